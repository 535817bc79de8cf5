/*
 * Unit tests of ipl_loop: ipl_loop_poll (readiness, timeout, the stop fd, a failing poll),
 * ipl_loop_run (handlers per ready item in order, the tick's wait, stopping) and
 * ipl_loop_run_rounds (a round's error ends the loop). Real inproc PAIR sockets and pipes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <stdio.h>
#include <unistd.h>

#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_loop.h"
#include "ipl_signal.h"

static void *s_ctx, *s_a, *s_b;
static int s_pipe[2];

static int s_setup(void **state)
{
    (void)state;
    assert_int_equal(ipl_signal_install(), 0);
    ipl_signal_reset();
    s_ctx = zmq_ctx_new();
    s_a = zmq_socket(s_ctx, ZMQ_PAIR);
    s_b = zmq_socket(s_ctx, ZMQ_PAIR);
    assert_int_equal(zmq_bind(s_a, "inproc://ipl-loop-test"), 0);
    assert_int_equal(zmq_connect(s_b, "inproc://ipl-loop-test"), 0);
    assert_int_equal(pipe(s_pipe), 0);
    return 0;
}

static int s_teardown(void **state)
{
    (void)state;
    ipl_signal_reset();
    zmq_close(s_a);
    zmq_close(s_b);
    zmq_ctx_term(s_ctx);
    close(s_pipe[0]);
    close(s_pipe[1]);
    return 0;
}

static void test_poll_readiness_timeout_and_stop_fd(void **state)
{
    (void)state;
    ipl_signal_reset();
    zmq_pollitem_t items[3] = {{s_b, 0, ZMQ_POLLIN, 0}, {NULL, s_pipe[0], ZMQ_POLLIN, 0}};
    uint64_t t0 = ipl_mono_ms();
    assert_int_equal(ipl_loop_poll(items, 2, -1, 30), 0);
    assert_true(ipl_mono_ms() - t0 >= 25);
    assert_int_equal(zmq_send(s_a, "x", 1, 0), 1);
    assert_int_equal(write(s_pipe[1], "y", 1), 1);
    assert_int_equal(ipl_loop_poll(items, 2, -1, 1000), 2);
    assert_true(items[0].revents & ZMQ_POLLIN);
    assert_true(items[1].revents & ZMQ_POLLIN);
    char buf[4];
    assert_int_equal(zmq_recv(s_b, buf, sizeof buf, 0), 1);
    assert_int_equal(read(s_pipe[0], buf, sizeof buf), 1);
    // the stop fd goes into items[n] and wakes the wait
    ipl_signal_request_stop();
    t0 = ipl_mono_ms();
    assert_int_equal(ipl_loop_poll(items, 2, ipl_signal_fd(), 5000), 1);
    assert_true(ipl_mono_ms() - t0 < 1000);
    assert_int_equal(items[0].revents, 0);
    assert_true(items[2].revents & ZMQ_POLLIN);
    assert_int_equal(items[2].fd, ipl_signal_fd());
}

static void test_poll_failure_is_logged(void **state)
{
    (void)state;
    ipl_signal_reset();
    FILE *out = tmpfile();
    ipl_log_init("testsvc", IPL_LOG_INFO);
    ipl_log_set_stream(out);
    static uint64_t junk[64]; // not a ZeroMQ socket: libzmq says ENOTSOCK
    zmq_pollitem_t items[1] = {{junk, 0, ZMQ_POLLIN, 0}};
    assert_int_equal(ipl_loop_poll(items, 1, -1, 0), IPL_E_IO);
    ipl_log_set_stream(NULL);
    char line[256] = "";
    rewind(out);
    assert_non_null(fgets(line, sizeof line, out));
    fclose(out);
    assert_non_null(strstr(line, "level=error svc=testsvc msg=poll_failed error=\""));
}

typedef struct {
    int socket_ready, pipe_ready, ticks, order[8], norder;
    long wait;
    uint64_t started_ms, last_tick_ms;
} s_seen_t;

static s_seen_t s_seen;

static void s_on_socket(void *arg)
{
    assert_ptr_equal(arg, &s_seen);
    char buf[4];
    while (zmq_recv(s_b, buf, sizeof buf, ZMQ_DONTWAIT) >= 0)
        s_seen.socket_ready++;
    if (s_seen.norder < 8) s_seen.order[s_seen.norder++] = 0;
}

static void s_on_pipe(void *arg)
{
    (void)arg;
    char buf[4];
    if (read(s_pipe[0], buf, sizeof buf) > 0) s_seen.pipe_ready++;
    if (s_seen.norder < 8) s_seen.order[s_seen.norder++] = 1;
}

// Round 1: sends to both items; round 3: asks to stop. Waits as long as s_seen.wait says.
static long s_tick(void *arg)
{
    assert_ptr_equal(arg, &s_seen);
    s_seen.ticks++;
    s_seen.last_tick_ms = ipl_mono_ms();
    if (s_seen.ticks == 1) {
        assert_int_equal(zmq_send(s_a, "x", 1, 0), 1);
        assert_int_equal(write(s_pipe[1], "y", 1), 1);
    }
    if (s_seen.ticks == 3) ipl_signal_request_stop();
    return s_seen.wait;
}

static void test_run_calls_handlers_in_order_and_stops(void **state)
{
    (void)state;
    ipl_signal_reset();
    s_seen = (s_seen_t){.wait = 20};
    const ipl_loop_item_t items[] = {{NULL, s_pipe[0], s_on_pipe, &s_seen},
                                     {s_b, -1, s_on_socket, &s_seen}};
    uint64_t t0 = ipl_mono_ms();
    assert_int_equal(ipl_loop_run(items, 2, 5000, s_tick, &s_seen), 0);
    // round 1 served both (pipe first: item order); round 2 timed out after the tick's 20 ms
    // (not the 5000 ms of timeout_ms); round 3 stopped
    assert_int_equal(s_seen.pipe_ready, 1);
    assert_int_equal(s_seen.socket_ready, 1);
    assert_int_equal(s_seen.norder, 2);
    assert_int_equal(s_seen.order[0], 1);
    assert_int_equal(s_seen.order[1], 0);
    assert_int_equal(s_seen.ticks, 3);
    assert_true(ipl_mono_ms() - t0 >= 15);
    assert_true(ipl_mono_ms() - t0 < 1000);
    assert_true(ipl_signal_stopping());
    // already stopping: not one round
    assert_int_equal(ipl_loop_run(items, 2, 5000, s_tick, &s_seen), 0);
    assert_int_equal(s_seen.ticks, 3);
}

static void test_run_without_items_waits_for_the_stop(void **state)
{
    (void)state;
    ipl_signal_reset();
    s_seen = (s_seen_t){.wait = -1}; // no limit of the tick's own: timeout_ms rules
    uint64_t t0 = ipl_mono_ms();
    assert_int_equal(ipl_loop_run(NULL, 0, 10, s_tick, &s_seen), 0);
    assert_int_equal(s_seen.ticks, 3);
    assert_true(ipl_mono_ms() - t0 >= 15); // two 10 ms waits before the stop
}

static int s_rounds;

static int s_round(void *arg, long timeout_ms, int stop_fd)
{
    assert_null(arg);
    assert_int_equal(timeout_ms, 7);
    assert_int_equal(stop_fd, ipl_signal_fd());
    return ++s_rounds == 4 ? IPL_E_IO : 0;
}

static void test_run_rounds_ends_on_a_round_error(void **state)
{
    (void)state;
    ipl_signal_reset();
    s_rounds = 0;
    assert_int_equal(ipl_loop_run_rounds(s_round, NULL, 7), IPL_E_IO);
    assert_int_equal(s_rounds, 4);
    ipl_signal_request_stop();
    assert_int_equal(ipl_loop_run_rounds(s_round, NULL, 7), 0);
    assert_int_equal(s_rounds, 4);
}

int main(void)
{
    // One set of sockets and pipe for the group; each test starts with the stop flag clear.
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_poll_readiness_timeout_and_stop_fd),
        cmocka_unit_test(test_poll_failure_is_logged),
        cmocka_unit_test(test_run_calls_handlers_in_order_and_stops),
        cmocka_unit_test(test_run_without_items_waits_for_the_stop),
        cmocka_unit_test(test_run_rounds_ends_on_a_round_error),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
