/*
 * Unit tests of ipl_httpd: a real server on an ephemeral loopback port, driven with libcurl.
 * Routes (exact, prefix, any method, first match), 404/405/413 JSON errors, request headers
 * and query arguments, response headers, streaming (chunks arrive before the end, chunked
 * encoding, client hang-up gives the producer EPIPE, destroy never waits for a producer),
 * pumped streams (the producer on the connection's thread, released exactly once whatever
 * ends the response), settled streams (sent buffered), concurrent requests and listen
 * address parsing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_httpd.h"
#include "ipl_log.h"
#include "ipl_test_http.h"

#define S_MAX_BODY 1024

/* ---------------------------------------------------------------------------------------- */
/* Handlers                                                                                  */

static void h_hello(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    ipl_http_resp_header(resp, "X-Route", arg ? (const char *)arg : "hello");
    ipl_http_resp_set(resp, 200, "text/plain", "hello", 5);
}

/* Echoes the body; reports method, path, a header and query arguments as response headers. */
static void h_echo(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)arg;
    size_t len = 0;
    const char *body = ipl_http_req_body(req, &len);
    assert_non_null(body);
    assert_int_equal(body[len], '\0');
    const char *v;
    ipl_http_resp_header(resp, "X-Method", ipl_http_req_method(req));
    ipl_http_resp_header(resp, "X-Path", ipl_http_req_path(req));
    ipl_http_resp_header(resp, "X-Custom", (v = ipl_http_req_header(req, "x-CUSTOM")) ? v : "-");
    ipl_http_resp_header(resp, "X-Missing", ipl_http_req_header(req, "X-Nope") ? "yes" : "no");
    ipl_http_resp_header(resp, "X-Q", (v = ipl_http_req_query(req, "q")) ? v : "-");
    ipl_http_resp_header(resp, "X-Upper-Q", (v = ipl_http_req_query(req, "Q")) ? v : "-");
    char flag[64];
    v = ipl_http_req_query(req, "flag");
    snprintf(flag, sizeof flag, v ? "[%s]" : "-", v);
    ipl_http_resp_header(resp, "X-Flag", flag);
    const char *ct = ipl_http_req_header(req, "content-type");
    char *copy = malloc(len + 1);
    assert_non_null(copy);
    memcpy(copy, body, len + 1);
    ipl_http_resp_take(resp, 201, ct ? ct : "application/octet-stream", &copy, len);
    assert_null(copy);
}

static void h_nothing(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)arg;
    (void)req;
    (void)resp;
}

static void h_no_content(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)arg;
    (void)req;
    ipl_http_resp_set(resp, 204, NULL, NULL, 0);
}

static void h_teapot(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)arg;
    (void)req;
    ipl_http_resp_error(resp, 418, "invalid_request_error", "I'm a \"teapot\"\n");
}

static void h_json(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)arg;
    (void)req;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "quote", "a \"b\"");
    cJSON_AddNumberToObject(root, "n", 42);
    ipl_http_resp_json(resp, 201, &root);
    assert_null(root);
}

static atomic_int s_slow_active, s_slow_peak;

static void h_slow(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)arg;
    (void)req;
    int now = atomic_fetch_add(&s_slow_active, 1) + 1;
    int peak = atomic_load(&s_slow_peak);
    while (now > peak && !atomic_compare_exchange_weak(&s_slow_peak, &peak, now)) {
    }
    ipl_sleep_ms(300);
    atomic_fetch_sub(&s_slow_active, 1);
    ipl_http_resp_set(resp, 200, "text/plain", "slow", 4);
}

/* Streaming: the handler starts a producer thread that writes `count` chunks `interval_ms`
 * apart (count 0: until a write fails, at most 10 s), then closes the fd. With `idle_after`,
 * it writes that many chunks, then waits for `wake` before writing again. */
typedef struct {
    int count;
    int interval_ms;
    int idle_after;
    atomic_int wake;
    int fd;
    pthread_t thread;
    atomic_int started;
    atomic_int done;
    int write_errno;  /* errno of the failed write, 0 when all succeeded */
    int written;      /* chunks written */
    uint64_t fail_ms; /* monotonic ms of the failed write */
} s_producer_t;

static s_producer_t s_prod;

static void *s_produce(void *arg)
{
    s_producer_t *p = arg;
    uint64_t deadline = ipl_mono_ms() + 10000;
    for (int i = 0; (p->count == 0 || i < p->count) && ipl_mono_ms() < deadline; i++) {
        if (p->idle_after && i == p->idle_after) {
            while (!atomic_load(&p->wake) && ipl_mono_ms() < deadline)
                ipl_sleep_ms(5);
        }
        char chunk[64];
        int n = snprintf(chunk, sizeof chunk, "data: chunk-%d\n\n", i);
        if (ipl_http_write_all(p->fd, chunk, (size_t)n) != 0) {
            p->write_errno = errno;
            p->fail_ms = ipl_mono_ms();
            break;
        }
        p->written++;
        ipl_sleep_ms((uint64_t)p->interval_ms);
    }
    close(p->fd);
    atomic_store(&p->done, 1);
    return NULL;
}

static void h_stream(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    s_producer_t *p = arg;
    ipl_http_resp_header(resp, "Cache-Control", "no-cache");
    p->fd = ipl_http_resp_stream(resp, 200, "text/event-stream");
    assert_true(p->fd >= 0);
    assert_int_equal(pthread_create(&p->thread, NULL, s_produce, p), 0);
    atomic_store(&p->started, 1);
}

