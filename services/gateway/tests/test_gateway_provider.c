/* Unit tests of gateway_provider: a provider trip from a policy (URL, credentials, TLS,
 * timeouts, refusals) and the response passed on (model rewritten, errors replaced, the
 * secret never in what the client gets). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway_provider.h"
#include "ipl_error.h"

#define SECRET "sk-test-0123456789abcdef"

typedef struct {
    ipl_backend_t backends[2];
    ipl_provider_model_t models[1];
    ipl_policy_t policy;
    gateway_backend_t *reg;
} s_fix_t;

static int s_setup(void **state)
{
    s_fix_t *f = calloc(1, sizeof(*f));
    for (int i = 0; i < 2; i++) {
        ipl_backend_t *b = &f->backends[i];
        b->name = i ? "other" : "cloud-backend";
        b->url = i ? "https://user:pw@api.example.com/v1" : "http://127.0.0.1:9/v1";
        b->protocol = "openai";
        b->auth = "bearer";
        b->auth_header = "";
        b->secret_source = "env";
        b->secret_name = "TEST_PROVIDER_KEY";
        b->secret_key = "";
        b->ca_bundle = "";
        b->ca_secret_name = "";
        b->ca_secret_key = "";
    }
    f->models[0] = (ipl_provider_model_t){"cloud", "chat-model", "remote-chat"};
    f->policy.backends = f->backends;
    f->policy.backends_len = 2;
    f->policy.provider_models = f->models;
    f->policy.provider_models_len = 1;
    f->reg = gateway_backend_new("/nonexistent", NULL);
    setenv("TEST_PROVIDER_KEY", SECRET, 1);
    *state = f;
    return 0;
}

static int s_teardown(void **state)
{
    s_fix_t *f = *state;
    assert_int_equal(gateway_backend_inflight(f->reg, "cloud-backend"), 0);
    gateway_backend_destroy(&f->reg);
    unsetenv("TEST_PROVIDER_KEY");
    free(f);
    return 0;
}

static gateway_provider_route_t s_route(const char *backend, const char *remote)
{
    return (gateway_provider_route_t){.provider = "cloud",
                                      .backend = backend,
                                      .client_model = "chat-model",
                                      .remote_model = remote,
                                      .client_path = "/v1/chat/completions"};
}

static void test_trip(void **state)
{
    s_fix_t *f = *state;
    gateway_api_error_t err = {0};
    gateway_provider_route_t r = s_route("cloud-backend", "");
    gateway_provider_t *p = gateway_provider_new(f->reg, &f->policy, &r, &err);
    assert_non_null(p);
    assert_string_equal(gateway_provider_url(p), "http://127.0.0.1:9/v1/chat/completions");
    assert_string_equal(gateway_provider_shown_url(p), "http://127.0.0.1:9/v1");
    assert_string_equal(gateway_provider_remote_model(p), "remote-chat"); /* from the policy */
    assert_string_equal(gateway_provider_backend(p), "cloud-backend");
    assert_int_equal(gateway_provider_response_timeout_ms(p, 1234), 1234);
    assert_int_equal(gateway_backend_inflight(f->reg, "cloud-backend"), 1);
    const char *extra[] = {"X-Request-Id: r1", "Accept: */*", NULL};
    gateway_xfer_opts_t o;
    gateway_provider_xfer_opts(p, extra, &o);
    assert_string_equal(o.headers[0], "X-Request-Id: r1");
    assert_string_equal(o.headers[1], "Accept: */*");
    assert_string_equal(o.headers[2], "Authorization: Bearer " SECRET);
    assert_null(o.headers[3]);
    assert_int_equal(o.connect_timeout_ms, 0);
    assert_false(o.insecure);
    assert_string_equal(o.ca_bundle, "");
    assert_string_equal(o.shown_url, "http://127.0.0.1:9/v1");
    gateway_provider_destroy(&p);
    assert_null(p);
    assert_int_equal(gateway_backend_inflight(f->reg, "cloud-backend"), 0);

    /* The decider's remote name wins; TLS and timeouts from the backend; no userinfo shown. */
    f->backends[1].insecure_skip_verify = true;
    f->backends[1].ca_bundle = "/etc/ca.pem";
    f->backends[1].connect_ms = 500;
    f->backends[1].response_ms = 30000;
    f->backends[1].auth = "none";
    r = s_route("other", "vendor/x");
    p = gateway_provider_new(f->reg, &f->policy, &r, &err);
    assert_non_null(p);
    assert_string_equal(gateway_provider_remote_model(p), "vendor/x");
    assert_string_equal(gateway_provider_url(p),
                        "https://user:pw@api.example.com/v1/chat/completions");
    assert_string_equal(gateway_provider_shown_url(p), "https://api.example.com/v1");
    assert_int_equal(gateway_provider_response_timeout_ms(p, 1234), 30000);
    gateway_provider_xfer_opts(p, NULL, &o);
    assert_null(o.headers[0]); /* auth none: no credentials */
    assert_int_equal(o.connect_timeout_ms, 500);
    assert_true(o.insecure);
    assert_string_equal(o.ca_bundle, "/etc/ca.pem");
    gateway_provider_destroy(&p);
}

