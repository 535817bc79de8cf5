/*
 * gateway_proxy — streams a request to a worker and its answer back to the client, with
 * libcurl, chunk by chunk, never holding the whole response.
 *
 * No thread of its own for a transfer: it runs on the thread of the client's connection
 * (libmicrohttpd's thread per connection). The HTTP handler starts it and drives it while
 * it waits (bounded) for the upstream status line and headers and the first body byte, opens
 * the client's streamed response with the same status and Content-Type, and attaches the
 * stream's fd and response: what has already arrived (often the whole answer) is written at
 * once, and the rest is pumped by the server's content reader on the same thread whenever the
 * client has taken what came before (ipl_http_resp_stream_pump):
 *
 *   connection thread (handler, then the server's content reader)
 *   ─────────────────────────────────────────────────────────────
 *   gateway_proxy_start           curl: connect, send the body
 *   gateway_xfer_wait_headers     curl runs here: status line and headers
 *   gateway_xfer_wait_body        … the first body byte, held (curl paused)
 *   ipl_http_resp_stream → fd
 *   gateway_xfer_attach_to(fd)    unpause: write what is here, bounded; on_chunk()
 *   (handler returns)
 *   pump (pipe empty) ──────────► curl runs here again: write the next chunks to the fd …
 *                                 until the upstream ends: on_done(), close(fd)
 *
 * So a request costs no thread, no thread hand-over and no wake-up beyond the sockets'.
 * Holding the first byte lets the handler still give up on the attempt — a 5xx, a 429, no
 * first byte in time — and retry elsewhere before anything was sent to the client
 * (gateway_failover).
 *
 * A client that goes away aborts the upstream transfer at once: whoever drives it polls the
 * client's socket (gateway_xfer_opts_t.client_fd) beside curl's, so a hang-up during a long
 * prefill, before any byte was written, frees the worker's slot within a poll; later, a
 * write() that fails with EPIPE does the same. gateway_proxy_stop() aborts every transfer
 * within ~100 ms (shutdown).
 *
 * An upstream that goes quiet after its first byte (a hung or SIGSTOPped worker keeps its TCP
 * connection open) is cut after stream_idle_timeout_ms without a byte: the transfer ends with
 * result.idle_timeout, and on_done ends the client's stream with an error in its API's shape.
 * Time the client takes to read (the pipe full, curl paused) does not count: the clock runs
 * only in pump rounds that wait for the upstream.
 *
 * Connections are kept alive and reused: each transfer takes a curl handle pair (multi +
 * easy) from a pool and gives it back afterwards, and each pair keeps its connection cache, so
 * the next transfer to the same worker reuses an idle connection. (A share handle with
 * CURL_LOCK_DATA_CONNECT would do the same, but libcurl does not support sharing a
 * connection cache between concurrent threads.)
 *
 * Metrics: inferplane_gateway_upstream_errors_total{kind} (connect | timeout | transfer |
 * stream_idle | client_gone: before or after the response started), inferplane_gateway_inflight
 * (transfers running).
 */
#ifndef GATEWAY_PROXY_H
#define GATEWAY_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipl_metrics.h"

typedef struct gateway_proxy gateway_proxy_t;
typedef struct gateway_xfer gateway_xfer_t;

typedef struct {
    int connect_timeout_ms;     /* TCP connect to a worker (0: 2000) */
    int stream_idle_timeout_ms; /* after the first byte: no byte this long cuts it (0: never) */
} gateway_proxy_config_t;

/* How a streamed transfer ended (for on_done). */
typedef struct {
    int status;        /* upstream HTTP status */
    bool ok;           /* upstream body received completely */
    bool client_gone;  /* the client disconnected (EPIPE) */
    bool aborted;      /* stopped by gateway_proxy_stop */
    bool idle_timeout; /* cut: no byte for stream_idle_timeout_ms (error says so) */
    uint64_t bytes;    /* body bytes forwarded */
    uint64_t end_ns;   /* monotonic time it ended */
    char error[256];   /* curl's explanation when !ok, else "" */
} gateway_xfer_result_t;

typedef struct {
    /* Each chunk forwarded to the client, after it was written (the thread that drives the
     * transfer, see attach; the callbacks never run concurrently). */
    void (*on_chunk)(void *arg, const char *data, size_t len, uint64_t now_ns);
    /* Optional filter: when set, it writes each chunk to the client's fd itself (changed,
     * held back for later: e.g. a rewrite of the response) instead of the proxy's plain
     * write; 0, or nonzero when the client is gone (the transfer is aborted as on EPIPE).
     * What it still holds at the end it writes in on_done. on_chunk then still gets the
     * chunk as received. */
    int (*on_write)(void *arg, int fd, const char *data, size_t len);
    /* Exactly once after gateway_xfer_attach_to, when the transfer has ended; the fd is still
     * open (a trailer may be written to it) and is closed right after. */
    void (*on_done)(void *arg, const gateway_xfer_result_t *result, int fd);
    void *arg;
} gateway_xfer_cb_t;

