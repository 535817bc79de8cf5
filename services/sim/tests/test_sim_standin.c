/*
 * Unit tests of sim_standin: the key check (vLLM's bearer parsing, several keys, x-api-key
 * only when accepted), the latency draw (bounds, seeded), and the counters and history
 * (served vs rejected, by path and model, the ring keeping the last N, reset, header names
 * without values, the bucket cap).
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

#include "sim_standin.h"

static const char *const s_keys[] = {"sk-one", "sk-two"};

static sim_standin_t *s_new(uint32_t nkeys, bool x_api_key, uint32_t history)
{
    sim_standin_config_t cfg = {.api_keys = s_keys,
                                .napi_keys = nkeys,
                                .accept_x_api_key = x_api_key,
                                .history = history,
                                .extra_headers = " X-Custom-Thing , x-api-key,"};
    sim_standin_t *s = sim_standin_new(&cfg);
    assert_non_null(s);
    return s;
}

static void test_key_check_follows_vllm(void **state)
{
    (void)state;
    sim_standin_t *s = s_new(2, false, 0);
    assert_true(sim_standin_requires_key(s));
    assert_int_equal(sim_standin_check(s, NULL, NULL), SIM_AUTH_MISSING);
    assert_int_equal(sim_standin_check(s, "", NULL), SIM_AUTH_MISSING);
    assert_int_equal(sim_standin_check(s, "Basic c2stb25l", NULL), SIM_AUTH_MISSING);
    assert_int_equal(sim_standin_check(s, "Bearer sk-one", NULL), SIM_AUTH_OK);
    assert_int_equal(sim_standin_check(s, "bEaReR sk-two", NULL), SIM_AUTH_OK);
    assert_int_equal(sim_standin_check(s, "Bearer sk-three", NULL), SIM_AUTH_WRONG);
    assert_int_equal(sim_standin_check(s, "Bearer sk-on", NULL), SIM_AUTH_WRONG);
    assert_int_equal(sim_standin_check(s, "Bearer sk-one ", NULL), SIM_AUTH_WRONG);
    assert_int_equal(sim_standin_check(s, "Bearer  sk-one", NULL), SIM_AUTH_WRONG);
    assert_int_equal(sim_standin_check(s, "Bearer", NULL), SIM_AUTH_WRONG);
    assert_int_equal(sim_standin_check(s, "Bearersk-one", NULL), SIM_AUTH_MISSING);
    /* x-api-key is not a credential unless accepted */
    assert_int_equal(sim_standin_check(s, NULL, "sk-one"), SIM_AUTH_MISSING);
    sim_standin_destroy(&s);
    assert_null(s);
    sim_standin_destroy(&s); /* NULL is fine */

    s = s_new(1, true, 0);
    assert_int_equal(sim_standin_check(s, NULL, "sk-one"), SIM_AUTH_OK);
    assert_int_equal(sim_standin_check(s, NULL, "sk-two"), SIM_AUTH_WRONG); /* one key only */
    assert_int_equal(sim_standin_check(s, "Bearer wrong", "sk-one"), SIM_AUTH_OK);
    assert_int_equal(sim_standin_check(s, "Bearer wrong", "bad"), SIM_AUTH_WRONG);
    sim_standin_destroy(&s);

    s = s_new(0, false, 0);
    assert_false(sim_standin_requires_key(s));
    assert_int_equal(sim_standin_check(s, NULL, NULL), SIM_AUTH_NOT_REQUIRED);
    assert_int_equal(sim_standin_check(s, "Bearer anything", NULL), SIM_AUTH_NOT_REQUIRED);
    sim_standin_destroy(&s);
    assert_string_equal(sim_auth_name(SIM_AUTH_WRONG), "wrong");
    assert_string_equal(sim_auth_name(SIM_AUTH_MISSING), "missing");
}

static void test_latency_draws_stay_in_bounds(void **state)
{
    (void)state;
    sim_standin_config_t cfg = {.latency_ms = 40, .jitter_ms = 10, .seed = 7};
    sim_standin_t *a = sim_standin_new(&cfg), *b = sim_standin_new(&cfg);
    assert_non_null(a);
    assert_non_null(b);
    uint32_t lo = UINT32_MAX, hi = 0;
    for (int i = 0; i < 2000; i++) {
        uint32_t x = sim_standin_draw_latency_ms(a);
        assert_int_equal(x, sim_standin_draw_latency_ms(b)); /* seeded: repeatable */
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
    }
    assert_int_equal(lo, 40);
    assert_int_equal(hi, 50);
    sim_standin_destroy(&a);
    sim_standin_destroy(&b);
    cfg.jitter_ms = 0;
    a = sim_standin_new(&cfg);
    assert_int_equal(sim_standin_draw_latency_ms(a), 40);
    sim_standin_destroy(&a);
}

static int s_header_index(const sim_standin_t *s, const char *name)
{
    for (int i = 0; sim_standin_header_name(s, i); i++)
        if (strcmp(sim_standin_header_name(s, i), name) == 0) return i;
    return -1;
}

