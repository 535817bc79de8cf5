/*
 * Unit tests for collector_node: the static worker-list parser, and a node wired to sockets
 * owned by the test (a fake worker PUB, a PULL standing in for the aggregator): start-up
 * CLEARED, KV events forwarded as KV_EVENTs with our hashes, malformed frames counted, a
 * failing scrape reported as LOAD health DOWN.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <czmq.h>
#include <msgpack.h>

#include "../collector_node.h"
#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_hash.h"
#include "ipl_log.h"
#include "ipl_proto.h"

static void test_parse_specs(void **state)
{
    (void)state;
    collector_worker_spec_t *specs;
    size_t n;
    char err[256];
    assert_int_equal(collector_worker_specs_parse(
                         " w0=http://h:1/|tcp://h:2|tcp://h:3 , w1=http://h:4|tcp://h:5,", &specs,
                         &n, err, sizeof err),
                     0);
    assert_int_equal(n, 2);
    assert_string_equal(specs[0].name, "w0");
    assert_string_equal(specs[0].url, "http://h:1/");
    assert_string_equal(specs[0].metrics_url, "http://h:1/metrics");
    assert_string_equal(specs[0].kv_endpoint, "tcp://h:2");
    assert_string_equal(specs[0].replay_endpoint, "tcp://h:3");
    assert_string_equal(specs[1].name, "w1");
    assert_string_equal(specs[1].replay_endpoint, "");
    collector_worker_specs_free(&specs, n);
    assert_null(specs);

    assert_int_equal(collector_worker_specs_parse("", &specs, &n, err, sizeof err), 0);
    assert_int_equal(n, 0);
    const char *bad[] = {"w0",
                         "w0=http://h",
                         "=http://h|tcp://x",
                         "w0=|tcp://x",
                         "w0=http://h|tcp://x|tcp://y|tcp://z",
                         "w0=a|b,w0=c|d"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(collector_worker_specs_parse(bad[i], &specs, &n, err, sizeof err),
                         IPL_E_INVAL);
        assert_null(specs);
        assert_true(strlen(err) > 0);
    }
}

typedef struct {
    ipl_metrics_t *metrics;
    zsock_t *pull; /* the aggregator */
    zsock_t *pub;  /* the worker */
    collector_node_t *node;
} s_fx_t;

static int s_setup(void **state)
{
    ipl_log_init("test", IPL_LOG_OFF);
    s_fx_t *f = calloc(1, sizeof *f);
    f->metrics = ipl_metrics_new();
    f->pull = zsock_new_pull("tcp://127.0.0.1:*");
    f->pub = zsock_new_pub("tcp://127.0.0.1:*");
    assert_non_null(f->pull);
    assert_non_null(f->pub);
    zsock_set_rcvtimeo(f->pull, 50);
    char *agg = zsock_last_endpoint(f->pull);
    char *kv = zsock_last_endpoint(f->pub);
    /* a metrics URL nobody listens on: port 1 on loopback refuses at once */
    char workers[512];
    snprintf(workers, sizeof workers, "w0=http://127.0.0.1:1|%s", kv);
    collector_config_t cfg = {.aggregators = agg, .workers = workers, .scrape_interval_ms = 50};
    char err[256];
    f->node = collector_node_new(&cfg, f->metrics, err, sizeof err);
    free(agg);
    free(kv);
    assert_non_null(f->node);
    *state = f;
    return 0;
}

static int s_teardown(void **state)
{
    s_fx_t *f = *state;
    collector_node_destroy(&f->node);
    zsock_destroy(&f->pull);
    zsock_destroy(&f->pub);
    ipl_metrics_destroy(&f->metrics);
    free(f);
    return 0;
}

/* Runs the node for `ms` while collecting what reaches the aggregator. */
typedef struct {
    int kv, load, cleared, stored, down;
    uint64_t hashes[8];
    uint32_t nhashes;
} s_seen_t;

