/*
 * Unit tests for collector_node: the static worker-list parser, and a node wired to sockets
 * owned by the test (a fake worker PUB and replay ROUTER, a PULL standing in for the
 * aggregator): start-up CLEARED, KV events forwarded as KV_EVENTs with our hashes, malformed
 * frames counted, a failing scrape reported as LOAD health DOWN; the replay DEALER (request
 * frames, both reply layouts, a gap closed, an evicted start → RECOVERING, sent as SYNCING in
 * the next LOAD); an aggregator that comes back on the same endpoint is resent the whole
 * state; checkpoints: saved at shutdown, resumed by the next node (a replay from the saved
 * batch, then the blocks at the aggregator), a corrupt file ignored and counted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <czmq.h>
#include <msgpack.h>

#include "collector_node.h"
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
    s_pump(f, 300, &seen);          /* start-up CLEARED, failing scrapes, SUB connected */
    assert_true(seen.cleared >= 1); /* and again in the resend when the PULL's handshake is seen */
    assert_true(seen.down >= 1);    /* nothing listens on its /metrics */

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

/* ---- replay and aggregator reconnection ---- */

typedef struct {
    ipl_metrics_t *metrics;
    zsock_t *pull;   /* the aggregator */
    char *agg;       /* its endpoint */
    zsock_t *xpub;   /* the worker's PUB (XPUB: we see the collector subscribe) */
    zsock_t *router; /* the worker's replay ROUTER */
    collector_node_t *node;
    int subscribed;
    char *workers; /* the --workers list */
    char ckpt[64]; /* a checkpoint dir, "" for none */
} s_rfx_t;

static collector_node_t *s_rnode(s_rfx_t *f)
{
    collector_config_t cfg = {.aggregators = f->agg,
                              .workers = f->workers,
                              .scrape_interval_ms = 50,
                              .checkpoint_dir = f->ckpt,
                              .checkpoint_interval_ms = 50};
    char err[256];
    collector_node_t *node = collector_node_new(&cfg, f->metrics, err, sizeof err);
    assert_non_null(node);
    return node;
}

static int s_rsetup(void **state)
{
    ipl_log_init("test", IPL_LOG_OFF);
    s_rfx_t *f = calloc(1, sizeof *f);
    f->metrics = ipl_metrics_new();
    f->pull = zsock_new_pull("tcp://127.0.0.1:*");
    f->xpub = zsock_new(ZMQ_XPUB);
    f->router = zsock_new(ZMQ_ROUTER);
    assert_non_null(f->pull);
    assert_true(zsock_bind(f->xpub, "tcp://127.0.0.1:*") > 0);
    assert_true(zsock_bind(f->router, "tcp://127.0.0.1:*") > 0);
    f->agg = zsock_last_endpoint(f->pull);
    char *kv = zsock_last_endpoint(f->xpub);
    char *rep = zsock_last_endpoint(f->router);
    char workers[512];
    snprintf(workers, sizeof workers, "w0=http://127.0.0.1:1|%s|%s", kv, rep);
    f->workers = strdup(workers);
    free(kv);
    free(rep);
    f->node = s_rnode(f);
    *state = f;
    return 0;
}

static int s_rteardown(void **state)
{
    s_rfx_t *f = *state;
    collector_node_destroy(&f->node);
    zsock_destroy(&f->pull);
    zsock_destroy(&f->xpub);
    zsock_destroy(&f->router);
    ipl_metrics_destroy(&f->metrics);
    free(f->agg);
    free(f->workers);
    if (f->ckpt[0]) {
        char path[128];
        snprintf(path, sizeof path, "%s/w0.ckpt", f->ckpt);
        unlink(path);
        rmdir(f->ckpt);
    }
    free(f);
    return 0;
}

typedef struct {
    int cleared, stored, loads;
    uint64_t stored_hashes; /* how many hashes in STORED */
    uint64_t sum;           /* their sum */
    int last_kv_state;
} s_agg_seen_t;

