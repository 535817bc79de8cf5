/*
 * Unit tests of decider_http: request parsing (every 400 message), hashing like the gateway
 * (LoRA, cache_salt, an isolated tenant's salt),
 * status mapping, the rendered JSON and GET /debug/model (a real server on an ephemeral
 * loopback port, driven with libcurl).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <curl/curl.h>

#include "decider_http.h"
#include "ipl_error.h"
#include "ipl_hash.h"
#include "ipl_log.h"
#include "ipl_prompt.h"
#include "policy_isolation.h"

static ipl_prompt_t *s_prompt; /* the built-in model (ChatML) */

static void s_bad(const char *body, const char *expect)
{
    decider_http_request_t r;
    char err[384] = "";
    assert_int_equal(decider_http_parse(body, strlen(body), s_prompt, &r, err, sizeof err),
                     IPL_E_INVAL);
    if (!strstr(err, expect)) fail_msg("body %s: expected [%s], got [%s]", body, expect, err);
    assert_null(r.model); // nothing to free after a failure
}

static void test_parse_errors(void **state)
{
    (void)state;
    s_bad("{nope", "not valid JSON");
    s_bad("[1]", "must be a JSON object");
    s_bad("{\"prompt\":\"x\"}", "'model' is required");
    s_bad("{\"model\":\"\",\"prompt\":\"x\"}", "'model' must not be empty");
    s_bad("{\"model\":3,\"prompt\":\"x\"}", "'model' must be a string");
    s_bad("{\"model\":\"m\",\"tenant\":[],\"prompt\":\"x\"}", "'tenant' must be a string");
    s_bad("{\"model\":\"m\"}", "give exactly one of 'prompt'");
    s_bad("{\"model\":\"m\",\"prompt\":\"x\",\"messages\":[]}", "several were given");
    s_bad("{\"model\":\"m\",\"prompt\":1}", "'prompt' must be a string");
    s_bad("{\"model\":\"m\",\"messages\":{}}", "'messages' must be an array");
    s_bad("{\"model\":\"m\",\"messages\":[{\"content\":\"x\"}]}", "messages[0]");
    s_bad("{\"model\":\"m\",\"block_hashes\":{}}", "'block_hashes' must be an array");
    s_bad("{\"model\":\"m\",\"block_hashes\":[1,-1]}", "block_hashes[1] must be a non-negative");
    s_bad("{\"model\":\"m\",\"block_hashes\":[1.5]}", "block_hashes[0]");
    s_bad("{\"model\":\"m\",\"block_hashes\":[1e18]}", "pass larger hashes as strings");
    s_bad("{\"model\":\"m\",\"block_hashes\":[\"12x\"]}", "unsigned 64-bit integer");
    s_bad("{\"model\":\"m\",\"block_hashes\":[\"-1\"]}", "unsigned 64-bit integer");
    s_bad("{\"model\":\"m\",\"block_hashes\":[\"0x1ffffffffffffffff\"]}", "unsigned 64-bit");
    s_bad("{\"model\":\"m\",\"prompt\":\"x\",\"prompt_tokens\":\"5\"}", "'prompt_tokens' must be");
    s_bad("{\"model\":\"m\",\"prompt\":\"x\",\"block_size\":0.5}", "'block_size' must be");
    s_bad("{\"model\":\"m\",\"prompt\":\"x\",\"labels\":\"pii\"}", "'labels' must be an array");
    s_bad("{\"model\":\"m\",\"prompt\":\"x\",\"labels\":[\"\"]}", "non-empty strings");
    s_bad("{\"model\":\"m\",\"prompt\":\"x\",\"labels\":[1]}", "non-empty strings");
    s_bad("{\"model\":\"m\",\"prompt\":\"x\",\"headers\":[]}", "'headers' must be an object");
    s_bad("{\"model\":\"m\",\"prompt\":\"x\",\"headers\":{\"a\":1}}", "map header names");
    s_bad("{\"model\":\"m\",\"prompt\":\"x\",\"headers\":{\"a=b\":\"c\"}}", "without '='");
    // Too many hashes.
    size_t n = DECIDER_HTTP_MAX_HASHES + 1, cap = n * 2 + 64;
    char *big = malloc(cap), *p = big;
    p += sprintf(p, "{\"model\":\"m\",\"block_hashes\":[");
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "%s1", i ? "," : "");
    strcpy(p, "]}");
    s_bad(big, "above the limit of 65536");
    free(big);
}

