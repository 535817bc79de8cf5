/*
 * Unit tests of ipl_httpd against hostile or broken clients and of its graceful stop, with raw
 * sockets on an ephemeral loopback port:
 *   framing   Content-Length with Transfer-Encoding, two Content-Lengths and a
 *             Transfer-Encoding other than chunked get 400 and a closed connection; HTTP/1.1
 *             without Host gets 400 (HTTP/1.0 is served); a chunked body past max_body gets
 *             its 413 while the client is still sending
 *   limits    the connection limit and the per-address limit close the newest at once, the
 *             established ones keep working; the descriptor limit is raised, or the
 *             connection limit lowered to fit it
 *   timeouts  a request trickling in is cut after the read timeout, an idle connection (new,
 *             or after a response, a stream's too) after the idle timeout
 *   drain     new connections refused, idle ones closed, a request in flight finishes (with
 *             Connection: close), one whose head arrives later gets the drain handler's answer
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ipl_clock.h"
#include "ipl_httpd.h"
#include "ipl_log.h"

#define S_MAX_BODY 1024

/* ---- handlers ------------------------------------------------------------------------------- */

static void h_hello(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)arg;
    (void)req;
    ipl_http_resp_set(resp, 200, "text/plain", "hello", 5);
}

/* Answers after ?ms= milliseconds (default 400). */
static void h_slow(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)arg;
    const char *ms = ipl_http_req_query(req, "ms");
    ipl_sleep_ms(ms ? (uint64_t)atoi(ms) : 400);
    ipl_http_resp_set(resp, 200, "text/plain", "slow", 4);
}

/* A stream written and closed at once (a short stream that switched MHD's timeout off). */
static void h_stream(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)arg;
    (void)req;
    int fd = ipl_http_resp_stream(resp, 200, "text/event-stream");
    assert_true(fd >= 0);
    assert_int_equal(ipl_http_write_all(fd, "data: x\n\n", 9), 0);
    close(fd);
}

static void h_drain(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)arg;
    (void)req;
    ipl_http_resp_set(resp, 503, "text/plain", "draining", 8);
}

static ipl_httpd_t *s_start(const ipl_conns_config_t *conns)
{
    ipl_httpd_t *srv = ipl_httpd_new("127.0.0.1:0", S_MAX_BODY);
    assert_non_null(srv);
    ipl_httpd_route(srv, "GET", "/hello", h_hello, NULL);
    ipl_httpd_route(srv, "POST", "/hello", h_hello, NULL);
    ipl_httpd_route(srv, "GET", "/slow", h_slow, NULL);
    ipl_httpd_route(srv, "GET", "/stream", h_stream, NULL);
    if (conns) ipl_httpd_connections(srv, conns);
    assert_int_equal(ipl_httpd_start(srv), 0);
    return srv;
}

/* ---- raw clients ---------------------------------------------------------------------------- */

static int s_connect(int port, const char *source)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in src = {.sin_family = AF_INET};
    assert_int_equal(inet_pton(AF_INET, source ? source : "127.0.0.1", &src.sin_addr), 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&src, sizeof src), 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void s_send(int fd, const char *text)
{
    assert_int_equal(ipl_http_write_all(fd, text, strlen(text)), 0);
}

/* Reads until the peer closes (or resets) within ms into buf; -1 when it stays open. */
static ssize_t s_read_to_end(int fd, char *buf, size_t size, int ms)
{
    size_t len = 0;
    uint64_t deadline = ipl_mono_ms() + (uint64_t)ms;
    while (ipl_mono_ms() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) != 1) continue;
        ssize_t n = recv(fd, buf + len, size - 1 - len, 0);
        if (n <= 0) {
            buf[len] = '\0';
            return (ssize_t)len;
        }
        len += (size_t)n;
        if (len + 1 >= size) len = 0; /* keep the tail only */
    }
    buf[len] = '\0';
    return -1;
}

