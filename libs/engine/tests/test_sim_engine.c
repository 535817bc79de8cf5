/*
 * Unit tests of sim_engine in manual (virtual-clock) mode with a round-number profile
 * (10 ms per step + 1 ms per prefill token): TTFT grows with uncached tokens and with the
 * queue; a fully cached prompt's TTFT is one step; cached_tokens is the reused prefix rounded
 * down to whole blocks (never the whole prompt); chunked prefill; preemption under memory
 * pressure with every request still completing; aborts free blocks; inter-token latency
 * follows the decode terms; the threaded engine in scaled real time; and the event stream:
 * one batch per step that changed the cache, chained BlockStored events carrying prompt and
 * output tokens, AllBlocksCleared on reset.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sim_engine.h"
#include "sim_kvwire.h"
#include "ipl_vllm_kv.h"
#include "ipl_error.h"
#include "ipl_metrics.h"

#define STEP      0.010
#define PER_TOKEN 0.001

static sim_engine_config_t s_config(uint32_t blocks, uint32_t batched)
{
    sim_profile_t p = {
        .name = "test", .step_s = STEP, .prefill_token_s = PER_TOKEN, .num_gpu_blocks = blocks};
    return (sim_engine_config_t){.block_size = 16,
                                 .num_gpu_blocks = blocks,
                                 .max_num_seqs = 256,
                                 .max_num_batched_tokens = batched,
                                 .time_scale = 1.0,
                                 .profile = p,
                                 .hash_algo = SIM_HASH_SHA256,
                                 .pythonhashseed = "0",
                                 .model_name = "m",
                                 .manual = true};
}

static sim_engine_t *s_engine(uint32_t blocks, uint32_t batched)
{
    sim_engine_config_t cfg = s_config(blocks, batched);
    sim_engine_t *e = sim_engine_new(&cfg);
    assert_non_null(e);
    return e;
}

/* Submits a prompt of n tokens base, base+1, ... producing `out` tokens, under `keys`. */
static sim_req_t *s_submit_keys(sim_engine_t *e, uint32_t base, uint32_t n, uint32_t out,
                                const sim_block_keys_t *keys)
{
    uint32_t *prompt = malloc(n * sizeof *prompt), *output = malloc(out * sizeof *output);
    for (uint32_t i = 0; i < n; i++)
        prompt[i] = base + i;
    for (uint32_t i = 0; i < out; i++)
        output[i] = 7 + i;
    sim_req_spec_t spec = {.prompt = prompt,
                           .nprompt = n,
                           .output = output,
                           .noutput = out,
                           .finish = SIM_FINISH_LENGTH,
                           .keys = keys};
    sim_req_t *r = sim_engine_submit(e, &spec);
    assert_non_null(r);
    free(prompt);
    free(output);
    return r;
}

static sim_req_t *s_submit(sim_engine_t *e, uint32_t base, uint32_t n, uint32_t out)
{
    return s_submit_keys(e, base, n, out, NULL);
}

/* Steps until nothing is left (bounded); returns the number of steps. */
static int s_drain(sim_engine_t *e)
{
    int steps = 0;
    for (; steps < 100000; steps++) {
        sim_engine_stats_t st;
        sim_engine_stats(e, &st);
        if (!st.running && !st.waiting) return steps;
        sim_engine_step(e);
    }
    fail_msg("engine did not drain");
    return steps;
}

static sim_req_status_t s_status(sim_engine_t *e, sim_req_t *r)
{
    sim_req_status_t st;
    sim_engine_status(e, r, &st);
    return st;
}

static double s_ttft(sim_engine_t *e, sim_req_t *r)
{
    sim_req_status_t st = s_status(e, r);
    assert_true(st.first_token_s >= 0);
    return st.first_token_s - st.arrival_s;
}

/* Runs one request alone on a fresh engine and returns its TTFT. */
static double s_alone(uint32_t n)
{
    sim_engine_t *e = s_engine(1000, 8192);
    sim_req_t *r = s_submit(e, 1, n, 2);
    s_drain(e);
    double t = s_ttft(e, r);
    sim_engine_release(e, &r);
    sim_engine_destroy(&e);
    return t;
}