/* Per-transfer settings beyond the proxy's (gateway_proxy_start_with); everything is copied
 * at start. Zero means "the proxy's default" throughout. */
typedef struct {
    const char *const *headers; /* NULL-terminated "Name: value" lines (may be NULL); header
                                   memory is zeroed before it is freed (credentials) */
    int connect_timeout_ms;     /* TCP (+ TLS) connect; 0: the proxy's */
    const char *ca_bundle;      /* PEM file of CAs to verify the peer with; NULL or "": the
                                   system's */
    bool insecure;              /* no certificate or host name verification */
    const char *shown_url;      /* the URL as logs may show it (NULL: the URL) */
    bool watch_client;          /* poll client_fd: its hang-up aborts the transfer */
    int client_fd;              /* the client's socket (ipl_http_req_socket; borrowed, only
                                   polled and peeked, never read or closed) */
} gateway_xfer_opts_t;

/* curl_global_init happens here: create it from main before other threads. `metrics` is
 * borrowed and must outlive the proxy. */
gateway_proxy_t *gateway_proxy_new(const gateway_proxy_config_t *config, ipl_metrics_t *metrics);
/* Call after gateway_proxy_stop and gateway_proxy_wait_idle. */
void gateway_proxy_destroy(gateway_proxy_t **self_p);
/* Aborts every transfer (and refuses new ones) promptly. */
void gateway_proxy_stop(gateway_proxy_t *self);
/* Waits until no transfer is left (started and not yet ended, abandoned or released by
 * its stream), at most timeout_ms. true when idle. */
bool gateway_proxy_wait_idle(gateway_proxy_t *self, int timeout_ms);

/* Starts POSTing `body` (ownership moves in; *body_p is NULLed) to `url`: connects and sends
 * what it can at once, on the caller's thread, which goes on driving it in the waits below.
 * `headers` is a NULL-terminated list of "Name: value" lines to send (copied; may be NULL).
 * `cb` is copied; its callbacks run only after gateway_xfer_attach_to.
 * Returns 0 and the transfer in *xfer_p, or IPL_E_NOMEM / IPL_E_IO / IPL_E_AGAIN (stopping).
 * The caller then must end its part with exactly one of gateway_xfer_attach_to or
 * gateway_xfer_abandon. */
int gateway_proxy_start(gateway_proxy_t *self, const char *url, char **body_p, size_t len,
                        const char *const *headers, const gateway_xfer_cb_t *cb,
                        gateway_xfer_t **xfer_p);

/* gateway_proxy_start with per-transfer settings (`opts` may be NULL: the defaults). */
int gateway_proxy_start_with(gateway_proxy_t *self, const char *url, char **body_p, size_t len,
                             const gateway_xfer_opts_t *opts, const gateway_xfer_cb_t *cb,
                             gateway_xfer_t **xfer_p);

/* Waits until the upstream's final status and headers arrived, at most timeout_ms (the
 * transfer runs on the caller's thread meanwhile).
 * Returns 0 with *status and content_type (NUL-terminated, "" when none); IPL_E_IO when the
 * transfer failed before any response (connection refused, reset...; `error` explains);
 * IPL_E_TIMEOUT; IPL_E_AGAIN when the proxy is stopping. `error` may be NULL. */
int gateway_xfer_wait_headers(gateway_xfer_t *xfer, int timeout_ms, int *status, char *content_type,
                              size_t ct_size, char *error, size_t err_size);

/* After the headers (gateway_xfer_wait_headers returned 0): waits until the first body byte
 * arrived (it is held until attach) or the transfer ended, at most timeout_ms. Returns 0,
 * IPL_E_TIMEOUT, IPL_E_IO (the transfer failed first, or the client went away:
 * gateway_xfer_client_gone), IPL_E_AGAIN (stopping). */
int gateway_xfer_wait_body(gateway_xfer_t *xfer, int timeout_ms, char *error, size_t err_size);
/* Whether the client hung up (seen on its socket or as EPIPE). */
bool gateway_xfer_client_gone(gateway_xfer_t *xfer);

/* Hands the client's streamed response (`resp`, whose fd is `fd` from ipl_http_resp_stream;
 * ownership of the fd moves) to the transfer: what has arrived is written to the fd now, and
 * the rest by the server's content reader on this connection's thread (a pump), until the
 * upstream ends (on_done, then the fd is closed). An answer that was complete at once (and
 * on_done's trailer) goes out as a buffered response (ipl_http_resp_stream_settle). The
 * callbacks run on this thread, from here on or after the handler returned. Call last in
 * the handler. *xfer_p is NULLed. */
struct ipl_http_resp;
void gateway_xfer_attach_to(gateway_xfer_t **xfer_p, struct ipl_http_resp *resp, int fd);
/* Gives up on the transfer (it is aborted; no callback runs). *xfer_p is NULLed. */
void gateway_xfer_abandon(gateway_xfer_t **xfer_p);

#endif
