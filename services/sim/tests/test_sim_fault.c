/*
 * sim_fault: arming from JSON (status, stall, count; malformed bodies refused with a message),
 * each request using up one (the status first), disarming; a peer gone is seen on a socket
 * (its other end closed) and on a pipe (its reader closed), and a stall ends early when it is.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "ipl_clock.h"
#include "sim_fault.h"

static int s_arm(sim_fault_t *f, const char *json)
{
    char err[160] = "";
    int rc = sim_fault_arm(f, json, strlen(json), err, sizeof err);
    if (rc != 0) assert_true(err[0] != '\0');
    return rc;
}

static void test_arm_and_take(void **state)
{
    (void)state;
    sim_fault_t *f = sim_fault_new();
    assert_non_null(f);
    int status, stall;
    sim_fault_take(f, &status, &stall);
    assert_int_equal(status + stall, 0); /* nothing armed */
    assert_int_equal(s_arm(f, "{\"status\": 429, \"count\": 2}"), 0);
    sim_fault_take(f, &status, &stall);
    assert_int_equal(status, 429);
    sim_fault_take(f, &status, &stall);
    assert_int_equal(status, 429);
    sim_fault_take(f, &status, &stall);
    assert_int_equal(status, 0);
    assert_int_equal(s_arm(f, "{\"stall_ms\": 300}"), 0); /* count defaults to 1 */
    sim_fault_take(f, &status, &stall);
    assert_int_equal(stall, 300);
    sim_fault_take(f, &status, &stall);
    assert_int_equal(stall, 0);
    assert_int_equal(s_arm(f, "{\"status\": 500, \"stall_ms\": 10, \"count\": 1}"), 0);
    sim_fault_take(f, &status, &stall);
    assert_int_equal(status, 500); /* the status first */
    sim_fault_take(f, &status, &stall);
    assert_int_equal(stall, 10);
    assert_int_equal(s_arm(f, "{\"status\": 503, \"count\": 5}"), 0);
    char *json = sim_fault_json(f);
    assert_non_null(strstr(json, "\"status_count\":5"));
    free(json);
    assert_int_equal(s_arm(f, "{}"), 0); /* disarms */
    sim_fault_take(f, &status, &stall);
    assert_int_equal(status + stall, 0);
    assert_int_equal(s_arm(f, "[1]"), -1);
    assert_int_equal(s_arm(f, "{\"status\": 200}"), -1);
    assert_int_equal(s_arm(f, "{\"status\": \"500\"}"), -1);
    assert_int_equal(s_arm(f, "{\"stall_ms\": -1}"), -1);
    assert_int_equal(s_arm(f, "{\"status\": 500, \"count\": 1.5}"), -1);
    assert_int_equal(s_arm(f, "not json"), -1);
    sim_fault_destroy(&f);
    assert_null(f);
}

static void test_peer_gone(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_false(sim_fault_peer_gone(sv[0], true));
    assert_int_equal(write(sv[1], "x", 1), 1); /* data is not a hang-up */
    assert_false(sim_fault_peer_gone(sv[0], true));
    close(sv[1]);
    assert_true(sim_fault_peer_gone(sv[0], true));
    close(sv[0]);
    int p[2];
    assert_int_equal(pipe(p), 0);
    assert_false(sim_fault_peer_gone(p[1], false));
    uint64_t t0 = ipl_mono_ms();
    assert_false(sim_fault_stall(20, p[1], false)); /* the whole stall */
    assert_true(ipl_mono_ms() - t0 >= 20);
    close(p[0]);
    assert_true(sim_fault_peer_gone(p[1], false));
    t0 = ipl_mono_ms();
    assert_true(sim_fault_stall(5000, p[1], false)); /* ends at once */
    assert_true(ipl_mono_ms() - t0 < 1000);
    close(p[1]);
    assert_false(sim_fault_peer_gone(-1, true));
    assert_false(sim_fault_stall(1, -1, true));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arm_and_take),
        cmocka_unit_test(test_peer_gone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