static void test_ttft_grows_with_uncached_tokens(void **state)
{
    (void)state;
    double t100 = s_alone(100), t400 = s_alone(400), t1600 = s_alone(1600);
    assert_float_equal(t100, STEP + 100 * PER_TOKEN, 1e-9);
    assert_float_equal(t400, STEP + 400 * PER_TOKEN, 1e-9);
    assert_float_equal(t1600, STEP + 1600 * PER_TOKEN, 1e-9);
}

static void test_ttft_grows_with_queue(void **state)
{
    (void)state;
    sim_engine_t *e = s_engine(1000, 512);
    sim_req_t *r[6];
    for (int i = 0; i < 6; i++)
        r[i] = s_submit(e, 100000u * (uint32_t)(i + 1), 400, 4); /* distinct prompts */
    s_drain(e);
    double prev = 0;
    for (int i = 0; i < 6; i++) {
        double t = s_ttft(e, r[i]); /* later arrivals never go first (FCFS) */
        assert_true(t >= prev);
        prev = t;
        assert_int_equal(s_status(e, r[i]).emitted, 4);
        assert_int_equal(s_status(e, r[i]).finish, SIM_FINISH_LENGTH);
    }
    /* Six 400-token prefills through a 512-token budget: the last waits for most of them. */
    assert_true(s_ttft(e, r[5]) > 4 * s_ttft(e, r[0]));
    for (int i = 0; i < 6; i++)
        sim_engine_release(e, &r[i]);
    sim_engine_destroy(&e);
}

static void test_fully_cached_prompt_is_one_step(void **state)
{
    (void)state;
    sim_engine_t *e = s_engine(1000, 8192);
    sim_req_t *a = s_submit(e, 1, 161, 3);
    s_drain(e);
    sim_engine_advance(e, 1.0);
    sim_req_t *b = s_submit(e, 1, 161, 3);
    s_drain(e);
    sim_req_status_t st = s_status(e, b);
    assert_int_equal(st.cached_tokens, 160);
    /* One step computing the one uncached token. */
    assert_float_equal(s_ttft(e, b), STEP + 1 * PER_TOKEN, 1e-9);
    assert_true(s_ttft(e, a) > 10 * s_ttft(e, b));
    sim_engine_release(e, &a);
    sim_engine_release(e, &b);
    sim_engine_destroy(&e);
}

static void test_cached_tokens_are_whole_blocks(void **state)
{
    (void)state;
    sim_engine_t *e = s_engine(1000, 8192);
    sim_req_t *a = s_submit(e, 1, 100, 1);
    s_drain(e);
    /* Shares 50 tokens with a, then differs: 3 whole blocks = 48 tokens. */
    uint32_t prompt[100], out[1] = {5};
    for (uint32_t i = 0; i < 100; i++)
        prompt[i] = i < 50 ? 1 + i : 900000 + i;
    sim_req_spec_t spec = {
        .prompt = prompt, .nprompt = 100, .output = out, .noutput = 1, .finish = SIM_FINISH_STOP};
    sim_req_t *b = sim_engine_submit(e, &spec);
    s_drain(e);
    assert_int_equal(s_status(e, b).cached_tokens, 48);
    assert_int_equal(s_status(e, b).finish, SIM_FINISH_STOP);
    /* The same 100 tokens again: 6 blocks = 96. */
    sim_req_t *c = s_submit(e, 1, 100, 1);
    s_drain(e);
    assert_int_equal(s_status(e, c).cached_tokens, 96);
    /* Exactly two blocks repeated: at least one token is computed, so only one block hits. */
    sim_req_t *d1 = s_submit(e, 5000, 32, 1);
    s_drain(e);
    sim_req_t *d2 = s_submit(e, 5000, 32, 1);
    s_drain(e);
    assert_int_equal(s_status(e, d2).cached_tokens, 16);
    sim_engine_stats_t st;
    sim_engine_stats(e, &st);
    assert_int_equal(st.prefix_queries, 100 + 100 + 100 + 32 + 32);
    assert_int_equal(st.prefix_hits, 48 + 96 + 16);
    sim_req_t *all[] = {a, b, c, d1, d2};
    for (int i = 0; i < 5; i++)
        sim_engine_release(e, &all[i]);
    sim_engine_destroy(&e);
}

