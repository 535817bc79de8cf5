/*
 * Unit tests of clustersim_workload: the generators (counts, Poisson arrivals, which tokens
 * are shared and which are not, multi-turn histories), determinism by seed, and both trace
 * formats with their errors (file:line).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "clustersim_workload.h"
#include "ipl_error.h"

static uint32_t *s_prompt(const clustersim_workload_t *wl, uint32_t i)
{
    uint32_t *buf = malloc(clustersim_workload_req(wl, i)->prompt_tokens * sizeof *buf);
    clustersim_workload_prompt(wl, i, buf);
    return buf;
}

// Index of the first differing token of requests i and j (min length when one is a prefix).
static uint32_t s_common(const clustersim_workload_t *wl, uint32_t i, uint32_t j)
{
    uint32_t *a = s_prompt(wl, i), *b = s_prompt(wl, j);
    uint32_t n = clustersim_workload_req(wl, i)->prompt_tokens;
    if (clustersim_workload_req(wl, j)->prompt_tokens < n)
        n = clustersim_workload_req(wl, j)->prompt_tokens;
    uint32_t k = 0;
    while (k < n && a[k] == b[k])
        k++;
    free(a);
    free(b);
    return k;
}

static void test_kind_names(void **state)
{
    (void)state;
    clustersim_gen_kind_t k;
    assert_int_equal(clustersim_gen_kind_parse("multi-turn", &k), 0);
    assert_int_equal(k, CLUSTERSIM_GEN_MULTI_TURN);
    assert_string_equal(clustersim_gen_kind_name(CLUSTERSIM_GEN_NO_PREFIX), "no-prefix");
    assert_int_equal(clustersim_gen_kind_parse("bogus", &k), IPL_E_INVAL);
    assert_int_equal(clustersim_gen_kind_parse(NULL, &k), IPL_E_INVAL);
}

static void test_shared_prefix(void **state)
{
    (void)state;
    clustersim_gen_config_t c;
    clustersim_gen_config_defaults(CLUSTERSIM_GEN_SHARED_PREFIX, &c);
    c.requests = 2000;
    c.rate = 4.0;
    c.prefix_groups = 3;
    c.prefix_tokens = 100;
    c.suffix_tokens = 20;
    c.output_tokens = 7;
    clustersim_workload_t *wl = clustersim_workload_generate(CLUSTERSIM_GEN_SHARED_PREFIX, &c);
    assert_non_null(wl);
    assert_string_equal(clustersim_workload_name(wl), "shared-prefix");
    assert_int_equal(clustersim_workload_count(wl), 2000);
    assert_int_equal(clustersim_workload_max_tokens(wl), 127);
    uint32_t nroots;
    const uint32_t *roots = clustersim_workload_roots(wl, &nroots);
    assert_int_equal(nroots, 2000);
    double last = 0;
    uint32_t per_group[3] = {0};
    for (uint32_t i = 0; i < nroots; i++) {
        const clustersim_req_t *r = clustersim_workload_req(wl, roots[i]);
        assert_true(r->arrival_s >= last);
        last = r->arrival_s;
        assert_int_equal(r->prompt_tokens, 120);
        assert_int_equal(r->base_tokens, 100);
        assert_int_equal(r->output_tokens, 7);
        assert_true(r->group >= 0 && r->group < 3);
        assert_int_equal(r->prev, -1);
        per_group[r->group]++;
    }
    // Poisson at 4/s: 2000 arrivals take ~500 s (5 sigma is ±11%).
    assert_true(last > 440 && last < 560);
    for (int g = 0; g < 3; g++)
        assert_true(per_group[g] > 500);
    // Same group: exactly the prefix in common; different groups: nothing.
    uint32_t same = 0, other = 0;
    for (uint32_t j = 1; j < 40; j++) {
        uint32_t k = s_common(wl, 0, j);
        if (clustersim_workload_req(wl, j)->group == clustersim_workload_req(wl, 0)->group) {
            assert_int_equal(k, 100);
            same++;
        } else {
            assert_int_equal(k, 0);
            other++;
        }
    }
    assert_true(same > 0 && other > 0);
    uint32_t out[7], out2[7];
    clustersim_workload_output(wl, 0, out);
    clustersim_workload_output(wl, 1, out2);
    assert_memory_not_equal(out, out2, sizeof out);
    clustersim_workload_destroy(&wl);
    assert_null(wl);
}

static void test_no_prefix_and_models(void **state)
{
    (void)state;
    clustersim_gen_config_t c;
    clustersim_gen_config_defaults(CLUSTERSIM_GEN_NO_PREFIX, &c);
    c.requests = 50;
    c.suffix_tokens = 64;
    c.models = 3;
    c.tenants = 2;
    clustersim_workload_t *wl = clustersim_workload_generate(CLUSTERSIM_GEN_NO_PREFIX, &c);
    assert_non_null(wl);
    assert_int_equal(clustersim_workload_nmodels(wl), 3);
    assert_string_equal(clustersim_workload_model(wl, 2), "model-2");
    assert_string_equal(clustersim_workload_tenant(wl, 1), "tenant-1");
    for (uint32_t j = 1; j < 50; j++) {
        const clustersim_req_t *r = clustersim_workload_req(wl, j);
        assert_int_equal(r->group, -1);
        assert_int_equal(r->base_tokens, 0);
        assert_true(r->model < 3 && r->tenant < 2);
        assert_true(s_common(wl, 0, j) < 2); // a chance match of one token at most
    }
    clustersim_workload_destroy(&wl);
}

static void test_multi_turn_history(void **state)
{
    (void)state;
    clustersim_gen_config_t c;
    clustersim_gen_config_defaults(CLUSTERSIM_GEN_MULTI_TURN, &c);
    c.requests = 10; // 4 turns each: 3 conversations, 12 requests
    c.turns = 4;
    c.prefix_groups = 2;
    c.prefix_tokens = 30;
    c.suffix_tokens = 10;
    c.output_tokens = 5;
    c.think_s = 2.0;
    clustersim_workload_t *wl = clustersim_workload_generate(CLUSTERSIM_GEN_MULTI_TURN, &c);
    assert_non_null(wl);
    assert_int_equal(clustersim_workload_count(wl), 12);
    uint32_t nroots;
    const uint32_t *roots = clustersim_workload_roots(wl, &nroots);
    assert_int_equal(nroots, 3);
    for (uint32_t k = 0; k < nroots; k++) {
        uint32_t i = roots[k];
        const clustersim_req_t *r = clustersim_workload_req(wl, i);
        assert_int_equal(r->prompt_tokens, 40);
        for (int turn = 1; r->next >= 0; turn++) {
            uint32_t n = (uint32_t)r->next;
            const clustersim_req_t *nr = clustersim_workload_req(wl, n);
            assert_int_equal(nr->prev, (int32_t)i);
            assert_int_equal(nr->prompt_tokens, r->prompt_tokens + 5 + 10);
            assert_int_equal(nr->base_tokens, r->prompt_tokens + 5);
            assert_true(nr->arrival_s >= 0); // think time, relative to the previous answer
            // The follow-up starts with the previous prompt and its answer.
            uint32_t *prev = s_prompt(wl, i), *next = s_prompt(wl, n), out[5];
            clustersim_workload_output(wl, i, out);
            assert_memory_equal(next, prev, r->prompt_tokens * sizeof *prev);
            assert_memory_equal(next + r->prompt_tokens, out, sizeof out);
            free(prev);
            free(next);
            i = n;
            r = nr;
            assert_true(turn < 4);
        }
    }
    clustersim_workload_destroy(&wl);
}

static void test_determinism_by_seed(void **state)
{
    (void)state;
    clustersim_gen_config_t c;
    clustersim_gen_config_defaults(CLUSTERSIM_GEN_SHARED_PREFIX, &c);
    c.requests = 20;
    c.prefix_tokens = 64;
    c.suffix_tokens = 16;
    clustersim_workload_t *a = clustersim_workload_generate(CLUSTERSIM_GEN_SHARED_PREFIX, &c);
    clustersim_workload_t *b = clustersim_workload_generate(CLUSTERSIM_GEN_SHARED_PREFIX, &c);
    c.seed = 2;
    clustersim_workload_t *d = clustersim_workload_generate(CLUSTERSIM_GEN_SHARED_PREFIX, &c);
    bool arrivals_differ = false;
    for (uint32_t i = 0; i < 20; i++) {
        assert_true(clustersim_workload_req(a, i)->arrival_s ==
                    clustersim_workload_req(b, i)->arrival_s);
        arrivals_differ |=
            clustersim_workload_req(a, i)->arrival_s != clustersim_workload_req(d, i)->arrival_s;
        uint32_t *pa = s_prompt(a, i), *pb = s_prompt(b, i), *pd = s_prompt(d, i);
        assert_memory_equal(pa, pb, 80 * sizeof *pa);
        assert_memory_not_equal(pa + 64, pd + 64, 16 * sizeof *pa);
        free(pa);
        free(pb);
        free(pd);
    }
    assert_true(arrivals_differ);
    clustersim_workload_destroy(&a);
    clustersim_workload_destroy(&b);
    clustersim_workload_destroy(&d);
}

static char *s_write(const char *text)
{
    char *path = strdup("/tmp/test_clustersim_workload.XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void test_trace_ours(void **state)
{
    (void)state;
    char *path = s_write(
        "# our format\n"
        "{\"arrival_s\": 2.0, \"tenant\": \"a\", \"model\": \"chat\", \"prompt_tokens\": 300, "
        "\"prefix_group\": 1, \"output_tokens\": 10}\n"
        "\n"
        "{\"arrival_s\": 1.0, \"tenant\": \"b\", \"model\": \"chat\", \"prompt_tokens\": 200, "
        "\"prefix_group\": 1, \"prefix_tokens\": 150, \"output_tokens\": 0}\n"
        "{\"arrival_s\": 3.0, \"prompt_tokens\": 100, \"prefix_group\": \"rag\", "
        "\"output_tokens\": 5}\n"
        "{\"arrival_s\": 4.0, \"prompt_tokens\": 100, \"prefix_group\": null, "
        "\"output_tokens\": 5, \"model\": \"big\"}\n");
    clustersim_trace_config_t tc;
    clustersim_trace_config_defaults(&tc);
    tc.suffix_tokens = 100;
    tc.speed = 2.0;
    clustersim_workload_t *wl = NULL;
    char err[256];
    assert_int_equal(clustersim_workload_read(path, &tc, &wl, err, sizeof err), 0);
    assert_int_equal(clustersim_workload_count(wl), 4);
    assert_int_equal(strncmp(clustersim_workload_name(wl), "test_clustersim_workload.", 25), 0);
    const clustersim_req_t *r0 = clustersim_workload_req(wl, 0);
    const clustersim_req_t *r1 = clustersim_workload_req(wl, 1);
    assert_true(r0->arrival_s == 1.0);      // 2.0 at speed 2
    assert_int_equal(r0->base_tokens, 200); // prompt − suffix_tokens
    assert_int_equal(r1->base_tokens, 150);
    assert_int_equal(r1->output_tokens, 1);    // at least one
    assert_int_equal(s_common(wl, 0, 1), 150); // group 1 up to the shorter prefix
    assert_int_equal(s_common(wl, 0, 2), 0);   // another group
    assert_int_equal(clustersim_workload_req(wl, 3)->group, -1);
    assert_string_equal(clustersim_workload_tenant(wl, r1->tenant), "b");
    assert_string_equal(clustersim_workload_model(wl, clustersim_workload_req(wl, 3)->model),
                        "big");
    assert_string_equal(clustersim_workload_tenant(wl, clustersim_workload_req(wl, 2)->tenant),
                        "default");
    uint32_t n;
    const uint32_t *roots = clustersim_workload_roots(wl, &n);
    assert_int_equal(n, 4);
    assert_int_equal(roots[0], 1); // sorted by arrival
    assert_int_equal(roots[1], 0);
    clustersim_workload_destroy(&wl);
    unlink(path);
    free(path);
}

static void test_trace_mooncake(void **state)
{
    (void)state;
    char *path = s_write(
        "{\"timestamp\": 0, \"input_length\": 1500, \"output_length\": 20, "
        "\"hash_ids\": [1, 2, 3]}\n"
        "{\"timestamp\": 500, \"input_length\": 1100, \"output_length\": 20, "
        "\"hash_ids\": [1, 2, 4]}\n"
        "{\"timestamp\": 900, \"input_length\": 600, \"output_length\": 20, "
        "\"hash_ids\": [7, 2]}\n"
        "{\"timestamp\": 1000, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n");
    clustersim_trace_config_t tc;
    clustersim_trace_config_defaults(&tc);
    tc.max_requests = 3;
    clustersim_workload_t *wl = NULL;
    char err[256];
    assert_int_equal(clustersim_workload_read(path, &tc, &wl, err, sizeof err), 0);
    assert_int_equal(clustersim_workload_count(wl), 3);
    assert_true(clustersim_workload_req(wl, 1)->arrival_s == 0.5);
    assert_int_equal(clustersim_workload_req(wl, 0)->nhash, 3);
    assert_int_equal(clustersim_workload_req(wl, 0)->base_tokens, 1500);
    assert_int_equal(clustersim_workload_req(wl, 1)->nhash, 3);
    assert_int_equal(clustersim_workload_req(wl, 1)->base_tokens, 1100);
    assert_int_equal(s_common(wl, 0, 1), 1024); // hash ids 1, 2 in common
    assert_int_equal(s_common(wl, 0, 2), 0);    // 7 first: nothing in common
    // The same hash id is the same 512 tokens wherever it appears (2 at block 1 in both).
    uint32_t *a = s_prompt(wl, 0), *c = s_prompt(wl, 2);
    assert_memory_equal(a + 512, c + 512, 88 * sizeof *a);
    free(a);
    free(c);
    clustersim_workload_destroy(&wl);
    unlink(path);
    free(path);
}

static void test_trace_errors(void **state)
{
    (void)state;
    clustersim_trace_config_t tc;
    clustersim_trace_config_defaults(&tc);
    clustersim_workload_t *wl = NULL;
    char err[256];
    assert_int_equal(
        clustersim_workload_read("/nonexistent/trace.jsonl", &tc, &wl, err, sizeof err), IPL_E_IO);
    assert_null(wl);
    const char *bad[] = {
        "{\"arrival_s\": 0, \"prompt_tokens\": 10, \"output_tokens\": 1}\nnot json\n",
        "{\"arrival_s\": 0, \"prompt_tokens\": 10, \"output_tokens\": 1}\n"
        "{\"arrival_s\": -1, \"prompt_tokens\": 10, \"output_tokens\": 1}\n",
        "{\"arrival_s\": 0, \"prompt_tokens\": 10, \"output_tokens\": 1}\n"
        "{\"arrival_s\": 1, \"prompt_tokens\": 0, \"output_tokens\": 1}\n",
        "{\"arrival_s\": 0, \"prompt_tokens\": 10, \"output_tokens\": 1}\n"
        "{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [\"x\"]}\n",
        "{\"arrival_s\": 0, \"prompt_tokens\": 10, \"output_tokens\": 1}\n"
        "{\"arrival_s\": 1, \"prompt_tokens\": 10, \"output_tokens\": 1, \"prefix_group\": []}\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *path = s_write(bad[i]);
        assert_int_equal(clustersim_workload_read(path, &tc, &wl, err, sizeof err), IPL_E_INVAL);
        assert_null(wl);
        char where[300];
        snprintf(where, sizeof where, "%s:2: ", path);
        assert_non_null(strstr(err, where));
        unlink(path);
        free(path);
    }
    char *path = s_write("# nothing\n\n");
    assert_int_equal(clustersim_workload_read(path, &tc, &wl, err, sizeof err), IPL_E_INVAL);
    assert_non_null(strstr(err, "no request"));
    unlink(path);
    free(path);
}

/* --- the suite's workloads (issue 16) ---------------------------------------------------- */