static void s_producer_join(s_producer_t *p)
{
    if (atomic_load(&p->started)) pthread_join(p->thread, NULL);
    atomic_store(&p->started, 0);
}

/* A pumped stream: the pump writes `count` chunks (0: without end) `interval_ms` apart and
 * closes the fd after the last; with `idle_after` it writes that many, then nothing. */
typedef struct {
    int count;
    int interval_ms;
    int idle_after;
    int fd;
    int written;
    uint64_t next_ms;
    atomic_int pumps, released, wrong_thread, write_failed;
    pthread_t handler;
    bool error_after; /* the handler replaces the stream with an error: never sent */
} s_pumped_t;

static s_pumped_t s_pumped;

static void s_pump_fn(void *arg, int ms)
{
    s_pumped_t *p = arg;
    atomic_fetch_add(&p->pumps, 1);
    if (!pthread_equal(pthread_self(), p->handler)) atomic_fetch_add(&p->wrong_thread, 1);
    assert_true(ms > 0 && ms <= 1000);
    if (p->fd < 0) return;
    bool idle = (p->idle_after && p->written >= p->idle_after) || ipl_mono_ms() < p->next_ms;
    if (idle) { /* nothing to write: wait, as a producer waits for its upstream */
        ipl_sleep_ms((uint64_t)(ms < 20 ? ms : 20));
        return;
    }
    char chunk[64];
    int n = snprintf(chunk, sizeof chunk, "data: pumped-%d\n\n", p->written);
    if (ipl_http_write_all(p->fd, chunk, (size_t)n) != 0) {
        atomic_fetch_add(&p->write_failed, 1);
        return;
    }
    p->written++;
    p->next_ms = ipl_mono_ms() + (uint64_t)p->interval_ms;
    if (p->count && p->written == p->count) {
        close(p->fd);
        p->fd = -1;
    }
}

static void s_pump_release(void *arg)
{
    s_pumped_t *p = arg;
    atomic_fetch_add(&p->released, 1);
    if (!pthread_equal(pthread_self(), p->handler)) atomic_fetch_add(&p->wrong_thread, 1);
    if (p->fd >= 0) close(p->fd);
    p->fd = -1;
}

static void h_pumped(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    s_pumped_t *p = arg;
    p->handler = pthread_self();
    p->fd = ipl_http_resp_stream(resp, 200, "text/event-stream");
    assert_true(p->fd >= 0);
    ipl_http_pump_t pump = {.pump = s_pump_fn, .release = s_pump_release, .arg = p};
    ipl_http_resp_stream_pump(resp, &pump);
    if (p->error_after) ipl_http_resp_error(resp, 503, "server_error", "changed my mind");
}

/* A stream written completely (and closed) before the handler returns, then settled into a
 * buffered response; ?open=1 settles with the write end still open (a caller's bug: 500). */
static void h_settled(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)arg;
    bool open = ipl_http_req_query(req, "open") != NULL;
    ipl_http_resp_header(resp, "X-Kept", "yes");
    int fd = ipl_http_resp_stream(resp, 201, "application/json");
    assert_true(fd >= 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(ipl_http_write_all(fd, "{\"part\":1}\n", 11), 0);
    if (!open) close(fd);
    assert_int_equal(ipl_http_resp_stream_settle(resp), open ? IPL_E_IO : 0);
    if (open) close(fd);
}

/* ---------------------------------------------------------------------------------------- */
/* Fixture                                                                                   */

static ipl_httpd_t *s_srv;
static int s_port;

static int s_setup(void **state)
{
    (void)state;
    memset(&s_prod, 0, sizeof s_prod);
    s_prod.fd = -1;
    memset(&s_pumped, 0, sizeof s_pumped);
    s_pumped.fd = -1;
    s_srv = ipl_httpd_new("127.0.0.1:0", S_MAX_BODY);
    if (!s_srv) return -1;
    ipl_httpd_route(s_srv, "GET", "/hello", h_hello, NULL);
    ipl_httpd_route(s_srv, "POST", "/hello", h_hello, "post");
    ipl_httpd_route(s_srv, "POST", "/echo", h_echo, NULL);
    ipl_httpd_route(s_srv, "PUT", "/echo", h_echo, NULL);
    ipl_httpd_route(s_srv, "*", "/any", h_echo, NULL);
    ipl_httpd_route(s_srv, "GET", "/files/special", h_hello, "exact-first");
    ipl_httpd_route(s_srv, "GET", "/files/*", h_echo, NULL);
    ipl_httpd_route(s_srv, "GET", "/files/shadowed", h_hello, "never");
    ipl_httpd_route(s_srv, "GET", "/nothing", h_nothing, NULL);
    ipl_httpd_route(s_srv, "GET", "/nocontent", h_no_content, NULL);
    ipl_httpd_route(s_srv, "GET", "/teapot", h_teapot, NULL);
    ipl_httpd_route(s_srv, "GET", "/json", h_json, NULL);
    ipl_httpd_route(s_srv, "GET", "/slow", h_slow, NULL);
    ipl_httpd_route(s_srv, "GET", "/stream", h_stream, &s_prod);
    ipl_httpd_route(s_srv, "GET", "/pumped", h_pumped, &s_pumped);
    ipl_httpd_route(s_srv, "GET", "/settled", h_settled, NULL);
    s_port = ipl_httpd_port(s_srv);
    if (s_port <= 0 || ipl_httpd_start(s_srv) != 0) return -1;
    return 0;
}

