/*
 * Unit tests of gateway_tokenize: ids from a stand-in worker's POST /tokenize (an ipl_httpd
 * on an ephemeral loopback port) and then from the cache; the cache's bounds (entries and
 * bytes, least recently used first out); failures (HTTP error, a malformed answer, a worker
 * slower than the timeout, nobody to ask) give no ids; the worker pick (pool, LoRA adapter,
 * rotation); gateway_api_tokenize_body's shape.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "gateway_api.h"
#include "gateway_tokenize.h"
#include "ipl_httpd.h"
#include "ipl_prompt.h"

static atomic_int s_calls;
static char s_last_body[4096];

/* The stand-in: {"tokens": [the body's length, 1, 2]}; "/bad" paths answer otherwise. */
static void s_tokenize(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    const char *mode = arg;
    size_t len = 0;
    const char *body = ipl_http_req_body(req, &len);
    snprintf(s_last_body, sizeof s_last_body, "%s", body ? body : "");
    atomic_fetch_add(&s_calls, 1);
    if (!strcmp(mode, "error")) {
        ipl_http_resp_set(resp, 400, "application/json", "{\"error\":\"no\"}", 14);
        return;
    }
    if (!strcmp(mode, "junk")) {
        ipl_http_resp_set(resp, 200, "application/json", "{\"tokens\":[1,-2]}", 17);
        return;
    }
    if (!strcmp(mode, "slow")) usleep(400 * 1000);
    char out[128];
    int n =
        snprintf(out, sizeof out, "{\"count\":3,\"tokens\":[%zu,1,2],\"token_strs\":null}", len);
    ipl_http_resp_set(resp, 200, "application/json", out, (size_t)n);
}

typedef struct {
    ipl_httpd_t *httpd;
    char url[4][64]; /* ok, error, junk, slow */
} s_fixture_t;

static int s_setup(void **state)
{
    s_fixture_t *f = calloc(1, sizeof *f);
    static const char *modes[] = {"ok", "error", "junk", "slow"};
    f->httpd = ipl_httpd_new("127.0.0.1:0", 1 << 20);
    if (!f->httpd) return -1;
    for (int i = 0; i < 4; i++) {
        char path[64];
        snprintf(path, sizeof path, "/%s/tokenize", modes[i]);
        ipl_httpd_route(f->httpd, "POST", path, s_tokenize, (void *)modes[i]);
    }
    if (ipl_httpd_start(f->httpd) != 0) return -1;
    for (int i = 0; i < 4; i++)
        snprintf(f->url[i], sizeof f->url[i], "http://127.0.0.1:%d/%s/", ipl_httpd_port(f->httpd),
                 modes[i]);
    *state = f;
    return 0;
}

static int s_teardown(void **state)
{
    s_fixture_t *f = *state;
    ipl_httpd_destroy(&f->httpd);
    free(f);
    return 0;
}

static void test_worker_then_cache(void **state)
{
    s_fixture_t *f = *state;
    ipl_metrics_t *m = ipl_metrics_new();
    gateway_tokenize_t *t = gateway_tokenize_new(NULL, m);
    assert_non_null(t);
    atomic_store(&s_calls, 0);
    const char *body = "{\"model\":\"m\",\"messages\":[]}";
    uint32_t *ids = NULL;
    size_t n = 0;
    char note[128];
    assert_int_equal(
        gateway_tokenize_ids(t, f->url[0], body, strlen(body), &ids, &n, note, sizeof note),
        GATEWAY_TOKENIZE_WORKER);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], strlen(body)); /* the worker got our body */
    assert_string_equal(s_last_body, body);
    free(ids);
    // the second time: the cache, not the worker (even with no worker to ask)
    assert_int_equal(gateway_tokenize_ids(t, NULL, body, strlen(body), &ids, &n, note, sizeof note),
                     GATEWAY_TOKENIZE_CACHED);
    assert_int_equal(n, 3);
    assert_int_equal(ids[2], 2);
    free(ids);
    assert_int_equal(atomic_load(&s_calls), 1);
    size_t entries = 0, bytes = 0;
    gateway_tokenize_stats(t, &entries, &bytes);
    assert_int_equal(entries, 1);
    assert_int_equal(bytes, 3 * sizeof(uint32_t));
    size_t len = 0;
    char *text = ipl_metrics_render(m, &len);
    assert_non_null(strstr(text, "inferplane_gateway_worker_tokenize_total{result=\"worker\"} 1"));
    assert_non_null(strstr(text, "inferplane_gateway_worker_tokenize_total{result=\"cached\"} 1"));
    free(text);
    gateway_tokenize_destroy(&t);
    assert_null(t);
    ipl_metrics_destroy(&m);
}

