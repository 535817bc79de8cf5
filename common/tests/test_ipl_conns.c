/*
 * Unit tests of ipl_conns: the limits at accept (all connections, per address, IPv4 and IPv6
 * apart, a closed one frees its place), the deadlines (idle from the open or the last
 * response, read from the request line, none while active; a passed one shuts the socket
 * down, which its peer sees as the end), the drain (idle ones cut at once, the others when
 * they become idle; in-flight counts) and the metrics. Sockets are socketpair(2) ends: the
 * test holds the peer and watches for the end of the stream.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipl_clock.h"
#include "ipl_conns.h"
#include "ipl_log.h"
#include "ipl_metrics.h"

static struct sockaddr_in s_v4(const char *ip)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(40000)};
    assert_int_equal(inet_pton(AF_INET, ip, &a.sin_addr), 1);
    return a;
}

static struct sockaddr_in6 s_v6(const char *ip)
{
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(40000)};
    assert_int_equal(inet_pton(AF_INET6, ip, &a.sin6_addr), 1);
    return a;
}

#define ADMIT(c, a)    ipl_conns_admit((c), (const struct sockaddr *)&(a), sizeof(a))
#define OPEN(c, a, fd) ipl_conns_open((c), (const struct sockaddr *)&(a), sizeof(a), (fd))

/* A connected pair: fds[0] is "the server's" (given to the table), fds[1] the client's. */
static void s_pair(int fds[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
}

/* Whether the client end sees the end of the stream within ms. */
static bool s_ended(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, ms) != 1) return false;
    char c;
    return recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

static void test_limits(void **state)
{
    (void)state;
    ipl_conns_config_t cfg = {.max_connections = 3, .max_per_ip = 2};
    ipl_conns_t *c = ipl_conns_new(&cfg, "test");
    assert_non_null(c);
    struct sockaddr_in a = s_v4("10.0.0.1"), b = s_v4("10.0.0.2");
    struct sockaddr_in6 a6 = s_v6("::ffff:10.0.0.1"), v6 = s_v6("2001:db8::1");
    int fds[4][2];
    for (int i = 0; i < 4; i++)
        s_pair(fds[i]);
    assert_true(ADMIT(c, a));
    ipl_conn_t *c1 = OPEN(c, a, fds[0][0]);
    assert_true(ADMIT(c, a));
    ipl_conn_t *c2 = OPEN(c, a6, fds[1][0]); /* the same address, IPv4-mapped */
    assert_false(ADMIT(c, a));               /* its third */
    assert_false(ADMIT(c, a6));
    assert_true(ADMIT(c, b)); /* another address may */
    assert_true(ADMIT(c, v6));
    ipl_conn_t *c3 = OPEN(c, v6, fds[2][0]);
    assert_int_equal(ipl_conns_count(c), 3);
    assert_false(ADMIT(c, b)); /* all three places taken */
    ipl_conns_close(c, &c1);
    assert_null(c1);
    assert_true(ADMIT(c, b));
    assert_true(ADMIT(c, a)); /* a's count went down too */
    ipl_conns_close(c, &c2);
    ipl_conns_close(c, &c3);
    ipl_conns_close(c, &c3); /* NULL: nothing */
    assert_int_equal(ipl_conns_count(c), 0);
    ipl_conns_destroy(&c);
    assert_null(c);
    for (int i = 0; i < 4; i++) {
        close(fds[i][0]);
        close(fds[i][1]);
    }
}

static void test_no_per_ip_limit(void **state)
{
    (void)state;
    ipl_conns_config_t cfg = {.max_connections = 0 /* the default */, .max_per_ip = 0};
    ipl_conns_t *c = ipl_conns_new(&cfg, "test");
    struct sockaddr_in a = s_v4("10.0.0.1");
    ipl_conn_t *open[50];
    int fds[50][2];
    for (int i = 0; i < 50; i++) {
        s_pair(fds[i]);
        assert_true(ADMIT(c, a));
        open[i] = OPEN(c, a, fds[i][0]);
    }
    assert_int_equal(ipl_conns_count(c), 50);
    for (int i = 0; i < 50; i++) {
        ipl_conns_close(c, &open[i]);
        close(fds[i][0]);
        close(fds[i][1]);
    }
    ipl_conns_destroy(&c);
}