static int s_cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static clustersim_workload_t *s_gen(clustersim_gen_kind_t kind, uint32_t requests, uint64_t seed)
{
    clustersim_gen_config_t c;
    clustersim_gen_config_defaults(kind, &c);
    c.requests = requests;
    c.seed = seed;
    clustersim_workload_t *wl = clustersim_workload_generate(kind, &c);
    assert_non_null(wl);
    return wl;
}

// Σ ideal reuse / Σ prompt tokens.
static double s_reuse_ratio(const clustersim_workload_t *wl, uint64_t *working_set)
{
    uint32_t n = clustersim_workload_count(wl);
    uint32_t *reused = malloc(n * sizeof *reused);
    assert_int_equal(clustersim_workload_ideal_reuse(wl, 16, reused, working_set), 0);
    double hit = 0, all = 0;
    for (uint32_t i = 0; i < n; i++) {
        hit += reused[i];
        all += clustersim_workload_req(wl, i)->prompt_tokens;
        assert_true(reused[i] % 16 == 0 &&
                    reused[i] < clustersim_workload_req(wl, i)->prompt_tokens);
    }
    free(reused);
    return hit / all;
}

static void test_production_moments(void **state)
{
    (void)state;
    clustersim_workload_t *wl = s_gen(CLUSTERSIM_GEN_PRODUCTION, 20000, 1);
    assert_string_equal(clustersim_workload_name(wl), "production");
    uint32_t n = clustersim_workload_count(wl);
    uint32_t *len = malloc(n * sizeof *len);
    for (uint32_t i = 0; i < n; i++) {
        const clustersim_req_t *r = clustersim_workload_req(wl, i);
        len[i] = r->prompt_tokens;
        assert_true(r->prompt_tokens >= 16 && r->prompt_tokens <= 100000);
        assert_int_equal(r->base_tokens, (uint32_t)(0.45 * r->prompt_tokens));
        assert_true(r->group >= 0 && r->group < 200);
        assert_int_equal(r->output_tokens, 256);
    }
    qsort(len, n, sizeof *len, s_cmp_u32);
    // Log-normal, median 7,000 and p90 27,000 (so p99 ~ 81,000), cut at 100,000.
    assert_in_range(len[n / 2], 6500, 7500);
    assert_in_range(len[n * 9 / 10], 25000, 29000);
    assert_in_range(len[n * 99 / 100], 72000, 92000);
    free(len);
    clustersim_workload_destroy(&wl);
    // At the default 2,000 requests about a third of the prompt tokens repeat an earlier
    // prompt's.
    wl = s_gen(CLUSTERSIM_GEN_PRODUCTION, 2000, 1);
    double reuse = s_reuse_ratio(wl, NULL);
    assert_true(reuse > 0.28 && reuse < 0.40);
    clustersim_workload_destroy(&wl);

    // Two requests of one group share exactly the shorter one's shared part.
    wl = s_gen(CLUSTERSIM_GEN_PRODUCTION, 400, 3);
    uint32_t checked = 0;
    for (uint32_t i = 0; i < 400 && checked < 5; i++)
        for (uint32_t j = i + 1; j < 400 && checked < 5; j++) {
            const clustersim_req_t *a = clustersim_workload_req(wl, i);
            const clustersim_req_t *b = clustersim_workload_req(wl, j);
            if (a->group != b->group) continue;
            uint32_t shared = a->base_tokens < b->base_tokens ? a->base_tokens : b->base_tokens;
            uint32_t common = s_common(wl, i, j);
            assert_true(common >= shared && common <= shared + 2); // a chance equal token or two
            checked++;
        }
    assert_int_equal(checked, 5);
    clustersim_workload_destroy(&wl);
}