/* A replay request seen by the fake ROUTER. */
typedef struct {
    zframe_t *id;
    uint64_t start;
} s_request_t;

/* Runs the node for up to `ms` (less once a replay request arrived, when `req` is given),
 * collecting what the aggregator receives. */
static void s_rpump(s_rfx_t *f, int ms, s_agg_seen_t *seen, s_request_t *req)
{
    uint64_t until = ipl_mono_ms() + (uint64_t)ms;
    while (ipl_mono_ms() < until) {
        collector_node_poll(f->node, 5, -1);
        zframe_t *fr;
        if (f->pull) zsock_set_rcvtimeo(f->pull, 0);
        while (f->pull && (fr = zframe_recv(f->pull))) {
            ipl_msg_t m;
            memset(&m, 0, sizeof m);
            assert_int_equal(ipl_msg_decode(zframe_data(fr), zframe_size(fr), &m), 0);
            if (m.type == IPL_MSG_KV_EVENT && m.u.kv_event.op == IPL_KV_OP_CLEARED) {
                seen->cleared++;
                seen->stored_hashes = seen->sum = 0; /* what the aggregator holds */
            } else if (m.type == IPL_MSG_KV_EVENT && m.u.kv_event.op == IPL_KV_OP_STORED) {
                seen->stored++;
                for (uint32_t i = 0; i < m.u.kv_event.hashes_len; i++) {
                    seen->stored_hashes++;
                    seen->sum += m.u.kv_event.hashes[i];
                }
            } else if (m.type == IPL_MSG_LOAD) {
                seen->loads++;
                seen->last_kv_state = (int)m.u.load.kv_state;
            }
            ipl_msg_clear(&m);
            zframe_destroy(&fr);
        }
        zsock_set_rcvtimeo(f->xpub, 0);
        while ((fr = zframe_recv(f->xpub))) { /* subscription messages */
            if (zframe_size(fr) >= 1 && zframe_data(fr)[0] == 1) f->subscribed++;
            zframe_destroy(&fr);
        }
        if (req) {
            zmsg_t *msg = NULL;
            zsock_set_rcvtimeo(f->router, 0);
            if ((msg = zmsg_recv(f->router))) {
                assert_int_equal(zmsg_size(msg), 3); /* [identity, "", start_seq] */
                req->id = zmsg_pop(msg);
                zframe_t *delim = zmsg_pop(msg), *seq = zmsg_pop(msg);
                assert_int_equal(zframe_size(delim), 0);
                assert_int_equal(zframe_size(seq), 8);
                req->start = 0;
                for (int i = 0; i < 8; i++)
                    req->start = (req->start << 8) | zframe_data(seq)[i];
                zframe_destroy(&delim);
                zframe_destroy(&seq);
                zmsg_destroy(&msg);
                return;
            }
        }
    }
}

/* The payload of batch `seq`: one root BlockStored of 2 blocks with tokens 100*seq... */
static void s_batch(uint64_t seq, msgpack_sbuffer *sb)
{
    msgpack_sbuffer_init(sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_double(&pk, 1700000000.0 + (double)seq);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_map(&pk, 5);
    msgpack_pack_str_with_body(&pk, "type", 4);
    msgpack_pack_str_with_body(&pk, "BlockStored", 11);
    msgpack_pack_str_with_body(&pk, "block_hashes", 12);
    msgpack_pack_array(&pk, 2);
    msgpack_pack_uint64(&pk, 1000 + 2 * seq);
    msgpack_pack_uint64(&pk, 1001 + 2 * seq);
    msgpack_pack_str_with_body(&pk, "parent_block_hash", 17);
    msgpack_pack_nil(&pk);
    msgpack_pack_str_with_body(&pk, "token_ids", 9);
    msgpack_pack_array(&pk, 32);
    for (uint32_t i = 0; i < 32; i++)
        msgpack_pack_uint32(&pk, 100 * (uint32_t)seq + i);
    msgpack_pack_str_with_body(&pk, "block_size", 10);
    msgpack_pack_uint32(&pk, 16);
    msgpack_pack_int64(&pk, 0);
}

/* Our hash sum for batches [from, to]. */
static uint64_t s_sum(uint64_t from, uint64_t to)
{
    uint64_t sum = 0;
    for (uint64_t seq = from; seq <= to; seq++) {
        uint32_t tokens[32];
        for (uint32_t i = 0; i < 32; i++)
            tokens[i] = 100 * (uint32_t)seq + i;
        uint64_t h[2];
        ipl_block_hashes(ipl_hash_chain_start(0), tokens, 32, 16, h, 2);
        sum += h[0] + h[1];
    }
    return sum;
}

static void s_seq8(uint64_t seq, uint8_t out[8])
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(seq >> (56 - 8 * i));
}