static void test_chunked_prefill(void **state)
{
    (void)state;
    sim_engine_t *e = s_engine(1000, 256);
    sim_req_t *r = s_submit(e, 1, 1000, 2);
    int steps = s_drain(e);
    /* 1000 tokens in chunks of 256: 4 steps to the first token, one more for the second. */
    assert_int_equal(steps, 5);
    assert_float_equal(s_ttft(e, r), 4 * STEP + 1000 * PER_TOKEN, 1e-9);
    sim_engine_release(e, &r);
    sim_engine_destroy(&e);
}

static void test_preemption_under_memory_pressure(void **state)
{
    (void)state;
    /* 16 blocks = 256 tokens; each request grows to 100 + 150 = 250 tokens (16 blocks). */
    sim_engine_t *e = s_engine(16, 8192);
    sim_req_t *a = s_submit(e, 1, 100, 150);
    sim_req_t *b = s_submit(e, 100000, 100, 150);
    s_drain(e);
    sim_engine_stats_t st;
    sim_engine_stats(e, &st);
    assert_true(st.preemptions >= 1);
    sim_req_status_t sa = s_status(e, a), sb = s_status(e, b);
    assert_int_equal(sa.emitted, 150);
    assert_int_equal(sb.emitted, 150);
    assert_int_equal(sa.finish, SIM_FINISH_LENGTH);
    assert_int_equal(sb.finish, SIM_FINISH_LENGTH);
    /* The newest request is the one preempted; the oldest runs through. */
    assert_int_equal(sa.preemptions, 0);
    assert_true(sb.preemptions >= 1);
    assert_true(sb.finish_s > sa.finish_s);
    assert_int_equal(st.free_blocks, 16);
    sim_engine_release(e, &a);
    sim_engine_release(e, &b);
    sim_engine_destroy(&e);
}

static void test_abort_frees_blocks(void **state)
{
    (void)state;
    sim_engine_t *e = s_engine(100, 8192);
    sim_req_t *r = s_submit(e, 1, 300, 100);
    sim_engine_step(e);
    sim_engine_stats_t st;
    sim_engine_stats(e, &st);
    assert_int_equal(st.running, 1);
    assert_true(st.free_blocks < 100);
    sim_engine_abort(e, r);
    sim_engine_stats(e, &st);
    assert_int_equal(st.running, 0);
    assert_int_equal(st.free_blocks, 100);
    assert_int_equal(s_status(e, r).finish, SIM_FINISH_ABORT);
    /* Its full blocks stay cached. */
    assert_int_equal(st.cached_blocks, 300 / 16);
    sim_engine_release(e, &r);
    sim_engine_destroy(&e);
}

static void test_inter_token_latency(void **state)
{
    (void)state;
    sim_engine_config_t cfg = s_config(1000, 8192);
    cfg.profile.decode_seq_s = 0.002;
    cfg.profile.context_token_s = 1e-5;
    ipl_metrics_t *m = ipl_metrics_new();
    cfg.metrics = m;
    sim_engine_t *e = sim_engine_new(&cfg);
    sim_req_t *r = s_submit(e, 1, 100, 11);
    s_drain(e);
    sim_req_status_t st = s_status(e, r);
    /* Decode step k (k = 1..10) reads 100 + k tokens of context. */
    double expect = 0;
    for (int k = 1; k <= 10; k++)
        expect += STEP + 0.002 + 1e-5 * (100 + k);
    assert_float_equal(st.last_token_s - st.first_token_s, expect, 1e-9);
    /* The histograms saw it: 1 TTFT, 10 inter-token gaps. */
    size_t len;
    char *text = ipl_metrics_render(m, &len);
    assert_non_null(strstr(text, "vllm:time_to_first_token_seconds_count{engine=\"0\","
                                 "model_name=\"m\"} 1"));
    assert_non_null(strstr(text, "vllm:inter_token_latency_seconds_count{engine=\"0\","
                                 "model_name=\"m\"} 10"));
    assert_non_null(strstr(text, "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} "
                                 "11"));
    free(text);
    sim_engine_release(e, &r);
    sim_engine_destroy(&e);
    ipl_metrics_destroy(&m);
}