static void test_failures_give_no_ids(void **state)
{
    s_fixture_t *f = *state;
    gateway_tokenize_config_t cfg = {.timeout_ms = 100};
    gateway_tokenize_t *t = gateway_tokenize_new(&cfg, NULL);
    uint32_t *ids = (uint32_t *)&cfg;
    size_t n = 7;
    char note[128];
    const char *body = "{\"model\":\"m\"}";
    assert_int_equal(
        gateway_tokenize_ids(t, f->url[1], body, strlen(body), &ids, &n, note, sizeof note),
        GATEWAY_TOKENIZE_FAILED);
    assert_null(ids);
    assert_int_equal(n, 0);
    assert_string_equal(note, "HTTP 400");
    assert_int_equal(
        gateway_tokenize_ids(t, f->url[2], body, strlen(body), &ids, &n, note, sizeof note),
        GATEWAY_TOKENIZE_FAILED);
    assert_non_null(strstr(note, "tokens[1]"));
    assert_int_equal(
        gateway_tokenize_ids(t, f->url[3], body, strlen(body), &ids, &n, note, sizeof note),
        GATEWAY_TOKENIZE_FAILED);
    assert_string_equal(note, "timed out after 100 ms");
    assert_int_equal(gateway_tokenize_ids(t, NULL, body, strlen(body), &ids, &n, note, sizeof note),
                     GATEWAY_TOKENIZE_FAILED);
    assert_string_equal(note, "no worker to ask");
    assert_int_equal(gateway_tokenize_ids(t, "http://127.0.0.1:1", body, strlen(body), &ids, &n,
                                          note, sizeof note),
                     GATEWAY_TOKENIZE_FAILED);
    size_t entries = 9;
    gateway_tokenize_stats(t, &entries, NULL);
    assert_int_equal(entries, 0); /* failures are not cached */
    gateway_tokenize_destroy(&t);
}

static void test_cache_bounds(void **state)
{
    s_fixture_t *f = *state;
    // 3 entries at most, and 10 ids' worth of bytes (each answer here is 3 ids)
    gateway_tokenize_config_t cfg = {.max_entries = 3, .max_bytes = 10 * sizeof(uint32_t)};
    gateway_tokenize_t *t = gateway_tokenize_new(&cfg, NULL);
    uint32_t *ids;
    size_t n, entries, bytes;
    char body[64];
    for (int i = 0; i < 5; i++) {
        snprintf(body, sizeof body, "{\"n\":%d}", i);
        assert_int_equal(gateway_tokenize_ids(t, f->url[0], body, strlen(body), &ids, &n, NULL, 0),
                         GATEWAY_TOKENIZE_WORKER);
        free(ids);
        gateway_tokenize_stats(t, &entries, &bytes);
        assert_true(entries <= 3);
        assert_true(bytes <= 10 * sizeof(uint32_t));
        if (i == 2) { /* touch {"n":0}: the least recently used is {"n":1} now */
            snprintf(body, sizeof body, "{\"n\":0}");
            assert_int_equal(gateway_tokenize_ids(t, NULL, body, strlen(body), &ids, &n, NULL, 0),
                             GATEWAY_TOKENIZE_CACHED);
            free(ids);
        }
    }
    // 3 × 3 ids fit 10: three entries, the most recent ones: 0 (touched), 3, 4
    gateway_tokenize_stats(t, &entries, &bytes);
    assert_int_equal(entries, 3);
    const int kept[] = {0, 3, 4}, gone[] = {1, 2};
    for (size_t i = 0; i < 3; i++) {
        snprintf(body, sizeof body, "{\"n\":%d}", kept[i]);
        assert_int_equal(gateway_tokenize_ids(t, NULL, body, strlen(body), &ids, &n, NULL, 0),
                         GATEWAY_TOKENIZE_CACHED);
        free(ids);
    }
    for (size_t i = 0; i < 2; i++) {
        snprintf(body, sizeof body, "{\"n\":%d}", gone[i]);
        assert_int_equal(gateway_tokenize_ids(t, NULL, body, strlen(body), &ids, &n, NULL, 0),
                         GATEWAY_TOKENIZE_FAILED);
    }
    gateway_tokenize_destroy(&t);
    // an answer larger than the byte bound is passed on, not cached
    gateway_tokenize_config_t tiny = {.max_bytes = 2 * sizeof(uint32_t)};
    t = gateway_tokenize_new(&tiny, NULL);
    assert_int_equal(gateway_tokenize_ids(t, f->url[0], "{}", 2, &ids, &n, NULL, 0),
                     GATEWAY_TOKENIZE_WORKER);
    free(ids);
    gateway_tokenize_stats(t, &entries, &bytes);
    assert_int_equal(entries, 0);
    gateway_tokenize_destroy(&t);
}