static void test_zipf_and_kv_pressure(void **state)
{
    (void)state;
    // zipf-prefix: group 0 draws 1 / Σ_{g<60} (g+1)^-1.2 ≈ 29.5% of the requests.
    clustersim_workload_t *wl = s_gen(CLUSTERSIM_GEN_ZIPF_PREFIX, 10000, 1);
    uint32_t top = 0;
    for (uint32_t i = 0; i < 10000; i++) {
        const clustersim_req_t *r = clustersim_workload_req(wl, i);
        top += r->group == 0;
        assert_int_equal(r->prompt_tokens, 4096 + 512);
    }
    assert_in_range(top, 2750, 3150);
    clustersim_workload_destroy(&wl);
    // kv-pressure: 240 uniform prefixes of 8,192 tokens, nearly all seen in 1,200 requests:
    // a working set of ~2M tokens.
    wl = s_gen(CLUSTERSIM_GEN_KV_PRESSURE, 1200, 1);
    uint64_t ws = 0;
    double reuse = s_reuse_ratio(wl, &ws);
    assert_in_range(ws / 8192, 232, 240);
    assert_true(ws % 8192 == 0);
    assert_true(reuse > 0.7 && reuse < 0.8); // (1200 - 240) / 1200 × 8192 / 8704 ≈ 0.75
    clustersim_workload_destroy(&wl);
}