static void test_threaded_scaled_time(void **state)
{
    (void)state;
    sim_engine_config_t cfg = s_config(1000, 8192);
    cfg.manual = false;
    cfg.time_scale = 100; /* 0.51 s simulated ≈ 5 ms real */
    sim_engine_t *e = sim_engine_new(&cfg);
    assert_int_equal(sim_engine_start(e), 0);
    sim_req_t *r = s_submit(e, 1, 500, 5);
    sim_req_status_t st = {0};
    uint32_t seen = 0;
    for (int i = 0; i < 200 && st.finish == SIM_FINISH_NONE; i++) {
        sim_engine_wait(e, r, seen, 100, &st);
        seen = st.emitted;
    }
    assert_int_equal(st.finish, SIM_FINISH_LENGTH);
    assert_int_equal(st.emitted, 5);
    double ttft = st.first_token_s - st.arrival_s;
    assert_true(ttft >= STEP + 500 * PER_TOKEN - 1e-9);
    assert_true(ttft < 1.0); /* generous: scheduling noise on a loaded machine, times 100 */
    /* A request in flight when the engine stops finishes as abort and wakes its waiter. */
    sim_req_t *q = s_submit(e, 9000, 100, 10000);
    sim_engine_stop(e);
    sim_engine_wait(e, q, 0, 1000, &st);
    assert_int_equal(st.finish, SIM_FINISH_ABORT);
    assert_null(sim_engine_submit(
        e, &(sim_req_spec_t){
               .prompt = (uint32_t[]){1}, .nprompt = 1, .output = (uint32_t[]){1}, .noutput = 1}));
    sim_engine_release(e, &r);
    sim_engine_release(e, &q);
    sim_engine_destroy(&e);
}

/* vLLM's extra keys: a LoRA adapter's blocks never serve the base model or another adapter,
 * a cache salt isolates its chain; the same adapter (or salt) hits its own blocks. */
static void test_lora_and_salt_isolate(void **state)
{
    (void)state;
    sim_engine_t *e = s_engine(1000, 8192);
    sim_block_keys_t a = {.lora_id = 1, .lora_name = "adapter-a"};
    sim_block_keys_t b = {.lora_id = 2, .lora_name = "adapter-b"};
    sim_block_keys_t salt = {.cache_salt = "tenant-1"};
    sim_block_keys_t salt2 = {.cache_salt = "tenant-2"};
    const sim_block_keys_t *seq[] = {NULL, &a, &b, &a, &salt, &salt2, &salt, NULL};
    uint32_t expect[] = {0, 0, 0, 96, 0, 0, 96, 96};
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        sim_req_t *r = s_submit_keys(e, 1, 100, 1, seq[i]);
        s_drain(e);
        assert_int_equal(s_status(e, r).cached_tokens, expect[i]);
        sim_engine_release(e, &r);
    }
    sim_engine_destroy(&e);
}

