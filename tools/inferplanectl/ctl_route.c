/* inferplanectl route — placeholder until the decider lands (owned by the decider developer). */
#include <stdio.h>

#include "ctl.h"

int ctl_route(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "inferplanectl route: not implemented yet\n");
    return 1;
}