static void test_ideal_reuse_by_hand(void **state)
{
    (void)state;
    clustersim_gen_config_t c;
    clustersim_gen_config_defaults(CLUSTERSIM_GEN_MULTI_TURN, &c);
    c.requests = 6;
    c.turns = 2;
    c.prefix_groups = 1;
    c.prefix_tokens = 100;
    c.suffix_tokens = 20;
    c.output_tokens = 10;
    clustersim_workload_t *wl = clustersim_workload_generate(CLUSTERSIM_GEN_MULTI_TURN, &c);
    uint32_t reused[6];
    uint64_t ws;
    assert_int_equal(clustersim_workload_ideal_reuse(wl, 16, reused, &ws), 0);
    assert_int_equal(ws, 100);
    uint32_t nroots;
    const uint32_t *roots = clustersim_workload_roots(wl, &nroots);
    assert_int_equal(nroots, 3);
    assert_int_equal(reused[roots[0]], 0);  // the first of its group
    assert_int_equal(reused[roots[1]], 96); // the system prompt: 6 whole blocks of 100 tokens
    // A follow-up: its history (120 + 10 tokens) in whole blocks.
    assert_int_equal(reused[clustersim_workload_req(wl, roots[0])->next], 128);
    clustersim_workload_destroy(&wl);
}