static void s_live(s_rfx_t *f, uint64_t seq)
{
    msgpack_sbuffer sb;
    s_batch(seq, &sb);
    uint8_t seqf[8];
    s_seq8(seq, seqf);
    zsock_send(f->xpub, "sbb", "kv-events", seqf, (size_t)8, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
}

/* One reply: layout 3 [id, "", topic, seq, payload] or 2 [id, "", seq, payload]; `seq` ==
 * UINT64_MAX sends the end marker. */
static void s_answer(s_rfx_t *f, zframe_t *id, int layout, uint64_t seq)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    uint8_t seqf[8];
    s_seq8(seq, seqf);
    if (seq != UINT64_MAX) s_batch(seq, &sb);
    zmsg_t *msg = zmsg_new();
    zmsg_append(msg, &(zframe_t *){zframe_dup(id)});
    zmsg_addmem(msg, "", 0);
    if (layout == 3) zmsg_addstr(msg, seq == UINT64_MAX ? "" : "kv-events");
    zmsg_addmem(msg, seqf, 8);
    zmsg_addmem(msg, sb.data, seq == UINT64_MAX ? 0 : sb.size);
    assert_int_equal(zmsg_send(&msg, f->router), 0);
    msgpack_sbuffer_destroy(&sb);
}

static double s_metric(s_rfx_t *f, const char *name, const char *labels)
{
    return ipl_metric_value(ipl_metrics_counter(f->metrics, name, "", labels));
}