static void s_record(sim_standin_t *s, const char *path, const char *model, int status,
                     uint32_t prompt, uint32_t completion, uint64_t headers)
{
    sim_standin_note_t n;
    sim_standin_note_init(&n, "POST", path);
    snprintf(n.model, sizeof n.model, "%s", model);
    n.status = status;
    n.auth = status == 401 ? SIM_AUTH_WRONG : SIM_AUTH_OK;
    n.prompt_tokens = prompt;
    n.completion_tokens = completion;
    n.headers = headers;
    n.stream = status == 200;
    sim_standin_record(s, &n);
}

static double s_num(const cJSON *o, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *it = o;
    for (char *tok = strtok(buf, "."); tok; tok = strtok(NULL, "."))
        it = cJSON_GetObjectItemCaseSensitive(it, tok);
    assert_true(cJSON_IsNumber(it));
    return it->valuedouble;
}

static void test_counters_and_history(void **state)
{
    (void)state;
    sim_standin_t *s = s_new(1, false, 3);
    int auth = s_header_index(s, "authorization"), custom = s_header_index(s, "x-custom-thing");
    assert_true(auth >= 0);
    assert_true(custom >= 0);
    assert_int_equal(s_header_index(s, "X-Custom-Thing"), -1); /* kept lower case */
    int n = 0;
    while (sim_standin_header_name(s, n))
        n++;
    int dup = 0;
    for (int i = 0; i < n; i++)
        dup += strcmp(sim_standin_header_name(s, i), "x-api-key") == 0;
    assert_int_equal(dup, 1); /* the extra list's duplicate is dropped */

    s_record(s, "/v1/chat/completions", "remote-a", 401, 0, 0, 1ULL << auth);
    s_record(s, "/v1/chat/completions", "remote-a", 200, 10, 5, (1ULL << auth) | (1ULL << custom));
    s_record(s, "/v1/completions", "remote-b", 200, 3, 2, 0);
    s_record(s, "/v1/completions", "nope", 404, 0, 0, 0);
    cJSON *r = sim_standin_report(s);
    assert_non_null(r);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r, "api_key_required")));
    assert_int_equal(s_num(r, "received"), 4);
    assert_int_equal(s_num(r, "served"), 2);
    assert_int_equal(s_num(r, "rejected"), 2);
    assert_int_equal(s_num(r, "unauthorized"), 1);
    assert_int_equal(s_num(r, "by_status.2xx"), 2);
    assert_int_equal(s_num(r, "by_status.4xx"), 2);
    assert_int_equal(s_num(r, "by_path./v1/chat/completions.received"), 2);
    assert_int_equal(s_num(r, "by_path./v1/chat/completions.served"), 1);
    assert_int_equal(s_num(r, "by_model.remote-a.rejected"), 1);
    assert_int_equal(s_num(r, "by_model.remote-a.prompt_tokens"), 10);
    assert_int_equal(s_num(r, "by_model.remote-b.completion_tokens"), 2);
    assert_int_equal(s_num(r, "tokens.prompt"), 13);
    assert_int_equal(s_num(r, "tokens.completion"), 7);
    const cJSON *last = cJSON_GetObjectItem(r, "last");
    assert_int_equal(cJSON_GetArraySize(last), 3); /* history 3: the first fell out */
    const cJSON *e0 = cJSON_GetArrayItem(last, 0);
    assert_int_equal(s_num(e0, "seq"), 2);
    assert_string_equal(cJSON_GetObjectItem(e0, "outcome")->valuestring, "served");
    assert_string_equal(cJSON_GetObjectItem(e0, "auth")->valuestring, "ok");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(e0, "stream")));
    const cJSON *h = cJSON_GetObjectItem(e0, "headers");
    assert_int_equal(cJSON_GetArraySize(h), 2);
    assert_string_equal(cJSON_GetArrayItem(h, 0)->valuestring, "authorization");
    assert_string_equal(cJSON_GetArrayItem(h, 1)->valuestring, "x-custom-thing");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(last, 2), "outcome")->valuestring,
                        "rejected");
    /* no key material anywhere in the report */
    char *text = cJSON_PrintUnformatted(r);
    assert_null(strstr(text, "sk-one"));
    free(text);
    cJSON_Delete(r);

    sim_standin_reset(s);
    r = sim_standin_report(s);
    assert_int_equal(s_num(r, "received"), 0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r, "last")), 0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r, "by_model")), 0);
    cJSON_Delete(r);
    sim_standin_destroy(&s);
}

static void test_many_models_fall_into_other(void **state)
{
    (void)state;
    sim_standin_t *s = s_new(0, false, 0);
    char name[32];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof name, "m%d", i);
        s_record(s, "/v1/completions", name, 200, 1, 1, 0);
    }
    cJSON *r = sim_standin_report(s);
    const cJSON *by_model = cJSON_GetObjectItem(r, "by_model");
    assert_int_equal(cJSON_GetArraySize(by_model), 65);
    assert_int_equal(s_num(r, "by_model.(other).received"), 36);
    assert_int_equal(s_num(r, "by_model.m63.received"), 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r, "last")), 100);
    cJSON_Delete(r);
    sim_standin_destroy(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_check_follows_vllm),
        cmocka_unit_test(test_latency_draws_stay_in_bounds),
        cmocka_unit_test(test_counters_and_history),
        cmocka_unit_test(test_many_models_fall_into_other),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