static void test_bursty_arrivals(void **state)
{
    (void)state;
    // On 15 s / off 30 s: long silences between bursts, three times the mean rate inside.
    clustersim_workload_t *wl = s_gen(CLUSTERSIM_GEN_BURSTY, 6000, 1);
    clustersim_workload_t *plain = s_gen(CLUSTERSIM_GEN_SHARED_PREFIX, 6000, 1);
    uint32_t long_gaps = 0, plain_long = 0;
    for (uint32_t i = 1; i < 6000; i++) {
        long_gaps += clustersim_workload_req(wl, i)->arrival_s -
                         clustersim_workload_req(wl, i - 1)->arrival_s >
                     5.0;
        plain_long += clustersim_workload_req(plain, i)->arrival_s -
                          clustersim_workload_req(plain, i - 1)->arrival_s >
                      5.0;
    }
    double span = clustersim_workload_req(wl, 5999)->arrival_s;
    // Mean rate 2 req/s: 3,000 s, ~67 on/off cycles (most off periods exceed 5 s).
    assert_true(span > 2500 && span < 3500);
    assert_in_range(long_gaps, 35, 100);
    assert_int_equal(plain_long, 0);
    clustersim_workload_destroy(&wl);
    clustersim_workload_destroy(&plain);
}

static void test_many_models_nesting(void **state)
{
    (void)state;
    clustersim_workload_t *wl = s_gen(CLUSTERSIM_GEN_MANY_MODELS, 4000, 1);
    assert_int_equal(clustersim_workload_nmodels(wl), 8);
    assert_int_equal(clustersim_workload_ntenants(wl), 16);
    uint32_t model0 = 0;
    for (uint32_t i = 0; i < 4000; i++) {
        const clustersim_req_t *r = clustersim_workload_req(wl, i);
        model0 += r->model == 0;
        assert_int_equal(r->prompt_tokens, 2048 + 4096 + 256);
        assert_int_equal(r->sub, (int32_t)(r->model * 16 + r->tenant));
        assert_int_equal((uint32_t)r->group, r->model);
    }
    assert_in_range(model0, 1330, 1610); // 1 / H(8) = 36.8%
    // Same model, other tenant: the system prompt; same (model, tenant): the document too.
    int same_doc = -1, same_model = -1, other = -1;
    const clustersim_req_t *r0 = clustersim_workload_req(wl, 0);
    for (uint32_t j = 1; j < 4000; j++) {
        const clustersim_req_t *r = clustersim_workload_req(wl, j);
        if (r->sub == r0->sub && same_doc < 0) same_doc = (int)j;
        if (r->model == r0->model && r->sub != r0->sub && same_model < 0) same_model = (int)j;
        if (r->model != r0->model && other < 0) other = (int)j;
    }
    assert_true(same_doc > 0 && same_model > 0 && other > 0);
    assert_in_range(s_common(wl, 0, (uint32_t)same_doc), 6144, 6146);
    assert_in_range(s_common(wl, 0, (uint32_t)same_model), 2048, 2050);
    assert_in_range(s_common(wl, 0, (uint32_t)other), 0, 2);
    clustersim_workload_destroy(&wl);
}

