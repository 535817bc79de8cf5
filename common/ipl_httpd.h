/*
 * ipl_httpd — an HTTP/1.1 server on libmicrohttpd with routed handlers.
 *
 * Threading: MHD runs one thread per connection, so a handler may block (ask another process
 * over ZeroMQ, wait for an upstream). Handlers run concurrently and must be thread-safe.
 * The request body is read completely before the handler runs; a body above `max_body` gets
 * 413 with a JSON error and the handler never runs (headers and target: ipl_httpd_limits).
 * Refusals (404, 405, 413) are sent after the client has sent its body (which is dropped), so
 * clients that write the whole body before reading see them, up to a 64 MiB body; beyond that,
 * or when the client sent "Expect: 100-continue", they are sent at once and the connection is
 * closed.
 * ipl_httpd_destroy ends open streams and waits for handlers that are still running, so
 * handlers that block must do so with a timeout.
 *
 * What a client can make the server hold is bounded (ipl_conns, ipl_httpd_connections): so many
 * connections at once, so many from one address (more are closed at accept); a connection
 * waiting for a request (new, or kept alive) is closed after the idle timeout, one whose request
 * (head and body) has not arrived within the read timeout of its request line too (slowloris).
 * A request whose framing is ambiguous (Transfer-Encoding other than "chunked", beside a
 * Content-Length, or several Content-Lengths) is answered 400 and its connection closed; an
 * HTTP/1.1 request without Host gets 400.
 *
 * Graceful stop: ipl_httpd_drain stops accepting (new connections are refused), closes idle
 * connections, answers requests that arrive afterwards with the drain handler (503 by default)
 * and closes every connection after its response; ipl_httpd_inflight says when the requests in
 * progress are done.
 *
 * Responses are either buffered (ipl_http_resp_set / _take / _error) or streamed: the handler
 * calls ipl_http_resp_stream() and gets the write end of a pipe; the server sends whatever is
 * written (chunked transfer encoding) until that fd is closed. The fd may be handed to another
 * thread; whoever holds it must close it exactly once. A write gets EPIPE when the client has
 * gone away (SIGPIPE is ignored by ipl_signal_install), which is how a producer learns to stop.
 *
 *   client ──HTTP──► MHD connection thread ──► route table ──► handler(req, resp)
 *                                                                │ buffered: body
 *                                                                └ streamed: pipe fd ◄─ producer
 *
 * A stream's producer may also run on the connection's thread itself, as a pump the server
 * calls whenever the pipe is empty (ipl_http_resp_stream_pump), and a stream whose producer
 * finished before the handler returned may be sent buffered (ipl_http_resp_stream_settle).
 */
#ifndef IPL_HTTPD_H
#define IPL_HTTPD_H

#include <stdbool.h>
#include <stddef.h>

#include "ipl_conns.h"
#include "ipl_metrics.h"

typedef struct ipl_httpd ipl_httpd_t;
typedef struct ipl_http_req ipl_http_req_t;
typedef struct ipl_http_resp ipl_http_resp_t;

/* Handler: fill `resp` before returning. Returning without setting anything sends 500. */
typedef void(ipl_http_handler_fn)(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp);

/* Binds `listen` ("127.0.0.1:8080", ":8080", "8080", "[::1]:8080" — host defaults to 0.0.0.0;
 * port 0 picks a free port, see ipl_httpd_port). Connections wait in the listen backlog until
 * ipl_httpd_start. Returns NULL and logs on failure, with errno EINVAL for a malformed
 * address, otherwise why it could not be bound (EADDRINUSE, EADDRNOTAVAIL, EACCES...).
 * `max_body` in bytes (0: 1 MiB). */
ipl_httpd_t *ipl_httpd_new(const char *listen, size_t max_body);
void ipl_httpd_destroy(ipl_httpd_t **self_p); /* stops, waits for connection threads */

/* Registers a handler for `method` ("GET", "POST", or "*") and an exact `path`, or a prefix
 * when `path` ends in '*' (e.g. "/debug/" followed by '*'). First match wins, in registration
 * order. An unmatched path gets 404, a matched path with another method 405, both with JSON error
 * bodies. Register every route before ipl_httpd_start. Strings are copied. A GET route also answers
 * HEAD. A NULL `self` (no server, e.g. the admin server is off) ignores the route. */
void ipl_httpd_route(ipl_httpd_t *self, const char *method, const char *path,
                     ipl_http_handler_fn *fn, void *arg);

/* Limits on a request's head, checked before any handler runs (call before ipl_httpd_start;
 * 0: unchecked, MHD's own 32 KiB buffer for the whole head applies): a header section (names
 * and values) above `max_header_bytes` gets 431, a request target (path and query) above
 * `max_url_bytes` 414, both with JSON error bodies like 413's. */
void ipl_httpd_limits(ipl_httpd_t *self, size_t max_header_bytes, size_t max_url_bytes);

/* A check run before every matched route's handler (one per server; register before
 * ipl_httpd_start; fn NULL: none): it returns true to let the handler run, or fills `resp`
 * (e.g. a 401) and returns false, and the handler does not run. It sees the request as a
 * handler does (method, path, headers, body, socket). ipl_admin uses it to keep the admin
 * routes that change state or show request data behind a token. Must be thread-safe. */
typedef bool(ipl_http_guard_fn)(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp);
void ipl_httpd_guard(ipl_httpd_t *self, ipl_http_guard_fn *fn, void *arg);

/* Connection limits and timeouts (ipl_conns.h; copied; call before ipl_httpd_start). Without
 * this call: IPL_CONNS_DEFAULTS. max_connections is lowered at start when the descriptors the
 * process may open (RLIMIT_NOFILE, whose soft limit is raised as far as needed first) cannot
 * hold that many (a warning says so). */