static void test_parse_block_hashes(void **state)
{
    (void)state;
    const char *body = "{\"model\":\"m\",\"tenant\":\"t\",\"strategy\":\"random\",\"block_hashes\":"
                       "[7, \"18446744073709551615\", \"0xabc\"],\"prompt_tokens\":50,"
                       "\"block_size\":16,\"labels\":[\"pii\",\"code\"],"
                       "\"headers\":{\"X-Class\":\"batch=1\"}}";
    decider_http_request_t r;
    char err[128];
    assert_int_equal(decider_http_parse(body, strlen(body), s_prompt, &r, err, sizeof err), 0);
    assert_string_equal(r.req.model, "m");
    assert_string_equal(r.req.tenant, "t");
    assert_string_equal(r.req.strategy, "random");
    assert_int_equal(r.req.nhashes, 3);
    assert_int_equal(r.req.hashes[0], 7);
    assert_true(r.req.hashes[1] == UINT64_MAX);
    assert_int_equal(r.req.hashes[2], 0xabc);
    assert_int_equal(r.req.prompt_tokens, 50);
    assert_int_equal(r.req.block_size, 16);
    assert_int_equal(r.req.nlabels, 2);
    assert_string_equal(r.req.labels[1], "code");
    assert_int_equal(r.req.nheaders, 1);
    assert_string_equal(r.req.headers[0], "x-class=batch=1"); // the name lower-cased
    assert_int_equal(decider_http_hash(&r, NULL, 16), 0); // no text: nothing to do
    assert_int_equal(r.req.nhashes, 3);
    decider_http_request_clear(&r);
    assert_null(r.model);
}

static void test_prompt_and_messages_hash_like_the_gateway(void **state)
{
    (void)state;
    const ipl_tokenizer_t *tok = ipl_prompt_tokenizer(s_prompt);
    const char *body = "{\"model\":\"m\",\"prompt\":\"The quick brown fox jumps over the lazy dog "
                       "again and again and again and again.\"}";
    decider_http_request_t r;
    char err[128];
    assert_int_equal(decider_http_parse(body, strlen(body), s_prompt, &r, err, sizeof err), 0);
    assert_int_equal(decider_http_hash(&r, s_prompt, 4), 0);
    size_t ntok = 0;
    const char *text = "The quick brown fox jumps over the lazy dog again and again and again and "
                       "again.";
    uint32_t *ids = ipl_tokenizer_encode(tok, text, strlen(text), &ntok);
    uint64_t want[64];
    size_t nb = ipl_block_hashes(ipl_hash_chain_start(0), ids, ntok, 4, want, 64);
    assert_int_equal(r.req.prompt_tokens, ntok);
    assert_int_equal(r.req.nhashes, nb);
    assert_true(nb > 3);
    assert_memory_equal(r.req.hashes, want, nb * sizeof *want);
    assert_int_equal(r.req.block_size, 4);
    decider_http_request_clear(&r);

    body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi there, how are "
           "you doing today?\"}]}";
    assert_int_equal(decider_http_parse(body, strlen(body), s_prompt, &r, err, sizeof err), 0);
    assert_non_null(strstr(r.text, "<|im_start|>user\nhi there"));
    assert_non_null(strstr(r.text, "<|im_start|>assistant\n")); // generation prompt added
    assert_int_equal(decider_http_hash(&r, s_prompt, 4), 0);
    assert_true(r.req.nhashes > 0);
    decider_http_request_clear(&r);

    /* a cache_salt moves the whole chain to the salt's space, as the gateway hashes it */
    body = "{\"model\":\"m\",\"cache_salt\":\"s1\",\"prompt\":\"The quick brown fox jumps "
           "over the lazy dog again and again and again and again.\"}";
    assert_int_equal(decider_http_parse(body, strlen(body), s_prompt, &r, err, sizeof err), 0);
    assert_int_equal(decider_http_hash(&r, s_prompt, 4), 0);
    ipl_block_hashes(ipl_hash_chain_start(ipl_hash_key(NULL, "s1")), ids, ntok, 4, want, 64);
    assert_int_equal(r.req.nhashes, nb);
    assert_memory_equal(r.req.hashes, want, nb * sizeof *want);
    decider_http_request_clear(&r);

    /* a tenant the policy isolates: its own salt (with the client's), as the gateway sends it;
     * another tenant's request stays in the shared space */
    char *isolated[] = {"team-a"};
    ipl_policy_t policy = {.cache_isolated_tenants = isolated, .cache_isolated_tenants_len = 1};
    char salt[POLICY_SALT_SIZE];
    const char *tenants[] = {"team-a", "team-b"};
    for (int t = 0; t < 2; t++) {
        char doc[512];
        snprintf(doc, sizeof doc,
                 "{\"model\":\"m\",\"tenant\":\"%s\",\"cache_salt\":\"s1\",\"prompt\":\"%s\"}",
                 tenants[t], text);
        assert_int_equal(decider_http_parse(doc, strlen(doc), s_prompt, &r, err, sizeof err), 0);
        assert_int_equal(decider_http_hash_for(&r, s_prompt, &policy, 4), 0);
        const char *key = t == 0 ? policy_isolation_salt("team-a", "s1", salt) : "s1";
        ipl_block_hashes(ipl_hash_chain_start(ipl_hash_key(NULL, key)), ids, ntok, 4, want, 64);
        assert_int_equal(r.req.nhashes, nb);
        assert_memory_equal(r.req.hashes, want, nb * sizeof *want);
        decider_http_request_clear(&r);
    }
    free(ids);
}