static void test_restart_forgets_everything(void **state)
{
    (void)state;
    sim_engine_t *e = s_engine(100, 8192);
    sim_req_t *done = s_submit(e, 1, 100, 1);
    s_drain(e);
    sim_req_t *live = s_submit(e, 5000, 100, 50);
    sim_engine_step(e);
    sim_engine_stats_t st;
    sim_engine_stats(e, &st);
    assert_true(st.cached_blocks > 0 && st.running == 1);
    sim_engine_restart(e);
    sim_engine_stats(e, &st);
    assert_int_equal(st.running + st.waiting, 0);
    assert_int_equal(st.cached_blocks, 0);
    assert_int_equal(st.free_blocks, 100);
    assert_int_equal(st.steps, 0);
    assert_int_equal(s_status(e, live).finish, SIM_FINISH_ABORT);
    /* The prompt that was cached before is computed again. */
    sim_req_t *again = s_submit(e, 1, 100, 1);
    s_drain(e);
    assert_int_equal(s_status(e, again).cached_tokens, 0);
    sim_engine_release(e, &done);
    sim_engine_release(e, &live);
    sim_engine_release(e, &again);
    sim_engine_destroy(&e);
}

/* --- the engine's event stream, decoded by the collector's decoder ------------------------- */

typedef struct {
    int n;
    ipl_vllm_kv_kind_t kind[8];
    uint32_t nblocks[8];
    bool has_parent[8];
    uint64_t parent[8];
    uint64_t last_hash[8];
    uint32_t tokens[8][48];
    uint32_t ntokens[8];
    bool extra_keys[8];
    char lora[8][16];
} s_events_t;

static int s_on_event(void *arg, const ipl_vllm_kv_event_t *ev)
{
    s_events_t *s = arg;
    assert_true(s->n < 8);
    int i = s->n++;
    s->kind[i] = ev->kind;
    s->nblocks[i] = ev->nblocks;
    s->has_parent[i] = ev->has_parent;
    s->parent[i] = ev->parent_hash;
    s->last_hash[i] = ev->nblocks ? ev->block_hashes[ev->nblocks - 1] : 0;
    s->ntokens[i] = ev->ntokens;
    s->extra_keys[i] = ev->has_extra_keys;
    if (ev->lora_name)
        snprintf(s->lora[i], sizeof s->lora[i], "%.*s", (int)ev->lora_name_len, ev->lora_name);
    for (uint32_t k = 0; k < ev->ntokens && k < 48; k++)
        s->tokens[i][k] = ev->token_ids[k];
    return 0;
}

/* The engine's KV sink in this test: every non-empty batch encoded as vLLM's wire payload
 * (sim_kvwire, the array format of vLLM < 0.26) and numbered from 1, as a publisher would. */
typedef struct {
    uint8_t *payload[16];
    size_t len[16];
    int n, next;
} s_sink_t;

static int s_sink_publish(void *arg, const sim_kvbatch_t *batch)
{
    s_sink_t *k = arg;
    if (!sim_kvbatch_count(batch)) return 0; /* vLLM publishes only steps with events */
    assert_true(k->n < 16);
    k->payload[k->n] = sim_kvwire_encode(batch, 1.5, SIM_KV_FORMAT_ARRAY, true, &k->len[k->n]);
    assert_non_null(k->payload[k->n]);
    k->n++;
    return 0;
}

/* Decodes the next published batch into *ev with the collector's decoder; returns its number
 * (from 1), or 0 when none is left. */
static uint64_t s_recv_events(s_sink_t *k, s_events_t *ev)
{
    if (k->next >= k->n) return 0;
    ipl_vllm_kv_decoder_t *dec = ipl_vllm_kv_decoder_new();
    memset(ev, 0, sizeof *ev);
    assert_int_equal(ipl_vllm_kv_decode(dec, k->payload[k->next], k->len[k->next], NULL,
                                        s_on_event, ev),
                     0);
    ipl_vllm_kv_decoder_destroy(&dec);
    return (uint64_t)++k->next;
}

