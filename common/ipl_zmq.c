/* ipl_zmq — see ipl_zmq.h. */
#include "ipl_zmq.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

#include "ipl_error.h"

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

int ipl_zmq_bind(void *socket, const char *endpoint, const char *what, const char *source,
                 const char *fix, char *err, size_t errlen)
{
    if (endpoint && *endpoint && zmq_bind(socket, endpoint) == 0) return 0;
    int code = endpoint && *endpoint ? zmq_errno() : EINVAL;
    snprintf(err, errlen, "cannot bind %s \"%s\"%s%s%s: %s; %s", what, endpoint ? endpoint : "",
             source ? " (from " : "", source ? source : "", source ? ")" : "", zmq_strerror(code),
             fix);
    return IPL_E_IO;
}
