/*
 * Unit tests of decider_metrics: decisions are counted under their reason (an unknown or
 * missing one under "other") and timed unless told not to; dropped frames by socket and
 * reason; and a render reads the parts: the replica's seq and size, the resyncs mirrored from
 * decider_sync without counting twice, the peers' counters, the policy version and info
 * (decider_pool_metrics has its own tests).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <unistd.h>

#include "decider_metrics.h"

typedef struct {
    ipl_metrics_t *registry;
    decider_sync_t *sync;
    decider_ledger_t *ledger;
    decider_router_t *router;
    decider_peers_t *peers;
    ipl_policy_view_t *policy;
    decider_metrics_t *metrics;
    char eps[2][96]; // policy endpoints nobody binds
} s_fixture_t;

static int s_setup(void **state)
{
    s_fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    for (int i = 0; i < 2; i++)
        snprintf(f->eps[i], sizeof f->eps[i], "ipc:///tmp/ipl-test-decider-metrics-%ld-%d.sock",
                 (long)getpid(), i);
    f->registry = ipl_metrics_new();
    f->sync = decider_sync_new(100, 1000);
    f->ledger = decider_ledger_new(2000);
    decider_router_config_t rc;
    decider_router_config_defaults(&rc);
    rc.ledger = f->ledger;
    f->router = decider_router_new(&rc);
    char err[256] = "";
    f->peers = decider_peers_new(&(decider_peers_config_t){.id = "d1"}, err, sizeof err);
    f->policy = ipl_policy_view_new(f->eps[0], f->eps[1]);
    assert_non_null(f->sync);
    assert_non_null(f->router);
    assert_non_null(f->peers);
    assert_non_null(f->policy);
    decider_metrics_sources_t src = {
        .sync = f->sync, .peers = f->peers, .policy = f->policy, .router = f->router};
    f->metrics = decider_metrics_new(f->registry, &src);
    assert_non_null(f->metrics);
    *state = f;
    return 0;
}

static int s_teardown(void **state)
{
    s_fixture_t *f = *state;
    ipl_metrics_destroy(&f->registry); // nothing renders it any more
    decider_metrics_destroy(&f->metrics);
    assert_null(f->metrics);
    decider_metrics_destroy(&f->metrics); // NULL: nothing
    ipl_policy_view_destroy(&f->policy);
    decider_peers_destroy(&f->peers);
    decider_router_destroy(&f->router);
    decider_ledger_destroy(&f->ledger);
    decider_sync_destroy(&f->sync);
    for (int i = 0; i < 2; i++)
        unlink(f->eps[i] + 6);
    free(f);
    return 0;
}

static double s_counter(s_fixture_t *f, const char *name, const char *labels)
{
    return ipl_metric_value(ipl_metrics_counter(f->registry, name, "", labels));
}

/* The rendered text has `line` as a whole line. */
static bool s_rendered(s_fixture_t *f, const char *line)
{
    size_t len = 0;
    char *text = ipl_metrics_render(f->registry, &len);
    assert_non_null(text);
    char want[256];
    snprintf(want, sizeof want, "\n%s\n", line);
    bool found = strstr(text, want) != NULL;
    free(text);
    return found;
}

static void test_decisions_by_reason(void **state)
{
    s_fixture_t *f = *state;
    const char *const *reasons = decider_router_reasons();
    assert_non_null(reasons[0]);
    char labels[96];
    snprintf(labels, sizeof labels, "reason=\"%s\"", reasons[0]);
    // Every reason has its series before any decision.
    assert_true(s_rendered(f, "inferplane_decider_decisions_total{reason=\"other\"} 0"));
    decider_metrics_decision(f->metrics, reasons[0], 0.001);
    decider_metrics_decision(f->metrics, reasons[0], 0.002);
    decider_metrics_decision(f->metrics, "no_such_reason", 0.003);
    decider_metrics_decision(f->metrics, NULL, -1); // counted, not timed
    assert_true(s_counter(f, "inferplane_decider_decisions_total", labels) == 2);
    assert_true(s_counter(f, "inferplane_decider_decisions_total", "reason=\"other\"") == 2);
    assert_true(s_rendered(f, "inferplane_decider_decision_seconds_count 3"));
}

static void test_drops_by_socket_and_reason(void **state)
{
    s_fixture_t *f = *state;
    decider_metrics_drop(f->metrics, "listen", "frames");
    decider_metrics_drop(f->metrics, "listen", "frames");
    decider_metrics_drop(f->metrics, "state_sub", "unexpected_type");
    // one schema in every service (ipl_drops): the socket is in the log line, not a label
    assert_true(s_counter(f, "inferplane_frames_dropped_total", "reason=\"frames\"") == 2);
    assert_true(s_counter(f, "inferplane_frames_dropped_total", "reason=\"unexpected_type\"") == 1);
}

static void test_render_reads_the_parts(void **state)
{
    s_fixture_t *f = *state;
    assert_true(s_rendered(f, "inferplane_decider_state_synced 0"));
    assert_true(s_rendered(f, "inferplane_decider_policy_version 0"));
    assert_true(s_rendered(f, "inferplane_decider_policy_info{hash=\"\"} 1")); // none yet
    assert_false(s_rendered(f, "inferplane_decider_pool_workers{"));           // no pools yet
    assert_true(s_rendered(f, "inferplane_decider_peer_routed_total{event=\"sent\"} 0"));
    // A snapshot at seq 3 with one worker, then a delta that skips ahead: a resync.
    assert_int_equal(decider_sync_tick(f->sync, 0), DECIDER_SYNC_RESYNC);
    decider_sync_requested(f->sync, 0);
    ipl_msg_t m = {.type = IPL_MSG_LOAD};
    m.u.load = (ipl_load_t){.seq = 3, .worker = "w0", .ts_ms = 1, .health = IPL_HEALTH_UP};
    assert_int_equal(decider_sync_snapshot(f->sync, &m, 1), DECIDER_SYNC_OK);
    m = (ipl_msg_t){.type = IPL_MSG_SNAPSHOT_END};
    m.u.snapshot_end.seq = 3;
    assert_int_equal(decider_sync_snapshot(f->sync, &m, 1), DECIDER_SYNC_OK);
    assert_true(s_rendered(f, "inferplane_decider_state_synced 1"));
    assert_true(s_rendered(f, "inferplane_decider_state_seq 3"));
    assert_true(s_rendered(f, "inferplane_decider_state_workers 1"));
    assert_true(s_rendered(f, "inferplane_decider_snapshots 1"));
    assert_true(s_rendered(f, "inferplane_decider_resyncs_total{reason=\"gap\"} 0"));
    m = (ipl_msg_t){.type = IPL_MSG_LOAD};
    m.u.load = (ipl_load_t){.seq = 7, .worker = "w0", .ts_ms = 2, .health = IPL_HEALTH_UP};
    assert_int_equal(decider_sync_delta(f->sync, &m, 2), DECIDER_SYNC_RESYNC);
    // Mirrored at render time, raised to decider_sync's count: twice is still 1.
    assert_true(s_rendered(f, "inferplane_decider_resyncs_total{reason=\"gap\"} 1"));
    assert_true(s_rendered(f, "inferplane_decider_resyncs_total{reason=\"gap\"} 1"));
    assert_true(s_counter(f, "inferplane_decider_resyncs_total", "reason=\"gap\"") == 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_decisions_by_reason, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_drops_by_socket_and_reason, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_render_reads_the_parts, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
