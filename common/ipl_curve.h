/*
 * ipl_curve — ZeroMQ CURVE (encryption and authentication) on every control-plane socket, with
 * one switch per process: --curve-dir DIR (INFERPLANE_CURVE_DIR), read by ipl_service.
 *
 * One cluster certificate, shared by every inferplane process (docs/security.md, "The ZeroMQ
 * control plane", says why):
 *
 *   DIR/cluster.key_secret   the certificate with its secret key (zcert format)   required
 *   DIR/cluster.key          its public half                                       required
 *   DIR/<any>.key            more public certificates whose holders may connect    optional
 *
 * A bind side (server) encrypts with the cluster key and lets a client in only if the client's
 * public key is one of the public certificates in DIR (ZAP, RFC 27, answered by a thread of
 * ours; the list is re-read when DIR changes, at most once a second). A connect side (client)
 * uses the cluster certificate as its own and expects the server to hold the cluster key.
 * `inferplanectl curve-keygen DIR` writes the two files.
 *
 * Process-wide state, like ipl_log and ipl_signal, because sockets are created deep inside
 * classes that know nothing of configuration: a class calls one line where it creates a socket
 *
 *   zsock_t *pull = zsock_new(ZMQ_PULL);
 *   ipl_curve_server(pull);            // before bind; does nothing unless CURVE is on
 *   zsock_t *push = zsock_new(ZMQ_PUSH);
 *   ipl_curve_client(push);            // before connect
 *
 * With CURVE off (no ipl_curve_setup) both calls return 0 and touch nothing: sockets behave
 * exactly as before. Sockets to workers (vLLM's KV-event PUB and replay ROUTER) stay plain:
 * vLLM does not speak CURVE.
 *
 * Refusals — a peer without CURVE, a peer that does not know the cluster's public key, a key
 * not in DIR — are counted in inferplane_zmq_auth_refused_total{reason} (plaintext |
 * handshake | unknown_key) and logged (zmq_auth_refused, at most once per 10 s per reason).
 * Plaintext and handshake failures are seen by a socket monitor on each server socket
 * (zmq_socket_monitor: a server socket must not get another monitor).
 *
 * Thread-safety: setup and shutdown from the main thread, before any socket is created and
 * after every one is closed; ipl_curve_server/client from any thread (they only read the
 * loaded certificate and queue a monitor endpoint under a lock).
 */
#ifndef IPL_CURVE_H
#define IPL_CURVE_H

#include <stdbool.h>
#include <stddef.h>

#include "ipl_metrics.h"

#define IPL_CURVE_CERT   "cluster.key" /* file names in DIR; the secret half adds "_secret" */
#define IPL_CURVE_DOMAIN "inferplane"  /* ZAP domain of our server sockets */
#define IPL_CURVE_REFUSED_METRIC "inferplane_zmq_auth_refused_total"
#define IPL_CURVE_MAX_KEYS 1024 /* public certificates read from DIR; more are ignored (logged) */

/* Turns CURVE on for this process: loads DIR/cluster.key_secret (checks that its public key
 * matches the secret), reads the allowed public keys and starts the ZAP handler, so that it is
 * answering before the first server socket exists. `metrics` (borrowed, may be NULL) gets the
 * refusal counters, created at 0. 0, or IPL_E_INVAL / IPL_E_IO / IPL_E_NOMEM with a message in
 * err naming the file and the fix (`what` names the setting in it: "--curve-dir \"DIR\" (from
 * env INFERPLANE_CURVE_DIR)"; NULL: "the CURVE directory"). A second setup without shutdown
 * fails (IPL_E_INVAL). */
int ipl_curve_setup(const char *dir, const char *what, ipl_metrics_t *metrics, char *err,
                    size_t errlen);

/* Stops the ZAP handler and forgets the certificate (CURVE off again). Call after every socket
 * that used it is closed: a server socket created with CURVE on and still open afterwards
 * admits any client that knows the cluster's public key (libzmq's rule with no ZAP handler).
 * Idempotent. */
void ipl_curve_shutdown(void);

bool ipl_curve_enabled(void);

/* Makes `sock` (a zsock_t or a raw libzmq socket) a CURVE server in the ZAP domain
 * IPL_CURVE_DOMAIN, monitored for failed handshakes. Call after creating it and before bind.
 * Does nothing when CURVE is off. Fails closed: if libzmq refuses an option (it cannot, short
 * of a socket that is not one), the process logs it and aborts rather than serve in clear when
 * CURVE was asked for — so the call sites need no error path. */
void ipl_curve_server(void *sock);

/* Makes `sock` a CURVE client of a server holding the cluster key. Before connect. Does
 * nothing when off; aborts like ipl_curve_server. */
void ipl_curve_client(void *sock);

/* The cluster's public key, Z85 (40 characters), or NULL when CURVE is off. Borrowed. */
const char *ipl_curve_public_key(void);

/* Refusals counted since setup (all reasons), for tests and logs. */
unsigned long ipl_curve_refused(void);

/* Writes a new cluster certificate to DIR/cluster.key and DIR/cluster.key_secret (mode 0600),
 * creating DIR (0700) if needed. Refuses to overwrite either file unless `force`. 0, or
 * IPL_E_INVAL (exists) / IPL_E_IO with err filled. Needs no setup. */
int ipl_curve_keygen(const char *dir, bool force, char *err, size_t errlen);

#endif
