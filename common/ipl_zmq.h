/*
 * ipl_zmq — receiving whole ZeroMQ messages from a raw libzmq socket (zsock_resolve(zsock)),
 * and binding one with an error that names the endpoint and the fix.
 *
 * Every socket of ours reads remote input, which may be a multipart message of any length
 * where one frame was expected. ipl_zmq_recv_parts reads one whole message without waiting
 * for it, keeps its first `max` frames and drops the rest, and says how many frames it had,
 * so a caller can reject the wrong shape (and count it) in one place instead of hand-rolling
 * the drain loop.
 *
 *   zmq_msg_t part[2];
 *   int kept;
 *   size_t total = ipl_zmq_recv_parts(raw, part, 2, &kept);  // ROUTER: [identity, message]
 *   if (total == 2) ...use part[0], part[1]...
 *   else if (total) ...count a malformed message...
 *   ipl_zmq_close_parts(part, kept);
 */
#ifndef IPL_ZMQ_H
#define IPL_ZMQ_H

#include <stddef.h>

#include <zmq.h>

/* Receives one whole message: never waits for its first frame (returns 0 when none is
 * waiting, or on EINTR), waits for the rest of a message that started. The first `max` frames
 * are left initialised in part[0 .. *kept-1] (the caller closes them with ipl_zmq_close_parts,
 * also when it returns 0); later frames are received and dropped. Returns how many frames the
 * message had. */
size_t ipl_zmq_recv_parts(void *socket, zmq_msg_t *part, int max, int *kept);
void ipl_zmq_close_parts(zmq_msg_t *part, int kept);

/* Binds `socket` (a raw libzmq socket) to `endpoint` (NULL or "" fails: nothing to bind).
 * Returns 0, or IPL_E_IO with an error a person can act on in err (always NUL-terminated):
 *
 *   cannot bind <what> "<endpoint>"[ (from <source>)]: <libzmq's error>; <fix>
 *   cannot bind --pub "tcp://127.0.0.1:7011" (from flag): Address already in use; use a free
 *   tcp://host:port
 *
 * `what` names the option or the socket ("--pub", "the KV-event replay ROUTER"); `source`
 * (NULL: left out) where the endpoint came from (ipl_config_source); `fix` what to do. The
 * socket stays the caller's, also on failure. */
int ipl_zmq_bind(void *socket, const char *endpoint, const char *what, const char *source,
                 const char *fix, char *err, size_t errlen);

#endif