/* Reads one response's head and its Content-Length body, the connection left open. */
static int s_read_response(int fd, char *buf, size_t size)
{
    size_t len = 0;
    char *end = NULL;
    while (!(end = strstr(buf, "\r\n\r\n"))) {
        ssize_t n = recv(fd, buf + len, size - 1 - len, 0);
        if (n <= 0) return -1;
        len += (size_t)n;
        buf[len] = '\0';
    }
    const char *cl = strcasestr(buf, "Content-Length:");
    size_t want = (size_t)(end + 4 - buf) + (cl ? (size_t)atoi(cl + 15) : 0);
    while (len < want) {
        ssize_t n = recv(fd, buf + len, size - 1 - len, 0);
        if (n <= 0) return -1;
        len += (size_t)n;
        buf[len] = '\0';
    }
    return atoi(buf + 9);
}

static int s_status(const char *resp)
{
    return strncmp(resp, "HTTP/1.", 7) == 0 ? atoi(resp + 9) : -1;
}

/* Sends `request` on a new connection; the answer's status, which must come with
 * Connection: close and the end of the connection when `closes`. */
static int s_exchange(int port, const char *request, bool closes)
{
    int fd = s_connect(port, NULL);
    assert_true(fd >= 0);
    s_send(fd, request);
    char buf[8192] = "";
    int status;
    if (closes) {
        assert_true(s_read_to_end(fd, buf, sizeof buf, 3000) > 0);
        assert_non_null(strcasestr(buf, "\r\nConnection: close\r\n"));
        status = s_status(buf);
    } else {
        status = s_read_response(fd, buf, sizeof buf);
    }
    close(fd);
    return status;
}

/* ---- framing -------------------------------------------------------------------------------- */

