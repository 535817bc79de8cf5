/*
 * bench_client — HTTP transfers on one libcurl multi handle, driven from one thread: no
 * thread per request, no thread at all besides the caller's.
 *
 *   bench_client_start(body)  ──► an easy handle (reused from a pool) is added; its bytes go
 *                                 to a bench_stream as they arrive, timed
 *   bench_client_run(ms)      ──► waits up to ms for sockets, moves every transfer on, and
 *                                 calls done(info) for each that finished
 *   bench_client_cancel_all   ──► removes every transfer still running (done(info) with
 *                                 info->cancelled)
 *
 * Connections are kept alive and reused (HTTP/1.1, one request per connection at a time);
 * "Expect: 100-continue" is never sent (it costs a round trip on every large body). Timing:
 * start_ns is taken just before the transfer is handed to libcurl, end_ns when libcurl reports
 * it done; each chunk of the answer is fed with the time it was read.
 *
 * Not thread-safe: one thread owns the client and calls everything, callbacks included.
 */
#ifndef BENCH_CLIENT_H
#define BENCH_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench_stream.h"

typedef struct {
    const char *base_url; /* "http://127.0.0.1:8000" (no trailing path) */
    bench_api_t api;
    const char *api_key;      /* NULL: none; sent as Bearer (OpenAI) or x-api-key (Anthropic) */
    double timeout_s;         /* per request; 0: none */
    uint32_t max_connections; /* connections kept for reuse */
} bench_client_config_t;

typedef struct {
    void *user; /* as given to bench_client_start */
    uint64_t start_ns, end_ns;
    long http_status;       /* 0: no answer */
    int curl_code;          /* CURLcode */
    const char *curl_error; /* a message when curl_code != 0 */
    bool got_data;          /* some of the answer arrived */
    bool cancelled;
    bench_stream_t *stream; /* the decoded answer (borrowed during the callback) */
} bench_xfer_info_t;

typedef void(bench_client_done_fn)(void *arg, const bench_xfer_info_t *info);

typedef struct bench_client bench_client_t;

/* NULL (with a message in err) on failure. Strings are copied. */
bench_client_t *bench_client_new(const bench_client_config_t *cfg, bench_client_done_fn *done,
                                 void *arg, char *err, size_t errlen);
void bench_client_destroy(bench_client_t **self_p);
/* Replaces the completion callback (while no transfer runs). */
void bench_client_set_done(bench_client_t *self, bench_client_done_fn *done, void *arg);

/* Starts one request; the body is copied by libcurl's postfields pointer rules: it must stay
 * valid until done, so ownership moves in (*body NULLed, freed by the client). 0 or
 * IPL_E_NOMEM / IPL_E_IO. */
int bench_client_start(bench_client_t *self, char **body, size_t len, bool streamed, bool keep_text,
                       void *user);

/* Runs transfers for at most timeout_ms (0: only what is ready); calls done for each that
 * finished. Returns the transfers still running. */
size_t bench_client_run(bench_client_t *self, int timeout_ms);
size_t bench_client_inflight(const bench_client_t *self);
/* New connections opened so far (the rest of the requests reused one). */
uint64_t bench_client_connects(const bench_client_t *self);
/* Ends every running transfer now (done with cancelled = true, end_ns = now). */
void bench_client_cancel_all(bench_client_t *self);

#endif