static int s_teardown(void **state)
{
    (void)state;
    ipl_httpd_destroy(&s_srv);
    s_producer_join(&s_prod);
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Tests                                                                                     */

static void test_exact_route(void **state)
{
    (void)state;
    s_reply_t r = {0};
    char v[128];
    assert_int_equal(s_http(s_port, "GET", "/hello", NULL, &r), CURLE_OK);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "hello");
    assert_string_equal(s_reply_header(&r, "content-type", v, sizeof v), "text/plain");
    assert_string_equal(s_reply_header(&r, "X-Route", v, sizeof v), "hello");
    assert_string_equal(s_reply_header(&r, "Content-Length", v, sizeof v), "5");
    s_reply_free(&r);

    s_reply_t p = {0};
    assert_int_equal(s_http(s_port, "POST", "/hello", "x", &p), CURLE_OK);
    assert_int_equal(p.status, 200);
    assert_string_equal(s_reply_header(&p, "X-Route", v, sizeof v), "post");
    s_reply_free(&p);

    s_reply_t h = {0}; /* HEAD is answered by GET routes, without a body */
    assert_int_equal(s_http(s_port, "HEAD", "/hello", NULL, &h), CURLE_OK);
    assert_int_equal(h.status, 200);
    assert_int_equal(h.len, 0);
    s_reply_free(&h);
}

static void test_not_found(void **state)
{
    (void)state;
    const char *paths[] = {"/", "/nope", "/hello/", "/hellox", "/files", "/echo/x"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        s_reply_t r = {0};
        assert_int_equal(s_http(s_port, "GET", paths[i], NULL, &r), CURLE_OK);
        s_assert_json_error(&r, 404, "not_found_error");
        assert_non_null(strstr(r.body, paths[i]));
        s_reply_free(&r);
    }
}

static void test_method_not_allowed(void **state)
{
    (void)state;
    s_reply_t r = {0};
    char v[128];
    assert_int_equal(s_http(s_port, "DELETE", "/hello", NULL, &r), CURLE_OK);
    s_assert_json_error(&r, 405, "invalid_request_error");
    assert_string_equal(s_reply_header(&r, "Allow", v, sizeof v), "GET, POST");
    s_reply_free(&r);

    s_reply_t g = {0};
    assert_int_equal(s_http(s_port, "GET", "/echo", NULL, &g), CURLE_OK);
    s_assert_json_error(&g, 405, "invalid_request_error");
    assert_string_equal(s_reply_header(&g, "Allow", v, sizeof v), "POST, PUT");
    s_reply_free(&g);

    /* With a body that is never read: the early answer still arrives. */
    s_reply_t b = {0};
    assert_int_equal(s_http(s_port, "POST", "/files/x", "some body", &b), CURLE_OK);
    s_assert_json_error(&b, 405, "invalid_request_error");
    s_reply_free(&b);
}

static void test_any_method_and_prefix(void **state)
{
    (void)state;
    const char *methods[] = {"GET", "PUT", "DELETE", "PATCH", "OPTIONS"};
    char v[256];
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        s_reply_t r = {0};
        assert_int_equal(s_http(s_port, methods[i], "/any", NULL, &r), CURLE_OK);
        assert_int_equal(r.status, 201);
        assert_string_equal(s_reply_header(&r, "X-Method", v, sizeof v), methods[i]);
        s_reply_free(&r);
    }
    s_reply_t p = {0};
    assert_int_equal(s_http(s_port, "GET", "/files/a/b.txt", NULL, &p), CURLE_OK);
    assert_int_equal(p.status, 201);
    assert_string_equal(s_reply_header(&p, "X-Path", v, sizeof v), "/files/a/b.txt");
    s_reply_free(&p);

    s_reply_t e = {0}; /* the bare prefix matches too */
    assert_int_equal(s_http(s_port, "GET", "/files/", NULL, &e), CURLE_OK);
    assert_int_equal(e.status, 201);
    s_reply_free(&e);
}

static void test_first_match_wins(void **state)
{
    (void)state;
    char v[128];
    s_reply_t r = {0};
    assert_int_equal(s_http(s_port, "GET", "/files/special", NULL, &r), CURLE_OK);
    assert_int_equal(r.status, 200);
    assert_string_equal(s_reply_header(&r, "X-Route", v, sizeof v), "exact-first");
    s_reply_free(&r);

    s_reply_t s = {0}; /* registered after the prefix route: never reached */
    assert_int_equal(s_http(s_port, "GET", "/files/shadowed", NULL, &s), CURLE_OK);
    assert_int_equal(s.status, 201);
    assert_string_equal(s_reply_header(&s, "X-Route", v, sizeof v), "(none)");
    s_reply_free(&s);
}