static void test_deadlines(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    ipl_conns_config_t cfg = {
        .max_connections = 10, .idle_timeout_ms = 300, .read_timeout_ms = 200};
    ipl_conns_t *c = ipl_conns_new(&cfg, "test");
    ipl_conns_metrics(c, m, "t");
    struct sockaddr_in a = s_v4("10.0.0.1");
    int idle[2], reading[2], active[2], back[2];
    s_pair(idle);
    s_pair(reading);
    s_pair(active);
    s_pair(back);
    uint64_t t0 = ipl_mono_ms();
    ipl_conn_t *ci = OPEN(c, a, idle[0]);
    ipl_conn_t *cr = OPEN(c, a, reading[0]);
    ipl_conn_t *ca = OPEN(c, a, active[0]);
    ipl_conn_t *cb = OPEN(c, a, back[0]);
    ipl_conns_reading(c, cr);
    assert_int_equal(ipl_conns_inflight(c), 0); /* its head is not in yet */
    ipl_conns_head(c, cr);                      /* its body may follow: the same deadline */
    ipl_conns_reading(c, ca);
    ipl_conns_head(c, ca);
    ipl_conns_active(c, ca);
    ipl_conns_reading(c, cb);
    ipl_conns_active(c, cb);
    assert_int_equal(ipl_conns_inflight(c), 3);
    assert_false(s_ended(reading[1], 100)); /* not before its time */
    assert_true(s_ended(reading[1], 1000)); /* read: 200 ms after its request line */
    assert_true(ipl_mono_ms() - t0 >= 190);
    ipl_conns_idle(c, cb); /* its response went out: idle from now */
    uint64_t t1 = ipl_mono_ms();
    assert_true(s_ended(idle[1], 1000));
    assert_true(ipl_mono_ms() - t0 >= 290);
    assert_true(s_ended(back[1], 1000));
    assert_true(ipl_mono_ms() - t1 >= 290);
    assert_false(s_ended(active[1], 500));      /* active: no deadline */
    assert_int_equal(ipl_conns_inflight(c), 2); /* the cut reading one until it is closed */
    char *text = ipl_metrics_render(m, NULL);
    assert_non_null(strstr(text, "t_connection_timeouts_total{state=\"idle\"} 2"));
    assert_non_null(strstr(text, "t_connection_timeouts_total{state=\"read\"} 1"));
    assert_non_null(strstr(text, "t_connections 4"));
    free(text);
    ipl_conns_close(c, &ci);
    ipl_conns_close(c, &cr);
    ipl_conns_close(c, &ca);
    ipl_conns_close(c, &cb);
    assert_int_equal(ipl_conns_inflight(c), 0);
    ipl_conns_destroy(&c);
    ipl_metrics_destroy(&m);
    int *all[] = {idle, reading, active, back};
    for (int i = 0; i < 4; i++) {
        close(all[i][0]);
        close(all[i][1]);
    }
}

