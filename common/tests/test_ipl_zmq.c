/* ipl_zmq: whole messages over a real PAIR of inproc sockets; binding with a readable error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_error.h"
#include "ipl_zmq.h"

static void *s_ctx, *s_a, *s_b;

static int s_setup(void **state)
{
    (void)state;
    s_ctx = zmq_ctx_new();
    s_a = zmq_socket(s_ctx, ZMQ_PAIR);
    s_b = zmq_socket(s_ctx, ZMQ_PAIR);
    assert_int_equal(zmq_bind(s_a, "inproc://ipl-zmq-test"), 0);
    assert_int_equal(zmq_connect(s_b, "inproc://ipl-zmq-test"), 0);
    return 0;
}

static int s_teardown(void **state)
{
    (void)state;
    zmq_close(s_a);
    zmq_close(s_b);
    zmq_ctx_term(s_ctx);
    return 0;
}

static void s_send(int nframes)
{
    for (int i = 0; i < nframes; i++) {
        char buf[8];
        int len = snprintf(buf, sizeof buf, "f%d", i);
        assert_int_equal(zmq_send(s_a, buf, (size_t)len, i + 1 < nframes ? ZMQ_SNDMORE : 0), len);
    }
}

static void test_nothing_waiting(void **state)
{
    (void)state;
    zmq_msg_t part[2];
    int kept = 7;
    assert_int_equal(ipl_zmq_recv_parts(s_b, part, 2, &kept), 0);
    assert_int_equal(kept, 0);
}

static void test_keeps_first_frames_and_drops_the_rest(void **state)
{
    (void)state;
    s_send(5);
    s_send(1);
    zmq_msg_t part[2];
    int kept;
    assert_int_equal(ipl_zmq_recv_parts(s_b, part, 2, &kept), 5);
    assert_int_equal(kept, 2);
    assert_memory_equal(zmq_msg_data(&part[0]), "f0", 2);
    assert_memory_equal(zmq_msg_data(&part[1]), "f1", 2);
    ipl_zmq_close_parts(part, kept);
    /* the next message starts cleanly after the dropped frames */
    assert_int_equal(ipl_zmq_recv_parts(s_b, part, 2, &kept), 1);
    assert_int_equal(kept, 1);
    assert_memory_equal(zmq_msg_data(&part[0]), "f0", 2);
    ipl_zmq_close_parts(part, kept);
}

static void test_fewer_frames_than_max(void **state)
{
    (void)state;
    s_send(2);
    zmq_msg_t part[3];
    int kept;
    assert_int_equal(ipl_zmq_recv_parts(s_b, part, 3, &kept), 2);
    assert_int_equal(kept, 2);
    ipl_zmq_close_parts(part, kept);
    /* max 0: count only */
    s_send(3);
    assert_int_equal(ipl_zmq_recv_parts(s_b, part, 0, &kept), 3);
    assert_int_equal(kept, 0);
}

static void test_bind_names_endpoint_error_and_fix(void **state)
{
    (void)state;
    void *c = zmq_socket(s_ctx, ZMQ_PULL);
    char err[256] = "untouched";
    assert_int_equal(ipl_zmq_bind(c, "inproc://ipl-zmq-bind", "--pull", NULL, "x", err, sizeof err),
                     0);
    assert_string_equal(err, "untouched");
    // taken: libzmq's error, the source when given, the fix
    void *d = zmq_socket(s_ctx, ZMQ_PULL);
    assert_int_equal(ipl_zmq_bind(d, "inproc://ipl-zmq-bind", "--pull", "env",
                                  "use a free tcp://host:port", err, sizeof err),
                     IPL_E_IO);
    assert_string_equal(err, "cannot bind --pull \"inproc://ipl-zmq-bind\" (from env): Address "
                             "already in use; use a free tcp://host:port");
    assert_int_equal(
        ipl_zmq_bind(d, "bogus://nowhere", "the replay ROUTER", NULL, "check it", err, sizeof err),
        IPL_E_IO);
    assert_string_equal(err, "cannot bind the replay ROUTER \"bogus://nowhere\": Protocol not "
                             "supported; check it");
    assert_int_equal(ipl_zmq_bind(d, NULL, "--pub", NULL, "give one", err, sizeof err), IPL_E_IO);
    assert_string_equal(err, "cannot bind --pub \"\": Invalid argument; give one");
    assert_int_equal(ipl_zmq_bind(d, "", "--pub", NULL, "give one", err, 16), IPL_E_IO);
    assert_string_equal(err, "cannot bind --p"); // truncated, terminated
    zmq_close(c);
    zmq_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bind_names_endpoint_error_and_fix, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_nothing_waiting, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_keeps_first_frames_and_drops_the_rest, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_fewer_frames_than_max, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