static void test_refusals(void **state)
{
    s_fix_t *f = *state;
    gateway_api_error_t err = {0};
    gateway_provider_route_t r = s_route("missing", "");
    assert_null(gateway_provider_new(f->reg, &f->policy, &r, &err));
    assert_int_equal(err.status, 502);
    assert_string_equal(err.code, "backend_unknown");
    assert_non_null(strstr(err.message, "missing"));
    assert_null(gateway_provider_new(f->reg, NULL, &r, &err)); /* no policy yet */
    assert_string_equal(err.code, "backend_unknown");

    r = s_route("cloud-backend", "");
    f->backends[0].protocol = "anthropic";
    assert_null(gateway_provider_new(f->reg, &f->policy, &r, &err));
    assert_string_equal(err.code, "backend_protocol");
    f->backends[0].protocol = "openai";

    unsetenv("TEST_PROVIDER_KEY");
    assert_null(gateway_provider_new(f->reg, &f->policy, &r, &err));
    assert_string_equal(err.code, "backend_credentials");
    assert_non_null(strstr(err.message, "TEST_PROVIDER_KEY"));
    setenv("TEST_PROVIDER_KEY", SECRET, 1);

    f->backends[0].max_connections = 1;
    gateway_provider_t *held = gateway_provider_new(f->reg, &f->policy, &r, &err);
    assert_non_null(held);
    assert_null(gateway_provider_new(f->reg, &f->policy, &r, &err));
    assert_int_equal(err.status, 503);
    assert_string_equal(err.code, "backend_busy");
    gateway_provider_destroy(&held);
    held = gateway_provider_new(f->reg, &f->policy, &r, &err);
    assert_non_null(held);
    gateway_provider_destroy(&held);
}

/* Feeds `chunks` through begin/write/finish into a pipe; returns what the client got. */
static char *s_pass(gateway_provider_t *p, int status, const char *ctype, const char *const *chunks,
                    const char **answer_type)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    *answer_type = gateway_provider_begin(p, status, ctype);
    for (size_t i = 0; chunks[i]; i++)
        assert_int_equal(gateway_provider_write(p, fds[1], chunks[i], strlen(chunks[i])), 0);
    assert_int_equal(gateway_provider_finish(p, fds[1]), 0);
    close(fds[1]);
    char *out = calloc(1, 65536);
    size_t len = 0;
    ssize_t n;
    while ((n = read(fds[0], out + len, 65535 - len)) > 0)
        len += (size_t)n;
    close(fds[0]);
    return out;
}

static void test_response_rewritten(void **state)
{
    s_fix_t *f = *state;
    gateway_api_error_t err = {0};
    gateway_provider_route_t r = s_route("cloud-backend", "remote-chat");
    gateway_provider_t *p = gateway_provider_new(f->reg, &f->policy, &r, &err);
    const char *sse[] = {"data: {\"id\":\"1\",\"mod", "el\":\"remote-chat\",\"choices\":[]}\n",
                         "\ndata: {\"model\":\"remote-chat\"}\n\ndata: [DONE]\n\n", NULL};
    const char *type = NULL;
    char *out = s_pass(p, 200, "text/event-stream", sse, &type);
    assert_string_equal(type, "text/event-stream");
    assert_string_equal(out, "data: {\"id\":\"1\",\"model\":\"chat-model\",\"choices\":[]}\n\n"
                             "data: {\"model\":\"chat-model\"}\n\ndata: [DONE]\n\n");
    free(out);
    gateway_provider_destroy(&p);

    p = gateway_provider_new(f->reg, &f->policy, &r, &err);
    const char *json[] = {"{\"model\":\"remote-", "chat\",\"usage\":{}}", NULL};
    out = s_pass(p, 200, "application/json", json, &type);
    assert_string_equal(out, "{\"model\":\"chat-model\",\"usage\":{}}");
    free(out);
    gateway_provider_destroy(&p);
}

