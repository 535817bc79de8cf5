/*
 * Unit tests of policy_validate: a YAML body and a JSON {"files": ...} body compile with the
 * service's compiler; errors keep file:line:col; the refusals (400, 413, 415) say how to fix
 * the request; and POST /validate through a real ipl_httpd.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "ipl_log.h"
#include "policy_compiler.h"
#include "policy_digest.h"
#include "policy_validate.h"
#include "tests/ipl_test_http.h"

#define S_SET                                                                                      \
    "apiVersion: inferplane.io/v1alpha1\n"                                                         \
    "kind: InferenceWorkerSet\n"                                                                   \
    "metadata: {name: small}\n"                                                                    \
    "spec: {model: m, workers: [{name: w0, url: 'http://h:1'}]}\n"
#define S_POOL                                                                                     \
    "apiVersion: inferplane.io/v1alpha1\n"                                                         \
    "kind: InferencePool\n"                                                                        \
    "metadata: {name: chat}\n"                                                                     \
    "spec:\n"                                                                                      \
    "  model: m\n"                                                                                 \
    "  strategy: ttft\n"                                                                           \
    "  targets: [{workerSet: small}]\n"

// Runs policy_validate_body and parses the answer, which must be JSON with "valid".
static cJSON *s_validate(const char *type, const char *body, size_t max, int want_status)
{
    char *json = NULL;
    int status = policy_validate_body(type, body, body ? strlen(body) : 0, max, &json);
    if (status != want_status) fprintf(stderr, "status %d: %s\n", status, json ? json : "");
    assert_int_equal(status, want_status);
    assert_non_null(json);
    cJSON *o = cJSON_Parse(json);
    free(json);
    assert_non_null(o);
    assert_true(cJSON_IsBool(cJSON_GetObjectItem(o, "valid")));
    assert_true(cJSON_IsArray(cJSON_GetObjectItem(o, "errors")));
    return o;
}

static const char *s_error(cJSON *o, int i)
{
    cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "errors"), i);
    assert_true(cJSON_IsString(e));
    return e->valuestring;
}

static void test_yaml_body(void **state)
{
    (void)state;
    cJSON *o = s_validate("application/yaml", S_SET "---\n" S_POOL, 1 << 20, 200);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(o, "valid")));
    assert_int_equal(cJSON_GetObjectItem(o, "pools")->valueint, 1);
    assert_int_equal(cJSON_GetObjectItem(o, "worker_sets")->valueint, 1);
    assert_int_equal(cJSON_GetObjectItem(o, "workers")->valueint, 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "errors")), 0);
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "files"), 0)->valuestring,
                        "request.yaml");
    // the hash the service would publish for the same resources
    policy_compiler_t *c = policy_compiler_new();
    policy_compiler_add_string(c, "x.yaml", S_POOL "---\n" S_SET, strlen(S_POOL "---\n" S_SET));
    assert_int_equal(policy_compiler_finish(c, "/some/dir"), 0);
    char hex[POLICY_DIGEST_HEX_LEN];
    assert_string_equal(cJSON_GetObjectItem(o, "hash")->valuestring,
                        policy_digest_hex(policy_compiler_policy(c)->hash, hex));
    policy_compiler_destroy(&c);
    cJSON_Delete(o);

    // Other YAML media types, with parameters.
    o = s_validate("text/yaml; charset=utf-8", S_SET "---\n" S_POOL, 1 << 20, 200);
    cJSON_Delete(o);
    o = s_validate(" Application/X-YAML", S_SET "---\n" S_POOL, 1 << 20, 200);
    cJSON_Delete(o);

    // An error: 422 with the compiler's file:line:col: what; how to fix.
    char *bad = strdup(S_SET "---\n" S_POOL);
    memcpy(strstr(bad, "ttft"), "ttfx", 4);
    o = s_validate("application/yaml", bad, 1 << 20, 422);
    assert_false(cJSON_IsTrue(cJSON_GetObjectItem(o, "valid")));
    assert_null(cJSON_GetObjectItem(o, "hash"));
    assert_true(strstr(s_error(o, 0), "request.yaml:11:13: InferencePool \"chat\": spec.strategy "
                                      "\"ttfx\" is not a known strategy; did you mean \"ttft\"?") ==
                s_error(o, 0));
    cJSON_Delete(o);
    free(bad);
    o = s_validate("application/yaml", "", 1 << 20, 422); // nothing in it
    assert_non_null(strstr(s_error(o, 0), "no InferencePool is defined"));
    cJSON_Delete(o);
}

static void test_json_files(void **state)
{
    (void)state;
    cJSON *req = cJSON_CreateObject();
    cJSON *files = cJSON_AddObjectToObject(req, "files");
    cJSON_AddStringToObject(files, "sets.yaml", S_SET);
    cJSON_AddStringToObject(files, "pools.yaml", S_POOL);
    char *body = cJSON_PrintUnformatted(req);
    cJSON *o = s_validate("application/json", body, 1 << 20, 200);
    cJSON *names = cJSON_GetObjectItem(o, "files");
    assert_string_equal(cJSON_GetArrayItem(names, 0)->valuestring, "pools.yaml"); // name order
    assert_string_equal(cJSON_GetArrayItem(names, 1)->valuestring, "sets.yaml");
    cJSON_Delete(o);
    free(body);

    // An error names its file.
    cJSON_ReplaceItemInObject(
        files, "pools.yaml",
        cJSON_CreateString("apiVersion: inferplane.io/v1alpha1\n"
                           "kind: InferencePool\n"
                           "metadata: {name: chat}\n"
                           "spec: {model: m, targets: [{workerSet: big}]}\n"));
    body = cJSON_PrintUnformatted(req);
    o = s_validate("application/json; charset=utf-8", body, 1 << 20, 422);
    assert_non_null(strstr(s_error(o, 0), "pools.yaml:4:40: InferencePool \"chat\": "
                                          "spec.targets[0].workerSet \"big\" does not exist"));
    cJSON_Delete(o);
    free(body);
    cJSON_Delete(req);

    // Malformed requests: 400, saying what the form is.
    static const struct {
        const char *body, *says;
    } bad[] = {
        {"{\"files\": ", "not valid JSON"},
        {"[1]", "not a JSON object"},
        {"{\"file\": {}}", "without a \"files\" object"},
        {"{\"files\": {\"a.yaml\": 3}}", "\"a.yaml\" must be a string"},
        {"{\"files\": {\"../a.yaml\": \"x\"}}", "is not a file name"},
        {"{\"files\": {\"\": \"x\"}}", "is not a file name"},
        {"{\"files\": {\"a\\nb.yaml\": \"x\"}}", "is not a file name"},
        {"{\"files\": {\"a.yaml\": \"x\", \"a.yaml\": \"y\"}}", "given twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o = s_validate("application/json", bad[i].body, 1 << 20, 400);
        assert_false(cJSON_IsTrue(cJSON_GetObjectItem(o, "valid")));
        assert_non_null(strstr(s_error(o, 0), bad[i].says));
        cJSON_Delete(o);
    }
}

static void test_refusals(void **state)
{
    (void)state;
    static const char *types[] = {NULL, "", "text/plain", "application/yamlx",
                                  "application/x-www-form-urlencoded"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        cJSON *o = s_validate(types[i], S_SET, 1 << 20, 415);
        assert_non_null(strstr(s_error(o, 0), "send the YAML as application/yaml"));
        cJSON_Delete(o);
    }
    cJSON *o = s_validate("application/yaml", S_SET, 100, 413);
    assert_non_null(strstr(s_error(o, 0), "above the 100-byte limit"));
    cJSON_Delete(o);
    o = s_validate("application/yaml", "a: 1\n", 5, 422); // at the limit: compiled
    cJSON_Delete(o);
}

// POST /validate through a real server: the handler reads the body and the content type.
static void test_http(void **state)
{
    (void)state;
    ipl_httpd_t *httpd = ipl_httpd_new("127.0.0.1:0", 0);
    assert_non_null(httpd);
    ipl_httpd_route(httpd, "POST", "/validate", policy_validate_http, NULL);
    assert_int_equal(ipl_httpd_start(httpd), 0);
    int port = ipl_httpd_port(httpd);
    const char *yaml[] = {"Content-Type: application/yaml", NULL};
    const char *plain[] = {"Content-Type: text/plain", NULL};
    const char *doc = S_SET "---\n" S_POOL;
    s_reply_t r = {0};
    assert_int_equal(s_http_ex(port, "POST", "/validate", doc, strlen(doc), yaml, false, &r),
                     CURLE_OK);
    assert_int_equal(r.status, 200);
    char ct[128];
    assert_string_equal(s_reply_header(&r, "Content-Type", ct, sizeof ct), "application/json");
    assert_non_null(strstr(r.body, "\"valid\":true"));
    s_reply_free(&r);
    memset(&r, 0, sizeof r);
    assert_int_equal(s_http_ex(port, "POST", "/validate", "kind: [\n", 8, yaml, true, &r),
                     CURLE_OK); // chunked upload too
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "[\"request.yaml:"));
    assert_non_null(strstr(r.body, "YAML syntax error"));
    s_reply_free(&r);
    memset(&r, 0, sizeof r);
    assert_int_equal(s_http_ex(port, "POST", "/validate", doc, strlen(doc), plain, false, &r),
                     CURLE_OK);
    assert_int_equal(r.status, 415);
    s_reply_free(&r);
    ipl_httpd_destroy(&httpd);
}

int main(void)
{
    ipl_log_set_level(IPL_LOG_OFF);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yaml_body),
        cmocka_unit_test(test_json_files),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_http),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
