/* ipl_zmq — see ipl_zmq.h. */
#include "ipl_zmq.h"

#include <stdbool.h>

size_t ipl_zmq_recv_parts(void *socket, zmq_msg_t *part, int max, int *kept)
{
    size_t total = 0;
    *kept = 0;
    for (bool more = true; more;) {
        zmq_msg_t scratch, *dst = *kept < max ? &part[*kept] : &scratch;
        zmq_msg_init(dst);
        if (zmq_msg_recv(dst, socket, total == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close(dst);
            break;
        }
        total++;
        more = zmq_msg_more(dst);
        if (dst == &scratch)
            zmq_msg_close(&scratch);
        else
            (*kept)++;
    }
    return total;
}

void ipl_zmq_close_parts(zmq_msg_t *part, int kept)
{
    for (int i = 0; i < kept; i++)
        zmq_msg_close(&part[i]);
}