static void test_request_accessors(void **state)
{
    (void)state;
    char v[256];
    const char *headers[] = {"X-Custom: Some Value", "Content-Type: application/json", NULL};
    const char *body = "{\"a\":1}";
    s_reply_t r = {0};
    assert_int_equal(s_http_ex(s_port, "POST", "/echo?q=hello%20world&flag&Q=upper", body,
                               strlen(body), headers, false, &r),
                     CURLE_OK);
    assert_int_equal(r.status, 201);
    assert_string_equal(r.body, body);
    assert_string_equal(s_reply_header(&r, "Content-Type", v, sizeof v), "application/json");
    assert_string_equal(s_reply_header(&r, "X-Method", v, sizeof v), "POST");
    assert_string_equal(s_reply_header(&r, "X-Path", v, sizeof v), "/echo");
    assert_string_equal(s_reply_header(&r, "X-Custom", v, sizeof v), "Some Value");
    assert_string_equal(s_reply_header(&r, "X-Missing", v, sizeof v), "no");
    assert_string_equal(s_reply_header(&r, "X-Q", v, sizeof v), "hello world");
    assert_string_equal(s_reply_header(&r, "X-Upper-Q", v, sizeof v), "upper");
    assert_string_equal(s_reply_header(&r, "X-Flag", v, sizeof v), "[]");
    s_reply_free(&r);

    s_reply_t n = {0}; /* no query, no body */
    assert_int_equal(s_http(s_port, "PUT", "/echo", NULL, &n), CURLE_OK);
    assert_int_equal(n.status, 201);
    assert_int_equal(n.len, 0);
    assert_string_equal(s_reply_header(&n, "X-Q", v, sizeof v), "-");
    assert_string_equal(s_reply_header(&n, "X-Custom", v, sizeof v), "-");
    s_reply_free(&n);

    /* A binary body with NUL bytes comes through whole. */
    const char bin[] = {'a', '\0', 'b', '\0', 'c'};
    s_reply_t b = {0};
    assert_int_equal(s_http_ex(s_port, "POST", "/echo", bin, sizeof bin, NULL, false, &b),
                     CURLE_OK);
    assert_int_equal(b.status, 201);
    assert_int_equal(b.len, sizeof bin);
    assert_memory_equal(b.body, bin, sizeof bin);
    s_reply_free(&b);
}

static void test_body_limit(void **state)
{
    (void)state;
    char *big = malloc(4 * S_MAX_BODY + 1);
    assert_non_null(big);
    memset(big, 'x', 4 * S_MAX_BODY);
    big[4 * S_MAX_BODY] = '\0';

    s_reply_t ok = {0}; /* exactly the limit: accepted, also when chunked */
    assert_int_equal(s_http_ex(s_port, "POST", "/echo", big, S_MAX_BODY, NULL, false, &ok),
                     CURLE_OK);
    assert_int_equal(ok.status, 201);
    assert_int_equal(ok.len, S_MAX_BODY);
    s_reply_free(&ok);
    s_reply_t okc = {0};
    assert_int_equal(s_http_ex(s_port, "POST", "/echo", big, S_MAX_BODY, NULL, true, &okc),
                     CURLE_OK);
    assert_int_equal(okc.status, 201);
    assert_int_equal(okc.len, S_MAX_BODY);
    s_reply_free(&okc);

    s_reply_t cl = {0}; /* one byte over, announced by Content-Length */
    assert_int_equal(s_http_ex(s_port, "POST", "/echo", big, S_MAX_BODY + 1, NULL, false, &cl),
                     CURLE_OK);
    s_assert_json_error(&cl, 413, "invalid_request_error");
    s_reply_free(&cl);

    s_reply_t ch = {0}; /* over the limit, chunked: found while reading */
    assert_int_equal(s_http_ex(s_port, "POST", "/echo", big, 4 * S_MAX_BODY, NULL, true, &ch),
                     CURLE_OK);
    s_assert_json_error(&ch, 413, "invalid_request_error");
    s_reply_free(&ch);
    free(big);

    s_reply_t after = {0}; /* the server is fine afterwards */
    assert_int_equal(s_http(s_port, "GET", "/hello", NULL, &after), CURLE_OK);
    assert_int_equal(after.status, 200);
    s_reply_free(&after);
}

/* Like a client that sends its whole body before reading (Python's urllib does): the
 * refusal must still be read, not a connection reset. Returns the status, or -1. */
static int s_raw_post(int port, const char *path, size_t body_len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    char head[256];
    int n = snprintf(head, sizeof head,
                     "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n", path, body_len);
    char *body = calloc(1, body_len);
    assert_non_null(body);
    int status = -1;
    if (ipl_http_write_all(fd, head, (size_t)n) == 0 &&
        ipl_http_write_all(fd, body, body_len) == 0) {
        char resp[512] = {0};
        ssize_t got = recv(fd, resp, sizeof resp - 1, 0);
        if (got > 12 && strncmp(resp, "HTTP/1.1 ", 9) == 0) status = atoi(resp + 9);
    }
    free(body);
    close(fd);
    return status;
}

static void test_refusal_after_full_body(void **state)
{
    (void)state;
    size_t big = 4 * 1024 * 1024; /* far more than the socket buffers hold */
    assert_int_equal(s_raw_post(s_port, "/echo", big), 413);
    assert_int_equal(s_raw_post(s_port, "/nope", big), 404);
    assert_int_equal(s_raw_post(s_port, "/hello/", big), 404);
    assert_int_equal(s_raw_post(s_port, "/files/x", big), 405);
    assert_int_equal(s_raw_post(s_port, "/echo", S_MAX_BODY), 201);
}