static void test_errors_replaced(void **state)
{
    s_fix_t *f = *state;
    gateway_api_error_t err = {0};
    gateway_provider_route_t r = s_route("cloud-backend", "remote-chat");
    gateway_provider_t *p = gateway_provider_new(f->reg, &f->policy, &r, &err);
    const char *e401[] = {"{\"error\":{\"message\":\"Incorrect API key provided: " SECRET
                          "\",\"type\":\"invalid_request_error\",\"param\":null,"
                          "\"code\":\"invalid_api_key\"}}",
                          NULL};
    const char *type = NULL;
    char *out = s_pass(p, 401, "application/json", e401, &type);
    assert_string_equal(type, "application/json");
    assert_null(strstr(out, SECRET));
    assert_null(strstr(out, "sk-test"));
    cJSON *root = cJSON_Parse(out);
    assert_non_null(root);
    cJSON *e = cJSON_GetObjectItem(root, "error");
    assert_string_equal(cJSON_GetObjectItem(e, "code")->valuestring, "provider_auth_failed");
    assert_string_equal(cJSON_GetObjectItem(e, "type")->valuestring, "invalid_request_error");
    assert_non_null(strstr(cJSON_GetObjectItem(e, "message")->valuestring, "cloud-backend"));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(e, "param")));
    cJSON_Delete(root);
    free(out);
    gateway_provider_destroy(&p);

    /* Other errors keep the upstream message, cleaned: no secret, the client's model name. */
    p = gateway_provider_new(f->reg, &f->policy, &r, &err);
    const char *e400[] = {"{\"error\":{\"message\":\"The model `remote-chat` cannot take ",
                          "that (key " SECRET ")\",\"type\":\"BadRequestError\",\"param\":"
                          "\"max_tokens\",\"code\":400}}",
                          NULL};
    out = s_pass(p, 400, "application/json", e400, &type);
    assert_null(strstr(out, SECRET));
    assert_null(strstr(out, "remote-chat"));
    root = cJSON_Parse(out);
    e = cJSON_GetObjectItem(root, "error");
    const char *msg = cJSON_GetObjectItem(e, "message")->valuestring;
    assert_non_null(strstr(msg, "The model `chat-model` cannot take that (key [redacted])"));
    assert_non_null(strstr(msg, "provider `cloud` answered HTTP 400"));
    assert_string_equal(cJSON_GetObjectItem(e, "type")->valuestring, "BadRequestError");
    assert_string_equal(cJSON_GetObjectItem(e, "param")->valuestring, "max_tokens");
    assert_string_equal(cJSON_GetObjectItem(e, "code")->valuestring, "provider_error");
    cJSON_Delete(root);
    free(out);
    gateway_provider_destroy(&p);
}

static void test_error_body_shapes(void **state)
{
    (void)state;
    static const struct {
        int status;
        const char *body, *type, *needle;
    } cases[] = {
        {502, "<html>Bad Gateway</html>", "server_error", "not an OpenAI error body"},
        {429, "{\"error\":{\"message\":\"slow down\",\"code\":\"rate_limit\"}}", "rate_limit_error",
         "slow down"},
        {500, "{\"error\":\"boom remote-chat\"}", "server_error", "boom chat-model"},
        {503, "{\"message\":\"overloaded\"}", "server_error", "overloaded"},
        {403, "{\"error\":{\"message\":\"key sk-abc***def is blocked\"}}", "permission_error",
         "refused the credentials"},
        {500, "", "server_error", "answered HTTP 500"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t len = 0;
        char *out = gateway_provider_error_body("cloud", "cloud-backend", cases[i].status,
                                                cases[i].body, strlen(cases[i].body), SECRET,
                                                "remote-chat", "chat-model", &len);
        assert_non_null(out);
        assert_int_equal(strlen(out), len);
        cJSON *root = cJSON_Parse(out);
        if (!root) fail_msg("not JSON: %s", out);
        cJSON *e = cJSON_GetObjectItem(root, "error");
        assert_string_equal(cJSON_GetObjectItem(e, "type")->valuestring, cases[i].type);
        if (!strstr(cJSON_GetObjectItem(e, "message")->valuestring, cases[i].needle))
            fail_msg("case %zu: %s", i, out);
        assert_null(strstr(out, "sk-abc"));
        cJSON_Delete(root);
        free(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_trip, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_response_rewritten, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_errors_replaced, s_setup, s_teardown),
        cmocka_unit_test(test_error_body_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
