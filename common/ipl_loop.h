/*
 * ipl_loop — the poll-until-stopping loop of a service's main thread.
 *
 * Every process serves its sockets the same way: wait for input on its ZeroMQ sockets and
 * file descriptors and on ipl_signal_fd() (so SIGTERM wakes it at once), serve what is ready,
 * do its timed work, and start again until ipl_signal_stopping(). One round:
 *
 *   tick() ──► wait: zmq_poll(items + stop fd, min(timeout, tick's wait)) ──► ready() per
 *    ▲                                                                        readable item
 *    └──────────────────────────── until ipl_signal_stopping() ◄──────────────────┘
 *
 *   ipl_loop_item_t items[] = {{zsock_resolve(pull), -1, s_on_pull, self}};
 *   ipl_loop_run(items, 1, 1000, NULL, NULL);
 *
 * A loop whose sockets change from round to round (the collector follows workers, the
 * decider replaces its state sockets) writes its own round on ipl_loop_poll and runs it with
 * ipl_loop_run_rounds.
 *
 * Threads: everything runs on the calling thread; handlers may not call the loop again.
 * Errors: a failed poll (anything but EINTR) is logged once as poll_failed and ends the loop
 * with IPL_E_IO; handlers report their own errors (they count and log remote input).
 */
#ifndef IPL_LOOP_H
#define IPL_LOOP_H

#include <stddef.h>

#include <zmq.h>

/* Items ipl_loop_run takes at most (a programmer error beyond: aborts). */
#define IPL_LOOP_MAX_ITEMS 16

typedef void(ipl_loop_ready_fn)(void *arg);

typedef struct {
    void *socket;             /* a raw libzmq socket (zsock_resolve), or NULL to poll `fd` */
    int fd;                   /* with socket NULL: a file descriptor, polled for reading */
    ipl_loop_ready_fn *ready; /* called with `arg` when the item is readable */
    void *arg;
} ipl_loop_item_t;

/* Called at the start of every round, before the wait: does the caller's timed work and
 * returns how long this round may wait at most, in ms (0: do not wait; negative: no limit of
 * its own). */
typedef long(ipl_loop_tick_fn)(void *arg);

/* One round of a custom loop: waits at most `timeout_ms` (negative: no limit) for its input
 * and for `stop_fd` (when >= 0), serves what is ready. Returns 0 to go on, or a negative
 * IPL_E_* code that ends the loop. */
typedef int(ipl_loop_round_fn)(void *arg, long timeout_ms, int stop_fd);

/* zmq_poll over items[0 .. n-1] and, when stop_fd >= 0, stop_fd as items[n] (so `items` must
 * have room for n + 1). Waits at most timeout_ms (negative: until something is ready).
 * Returns how many items are ready (revents set), 0 on timeout or EINTR, or IPL_E_IO when the
 * poll fails (logged as poll_failed with libzmq's error). */
int ipl_loop_poll(zmq_pollitem_t *items, int n, int stop_fd, long timeout_ms);

/* Runs rounds of `items` (n <= IPL_LOOP_MAX_ITEMS; n may be 0 to just wait for the stop) until
 * ipl_signal_stopping(): each round calls tick (may be NULL), waits at most the shorter of
 * `timeout_ms` and tick's wait (both negative: until input or the stop signal), then calls
 * every readable item's `ready`, in item order. Returns 0 when stopping, or IPL_E_IO. */
int ipl_loop_run(const ipl_loop_item_t *items, size_t n, long timeout_ms, ipl_loop_tick_fn *tick,
                 void *arg);

/* Calls round(arg, timeout_ms, ipl_signal_fd()) until ipl_signal_stopping() or until a round
 * returns non-zero. Returns 0 when stopping, or that round's code. */
int ipl_loop_run_rounds(ipl_loop_round_fn *round, void *arg, long timeout_ms);

#endif