static void test_handler_responses(void **state)
{
    (void)state;
    s_reply_t r = {0};
    assert_int_equal(s_http(s_port, "GET", "/nothing", NULL, &r), CURLE_OK);
    s_assert_json_error(&r, 500, "server_error");
    s_reply_free(&r);

    s_reply_t n = {0};
    assert_int_equal(s_http(s_port, "GET", "/nocontent", NULL, &n), CURLE_OK);
    assert_int_equal(n.status, 204);
    assert_int_equal(n.len, 0);
    s_reply_free(&n);

    s_reply_t t = {0}; /* the message is JSON-escaped */
    assert_int_equal(s_http(s_port, "GET", "/teapot", NULL, &t), CURLE_OK);
    s_assert_json_error(&t, 418, "invalid_request_error");
    cJSON *root = cJSON_Parse(t.body);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(root, "error"), "message")->valuestring,
        "I'm a \"teapot\"\n");
    cJSON_Delete(root);
    s_reply_free(&t);

    s_reply_t j = {0}; /* a cJSON tree rendered, its ownership taken */
    assert_int_equal(s_http(s_port, "GET", "/json", NULL, &j), CURLE_OK);
    assert_int_equal(j.status, 201);
    assert_string_equal(j.body, "{\"quote\":\"a \\\"b\\\"\",\"n\":42}");
    s_reply_free(&j);
}

static void test_stream_chunks_arrive_early(void **state)
{
    (void)state;
    s_prod.count = 5;
    s_prod.interval_ms = 150;
    s_reply_t r = {0};
    char v[128];
    assert_int_equal(s_http(s_port, "GET", "/stream", NULL, &r), CURLE_OK);
    uint64_t total_ms = ipl_mono_ms() - r.start_ms;
    assert_int_equal(r.status, 200);
    assert_string_equal(s_reply_header(&r, "Content-Type", v, sizeof v), "text/event-stream");
    assert_string_equal(s_reply_header(&r, "Cache-Control", v, sizeof v), "no-cache");
    assert_string_equal(s_reply_header(&r, "Transfer-Encoding", v, sizeof v), "chunked");
    assert_string_equal(s_reply_header(&r, "Content-Length", v, sizeof v), "(none)");
    s_producer_join(&s_prod);
    assert_int_equal(s_prod.write_errno, 0);
    assert_int_equal(s_prod.written, 5);
    /* Everything arrived, in order, piece by piece, the first long before the end. */
    assert_string_equal(r.body, "data: chunk-0\n\ndata: chunk-1\n\ndata: chunk-2\n\n"
                                "data: chunk-3\n\ndata: chunk-4\n\n");
    assert_true(r.writes >= 4);
    assert_true(total_ms >= 600);
    assert_true(r.first_byte_ms > 0);
    assert_true(r.first_byte_ms + 400 < total_ms);
    s_reply_free(&r);
}

static void test_stream_client_disconnect_gives_epipe(void **state)
{
    (void)state;
    s_prod.count = 0; /* until a write fails */
    s_prod.interval_ms = 20;
    s_reply_t r = {0};
    r.abort_after = 1; /* hang up at the first byte */
    assert_int_equal(s_http(s_port, "GET", "/stream", NULL, &r), CURLE_WRITE_ERROR);
    uint64_t hangup_ms = ipl_mono_ms();
    s_producer_join(&s_prod);
    assert_int_equal(s_prod.write_errno, EPIPE);
    assert_true(s_prod.fail_ms - hangup_ms < 3000);
    assert_true(s_prod.written >= 1);
    s_reply_free(&r);

    s_reply_t after = {0};
    assert_int_equal(s_http(s_port, "GET", "/hello", NULL, &after), CURLE_OK);
    assert_int_equal(after.status, 200);
    s_reply_free(&after);
}

/* The same with an idle producer: the hang-up is noticed without any write. */
static void test_stream_disconnect_while_producer_idle(void **state)
{
    (void)state;
    s_prod.count = 3;
    s_prod.interval_ms = 0;
    s_prod.idle_after = 1;
    s_reply_t r = {0};
    r.abort_after = 1;
    assert_int_equal(s_http(s_port, "GET", "/stream", NULL, &r), CURLE_WRITE_ERROR);
    ipl_sleep_ms(300); /* time for the server to see the hang-up and close the pipe */
    atomic_store(&s_prod.wake, 1);
    s_producer_join(&s_prod);
    assert_int_equal(s_prod.write_errno, EPIPE);
    assert_int_equal(s_prod.written, 1);
    s_reply_free(&r);
}

static void s_destroy_with_open_stream(int idle_after)
{
    s_prod.count = 0;
    s_prod.interval_ms = idle_after ? 0 : 50;
    s_prod.idle_after = idle_after;
    s_client_t c = {.port = s_port, .path = "/stream"};
    assert_int_equal(pthread_create(&c.thread, NULL, s_client_run, &c), 0);
    uint64_t deadline = ipl_mono_ms() + 5000;
    while (!atomic_load(&c.reply.got_data) && ipl_mono_ms() < deadline)
        ipl_sleep_ms(5);
    assert_true(atomic_load(&c.reply.got_data));
    uint64_t t0 = ipl_mono_ms();
    ipl_httpd_destroy(&s_srv);
    uint64_t took = ipl_mono_ms() - t0;
    assert_null(s_srv);
    assert_true(took < 2000);
    pthread_join(c.thread, NULL);
    assert_int_not_equal(c.reply.rc, CURLE_OK); /* the stream was cut, not ended */
    atomic_store(&s_prod.wake, 1);
    s_producer_join(&s_prod);
    assert_int_equal(s_prod.write_errno, EPIPE);
    s_reply_free(&c.reply);
}