static void test_replays(void **state)
{
    s_rfx_t *f = *state;
    s_agg_seen_t seen = {0};
    s_request_t req = {0};
    /* start-up: a catch-up replay from 0; the worker has nothing buffered yet */
    s_rpump(f, 3000, &seen, &req);
    assert_non_null(req.id);
    assert_int_equal(req.start, 0);
    s_answer(f, req.id, 2, UINT64_MAX);
    zframe_destroy(&req.id);
    for (int i = 0; i < 100 && (f->subscribed == 0 || seen.last_kv_state != IPL_KV_EXACT); i++)
        s_rpump(f, 20, &seen, NULL);
    assert_true(f->subscribed > 0);
    assert_int_equal(seen.last_kv_state, IPL_KV_EXACT); /* never published: empty */
    s_live(f, 0);
    s_live(f, 1);
    s_rpump(f, 200, &seen, NULL);
    assert_true(seen.sum == s_sum(0, 1));
    assert_int_equal(seen.last_kv_state, IPL_KV_EXACT); /* sent at once, not at the scrape */

    /* 2 and 3 lost; 4 arrives: a replay from the last applied batch (1), layout 3 */
    s_live(f, 4);
    s_rpump(f, 3000, &seen, &req);
    assert_non_null(req.id);
    assert_int_equal(req.start, 1);
    s_live(f, 5); /* kept until the replay is done */
    s_rpump(f, 100, &seen, NULL);
    assert_true(seen.sum == s_sum(0, 1));
    for (uint64_t seq = 1; seq <= 5; seq++)
        s_answer(f, req.id, 3, seq);
    s_answer(f, req.id, 3, UINT64_MAX);
    zframe_destroy(&req.id);
    s_rpump(f, 300, &seen, NULL);
    assert_true(seen.sum == s_sum(0, 5)); /* every block once, in order */
    assert_int_equal(seen.stored_hashes, 12);
    assert_int_equal(seen.last_kv_state, IPL_KV_EXACT);
    assert_true(s_metric(f, "inferplane_collector_replays_total", "worker=\"w0\",result=\"ok\"") ==
                0); /* mirrored at collect time */
    size_t len;
    free(ipl_metrics_render(f->metrics, &len));
    assert_true(s_metric(f, "inferplane_collector_replays_total", "worker=\"w0\",result=\"ok\"") ==
                2);

    /* 6 lost; the worker's buffer already starts at 7: RECOVERING from it (sent as SYNCING:
     * the index is a subset), what 0..5 stored cleared */
    int cleared = seen.cleared;
    s_live(f, 8);
    s_rpump(f, 3000, &seen, &req);
    assert_int_equal(req.start, 5);
    s_answer(f, req.id, 2, 7);
    s_answer(f, req.id, 2, UINT64_MAX);
    zframe_destroy(&req.id);
    s_rpump(f, 300, &seen, NULL);
    assert_int_equal(seen.last_kv_state, IPL_KV_SYNCING);
    assert_true(seen.cleared > cleared);
    assert_true(seen.sum == s_sum(7, 8)); /* the buffered batch and the live one */
    free(ipl_metrics_render(f->metrics, &len));
    assert_true(s_metric(f, "inferplane_collector_degraded_total", "worker=\"w0\"") == 1);
    assert_true(s_metric(f, "inferplane_collector_replays_total", "worker=\"w0\",result=\"ok\"") ==
                3);
    double recovering = ipl_metric_value(ipl_metrics_gauge(
        f->metrics, "inferplane_collector_worker_state", "", "worker=\"w0\",state=\"recovering\""));
    double exact = ipl_metric_value(ipl_metrics_gauge(
        f->metrics, "inferplane_collector_worker_state", "", "worker=\"w0\",state=\"exact\""));
    assert_true(recovering == 1 && exact == 0);
}

/* Starts a node and answers its start-up replay with `start` expected; returns what the
 * aggregator saw until the LOAD after it. */
static void s_restart_node(s_rfx_t *f, uint64_t start, s_agg_seen_t *seen)
{
    collector_node_destroy(&f->node); /* saves its checkpoint */
    ipl_metrics_destroy(&f->metrics); /* it holds the node's collect callback */
    f->metrics = ipl_metrics_new();
    f->subscribed = 0;
    f->node = s_rnode(f);
    s_request_t req = {0};
    s_rpump(f, 3000, seen, &req);
    assert_non_null(req.id);
    assert_int_equal(req.start, start);
    if (start > 0) {
        for (uint64_t seq = start; seq <= start + 1; seq++)
            s_answer(f, req.id, 3, seq);
    }
    s_answer(f, req.id, 3, UINT64_MAX);
    zframe_destroy(&req.id);
    for (int i = 0; i < 100 && seen->loads == 0; i++)
        s_rpump(f, 20, seen, NULL);
    s_rpump(f, 100, seen, NULL);
}

static double s_resumes(s_rfx_t *f, const char *result)
{
    size_t len;
    free(ipl_metrics_render(f->metrics, &len));
    char labels[64];
    snprintf(labels, sizeof labels, "result=\"%s\"", result);
    return s_metric(f, "inferplane_collector_checkpoint_resumes_total", labels);
}