static void s_pump(s_fx_t *f, int ms, s_seen_t *seen)
{
    uint64_t until = ipl_mono_ms() + (uint64_t)ms;
    while (ipl_mono_ms() < until) {
        collector_node_poll(f->node, 10, -1);
        zframe_t *fr;
        zsock_set_rcvtimeo(f->pull, 0);
        while ((fr = zframe_recv(f->pull))) {
            ipl_msg_t m;
            memset(&m, 0, sizeof m);
            assert_int_equal(ipl_msg_decode(zframe_data(fr), zframe_size(fr), &m), 0);
            if (m.type == IPL_MSG_KV_EVENT) {
                seen->kv++;
                assert_int_equal(m.u.kv_event.seq, 0);
                assert_string_equal(m.u.kv_event.worker, "w0");
                if (m.u.kv_event.op == IPL_KV_OP_CLEARED) seen->cleared++;
                if (m.u.kv_event.op == IPL_KV_OP_STORED) {
                    seen->stored++;
                    seen->nhashes = m.u.kv_event.hashes_len < 8 ? m.u.kv_event.hashes_len : 8;
                    memcpy(seen->hashes, m.u.kv_event.hashes, seen->nhashes * sizeof(uint64_t));
                }
            } else if (m.type == IPL_MSG_LOAD) {
                seen->load++;
                if (m.u.load.health == IPL_HEALTH_DOWN) seen->down++;
            }
            ipl_msg_clear(&m);
            zframe_destroy(&fr);
        }
    }
}

static void s_publish_stored(s_fx_t *f, uint64_t seq)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_double(&pk, 1.0);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_array(&pk, 7); /* array-encoded BlockStored, v0.10 layout */
    msgpack_pack_str_with_body(&pk, "BlockStored", 11);
    msgpack_pack_array(&pk, 2);
    msgpack_pack_uint64(&pk, 0xabc);
    msgpack_pack_uint64(&pk, 0xdef);
    msgpack_pack_nil(&pk);
    msgpack_pack_array(&pk, 32);
    for (uint32_t i = 0; i < 32; i++)
        msgpack_pack_uint32(&pk, 500 + i);
    msgpack_pack_uint32(&pk, 16);
    msgpack_pack_nil(&pk);
    msgpack_pack_str_with_body(&pk, "GPU", 3);
    msgpack_pack_int64(&pk, 0);
    uint8_t seqf[8];
    for (int i = 0; i < 8; i++)
        seqf[i] = (uint8_t)(seq >> (56 - 8 * i));
    zsock_send(f->pub, "sbb", "kv-events", seqf, (size_t)8, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
}

static void test_node_forwards(void **state)
{
    s_fx_t *f = *state;
    char detail[64];
    assert_true(collector_node_ready(f->node, detail, sizeof detail));
    assert_int_equal(collector_node_nworkers(f->node), 1);
    s_seen_t seen = {0};
    s_pump(f, 300, &seen); /* start-up CLEARED, failing scrapes, SUB connected */
    assert_int_equal(seen.cleared, 1);
    assert_true(seen.down >= 1); /* nothing listens on its /metrics */

    /* a PUB drops what it sends before the SUB's subscription arrived: repeat (with new
     * sequence numbers) until one gets through */
    for (uint64_t seq = 0; seq < 20 && seen.stored == 0; seq++) {
        s_publish_stored(f, seq);
        s_pump(f, 100, &seen);
    }
    assert_int_equal(seen.stored, 1);
    zsock_send(f->pub, "s", "just one frame");
    zsock_send(f->pub, "sbs", "kv-events", "\0\0\0\0\0\0\1\0", (size_t)8, "\xc1 not msgpack");
    s_pump(f, 300, &seen);
    assert_int_equal(seen.nhashes, 2);
    uint32_t tokens[32];
    for (uint32_t i = 0; i < 32; i++)
        tokens[i] = 500 + i;
    uint64_t want[2];
    ipl_block_hashes(ipl_hash_chain_start(0), tokens, 32, 16, want, 2);
    assert_memory_equal(seen.hashes, want, sizeof want);
    double dropped = ipl_metric_value(ipl_metrics_counter(
        f->metrics, "inferplane_frames_dropped_total", "", "reason=\"bad_frames\""));
    assert_true(dropped == 1);
    size_t len;
    char *text = ipl_metrics_render(f->metrics, &len);
    assert_non_null(strstr(text, "inferplane_collector_batches_total{worker=\"w0\"} 1"));
    assert_non_null(
        strstr(text, "inferplane_collector_scrapes_total{worker=\"w0\",result=\"failed\"}"));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_specs),
        cmocka_unit_test_setup_teardown(test_node_forwards, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
