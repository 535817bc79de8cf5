/*
 * Unit tests of sim_kvpub: the config parser and vLLM's bind-or-connect rule; and the live
 * sockets: PUB frames (topic, big-endian seq from 0, payload), both replay layouts, and the
 * drop-every-N fault. (The payload bytes are sim_kvwire's: libs/engine/tests/.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zmq.h>

#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_vllm_kv.h"
#include "sim_kvpub.h"

/* A batch for the live tests: the publisher sends whatever sim_kvwire encodes (its bytes are
 * tested in libs/engine/tests/test_sim_kvwire.c). */
static sim_kvbatch_t *s_example(void)
{
    sim_kvbatch_t *b = sim_kvbatch_new();
    uint32_t tokens[16];
    for (int i = 0; i < 16; i++)
        tokens[i] = (uint32_t)(i + 1);
    sim_hash_t h = sim_hash_from_u64(0x0123456789abcdefULL);
    assert_int_equal(sim_kvbatch_stored(b, &h, 1, NULL, tokens, 16, NULL), 0);
    return b;
}

/* --- configuration ------------------------------------------------------------------------- */

static void test_config(void **state)
{
    (void)state;
    sim_kvconfig_t c;
    char err[256];
    assert_int_equal(sim_kvconfig_parse(NULL, &c, err, sizeof err), 0);
    assert_false(c.enabled);
    assert_string_equal(c.endpoint, "tcp://*:5557");
    assert_int_equal(c.buffer_steps, 10000);
    assert_int_equal(c.hwm, 100000);
    assert_string_equal(c.replay_endpoint, "");
    assert_int_equal(sim_kvconfig_parse("{\"enable_kv_cache_events\":true,\"publisher\":\"zmq\","
                                        "\"endpoint\":\"tcp://*:6000\",\"replay_endpoint\":"
                                        "\"tcp://*:6100\",\"topic\":\"kv\",\"buffer_steps\":5,"
                                        "\"hwm\":7,\"max_queue_size\":1}",
                                        &c, err, sizeof err),
                     0);
    assert_true(c.enabled);
    assert_string_equal(c.endpoint, "tcp://*:6000");
    assert_string_equal(c.replay_endpoint, "tcp://*:6100");
    assert_string_equal(c.topic, "kv");
    assert_int_equal(c.buffer_steps, 5);
    assert_int_equal(c.hwm, 7);
    /* publisher omitted: newer vLLM resolves it to zmq when enabled; "null" disables */
    assert_int_equal(sim_kvconfig_parse("{\"enable_kv_cache_events\":true}", &c, err, sizeof err),
                     0);
    assert_true(c.enabled);
    assert_int_equal(sim_kvconfig_parse("{\"enable_kv_cache_events\":true,\"publisher\":\"null\"}",
                                        &c, err, sizeof err),
                     0);
    assert_false(c.enabled);
    const char *bad[] = {"{",
                         "[]",
                         "{\"enable_kv_cache_events\":1}",
                         "{\"publisher\":\"kafka\"}",
                         "{\"buffer_steps\":-1}",
                         "{\"hwm\":1.5}",
                         "{\"endpoint\":3}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(sim_kvconfig_parse(bad[i], &c, err, sizeof err), IPL_E_INVAL);
        assert_true(strstr(err, "kv-events-config") != NULL);
    }
}

static void test_bind_rule(void **state)
{
    (void)state;
    assert_true(sim_kv_endpoint_binds("tcp://*:5557"));
    assert_true(sim_kv_endpoint_binds("tcp://[::]:5557"));
    assert_true(sim_kv_endpoint_binds("ipc:///tmp/kv"));
    assert_true(sim_kv_endpoint_binds("inproc://kv"));
    assert_false(sim_kv_endpoint_binds("tcp://127.0.0.1:5557"));
    assert_false(sim_kv_endpoint_binds("tcp://collector:5557"));
    sim_kv_format_t f;
    sim_kv_bind_t bnd;
    assert_int_equal(sim_kv_format_parse("array", &f), 0);
    assert_int_equal(f, SIM_KV_FORMAT_ARRAY);
    assert_int_equal(sim_kv_format_parse("msgpack", &f), IPL_E_INVAL);
    assert_int_equal(sim_kv_bind_parse("connect", &bnd), 0);
    assert_int_equal(bnd, SIM_KV_BIND_CONNECT);
    assert_int_equal(sim_kv_bind_parse("", &bnd), IPL_E_INVAL);
}

/* --- sockets ------------------------------------------------------------------------------- */

typedef struct {
    void *ctx;
    sim_kvpub_t *pub;
    void *sub;
    char endpoint[128];
    char replay[128];
} s_live_t;