static void test_checkpoints(void **state)
{
    s_rfx_t *f = *state;
    snprintf(f->ckpt, sizeof f->ckpt, "/tmp/test_collector_node.XXXXXX");
    assert_non_null(mkdtemp(f->ckpt));
    s_agg_seen_t seen = {0};
    s_request_t req = {0};
    s_rpump(f, 3000, &seen, &req); /* the first node's request, out of the way */
    assert_non_null(req.id);
    s_answer(f, req.id, 3, UINT64_MAX);
    zframe_destroy(&req.id);
    s_restart_node(f, 0, &seen); /* a node with checkpoints; nothing saved yet */
    for (int i = 0; i < 100 && f->subscribed == 0; i++)
        s_rpump(f, 20, &seen, NULL);
    for (uint64_t seq = 0; seq < 4; seq++)
        s_live(f, seq);
    s_rpump(f, 300, &seen, NULL);
    assert_true(seen.sum == s_sum(0, 3));

    /* the next node resumes: a replay from the saved batch 3, which the worker still has */
    s_agg_seen_t next = {0};
    s_restart_node(f, 3, &next);
    assert_true(next.cleared >= 1);
    assert_true(next.sum == s_sum(0, 4)); /* the checkpoint's blocks, then batch 4's */
    assert_int_equal(next.last_kv_state, IPL_KV_EXACT);
    assert_true(s_resumes(f, "proven") == 1);

    /* a corrupt file is ignored (and counted): the history is replayed from 0 */
    char path[128];
    snprintf(path, sizeof path, "%s/w0.ckpt", f->ckpt);
    collector_node_destroy(&f->node);
    FILE *fp = fopen(path, "r+b");
    assert_non_null(fp);
    fseek(fp, 40, SEEK_SET); /* flipped, not overwritten: the byte there may be an 'X' */
    int byte = fgetc(fp);
    assert_true(byte != EOF);
    fseek(fp, 40, SEEK_SET);
    fputc(byte ^ 0xff, fp);
    fclose(fp);
    s_agg_seen_t third = {0};
    s_restart_node(f, 0, &third);
    assert_true(s_resumes(f, "corrupt") == 1);
    assert_int_equal(third.last_kv_state, IPL_KV_EXACT); /* our fake worker answers: nothing */
}

static void test_aggregator_restart_gets_everything(void **state)
{
    s_rfx_t *f = *state;
    s_agg_seen_t seen = {0};
    s_request_t req = {0};
    s_rpump(f, 3000, &seen, &req);
    assert_non_null(req.id);
    s_answer(f, req.id, 3, UINT64_MAX);
    zframe_destroy(&req.id);
    for (int i = 0; i < 100 && f->subscribed == 0; i++)
        s_rpump(f, 20, &seen, NULL);
    for (uint64_t seq = 0; seq < 3; seq++)
        s_live(f, seq);
    s_rpump(f, 300, &seen, NULL);
    assert_true(seen.sum == s_sum(0, 2));

    /* the aggregator restarts on the same endpoint, empty */
    zsock_destroy(&f->pull);
    s_rpump(f, 100, &seen, NULL);
    f->pull = zsock_new(ZMQ_PULL);
    assert_true(zsock_bind(f->pull, "%s", f->agg) >= 0);
    s_agg_seen_t fresh = {0};
    for (int i = 0; i < 100 && (fresh.sum != s_sum(0, 2) || fresh.loads == 0); i++)
        s_rpump(f, 50, &fresh, NULL);
    assert_true(fresh.cleared >= 1);
    assert_true(fresh.sum == s_sum(0, 2));
    assert_int_equal(fresh.stored_hashes, 6);
    assert_int_equal(fresh.last_kv_state, IPL_KV_EXACT);
    size_t len;
    char *text = ipl_metrics_render(f->metrics, &len);
    assert_non_null(strstr(text, "inferplane_collector_aggregator_resends_total{aggregator="));
    free(text);
    double resends = 0;
    char labels[300];
    snprintf(labels, sizeof labels, "aggregator=\"%s\"", f->agg);
    resends = s_metric(f, "inferplane_collector_aggregator_resends_total", labels);
    assert_true(resends >= 2); /* the first connection, and the new aggregator */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_specs),
        cmocka_unit_test_setup_teardown(test_node_forwards, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_replays, s_rsetup, s_rteardown),
        cmocka_unit_test_setup_teardown(test_aggregator_restart_gets_everything, s_rsetup,
                                        s_rteardown),
        cmocka_unit_test_setup_teardown(test_checkpoints, s_rsetup, s_rteardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
