/* ipl_loop — see ipl_loop.h. */
#include "ipl_loop.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_signal.h"

int ipl_loop_poll(zmq_pollitem_t *items, int n, int stop_fd, long timeout_ms)
{
    if (stop_fd >= 0) items[n++] = (zmq_pollitem_t){NULL, stop_fd, ZMQ_POLLIN, 0};
    int rc = zmq_poll(items, n, timeout_ms < 0 ? -1 : timeout_ms);
    if (rc >= 0) return rc;
    if (zmq_errno() == EINTR) return 0;
    char quoted[128];
    IPL_ERROR("poll_failed", "error=%s",
              ipl_log_quote(quoted, sizeof quoted, zmq_strerror(zmq_errno())));
    return IPL_E_IO;
}

typedef struct {
    const ipl_loop_item_t *items;
    size_t n;
    ipl_loop_tick_fn *tick;
    void *arg;
} s_items_t;

static int s_round(void *arg, long timeout_ms, int stop_fd)
{
    const s_items_t *loop = arg;
    if (loop->tick) {
        long wait = loop->tick(loop->arg);
        if (wait >= 0 && (timeout_ms < 0 || wait < timeout_ms)) timeout_ms = wait;
    }
    zmq_pollitem_t poll[IPL_LOOP_MAX_ITEMS + 1];
    for (size_t i = 0; i < loop->n; i++)
        poll[i] = (zmq_pollitem_t){loop->items[i].socket, loop->items[i].fd, ZMQ_POLLIN, 0};
    int rc = ipl_loop_poll(poll, (int)loop->n, stop_fd, timeout_ms);
    if (rc <= 0) return rc;
    for (size_t i = 0; i < loop->n; i++)
        if (poll[i].revents & ZMQ_POLLIN) loop->items[i].ready(loop->items[i].arg);
    return 0;
}

int ipl_loop_run(const ipl_loop_item_t *items, size_t n, long timeout_ms, ipl_loop_tick_fn *tick,
                 void *arg)
{
    if (n > IPL_LOOP_MAX_ITEMS) {
        fprintf(stderr, "ipl_loop_run: %zu items, at most %d\n", n, IPL_LOOP_MAX_ITEMS);
        abort();
    }
    s_items_t loop = {items, n, tick, arg};
    return ipl_loop_run_rounds(s_round, &loop, timeout_ms);
}

int ipl_loop_run_rounds(ipl_loop_round_fn *round, void *arg, long timeout_ms)
{
    while (!ipl_signal_stopping()) {
        int rc = round(arg, timeout_ms, ipl_signal_fd());
        if (rc != 0) return rc;
    }
    return 0;
}