static void test_framing(void **state)
{
    (void)state;
    ipl_httpd_t *srv = s_start(NULL);
    int port = ipl_httpd_port(srv);
    assert_int_equal(s_exchange(port,
                                "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                                "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
                                true),
                     400);
    assert_int_equal(s_exchange(port,
                                "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                                "Content-Length: 50\r\n\r\nhello",
                                true),
                     400);
    assert_int_equal(s_exchange(port,
                                "POST /hello HTTP/1.1\r\nHost: x\r\n"
                                "Transfer-Encoding: gzip, chunked\r\n\r\nxxxx",
                                true),
                     400);
    assert_int_equal(s_exchange(port,
                                "POST /hello HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                                "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                                true),
                     400);
    assert_int_equal(s_exchange(port, "GET /hello HTTP/1.1\r\n\r\n", false), 400);
    assert_int_equal(s_exchange(port, "GET /hello HTTP/1.0\r\n\r\n", true), 200);
    /* well-formed ones still pass, chunked too */
    assert_int_equal(s_exchange(port,
                                "POST /hello HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n"
                                "\r\n5\r\nhello\r\n0\r\n\r\n",
                                false),
                     200);
    assert_int_equal(s_exchange(port, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n", false), 200);
    ipl_httpd_destroy(&srv);
}

static void test_chunked_body_too_large_is_answered_early(void **state)
{
    (void)state;
    ipl_httpd_t *srv = s_start(NULL);
    int fd = s_connect(ipl_httpd_port(srv), NULL);
    /* one chunk announced as 256 MiB: its end never comes, the answer must */
    s_send(fd, "POST /hello HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10000000\r\n");
    char piece[512];
    memset(piece, 'x', sizeof piece);
    char buf[4096] = "";
    bool answered = false;
    for (int i = 0; i < 200 && !answered; i++) { /* at most 100 KiB */
        if (ipl_http_write_all(fd, piece, sizeof piece) != 0) break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        answered = poll(&p, 1, 5) == 1;
    }
    assert_true(s_read_to_end(fd, buf, sizeof buf, 5000) > 0);
    assert_int_equal(s_status(buf), 413);
    assert_non_null(strcasestr(buf, "Connection: close"));
    assert_non_null(strstr(buf, "\"code\":413"));
    close(fd);
    ipl_httpd_destroy(&srv);
}

/* ---- limits --------------------------------------------------------------------------------- */

static void test_connection_limits(void **state)
{
    (void)state;
    ipl_conns_config_t cfg = {.max_connections = 3, .max_per_ip = 2};
    ipl_httpd_t *srv = s_start(&cfg);
    int port = ipl_httpd_port(srv);
    char buf[4096];
    int a1 = s_connect(port, "127.0.0.2"), a2 = s_connect(port, "127.0.0.2");
    int a3 = s_connect(port, "127.0.0.2"); /* the per-address limit */
    assert_true(a1 >= 0 && a2 >= 0 && a3 >= 0);
    assert_true(s_read_to_end(a3, buf, sizeof buf, 2000) >= 0);
    int b1 = s_connect(port, "127.0.0.3");
    s_send(b1, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"); /* served: the third place */
    assert_int_equal(s_read_response(b1, buf, sizeof buf), 200);
    int b2 = s_connect(port, "127.0.0.3"); /* all three places taken */
    assert_true(s_read_to_end(b2, buf, sizeof buf, 2000) >= 0);
    s_send(a1, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"); /* the held ones still work */
    assert_int_equal(s_read_response(a1, buf, sizeof buf), 200);
    close(a2);
    uint64_t deadline = ipl_mono_ms() + 3000; /* its place frees once the server closed it */
    int status = -1;
    while (status != 200 && ipl_mono_ms() < deadline) {
        int c = s_connect(port, "127.0.0.4");
        if (c < 0) continue;
        const char *get = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
        status =
            ipl_http_write_all(c, get, strlen(get)) == 0 ? s_read_response(c, buf, sizeof buf) : -1;
        close(c);
        if (status != 200) ipl_sleep_ms(50);
    }
    assert_int_equal(status, 200);
    close(a1);
    close(a3);
    close(b1);
    close(b2);
    ipl_httpd_destroy(&srv);
}

/* In a child (limits are process-wide): a soft limit below what the connections need is
 * raised; a hard limit too small lowers the connection limit instead. */
static void test_descriptor_limit(void **state)
{
    (void)state;
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        rlim_t hard = rl.rlim_max;
        rl.rlim_cur = 256;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(2);
        ipl_conns_config_t cfg = {.max_connections = 100};
        ipl_httpd_t *srv = ipl_httpd_new("127.0.0.1:0", 0);
        ipl_httpd_connections(srv, &cfg);
        if (ipl_httpd_start(srv) != 0) _exit(3);
        getrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < 100 * 4 + 512 || (hard != RLIM_INFINITY && rl.rlim_cur > hard)) _exit(4);
        ipl_httpd_destroy(&srv);
        rl.rlim_cur = rl.rlim_max = 512 + 4 * 5; /* room for 5 */
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(5);
        srv = ipl_httpd_new("127.0.0.1:0", 0);
        if (ipl_httpd_start(srv) != 0) _exit(6); /* the default 4096 does not fit */
        int port = ipl_httpd_port(srv), fds[6];
        for (int i = 0; i < 6; i++)
            fds[i] = s_connect(port, "127.0.0.2");
        char buf[256];
        bool sixth_closed = s_read_to_end(fds[5], buf, sizeof buf, 2000) >= 0;
        const char *get = "GET /x HTTP/1.1\r\nHost: x\r\n\r\n";
        bool first_served = ipl_http_write_all(fds[0], get, strlen(get)) == 0 &&
                            s_read_response(fds[0], buf, sizeof buf) == 404;
        for (int i = 0; i < 6; i++)
            close(fds[i]);
        ipl_httpd_destroy(&srv);
        _exit(sixth_closed && first_served ? 0 : 7);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- timeouts ------------------------------------------------------------------------------- */

static void test_timeouts(void **state)
{
    (void)state;
    ipl_conns_config_t cfg = {
        .max_connections = 100, .idle_timeout_ms = 1000, .read_timeout_ms = 400};
    ipl_httpd_t *srv = s_start(&cfg);
    int port = ipl_httpd_port(srv);
    char buf[4096];
    /* slowloris: a header byte every 100 ms */
    int slow = s_connect(port, NULL);
    s_send(slow, "GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: ");
    uint64_t t0 = ipl_mono_ms();
    bool cut = false;
    while (!cut && ipl_mono_ms() - t0 < 3000) {
        struct pollfd p = {.fd = slow, .events = POLLIN};
        cut = poll(&p, 1, 100) == 1 || send(slow, "a", 1, MSG_NOSIGNAL) != 1;
    }
    uint64_t took = ipl_mono_ms() - t0;
    assert_true(cut);
    assert_true(took >= 350 && took < 1500);
    close(slow);
    /* idle, new */
    int idle = s_connect(port, NULL);
    t0 = ipl_mono_ms();
    assert_true(s_read_to_end(idle, buf, sizeof buf, 3000) >= 0);
    took = ipl_mono_ms() - t0;
    assert_true(took >= 900 && took < 2500);
    close(idle);
    /* idle after a stream (which switched MHD's own timeout off) and after a plain answer */
    const char *paths[] = {"/stream", "/hello"};
    for (int i = 0; i < 2; i++) {
        int c = s_connect(port, NULL);
        char req[128];
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", paths[i]);
        s_send(c, req);
        t0 = ipl_mono_ms();
        ssize_t n = s_read_to_end(c, buf, sizeof buf, 4000);
        took = ipl_mono_ms() - t0;
        assert_true(n >= 0);
        assert_true(took >= 900 && took < 3000);
        close(c);
    }
    /* a handler that takes longer than both timeouts is not cut */
    assert_int_equal(s_exchange(port, "GET /slow?ms=1300 HTTP/1.1\r\nHost: x\r\n\r\n", false), 200);
    ipl_httpd_destroy(&srv);
}

/* ---- drain ---------------------------------------------------------------------------------- */

typedef struct {
    int port;
    int status;
    char resp[4096];
} s_slow_client_t;

static void *s_slow_client(void *arg)
{
    s_slow_client_t *c = arg;
    int fd = s_connect(c->port, NULL);
    s_send(fd, "GET /slow?ms=600 HTTP/1.1\r\nHost: x\r\n\r\n");
    c->status = s_read_to_end(fd, c->resp, sizeof c->resp, 5000) > 0 ? s_status(c->resp) : -1;
    close(fd);
    return NULL;
}

static void test_drain(void **state)
{
    (void)state;
    ipl_httpd_t *srv = ipl_httpd_new("127.0.0.1:0", S_MAX_BODY);
    ipl_httpd_route(srv, "GET", "/slow", h_slow, NULL);
    ipl_httpd_route(srv, "GET", "/hello", h_hello, NULL);
    ipl_httpd_drain_handler(srv, h_drain, NULL);
    assert_int_equal(ipl_httpd_start(srv), 0);
    int port = ipl_httpd_port(srv);
    assert_int_equal(ipl_httpd_inflight(srv), 0);
    ipl_httpd_drain(NULL); /* nothing */
    int idle = s_connect(port, NULL);
    int late = s_connect(port, NULL);
    s_send(late, "GET /hello HTTP/1.1\r\n"); /* its request line only */
    s_slow_client_t c = {.port = port};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, s_slow_client, &c), 0);
    uint64_t deadline = ipl_mono_ms() + 2000;
    while (ipl_httpd_inflight(srv) < 1 && ipl_mono_ms() < deadline)
        ipl_sleep_ms(5);
    ipl_sleep_ms(100); /* the late one's request line is read meanwhile */
    assert_int_equal(ipl_httpd_inflight(srv), 1); /* the slow one: the late one's head is not in */
    ipl_httpd_drain(srv);
    ipl_httpd_drain(srv);                        /* idempotent */
    assert_int_equal(s_connect(port, NULL), -1); /* refused */
    assert_int_equal(errno, ECONNREFUSED);
    char buf[4096];
    assert_true(s_read_to_end(idle, buf, sizeof buf, 1000) >= 0); /* closed */
    s_send(late, "Host: x\r\n\r\n"); /* its head completes now: the drain answer */
    assert_true(s_read_to_end(late, buf, sizeof buf, 2000) > 0);
    assert_int_equal(s_status(buf), 503);
    assert_non_null(strstr(buf, "draining"));
    assert_non_null(strcasestr(buf, "Connection: close"));
    pthread_join(t, NULL); /* the one in flight finished, and its connection closes */
    assert_int_equal(c.status, 200);
    assert_non_null(strcasestr(c.resp, "Connection: close"));
    deadline = ipl_mono_ms() + 2000;
    while (ipl_httpd_inflight(srv) > 0 && ipl_mono_ms() < deadline)
        ipl_sleep_ms(5);
    assert_int_equal(ipl_httpd_inflight(srv), 0);
    close(idle);
    close(late);
    ipl_httpd_destroy(&srv);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as ipl_signal_install does in services */
    ipl_log_set_level(IPL_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_framing),
        cmocka_unit_test(test_chunked_body_too_large_is_answered_early),
        cmocka_unit_test(test_connection_limits),
        cmocka_unit_test(test_descriptor_limit),
        cmocka_unit_test(test_timeouts),
        cmocka_unit_test(test_drain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