static void test_pick(void **state)
{
    (void)state;
    static char *lora[] = {"sql-lora"};
    ipl_pool_t pools[] = {{.name = "chat", .model = "base"}, {.name = "x", .model = "xm"}};
    ipl_worker_t workers[] = {
        {.name = "a",
         .pool = "chat",
         .url = "http://a",
         .lora_adapters = lora,
         .lora_adapters_len = 1},
        {.name = "x1", .pool = "x", .url = "http://x1"},
        {.name = "b", .pool = "chat", .url = "http://b"},
    };
    ipl_policy_t p = {.pools = pools, .pools_len = 2, .workers = workers, .workers_len = 3};
    gateway_tokenize_t *t = gateway_tokenize_new(NULL, NULL);
    const ipl_worker_t *w1 = gateway_tokenize_pick(t, &p, "base", NULL);
    const ipl_worker_t *w2 = gateway_tokenize_pick(t, &p, "base", NULL);
    assert_non_null(w1);
    assert_non_null(w2);
    assert_ptr_not_equal(w1, w2); /* rotates between a and b */
    assert_string_equal(w1->pool, "chat");
    assert_string_equal(w2->pool, "chat");
    for (int i = 0; i < 3; i++)
        assert_string_equal(gateway_tokenize_pick(t, &p, "sql-lora", "sql-lora")->name, "a");
    assert_string_equal(gateway_tokenize_pick(t, &p, "xm", NULL)->name, "x1");
    assert_null(gateway_tokenize_pick(t, &p, "nothing", NULL));
    assert_null(gateway_tokenize_pick(t, NULL, "base", NULL));
    gateway_tokenize_destroy(&t);
}

static void test_tokenize_body(void **state)
{
    (void)state;
    const char *body = "{\"model\":\"m\",\"stream\":true,\"max_tokens\":5,\"tools\":null,"
                       "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                       "\"chat_template_kwargs\":{\"enable_thinking\":false},"
                       "\"add_generation_prompt\":false}";
    ipl_prompt_t *prompt = ipl_prompt_open("builtin", NULL, 0);
    gateway_api_req_t *req = NULL;
    gateway_api_error_t err;
    assert_int_equal(gateway_api_parse(GATEWAY_API_CHAT, body, strlen(body), prompt, &req, &err),
                     0);
    assert_false(req->worker_tokenize); /* builtin renders ChatML itself */
    size_t len = 0;
    char *tb = gateway_api_tokenize_body(req, &len);
    assert_string_equal(tb,
                        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                        "\"add_generation_prompt\":false,"
                        "\"chat_template_kwargs\":{\"enable_thinking\":false},"
                        "\"add_special_tokens\":false}");
    assert_int_equal(len, strlen(tb));
    free(tb);
    gateway_api_req_destroy(&req);
    const char *comp = "{\"model\":\"m\",\"prompt\":\"hi\"}";
    assert_int_equal(
        gateway_api_parse(GATEWAY_API_COMPLETIONS, comp, strlen(comp), prompt, &req, &err), 0);
    assert_null(gateway_api_tokenize_body(req, &len));
    gateway_api_req_destroy(&req);
    ipl_prompt_destroy(&prompt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worker_then_cache), cmocka_unit_test(test_failures_give_no_ids),
        cmocka_unit_test(test_cache_bounds),      cmocka_unit_test(test_pick),
        cmocka_unit_test(test_tokenize_body),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