static void test_events_per_step(void **state)
{
    (void)state;
    s_sink_t sink = {0};
    uint64_t seen = 0;
    sim_engine_config_t cfg = s_config(100, 8192);
    cfg.kv_publish = s_sink_publish;
    cfg.kv_sink = &sink;
    cfg.hash_algo = SIM_HASH_SHA256_CBOR; /* PYTHONHASHSEED "0": reproducible, see below */
    sim_engine_t *e = sim_engine_new(&cfg);
    /* 40 prompt tokens: step 1 commits 2 full blocks; the 8th output token fills block 3. */
    sim_req_t *r = s_submit(e, 1000, 40, 10);
    s_drain(e);
    s_events_t a, b;
    assert_int_equal(s_recv_events(&sink, &a), seen + 1);
    assert_int_equal(a.n, 1);
    assert_int_equal(a.kind[0], IPL_VLLM_KV_BLOCK_STORED);
    assert_int_equal(a.nblocks[0], 2);
    assert_false(a.has_parent[0]);
    assert_int_equal(a.ntokens[0], 32);
    for (uint32_t k = 0; k < 32; k++)
        assert_int_equal(a.tokens[0][k], 1000 + k);
    assert_int_equal(s_recv_events(&sink, &b), seen + 2); /* no batch for steps without events */
    assert_int_equal(b.n, 1);
    assert_int_equal(b.nblocks[0], 1);
    assert_true(b.has_parent[0] && b.parent[0] == a.last_hash[0]);
    assert_int_equal(b.tokens[0][7], 1039); /* last prompt token */
    assert_int_equal(b.tokens[0][8], 7);    /* first output token (s_submit's 7, 8, ...) */
    assert_int_equal(b.tokens[0][15], 7 + 7);
    /* A reset while idle goes out at once. */
    sim_engine_reset_prefix_cache(e);
    s_events_t c;
    assert_int_equal(s_recv_events(&sink, &c), seen + 3);
    assert_int_equal(c.kind[0], IPL_VLLM_KV_ALL_CLEARED);
    /* The wire hashes are vLLM's: tokens 1..16 under sha256_cbor with PYTHONHASHSEED=0 are
     * sha256(cbor((sha256(cbor("0")), (1, ..., 16), None))), last 8 bytes = 3236607068019569386
     * (CPython + cbor2, see test_sim_hasher.c); with LoRA "lora-a" and salt "salty" the extra
     * keys ("lora-a", "salty") give ...2c91c31e10e24b76. */
    sim_req_t *p = s_submit(e, 1, 17, 1);
    s_drain(e);
    s_events_t d;
    assert_int_equal(s_recv_events(&sink, &d), seen + 4);
    assert_true(d.last_hash[0] == 3236607068019569386ull);
    assert_false(d.extra_keys[0]);
    sim_engine_reset_prefix_cache(e);
    assert_int_equal(s_recv_events(&sink, &d), seen + 5);
    sim_block_keys_t keys = {.lora_id = 1, .lora_name = "lora-a", .cache_salt = "salty"};
    sim_req_t *q = s_submit_keys(e, 1, 17, 1, &keys);
    s_drain(e);
    assert_int_equal(s_recv_events(&sink, &d), seen + 6);
    assert_true(d.last_hash[0] == 0x2c91c31e10e24b76ull);
    assert_false(d.extra_keys[0]); /* the array format (vLLM < 0.26) has no extra_keys */
    assert_string_equal(d.lora[0], "lora-a");
    sim_engine_release(e, &p);
    sim_engine_release(e, &q);
    sim_engine_release(e, &r);
    sim_engine_destroy(&e);
    s_events_t none;
    assert_int_equal(s_recv_events(&sink, &none), 0); /* nothing else was published */
    for (int i = 0; i < sink.n; i++)
        free(sink.payload[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ttft_grows_with_uncached_tokens),
        cmocka_unit_test(test_ttft_grows_with_queue),
        cmocka_unit_test(test_fully_cached_prompt_is_one_step),
        cmocka_unit_test(test_cached_tokens_are_whole_blocks),
        cmocka_unit_test(test_chunked_prefill),
        cmocka_unit_test(test_preemption_under_memory_pressure),
        cmocka_unit_test(test_abort_frees_blocks),
        cmocka_unit_test(test_inter_token_latency),
        cmocka_unit_test(test_threaded_scaled_time),
        cmocka_unit_test(test_lora_and_salt_isolate),
        cmocka_unit_test(test_restart_forgets_everything),
        cmocka_unit_test(test_events_per_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
