/*
 * bench_stack.h — helpers for the benchmarks that drive running processes (bench_decision,
 * bench_freshness): an HTTP GET of a JSON admin endpoint, waiting for a condition on it, and
 * sending proto messages on raw ZeroMQ sockets. Header-only for the reason given in bench.h.
 *
 * The processes themselves are started, on ephemeral loopback ports, and stopped by
 * tools/run-bench; these benchmarks only connect to the endpoints they are given.
 */
#ifndef BENCH_STACK_H
#define BENCH_STACK_H

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "bench.h"
#include "ipl_proto.h"

typedef struct {
    char *data;
    size_t len;
} bench_buf_t;

static size_t bench_curl_write(char *ptr, size_t size, size_t n, void *arg)
{
    bench_buf_t *b = arg;
    char *p = realloc(b->data, b->len + size * n + 1);
    if (!p) return 0;
    memcpy(p + b->len, ptr, size * n);
    b->data = p;
    b->len += size * n;
    b->data[b->len] = '\0';
    return size * n;
}

/* GET `url`; the parsed JSON body of a 200 answer (cJSON_Delete it), or NULL. */
static inline cJSON *bench_get_json(const char *url)
{
    CURL *c = curl_easy_init();
    if (!c) return NULL;
    bench_buf_t b = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 2000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, bench_curl_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    long status = 0;
    cJSON *doc = NULL;
    if (curl_easy_perform(c) == CURLE_OK &&
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK && status == 200 &&
        b.data)
        doc = cJSON_Parse(b.data);
    free(b.data);
    curl_easy_cleanup(c);
    return doc;
}

static inline double bench_json_num(const cJSON *obj, const char *key)
{
    const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* Polls GET `url` every 50 ms until pred(doc, arg) is true; false after `timeout_s`, with the
 * last document (up to 2,000 bytes) on stderr. */
typedef bool(bench_json_pred_fn)(const cJSON *doc, void *arg);
static inline bool bench_wait_json(const char *url, bench_json_pred_fn *pred, void *arg,
                                   double timeout_s)
{
    uint64_t deadline = bench_now_ns() + (uint64_t)(timeout_s * 1e9);
    for (;;) {
        cJSON *doc = bench_get_json(url);
        bool ok = doc && pred(doc, arg);
        if (!ok && bench_now_ns() >= deadline) {
            char *text = doc ? cJSON_PrintUnformatted(doc) : NULL;
            BENCH_LOG("gave up waiting; last answer of %s: %.2000s", url, text ? text : "none");
            free(text);
        }
        cJSON_Delete(doc);
        if (ok) return true;
        if (bench_now_ns() >= deadline) return false;
        usleep(50000);
    }
}

/* A raw libzmq socket of `type`, connected (or bound when `bind`) to `endpoint`. Sends and
 * receives give up after 10 s (a process that stopped answering fails the benchmark instead of
 * hanging it). */
static inline void *bench_socket(void *ctx, int type, const char *endpoint, bool bind)
{
    void *s = zmq_socket(ctx, type);
    if (!s) BENCH_DIE("zmq_socket: %s", zmq_strerror(zmq_errno()));
    int zero = 0, big = 1000000, timeout_ms = 10000;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_SNDHWM, &big, sizeof big);
    zmq_setsockopt(s, ZMQ_RCVHWM, &big, sizeof big);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &timeout_ms, sizeof timeout_ms);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    if ((bind ? zmq_bind(s, endpoint) : zmq_connect(s, endpoint)) != 0)
        BENCH_DIE("%s %s: %s", bind ? "bind" : "connect", endpoint, zmq_strerror(zmq_errno()));
    return s;
}

/* Encodes `body` as message `type` into `buf` (cleared first). */
static inline void bench_encode(int type, const void *body, msgpack_sbuffer *buf)
{
    msgpack_sbuffer_clear(buf);
    int rc = ipl_msg_encode(type, body, buf);
    if (rc != 0) BENCH_DIE("ipl_msg_encode(%s): %d", ipl_msg_type_name(type), rc);
}

/* A LOAD for `worker` saying it is up, exact, with the given queue. */
static inline ipl_load_t bench_load(const char *worker, uint64_t running, uint64_t waiting,
                                    uint64_t wall_ms)
{
    return (ipl_load_t){.seq = 0,
                        .worker = (char *)worker,
                        .ts_ms = wall_ms,
                        .running = running,
                        .waiting = waiting,
                        .kv_usage = 0.5,
                        .block_size = 16,
                        .num_blocks = 100000,
                        .health = IPL_HEALTH_UP,
                        .kv_state = IPL_KV_EXACT};
}

#endif