static void test_destroy_with_writing_producer(void **state)
{
    (void)state;
    s_destroy_with_open_stream(0);
}

static void test_destroy_with_idle_producer(void **state)
{
    (void)state;
    s_destroy_with_open_stream(1);
}

static void test_pumped_stream(void **state)
{
    (void)state;
    s_pumped.count = 5;
    s_pumped.interval_ms = 150;
    s_reply_t r = {0};
    char v[128];
    assert_int_equal(s_http(s_port, "GET", "/pumped", NULL, &r), CURLE_OK);
    uint64_t total_ms = ipl_mono_ms() - r.start_ms;
    assert_int_equal(r.status, 200);
    assert_string_equal(s_reply_header(&r, "Content-Type", v, sizeof v), "text/event-stream");
    assert_string_equal(s_reply_header(&r, "Transfer-Encoding", v, sizeof v), "chunked");
    assert_string_equal(r.body, "data: pumped-0\n\ndata: pumped-1\n\ndata: pumped-2\n\n"
                                "data: pumped-3\n\ndata: pumped-4\n\n");
    /* piece by piece as the pump wrote them, the first long before the end */
    assert_true(r.writes >= 4);
    assert_true(total_ms >= 600);
    assert_true(r.first_byte_ms + 400 < total_ms);
    /* released exactly once (right after the response: wait a little for it), on the
     * connection's own thread like every pump round */
    uint64_t deadline = ipl_mono_ms() + 2000;
    while (!atomic_load(&s_pumped.released) && ipl_mono_ms() < deadline)
        ipl_sleep_ms(5);
    assert_int_equal(atomic_load(&s_pumped.released), 1);
    assert_int_equal(atomic_load(&s_pumped.wrong_thread), 0);
    assert_true(atomic_load(&s_pumped.pumps) >= 5);
    assert_int_equal(atomic_load(&s_pumped.write_failed), 0);
    s_reply_free(&r);
}

/* A client that hangs up while the pump has nothing to write ends the response: released. */
static void test_pumped_stream_client_hangup(void **state)
{
    (void)state;
    s_pumped.count = 0;
    s_pumped.idle_after = 1;
    s_reply_t r = {0};
    r.abort_after = 1; /* hang up at the first byte */
    assert_int_equal(s_http(s_port, "GET", "/pumped", NULL, &r), CURLE_WRITE_ERROR);
    uint64_t hangup_ms = ipl_mono_ms();
    while (!atomic_load(&s_pumped.released) && ipl_mono_ms() < hangup_ms + 3000)
        ipl_sleep_ms(5);
    assert_int_equal(atomic_load(&s_pumped.released), 1);
    assert_true(ipl_mono_ms() - hangup_ms < 1500);
    assert_int_equal(s_pumped.written, 1);
    assert_int_equal(atomic_load(&s_pumped.wrong_thread), 0);
    s_reply_free(&r);

    s_reply_t after = {0}; /* the server goes on */
    assert_int_equal(s_http(s_port, "GET", "/hello", NULL, &after), CURLE_OK);
    assert_int_equal(after.status, 200);
    s_reply_free(&after);
}

/* A stream replaced by another response before the handler returned is never sent: its
 * pump is released at once and never runs. */
static void test_pumped_stream_never_sent(void **state)
{
    (void)state;
    s_pumped.count = 3;
    s_pumped.error_after = true;
    s_reply_t r = {0};
    assert_int_equal(s_http(s_port, "GET", "/pumped", NULL, &r), CURLE_OK);
    assert_int_equal(r.status, 503);
    assert_non_null(strstr(r.body, "changed my mind"));
    assert_int_equal(atomic_load(&s_pumped.released), 1);
    assert_int_equal(atomic_load(&s_pumped.pumps), 0);
    assert_int_equal(s_pumped.fd, -1);
    s_reply_free(&r);
}

/* Destroy with an idle pumped stream open: it is cut within the stop check, released. */
static void test_destroy_with_idle_pump(void **state)
{
    (void)state;
    s_pumped.count = 0;
    s_pumped.idle_after = 1;
    s_client_t c = {.port = s_port, .path = "/pumped"};
    assert_int_equal(pthread_create(&c.thread, NULL, s_client_run, &c), 0);
    uint64_t deadline = ipl_mono_ms() + 5000;
    while (!atomic_load(&c.reply.got_data) && ipl_mono_ms() < deadline)
        ipl_sleep_ms(5);
    assert_true(atomic_load(&c.reply.got_data));
    uint64_t t0 = ipl_mono_ms();
    ipl_httpd_destroy(&s_srv);
    assert_true(ipl_mono_ms() - t0 < 2000);
    pthread_join(c.thread, NULL);
    assert_int_not_equal(c.reply.rc, CURLE_OK); /* the stream was cut, not ended */
    assert_int_equal(atomic_load(&s_pumped.released), 1);
    s_reply_free(&c.reply);
}

