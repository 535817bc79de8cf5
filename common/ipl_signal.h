/*
 * ipl_signal — graceful shutdown.
 *
 * ipl_signal_install() catches SIGTERM and SIGINT (and ignores SIGPIPE, so a client that hangs
 * up mid-stream gives EPIPE instead of killing the process). After a signal,
 * ipl_signal_stopping() is true and ipl_signal_fd() becomes readable, so event loops that poll
 * (zpoller, poll(2)) wake up at once. czmq's own handler is disabled (zsys_handler_set(NULL)).
 * Process-wide; call once from main before starting threads.
 *
 * A service that drains on the first signal (finishes what is in flight before it exits) uses
 * ipl_signal_count() to learn of a second one, the operator's "now": every SIGTERM, SIGINT and
 * ipl_signal_request_stop() counts.
 */
#ifndef IPL_SIGNAL_H
#define IPL_SIGNAL_H

#include <stdbool.h>

int ipl_signal_install(void);
bool ipl_signal_stopping(void);
/* A file descriptor that becomes readable when a stop was requested; -1 before install. */
int ipl_signal_fd(void);
/* Requests a stop from inside the process (as if SIGTERM arrived). Async-signal-safe. */
void ipl_signal_request_stop(void);
/* Stop requests so far (signals and ipl_signal_request_stop), 0 before the first. */
unsigned ipl_signal_count(void);
/* Tests only: clears the stop flag and the count and drains the fd. */
void ipl_signal_reset(void);

#endif