static void test_status_block_size_and_render(void **state)
{
    (void)state;
    assert_int_equal(decider_http_status(IPL_ROUTE_OK), 200);
    assert_int_equal(decider_http_status(IPL_ROUTE_NO_POOL), 404);
    assert_int_equal(decider_http_status(IPL_ROUTE_NO_WORKER), 503);
    assert_int_equal(decider_http_status(IPL_ROUTE_NOT_READY), 503);
    assert_int_equal(decider_http_status(IPL_ROUTE_OVERLOADED), 429);
    assert_int_equal(decider_http_status(IPL_ROUTE_BAD_REQUEST), 400);

    ipl_pool_t pool = {.name = "chat", .model = "m", .strategy = ""};
    ipl_worker_t w = {
        .name = "w0", .pool = "chat", .model = "up", .url = "http://w0", .block_size = 32};
    ipl_policy_t p = {.pools = &pool, .pools_len = 1, .workers = &w, .workers_len = 1};
    assert_int_equal(decider_http_block_size(&p, "m"), 32);
    assert_int_equal(decider_http_block_size(&p, "other"), 16);
    assert_int_equal(decider_http_block_size(NULL, "m"), 16);

    decider_candidate_t cand = {.c = {.worker = "w0",
                                      .url = "http://w0",
                                      .predicted_ttft_s = 0.0125,
                                      .cached_tokens = 64,
                                      .running = 1,
                                      .waiting = 2,
                                      .inflight = 3,
                                      .kv_usage = 0.5,
                                      .eligible = true}};
    cand.c.note = cand.note;
    decider_decision_t d = {.status = IPL_ROUTE_OK,
                            .reason = "cache_hit",
                            .strategy = "ttft",
                            .pool = &pool,
                            .worker = &w,
                            .winner = 0,
                            .predicted_ttft_s = 0.0125,
                            .cached_tokens = 64,
                            .state_seq = 9,
                            .cands = &cand,
                            .ncands = 1};
    strcpy(d.detail, "why");
    char *json = decider_http_render(&d, 100);
    cJSON *o = cJSON_Parse(json);
    assert_string_equal(cJSON_GetObjectItem(o, "endpoint")->valuestring, "http://w0");
    assert_string_equal(cJSON_GetObjectItem(o, "worker")->valuestring, "w0");
    assert_string_equal(cJSON_GetObjectItem(o, "model")->valuestring, "up");
    assert_string_equal(cJSON_GetObjectItem(o, "pool")->valuestring, "chat");
    assert_float_equal(cJSON_GetObjectItem(o, "predicted_ttft_ms")->valuedouble, 12.5, 1e-9);
    assert_int_equal(cJSON_GetObjectItem(o, "cached_tokens")->valueint, 64);
    assert_int_equal(cJSON_GetObjectItem(o, "prompt_tokens")->valueint, 100);
    assert_int_equal(cJSON_GetObjectItem(o, "state_seq")->valueint, 9);
    assert_string_equal(cJSON_GetObjectItem(o, "reason")->valuestring, "cache_hit");
    assert_null(cJSON_GetObjectItem(o, "error"));
    cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "candidates"), 0);
    assert_int_equal(cJSON_GetObjectItem(c0, "inflight")->valueint, 3);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(c0, "eligible")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(c0, "chosen")));
    cJSON_Delete(o);
    free(json);

    d.status = IPL_ROUTE_NO_WORKER;
    d.reason = "no_worker";
    d.worker = NULL;
    d.winner = -1;
    json = decider_http_render(&d, 0);
    o = cJSON_Parse(json);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "endpoint")));
    cJSON *e = cJSON_GetObjectItem(o, "error");
    assert_int_equal(cJSON_GetObjectItem(e, "code")->valueint, 503);
    assert_string_equal(cJSON_GetObjectItem(e, "type")->valuestring, "server_error");
    assert_string_equal(cJSON_GetObjectItem(e, "message")->valuestring, "why");
    cJSON_Delete(o);
    free(json);
}