static void test_drain(void **state)
{
    (void)state;
    ipl_conns_config_t cfg = {.max_connections = 10}; /* no deadlines */
    ipl_conns_t *c = ipl_conns_new(&cfg, "test");
    struct sockaddr_in a = s_v4("10.0.0.1");
    int idle[2], busy[2], late[2];
    s_pair(idle);
    s_pair(busy);
    s_pair(late);
    ipl_conn_t *ci = OPEN(c, a, idle[0]);
    ipl_conn_t *cb = OPEN(c, a, busy[0]);
    ipl_conns_reading(c, cb);
    ipl_conns_active(c, cb);
    int slow[2]; /* its request line is in, its head not: not waited for, not cut */
    s_pair(slow);
    ipl_conn_t *cs = OPEN(c, a, slow[0]);
    ipl_conns_reading(c, cs);
    assert_false(ipl_conns_draining(c));
    ipl_conns_drain(c);
    ipl_conns_drain(c); /* idempotent */
    assert_true(ipl_conns_draining(c));
    assert_true(s_ended(idle[1], 500));  /* idle: cut at once */
    assert_false(s_ended(busy[1], 200)); /* in flight: goes on */
    assert_false(s_ended(slow[1], 0));
    assert_int_equal(ipl_conns_inflight(c), 1);
    ipl_conns_head(c, cs); /* its head came after all: in flight, to be answered */
    assert_int_equal(ipl_conns_inflight(c), 2);
    ipl_conns_close(c, &cs);
    close(slow[0]);
    close(slow[1]);
    assert_int_equal(ipl_conns_inflight(c), 1);
    ipl_conns_idle(c, cb); /* its response is out: cut now */
    assert_true(s_ended(busy[1], 500));
    assert_int_equal(ipl_conns_inflight(c), 0);
    ipl_conn_t *cl = OPEN(c, a, late[0]); /* accepted as the listener was shut */
    assert_true(s_ended(late[1], 500));
    ipl_conns_close(c, &ci);
    ipl_conns_close(c, &cb);
    ipl_conns_close(c, &cl);
    ipl_conns_destroy(&c);
    int *all[] = {idle, busy, late};
    for (int i = 0; i < 3; i++) {
        close(all[i][0]);
        close(all[i][1]);
    }
}

static void test_refusals_counted(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    ipl_conns_config_t cfg = {.max_connections = 1, .max_per_ip = 1};
    ipl_conns_t *c = ipl_conns_new(&cfg, "test");
    ipl_conns_metrics(c, m, "t");
    struct sockaddr_in a = s_v4("10.0.0.1"), b = s_v4("10.0.0.2");
    int fds[2];
    s_pair(fds);
    ipl_conn_t *one = OPEN(c, a, fds[0]);
    assert_false(ADMIT(c, a));
    assert_false(ADMIT(c, b));
    assert_false(ADMIT(c, b));
    assert_true(ipl_conns_admit(c, NULL, 0) == false); /* full, whatever the address */
    char *text = ipl_metrics_render(m, NULL);
    assert_non_null(strstr(text, "t_connections_refused_total{reason=\"max_connections\"} 4"));
    assert_non_null(strstr(text, "t_connections_refused_total{reason=\"per_ip\"} 0"));
    free(text);
    ipl_conns_close(c, &one);
    ipl_conns_destroy(&c);
    ipl_metrics_destroy(&m);
    close(fds[0]);
    close(fds[1]);
}

static void test_per_ip_refusal_counted(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    ipl_conns_config_t cfg = {.max_connections = 10, .max_per_ip = 1};
    ipl_conns_t *c = ipl_conns_new(&cfg, "test");
    ipl_conns_metrics(c, m, "t");
    struct sockaddr_in a = s_v4("10.0.0.1");
    int fds[2];
    s_pair(fds);
    ipl_conn_t *one = OPEN(c, a, fds[0]);
    assert_false(ADMIT(c, a));
    char *text = ipl_metrics_render(m, NULL);
    assert_non_null(strstr(text, "t_connections_refused_total{reason=\"per_ip\"} 1"));
    free(text);
    ipl_conns_close(c, &one);
    ipl_conns_destroy(&c);
    ipl_metrics_destroy(&m);
    close(fds[0]);
    close(fds[1]);
}

int main(void)
{
    ipl_log_set_level(IPL_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limits),           cmocka_unit_test(test_no_per_ip_limit),
        cmocka_unit_test(test_deadlines),        cmocka_unit_test(test_drain),
        cmocka_unit_test(test_refusals_counted), cmocka_unit_test(test_per_ip_refusal_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
