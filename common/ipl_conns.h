/*
 * ipl_conns — the connection table behind ipl_httpd: limits checked at accept, a deadline per
 * connection state enforced by a watchdog thread, and the drain of a graceful stop.
 *
 * An HTTP server reports each connection's life to it; what a client can make the server
 * hold is bounded by it:
 *
 *   accept ──ipl_conns_admit──► refused: closed at once (max_connections, max_per_ip)
 *     │ ipl_conns_open
 *     ▼
 *   IDLE ──request line──► READING ──head in──► BODY ──body in──► ACTIVE ──response sent──► IDLE
 *   idle_timeout_ms        read_timeout_ms (absolute, from     (no deadline: the handler's
 *   (absolute, from the    the request line: a slowloris that  own timeouts, a stream's
 *   accept or the last     dribbles bytes is cut too)          idle timeout)
 *   response)
 *     │ ipl_conns_close (the server closed it)
 *     ▼
 *   gone
 *
 * A deadline that passes shuts the connection's socket down (shutdown(2), under the table's
 * lock, so never an fd the server has closed meanwhile: the server reports the close before
 * it closes the fd); the server then sees the end of the stream and closes it as usual. No
 * response is sent: the request was never complete.
 *
 * Draining (ipl_conns_drain) shuts down the IDLE connections at once and every connection
 * that becomes IDLE later; the others go on. ipl_conns_inflight counts the requests whose head
 * is in (BODY, ACTIVE): what a drain waits for. A READING one is not waited for (a slowloris
 * would hold every drain to its timeout); if its head completes meanwhile it is answered (the
 * server's drain answer) and counted from then on.
 *
 * Metrics (ipl_conns_metrics; PREFIX e.g. "inferplane_gateway"):
 * PREFIX_connections (gauge, open now), PREFIX_connections_refused_total{reason} (max_connections
 * | per_ip), PREFIX_connection_timeouts_total{state} (idle | read).
 *
 * Thread-safe: admit and open run on the server's accepting thread, the state changes on the
 * connections' threads, close on whichever thread cleans up, drain and inflight anywhere.
 */
#ifndef IPL_CONNS_H
#define IPL_CONNS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "ipl_metrics.h"

/* Zero fields mean "no limit" / "no deadline", except max_connections (0: the default). */
typedef struct {
    int max_connections; /* open at once; the next one is closed at accept */
    int max_per_ip;      /* open at once from one client address (IPv4, or IPv6) */
    int idle_timeout_ms; /* waiting for a request (new, or kept alive) at most this long */
    int read_timeout_ms; /* a request's head and body arrive within this of its request line */
} ipl_conns_config_t;

/* The defaults of every ipl_httpd server (the gateway's flags have the same):
 * 4096 connections: thread per connection, about 4 descriptors each (the client socket, a
 *   stream's pipe, its upstream connection) — within the descriptors a process may open
 *   (ipl_httpd_start lowers it to fit the limit, raising the soft limit first);
 * 1024 per client address: no single client takes all of them; behind a proxy that connects
 *   from one address, raise it (or 0: none);
 * 75 s idle: above the 60 s idle timeout of common load balancers, so that they close first
 *   (nginx keeps 75 s too);
 * 60 s to read a request: an 8 MiB body at about 1 Mbit/s. */
#define IPL_CONNS_DEFAULT_MAX             4096
#define IPL_CONNS_DEFAULT_MAX_PER_IP      1024
#define IPL_CONNS_DEFAULT_IDLE_TIMEOUT_MS 75000
#define IPL_CONNS_DEFAULT_READ_TIMEOUT_MS 60000
#define IPL_CONNS_DEFAULTS                                                                         \
    ((ipl_conns_config_t){.max_connections = IPL_CONNS_DEFAULT_MAX,                                \
                          .max_per_ip = IPL_CONNS_DEFAULT_MAX_PER_IP,                              \
                          .idle_timeout_ms = IPL_CONNS_DEFAULT_IDLE_TIMEOUT_MS,                    \
                          .read_timeout_ms = IPL_CONNS_DEFAULT_READ_TIMEOUT_MS})

typedef struct ipl_conns ipl_conns_t;
typedef struct ipl_conn ipl_conn_t;

/* `name` names the server in log lines ("127.0.0.1:8080"; copied). Starts the watchdog
 * thread. NULL when out of memory or threads. */
ipl_conns_t *ipl_conns_new(const ipl_conns_config_t *config, const char *name);
/* Joins the watchdog. Every connection must have been closed (a server stopped first). */
void ipl_conns_destroy(ipl_conns_t **self_p);

/* Registers the metrics above in `metrics` (borrowed: it must outlive the table). Call before
 * connections come. */
void ipl_conns_metrics(ipl_conns_t *self, ipl_metrics_t *metrics, const char *prefix);

/* At accept, before the connection is served: false when a limit refuses it (counted, logged
 * at most every 10 s); the caller then closes it. */
bool ipl_conns_admit(ipl_conns_t *self, const struct sockaddr *addr, socklen_t addrlen);

/* A connection being served, on socket `fd` (borrowed: only shut down, never closed). Starts
 * IDLE. NULL when out of memory: the connection then goes untracked (no deadline, not
 * counted). */
ipl_conn_t *ipl_conns_open(ipl_conns_t *self, const struct sockaddr *addr, socklen_t addrlen,
                           int fd);
/* The server is about to close it; *conn_p is NULLed (NULL: nothing). */
void ipl_conns_close(ipl_conns_t *self, ipl_conn_t **conn_p);

/* State changes (conn NULL: ignored). reading: its request line arrived. head: its head is in
 * (its body may follow, under the same deadline). active: its head and body are in, it is
 * being answered. idle: its response has been sent; when draining it is shut down now. */
void ipl_conns_reading(ipl_conns_t *self, ipl_conn_t *conn);
void ipl_conns_head(ipl_conns_t *self, ipl_conn_t *conn);
void ipl_conns_active(ipl_conns_t *self, ipl_conn_t *conn);
void ipl_conns_idle(ipl_conns_t *self, ipl_conn_t *conn);

/* Begins draining (idempotent). */
void ipl_conns_drain(ipl_conns_t *self);
bool ipl_conns_draining(ipl_conns_t *self);
/* Requests in flight: connections whose request's head is in (BODY or ACTIVE). */
size_t ipl_conns_inflight(ipl_conns_t *self);
/* Connections open. */
size_t ipl_conns_count(ipl_conns_t *self);

#endif