// Collects a response body (NUL-terminated) into a malloc'd buffer.
static size_t s_on_body(char *data, size_t size, size_t n, void *arg)
{
    char **body = arg;
    size_t old = *body ? strlen(*body) : 0, bytes = size * n;
    char *b = realloc(*body, old + bytes + 1);
    assert_non_null(b);
    memcpy(b + old, data, bytes);
    b[old + bytes] = '\0';
    *body = b;
    return bytes;
}

// GET /debug/model serves the router's model (decider_router_model_json).
static void test_debug_model(void **state)
{
    (void)state;
    decider_router_config_t cfg;
    decider_router_config_defaults(&cfg);
    cfg.default_strategy = "least-loaded";
    decider_router_t *router = decider_router_new(&cfg);
    ipl_httpd_t *httpd = ipl_httpd_new("127.0.0.1:0", 0);
    assert_non_null(router);
    assert_non_null(httpd);
    decider_http_register_model(httpd, router);
    assert_int_equal(ipl_httpd_start(httpd), 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/debug/model", ipl_httpd_port(httpd));
    char *body = NULL;
    long status = 0;
    CURL *curl = curl_easy_init();
    assert_non_null(curl);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, s_on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
    assert_int_equal(curl_easy_perform(curl), CURLE_OK);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(curl);
    assert_int_equal(status, 200);
    assert_non_null(body);
    cJSON *o = cJSON_Parse(body);
    assert_non_null(o);
    cJSON *r = cJSON_GetObjectItem(o, "router");
    assert_string_equal(cJSON_GetObjectItem(r, "default_strategy")->valuestring, "least-loaded");
    assert_true(cJSON_IsObject(cJSON_GetObjectItem(o, "predictor")));
    assert_true(cJSON_IsObject(cJSON_GetObjectItem(o, "fallbacks")));
    cJSON_Delete(o);
    free(body);
    ipl_httpd_destroy(&httpd);
    decider_router_destroy(&router);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_block_hashes),
        cmocka_unit_test(test_prompt_and_messages_hash_like_the_gateway),
        cmocka_unit_test(test_status_block_size_and_render),
        cmocka_unit_test(test_debug_model),
    };
    ipl_log_set_level(IPL_LOG_OFF);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    s_prompt = ipl_prompt_open("builtin", NULL, 0);
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    ipl_prompt_destroy(&s_prompt);
    curl_global_cleanup();
    return rc;
}