static void s_live_open(s_live_t *l, int layout, int64_t drop_every_n)
{
    sim_kvconfig_t c;
    char err[256];
    assert_int_equal(
        sim_kvconfig_parse("{\"enable_kv_cache_events\":true,\"endpoint\":\"tcp://127.0.0.1:*\","
                           "\"replay_endpoint\":\"tcp://127.0.0.1:*\",\"topic\":\"kv-events\","
                           "\"buffer_steps\":100}",
                           &c, err, sizeof err),
        0);
    sim_kvpub_opts_t o = {.format = SIM_KV_FORMAT_MAP,
                          .bind = SIM_KV_BIND_AUTO,
                          .replay_layout = layout,
                          .drop_every_n = drop_every_n};
    l->pub = sim_kvpub_new(&c, &o, err, sizeof err);
    assert_non_null(l->pub);
    assert_int_equal(sim_kvpub_last_endpoint(l->pub, false, l->endpoint, sizeof l->endpoint), 0);
    assert_int_equal(sim_kvpub_last_endpoint(l->pub, true, l->replay, sizeof l->replay), 0);
    l->ctx = zmq_ctx_new();
    l->sub = zmq_socket(l->ctx, ZMQ_SUB);
    int linger = 0, timeout = 2000;
    zmq_setsockopt(l->sub, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(l->sub, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt(l->sub, ZMQ_SUBSCRIBE, "kv-events", 9);
    assert_int_equal(zmq_connect(l->sub, l->endpoint), 0);
}

static void s_live_close(s_live_t *l)
{
    zmq_close(l->sub);
    zmq_ctx_term(l->ctx);
    sim_kvpub_destroy(&l->pub);
}

/* Receives one 3-frame message; returns its seq (payload length in *plen). */
static uint64_t s_recv_batch(void *sock, size_t *plen)
{
    char topic[64];
    uint8_t seq8[16];
    static uint8_t payload[4096];
    int n = zmq_recv(sock, topic, sizeof topic, 0);
    assert_int_equal(n, 9);
    assert_memory_equal(topic, "kv-events", 9);
    assert_int_equal(zmq_recv(sock, seq8, sizeof seq8, 0), 8);
    int p = zmq_recv(sock, payload, sizeof payload, 0);
    assert_true(p > 0);
    *plen = (size_t)p;
    uint64_t seq = 0;
    assert_int_equal(ipl_vllm_kv_seq(seq8, 8, &seq), 0);
    return seq;
}

/* PUB joins late (slow joiner): publish until the subscriber sees a batch. Returns the seq of
 * the first batch received. */
static uint64_t s_sync(s_live_t *l, sim_kvbatch_t *b)
{
    for (int i = 0; i < 200; i++) {
        assert_int_equal(sim_kvpub_publish(l->pub, b), 0);
        zmq_pollitem_t it = {.socket = l->sub, .events = ZMQ_POLLIN};
        if (zmq_poll(&it, 1, 20) == 1) {
            size_t len;
            return s_recv_batch(l->sub, &len);
        }
    }
    fail_msg("the subscriber never received a batch");
    return 0;
}

static void test_pub_frames(void **state)
{
    (void)state;
    s_live_t l;
    s_live_open(&l, 3, 0);
    sim_kvbatch_t *b = s_example();
    uint64_t first = s_sync(&l, b);
    sim_kvpub_stats_t st;
    sim_kvpub_stats(l.pub, &st);
    /* Sequence numbers start at 0 and count every batch. */
    assert_true(first < st.next_seq);
    for (uint64_t s = first + 1; s < st.next_seq; s++) {
        size_t len;
        assert_int_equal(s_recv_batch(l.sub, &len), s);
    }
    assert_int_equal(sim_kvpub_publish(l.pub, b), 0);
    size_t len = 0;
    assert_int_equal(s_recv_batch(l.sub, &len), st.next_seq);
    size_t want = 0; /* the payload is sim_kvwire's encoding of the batch, in the map format */
    uint8_t *bytes = sim_kvwire_encode(b, 1.0, SIM_KV_FORMAT_MAP, true, &want);
    free(bytes);
    assert_int_equal(len, want);
    /* An empty batch is not published and uses no sequence number. */
    sim_kvbatch_t *empty = sim_kvbatch_new();
    assert_int_equal(sim_kvpub_publish(l.pub, empty), 0);
    sim_kvpub_stats(l.pub, &st);
    sim_kvbatch_destroy(&empty);
    assert_int_equal(st.dropped, 0);
    sim_kvbatch_destroy(&b);
    s_live_close(&l);
}

/* Asks for replay from `start` with a DEALER; checks the frames of the given layout and
 * returns the sequence numbers received (before the end marker) in seqs. */
static int s_replay(s_live_t *l, int layout, uint64_t start, uint64_t *seqs, int max)
{
    void *d = zmq_socket(l->ctx, ZMQ_DEALER);
    int linger = 0, timeout = 2000;
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(d, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    assert_int_equal(zmq_connect(d, l->replay), 0);
    uint8_t seq8[8];
    for (int i = 0; i < 8; i++)
        seq8[i] = (uint8_t)(start >> (56 - 8 * i));
    zmq_send(d, "", 0, ZMQ_SNDMORE);
    zmq_send(d, seq8, 8, 0);
    int n = 0;
    for (;;) {
        uint8_t frames[5][512];
        int lens[5], nf = 0, more = 1;
        while (more && nf < 5) {
            lens[nf] = zmq_recv(d, frames[nf], sizeof frames[nf], 0);
            assert_true(lens[nf] >= 0);
            size_t sz = sizeof more;
            zmq_getsockopt(d, ZMQ_RCVMORE, &more, &sz);
            nf++;
        }
        assert_int_equal(more, 0);
        assert_int_equal(nf, layout + 1); /* the empty delimiter first */
        assert_int_equal(lens[0], 0);
        int seq_at = layout == 3 ? 2 : 1;
        assert_int_equal(lens[seq_at], 8);
        if (ipl_vllm_kv_is_end_seq(frames[seq_at], 8)) {
            assert_int_equal(lens[seq_at + 1], 0);
            if (layout == 3) assert_int_equal(lens[1], 0);
            break;
        }
        if (layout == 3) {
            assert_int_equal(lens[1], 9);
            assert_memory_equal(frames[1], "kv-events", 9);
        }
        assert_true(lens[seq_at + 1] > 0);
        uint64_t s = 0;
        assert_int_equal(ipl_vllm_kv_seq(frames[seq_at], 8, &s), 0);
        assert_true(n < max);
        seqs[n++] = s;
    }
    zmq_close(d);
    return n;
}

static void s_check_replay(int layout)
{
    s_live_t l;
    s_live_open(&l, layout, 0);
    sim_kvbatch_t *b = s_example();
    for (int i = 0; i < 5; i++)
        assert_int_equal(sim_kvpub_publish(l.pub, b), 0);
    uint64_t seqs[16];
    int n = s_replay(&l, layout, 2, seqs, 16);
    assert_int_equal(n, 3);
    for (int i = 0; i < n; i++)
        assert_int_equal(seqs[i], 2 + i);
    assert_int_equal(s_replay(&l, layout, 100, seqs, 16), 0);
    /* A malformed request (a single frame) is counted and dropped; the ROUTER keeps serving. */
    void *d = zmq_socket(l.ctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(d, l.replay);
    zmq_send(d, "garbage", 7, 0);
    sim_kvpub_stats_t st = {0};
    for (int i = 0; i < 200 && st.replay_invalid == 0; i++) {
        ipl_sleep_ms(5);
        sim_kvpub_stats(l.pub, &st);
    }
    zmq_close(d);
    assert_int_equal(st.replay_invalid, 1);
    assert_int_equal(s_replay(&l, layout, 0, seqs, 16), 5);
    sim_kvbatch_destroy(&b);
    s_live_close(&l);
}

static void test_replay_layout3(void **state)
{
    (void)state;
    s_check_replay(3);
}

static void test_replay_layout2(void **state)
{
    (void)state;
    s_check_replay(2);
}

static void test_drop_every_n(void **state)
{
    (void)state;
    s_live_t l;
    s_live_open(&l, 3, 3);
    sim_kvbatch_t *b = s_example();
    uint64_t first = s_sync(&l, b);
    sim_kvpub_stats_t st;
    sim_kvpub_stats(l.pub, &st);
    uint64_t base = st.next_seq;
    for (int i = 0; i < 6; i++)
        assert_int_equal(sim_kvpub_publish(l.pub, b), 0);
    /* Received: everything since `first` except seq % 3 == 2. */
    size_t len;
    for (uint64_t s = first + 1; s < base + 6; s++) {
        if (s % 3 == 2) continue;
        assert_int_equal(s_recv_batch(l.sub, &len), s);
    }
    zmq_pollitem_t it = {.socket = l.sub, .events = ZMQ_POLLIN};
    assert_int_equal(zmq_poll(&it, 1, 50), 0);
    sim_kvpub_stats(l.pub, &st);
    assert_true(st.dropped >= 2);
    /* ... but the replay has them all. */
    uint64_t seqs[300];
    int n = s_replay(&l, 3, base, seqs, 300);
    assert_int_equal(n, 6);
    sim_kvbatch_destroy(&b);
    s_live_close(&l);
}

static void test_restart(void **state)
{
    (void)state;
    s_live_t l;
    s_live_open(&l, 3, 0);
    sim_kvbatch_t *b = s_example();
    for (int i = 0; i < 4; i++)
        assert_int_equal(sim_kvpub_publish(l.pub, b), 0);
    uint64_t seqs[16];
    assert_int_equal(s_replay(&l, 3, 0, seqs, 16), 4);
    sim_kvpub_restart(l.pub);
    sim_kvpub_stats_t st;
    sim_kvpub_stats(l.pub, &st);
    assert_int_equal(st.next_seq, 0);
    assert_int_equal(s_replay(&l, 3, 0, seqs, 16), 0); /* a new process remembers nothing */
    assert_int_equal(sim_kvpub_publish(l.pub, b), 0);
    assert_int_equal(s_replay(&l, 3, 0, seqs, 16), 1);
    assert_int_equal(seqs[0], 0);
    sim_kvbatch_destroy(&b);
    s_live_close(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_bind_rule),
        cmocka_unit_test(test_pub_frames),
        cmocka_unit_test(test_replay_layout3),
        cmocka_unit_test(test_replay_layout2),
        cmocka_unit_test(test_drop_every_n),
        cmocka_unit_test(test_restart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