static void test_suite_determinism(void **state)
{
    (void)state;
    const clustersim_gen_kind_t kinds[] = {CLUSTERSIM_GEN_PRODUCTION, CLUSTERSIM_GEN_ZIPF_PREFIX,
                                           CLUSTERSIM_GEN_BURSTY, CLUSTERSIM_GEN_KV_PRESSURE,
                                           CLUSTERSIM_GEN_MANY_MODELS};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        clustersim_gen_kind_t kind;
        assert_int_equal(clustersim_gen_kind_parse(clustersim_gen_kind_name(kinds[k]), &kind), 0);
        assert_int_equal(kind, kinds[k]);
        clustersim_workload_t *a = s_gen(kinds[k], 50, 7), *b = s_gen(kinds[k], 50, 7);
        clustersim_workload_t *d = s_gen(kinds[k], 50, 8);
        bool differ = false;
        for (uint32_t i = 0; i < 50; i++) {
            const clustersim_req_t *ra = clustersim_workload_req(a, i);
            const clustersim_req_t *rb = clustersim_workload_req(b, i);
            assert_true(ra->arrival_s == rb->arrival_s);
            assert_int_equal(ra->prompt_tokens, rb->prompt_tokens);
            uint32_t *pa = s_prompt(a, i), *pb = s_prompt(b, i);
            assert_memory_equal(pa, pb, ra->prompt_tokens * sizeof *pa);
            free(pa);
            free(pb);
            differ |= ra->arrival_s != clustersim_workload_req(d, i)->arrival_s;
        }
        assert_true(differ);
        clustersim_workload_destroy(&a);
        clustersim_workload_destroy(&b);
        clustersim_workload_destroy(&d);
    }
}