void ipl_httpd_connections(ipl_httpd_t *self, const ipl_conns_config_t *config);
/* The connection metrics of ipl_conns.h under `prefix` (copied) in `metrics` (borrowed: must
 * outlive the server). Call before ipl_httpd_start. */
void ipl_httpd_metrics(ipl_httpd_t *self, ipl_metrics_t *metrics, const char *prefix);
/* The handler that answers requests arriving while draining (after their body, like any;
 * call before ipl_httpd_start). NULL (the default): 503 with a JSON error. Every response
 * then carries Connection: close. */
void ipl_httpd_drain_handler(ipl_httpd_t *self, ipl_http_handler_fn *fn, void *arg);

int ipl_httpd_start(ipl_httpd_t *self);      /* 0 or IPL_E_IO */
int ipl_httpd_port(const ipl_httpd_t *self); /* the bound port */

/* Begins a graceful stop (after ipl_httpd_start; idempotent; any thread): new connections are
 * refused (the listening socket is shut down: the kernel answers them with a reset), idle
 * ones closed, requests whose head arrives from now on get the drain handler's answer, and
 * connections close after their response. Requests in progress and their streams go on. */
void ipl_httpd_drain(ipl_httpd_t *self);
/* Requests in progress: their head is in (their body being read), they are handled, or their
 * response (or stream) is being sent. A connection still sending its head is not counted. */
size_t ipl_httpd_inflight(const ipl_httpd_t *self);

/* Request accessors. Pointers are borrowed and valid during the handler call only. */
const char *ipl_http_req_method(const ipl_http_req_t *req);
const char *ipl_http_req_path(const ipl_http_req_t *req);
const char *ipl_http_req_header(const ipl_http_req_t *req, const char *name); /* or NULL */
const char *ipl_http_req_query(const ipl_http_req_t *req, const char *key);   /* or NULL */
const char *ipl_http_req_body(const ipl_http_req_t *req, size_t *len);        /* NUL-terminated */
/* The connection's socket, for watching whether the client hangs up while the handler waits
 * (poll it for POLLRDHUP, peek at it; never read, write or close it), or -1. */
int ipl_http_req_socket(const ipl_http_req_t *req);

/* Buffered response. `body` is copied. */
void ipl_http_resp_set(ipl_http_resp_t *resp, int status, const char *content_type,
                       const char *body, size_t len);
/* Buffered response taking ownership of a malloc'd body. */
void ipl_http_resp_take(ipl_http_resp_t *resp, int status, const char *content_type, char **body_p,
                        size_t len);
/* Adds a response header (copied). May be called before either kind of response. */
void ipl_http_resp_header(ipl_http_resp_t *resp, const char *name, const char *value);
/* An OpenAI-shaped JSON error: {"error":{"message":..,"type":..,"param":null,"code":status}}
 * `type` e.g. "invalid_request_error", "not_found_error", "server_error". */
void ipl_http_resp_error(ipl_http_resp_t *resp, int status, const char *type, const char *message);
/* A JSON response from a cJSON tree, which this takes over and frees (whatever happens):
 * rendered compactly with content type application/json; 500 when rendering fails. */
struct cJSON;
void ipl_http_resp_json(ipl_http_resp_t *resp, int status, struct cJSON **root_p);
/* Streamed response: returns the write end of a pipe (the caller owns it and must close it),
 * or -1 on failure (then a 500 is sent). The response starts when the handler returns, so a
 * handler that writes before returning must stay within the pipe's capacity (64 KiB) or
 * it blocks forever; hand the fd to a producer thread instead. Writes block while the client
 * reads slowly (back-pressure). The stream ends when the fd is closed; the server ends it
 * early when the client hangs up or the server is destroyed, and the producer's next write
 * then fails with EPIPE. There is no idle timeout on a stream. */
int ipl_http_resp_stream(ipl_http_resp_t *resp, int status, const char *content_type);

/* A streamed response's producer run on the connection's own thread, instead of another
 * thread writing the fd: no hand-over per chunk. Whenever the pipe is empty, the server calls
 * pump(arg, ms) there; the pump writes what it has to the fd (at most 32 KiB per call: nobody
 * reads the pipe meanwhile, so it must never fill) or waits for it, at most `ms`, and closes
 * the fd when the stream is complete. After a call that wrote nothing the server looks at
 * the client (a hang-up ends the stream) and at its own shutdown before calling again.
 * release(arg) runs exactly once, on that thread, when the response is over (complete, ended
 * early, or never sent); it closes the fd if the pump has not. */
typedef struct {
    void (*pump)(void *arg, int ms);
    void (*release)(void *arg);
    void *arg;
} ipl_http_pump_t;

/* Gives the stream started with ipl_http_resp_stream a pump (copied); call before the
 * handler returns. From then on the pump is the fd's owner and closes it. */
void ipl_http_resp_stream_pump(ipl_http_resp_t *resp, const ipl_http_pump_t *pump);

/* Turns a stream whose write end has already been closed — the whole body sits in the pipe
 * (at most its 64 KiB) — into a buffered response: sent with a Content-Length in one go,
 * not in chunks. Keeps the status, content type and headers; the stream must have no pump.
 * 0, or IPL_E_IO (out of memory, or the write end was still open: a caller's bug) with a
 * 500 set instead. Call before the handler returns. */
int ipl_http_resp_stream_settle(ipl_http_resp_t *resp);

/* Writes all of buf to fd, retrying on EINTR/partial writes. 0, or IPL_E_IO (errno set;
 * EPIPE means the client went away). */
int ipl_http_write_all(int fd, const void *buf, size_t len);

#endif