static void test_settled_stream(void **state)
{
    (void)state;
    s_reply_t r = {0};
    char v[128];
    assert_int_equal(s_http(s_port, "GET", "/settled", NULL, &r), CURLE_OK);
    assert_int_equal(r.status, 201); /* status, type and headers kept, sent with a length */
    assert_string_equal(s_reply_header(&r, "Content-Type", v, sizeof v), "application/json");
    assert_string_equal(s_reply_header(&r, "X-Kept", v, sizeof v), "yes");
    assert_string_equal(s_reply_header(&r, "Content-Length", v, sizeof v), "33");
    assert_string_equal(s_reply_header(&r, "Transfer-Encoding", v, sizeof v), "(none)");
    assert_string_equal(r.body, "{\"part\":1}\n{\"part\":1}\n{\"part\":1}\n");
    s_reply_free(&r);

    s_reply_t bad = {0}; /* the write end still open: refused, not hung */
    assert_int_equal(s_http(s_port, "GET", "/settled?open=1", NULL, &bad), CURLE_OK);
    assert_int_equal(bad.status, 500);
    s_reply_free(&bad);
}

static void test_concurrent_requests(void **state)
{
    (void)state;
    enum { N = 8 };
    s_client_t c[N];
    atomic_store(&s_slow_peak, 0);
    uint64_t t0 = ipl_mono_ms();
    for (int i = 0; i < N; i++) {
        memset(&c[i], 0, sizeof c[i]);
        c[i].port = s_port;
        c[i].path = "/slow";
        assert_int_equal(pthread_create(&c[i].thread, NULL, s_client_run, &c[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(c[i].thread, NULL);
        assert_int_equal(c[i].reply.rc, CURLE_OK);
        assert_int_equal(c[i].reply.status, 200);
        assert_string_equal(c[i].reply.body, "slow");
        s_reply_free(&c[i].reply);
    }
    uint64_t took = ipl_mono_ms() - t0;
    /* Serially this takes N * 300 ms; handlers overlap on their own threads. */
    assert_true(atomic_load(&s_slow_peak) >= N / 2);
    assert_true(took < N * 300 / 2);
}

/* ---------------------------------------------------------------------------------------- */
/* Listen addresses and life cycle (no fixture)                                              */

static void test_listen_forms(void **state)
{
    (void)state;
    const char *good[] = {"127.0.0.1:0", "0.0.0.0:0", ":0", "0", "localhost:0"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        ipl_httpd_t *h = ipl_httpd_new(good[i], 0);
        assert_non_null(h);
        assert_true(ipl_httpd_port(h) > 0);
        ipl_httpd_destroy(&h);
        assert_null(h);
    }
    const char *bad[] = {"",      "abc",   "127.0.0.1:", "127.0.0.1:99999",  "127.0.0.1:x",
                         "::1:0", "[::1]", "host:-1",    "127.0.0.1:123456", "[]:0",
                         NULL};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        ipl_httpd_t *h = ipl_httpd_new(bad[i], 0);
        if (h || errno != EINVAL)
            fail_msg("listen address \"%s\": %p errno %d", bad[i] ? bad[i] : "(null)", (void *)h,
                     errno);
    }
    /* IPv6 when the machine has it. */
    ipl_httpd_t *v6 = ipl_httpd_new("[::1]:0", 0);
    if (v6) {
        assert_true(ipl_httpd_port(v6) > 0);
        ipl_httpd_destroy(&v6);
    }
}

/* An explicit port is honoured: a busy one fails, a free one is bound in every form. */
static void test_listen_explicit_port(void **state)
{
    (void)state;
    ipl_httpd_t *a = ipl_httpd_new("127.0.0.1:0", 0);
    assert_non_null(a);
    int port = ipl_httpd_port(a);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    errno = 0;
    assert_null(ipl_httpd_new(addr, 0)); /* in use */
    assert_int_equal(errno, EADDRINUSE);
    errno = 0;
    assert_null(ipl_httpd_new("192.0.2.1:0", 0)); /* not a local address (TEST-NET-1) */
    assert_int_equal(errno, EADDRNOTAVAIL);
    ipl_httpd_destroy(&a);

    const char *forms[] = {"127.0.0.1:%d", ":%d", "%d"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        /* The freed port may be taken by someone else meanwhile: retry with fresh ones. */
        bool bound = false;
        for (int attempt = 0; attempt < 5 && !bound; attempt++) {
            ipl_httpd_t *probe = ipl_httpd_new("0.0.0.0:0", 0);
            assert_non_null(probe);
            int p = ipl_httpd_port(probe);
            ipl_httpd_destroy(&probe);
            snprintf(addr, sizeof addr, forms[i], p);
            ipl_httpd_t *h = ipl_httpd_new(addr, 0);
            if (h) {
                assert_int_equal(ipl_httpd_port(h), p);
                ipl_httpd_destroy(&h);
                bound = true;
            }
        }
        assert_true(bound);
    }
}

static void test_lifecycle(void **state)
{
    (void)state;
    /* Destroyed without ever starting; destroy of NULL is a no-op. */
    ipl_httpd_t *h = ipl_httpd_new("127.0.0.1:0", 0);
    assert_non_null(h);
    ipl_httpd_route(h, "GET", "/x", h_hello, NULL);
    ipl_httpd_destroy(&h);
    assert_null(h);
    ipl_httpd_destroy(&h);
    ipl_httpd_route(NULL, "GET", "/x", h_hello, NULL); /* no server: ignored */
    assert_int_equal(ipl_httpd_port(NULL), 0);

    /* Bound but not started: connections wait in the backlog and are served on start. */
    h = ipl_httpd_new("127.0.0.1:0", 0);
    assert_non_null(h);
    ipl_httpd_route(h, "GET", "/hello", h_hello, NULL);
    int port = ipl_httpd_port(h);
    s_client_t c = {.port = port, .path = "/hello"};
    assert_int_equal(pthread_create(&c.thread, NULL, s_client_run, &c), 0);
    ipl_sleep_ms(100);
    assert_false(atomic_load(&c.reply.got_data));
    assert_int_equal(ipl_httpd_start(h), 0);
    assert_int_equal(ipl_httpd_start(h), 0); /* idempotent */
    assert_int_equal(ipl_httpd_port(h), port);
    pthread_join(c.thread, NULL);
    assert_int_equal(c.reply.rc, CURLE_OK);
    assert_int_equal(c.reply.status, 200);
    s_reply_free(&c.reply);
    ipl_httpd_destroy(&h);

    /* After destroy the port no longer answers. */
    s_reply_t r = {0};
    assert_int_not_equal(s_http(port, "GET", "/hello", NULL, &r), CURLE_OK);
    s_reply_free(&r);
}

/* The connection's socket, as a handler sees it: X-Socket "yes" when it is a socket. */
static void h_socket(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)arg;
    int fd = ipl_http_req_socket(req);
    int type = 0;
    socklen_t len = sizeof type;
    bool sock =
        fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
    ipl_http_resp_header(resp, "X-Socket", sock ? "yes" : "no");
    ipl_http_resp_set(resp, 200, "text/plain", "ok", 2);
}

/* ipl_httpd_limits: a header section above the limit gets 431, a request target above it 414
 * (JSON errors, the handler never runs); at the limits, requests pass. ipl_http_req_socket. */
static void test_head_limits(void **state)
{
    (void)state;
    ipl_httpd_t *srv = ipl_httpd_new("127.0.0.1:0", S_MAX_BODY);
    assert_non_null(srv);
    ipl_httpd_limits(srv, 2048, 256);
    ipl_httpd_route(srv, "*", "/s*", h_socket, NULL);
    assert_int_equal(ipl_httpd_start(srv), 0);
    int port = ipl_httpd_port(srv);
    char big[4096], line[4200];
    memset(big, 'h', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    snprintf(line, sizeof line, "X-Big: %s", big);
    const char *hdrs[] = {line, NULL};
    s_reply_t r = {0};
    assert_int_equal(s_http_ex(port, "GET", "/s", NULL, 0, hdrs, false, &r), CURLE_OK);
    s_assert_json_error(&r, 431, "invalid_request_error");
    s_reply_free(&r);
    big[1500] = '\0'; /* under 2048 with curl's own headers */
    snprintf(line, sizeof line, "X-Big: %s", big);
    s_reply_t ok = {0};
    assert_int_equal(s_http_ex(port, "GET", "/s", NULL, 0, hdrs, false, &ok), CURLE_OK);
    assert_int_equal(ok.status, 200);
    s_reply_free(&ok);
    char path[400] = "/s?q=";
    memset(path + 5, 'u', 300);
    path[305] = '\0';
    s_reply_t u = {0};
    assert_int_equal(s_http(port, "GET", path, NULL, &u), CURLE_OK);
    s_assert_json_error(&u, 414, "invalid_request_error");
    s_reply_free(&u);
    path[200] = '\0';
    s_reply_t s2 = {0};
    assert_int_equal(s_http(port, "GET", path, NULL, &s2), CURLE_OK);
    assert_int_equal(s2.status, 200);
    assert_non_null(strstr(s2.headers, "X-Socket: yes"));
    s_reply_free(&s2);
    ipl_httpd_destroy(&srv);
}

static void test_write_all(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(ipl_http_write_all(fds[1], "abc", 3), 0);
    assert_int_equal(ipl_http_write_all(fds[1], "", 0), 0);
    char buf[8] = {0};
    assert_int_equal(read(fds[0], buf, sizeof buf), 3);
    assert_string_equal(buf, "abc");
    close(fds[0]);
    errno = 0;
    assert_int_equal(ipl_http_write_all(fds[1], "abc", 3), IPL_E_IO);
    assert_int_equal(errno, EPIPE);
    close(fds[1]);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as ipl_signal_install does in services */
    ipl_log_set_level(IPL_LOG_OFF);
    curl_global_init(CURL_GLOBAL_DEFAULT);
#define T(name) cmocka_unit_test_setup_teardown(name, s_setup, s_teardown)
    const struct CMUnitTest tests[] = {
        T(test_exact_route),
        T(test_not_found),
        T(test_method_not_allowed),
        T(test_any_method_and_prefix),
        T(test_first_match_wins),
        T(test_request_accessors),
        T(test_body_limit),
        T(test_refusal_after_full_body),
        T(test_handler_responses),
        T(test_stream_chunks_arrive_early),
        T(test_stream_client_disconnect_gives_epipe),
        T(test_stream_disconnect_while_producer_idle),
        T(test_destroy_with_writing_producer),
        T(test_destroy_with_idle_producer),
        T(test_pumped_stream),
        T(test_pumped_stream_client_hangup),
        T(test_pumped_stream_never_sent),
        T(test_destroy_with_idle_pump),
        T(test_settled_stream),
        T(test_concurrent_requests),
        cmocka_unit_test(test_listen_forms),
        cmocka_unit_test(test_listen_explicit_port),
        cmocka_unit_test(test_lifecycle),
        cmocka_unit_test(test_write_all),
        cmocka_unit_test(test_head_limits),
    };
#undef T
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