static void test_invalid_configs(void **state)
{
    (void)state;
    clustersim_gen_config_t c;
    clustersim_gen_config_defaults(CLUSTERSIM_GEN_SHARED_PREFIX, &c);
    c.rate = 0;
    assert_null(clustersim_workload_generate(CLUSTERSIM_GEN_SHARED_PREFIX, &c));
    clustersim_gen_config_defaults(CLUSTERSIM_GEN_NO_PREFIX, &c);
    c.suffix_tokens = 0;
    assert_null(clustersim_workload_generate(CLUSTERSIM_GEN_NO_PREFIX, &c));
    clustersim_gen_config_defaults(CLUSTERSIM_GEN_MULTI_TURN, &c);
    c.turns = 0;
    assert_null(clustersim_workload_generate(CLUSTERSIM_GEN_MULTI_TURN, &c));
    clustersim_gen_config_defaults(CLUSTERSIM_GEN_PRODUCTION, &c);
    c.prompt_p90 = c.prompt_median - 1; // p90 below the median
    assert_null(clustersim_workload_generate(CLUSTERSIM_GEN_PRODUCTION, &c));
    clustersim_gen_config_defaults(CLUSTERSIM_GEN_PRODUCTION, &c);
    c.shared_fraction = 1.0;
    assert_null(clustersim_workload_generate(CLUSTERSIM_GEN_PRODUCTION, &c));
    clustersim_gen_config_defaults(CLUSTERSIM_GEN_BURSTY, &c);
    c.burst_on_s = -1;
    assert_null(clustersim_workload_generate(CLUSTERSIM_GEN_BURSTY, &c));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kind_names),           cmocka_unit_test(test_shared_prefix),
        cmocka_unit_test(test_no_prefix_and_models), cmocka_unit_test(test_multi_turn_history),
        cmocka_unit_test(test_determinism_by_seed),  cmocka_unit_test(test_trace_ours),
        cmocka_unit_test(test_trace_mooncake),       cmocka_unit_test(test_trace_errors),
        cmocka_unit_test(test_invalid_configs),      cmocka_unit_test(test_production_moments),
        cmocka_unit_test(test_zipf_and_kv_pressure), cmocka_unit_test(test_ideal_reuse_by_hand),
        cmocka_unit_test(test_bursty_arrivals),      cmocka_unit_test(test_many_models_nesting),
        cmocka_unit_test(test_suite_determinism),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
