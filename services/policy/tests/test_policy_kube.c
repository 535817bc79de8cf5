/*
 * Unit tests of policy_kube's pieces: the watch-stream parser (lines cut anywhere across
 * chunks, CRLF and blank lines, BOOKMARK, ERROR 410, garbage counted and skipped, a line too
 * long), label selectors, the conditions worked out from real compiler errors, and the status diff
 * (no patch when nothing changed; lastTransitionTime kept while a status stays, renewed when it
 * flips). The client against a real API server is integration/test_policy_kube.py.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_log.h"
#include "policy_compiler.h"
#include "policy_kube.h"

typedef struct {
    int n;
    policy_kube_event_type_t types[16];
    char names[16][64];
    char rvs[16][32];
    int codes[16];
} s_seen_t;

static void s_on_event(void *arg, policy_kube_event_type_t type, cJSON *object, int code)
{
    s_seen_t *s = arg;
    assert_true(s->n < 16);
    s->types[s->n] = type;
    s->codes[s->n] = code;
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(object, "metadata");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");
    const cJSON *rv = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
    snprintf(s->names[s->n], sizeof s->names[0], "%s",
             cJSON_IsString(name) ? name->valuestring : "");
    snprintf(s->rvs[s->n], sizeof s->rvs[0], "%s", cJSON_IsString(rv) ? rv->valuestring : "");
    s->n++;
}

static const char *s_stream =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"InferencePool\",\"metadata\":{\"name\":\"chat\","
    "\"resourceVersion\":\"5\"},\"spec\":{\"model\":\"m\"}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"chat\",\"resourceVersion\":\"6\"}}"
    "}"
    "\r\n"
    "\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"InferencePool\",\"metadata\":"
    "{\"resourceVersion\":\"9\"}}}\n"
    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"chat\",\"resourceVersion\":\"10\"}}"
    "}\n";

static void s_check_stream(const s_seen_t *s)
{
    assert_int_equal(s->n, 4);
    assert_int_equal(s->types[0], POLICY_KUBE_ADDED);
    assert_string_equal(s->names[0], "chat");
    assert_string_equal(s->rvs[0], "5");
    assert_int_equal(s->types[1], POLICY_KUBE_MODIFIED);
    assert_string_equal(s->rvs[1], "6");
    assert_int_equal(s->types[2], POLICY_KUBE_BOOKMARK);
    assert_string_equal(s->rvs[2], "9");
    assert_int_equal(s->types[3], POLICY_KUBE_DELETED);
    assert_string_equal(s->rvs[3], "10");
}

// A stream reporting to `seen`, fed `text` whole; returns the events.
static size_t s_feed_new(policy_kube_stream_t *s, s_seen_t *seen, const char *text)
{
    memset(seen, 0, sizeof *seen);
    policy_kube_stream_init(s, s_on_event, seen);
    return policy_kube_stream_feed(s, text, strlen(text));
}

// The same stream in one chunk, byte by byte, and cut at every position into two chunks.
static void test_stream_split_lines(void **state)
{
    (void)state;
    size_t len = strlen(s_stream);
    s_seen_t seen;
    policy_kube_stream_t s;
    assert_int_equal(s_feed_new(&s, &seen, s_stream), 4);
    s_check_stream(&seen);
    assert_int_equal(s.garbage, 0);

    memset(&seen, 0, sizeof seen);
    size_t events = 0;
    for (size_t i = 0; i < len; i++)
        events += policy_kube_stream_feed(&s, s_stream + i, 1);
    assert_int_equal(events, 4);
    s_check_stream(&seen);

    for (size_t cut = 0; cut <= len; cut++) {
        memset(&seen, 0, sizeof seen);
        policy_kube_stream_feed(&s, s_stream, cut);
        policy_kube_stream_feed(&s, s_stream + cut, len - cut);
        s_check_stream(&seen);
    }
    assert_int_equal(s.garbage, 0);
    assert_int_equal(s.events, 4 * (2 + len + 1));

    // a partial line is held until its newline, and dropped by a reset (a new watch)
    memset(&seen, 0, sizeof seen);
    policy_kube_stream_feed(&s, s_stream, 30);
    assert_int_equal(seen.n, 0);
    policy_kube_stream_reset(&s);
    policy_kube_stream_feed(&s, s_stream + 30, len - 30); // the rest of line 1 is garbage
    assert_int_equal(seen.n, 3);
    assert_int_equal(s.garbage, 1);
    policy_kube_stream_free(&s);
}

static void test_stream_error_410(void **state)
{
    (void)state;
    static const char *gone =
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
        "\"status\":\"Failure\",\"message\":\"too old resource version: 3 (15)\",\"reason\":"
        "\"Expired\",\"code\":410}}\n"
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"message\":\"internal\"}}\n";
    s_seen_t seen;
    policy_kube_stream_t s;
    assert_int_equal(s_feed_new(&s, &seen, gone), 2);
    assert_int_equal(seen.types[0], POLICY_KUBE_ERROR);
    assert_int_equal(seen.codes[0], 410);
    assert_int_equal(seen.types[1], POLICY_KUBE_ERROR);
    assert_int_equal(seen.codes[1], 0);
    policy_kube_stream_free(&s);
}

// Every kind of bad line is counted once and skipped; the events around them still come.
static void test_stream_garbage(void **state)
{
    (void)state;
    static const char *bad = "not json at all\n"
                             "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n"
                             "[1,2,3]\n"
                             "{\"object\":{}}\n"
                             "{\"type\":\"EXPLODED\",\"object\":{}}\n"
                             "{\"type\":\"ADDED\",\"object\":\"a string\"}\n"
                             "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"b\"}}\n"
                             "\x01\x02\xff\xfe\n"
                             "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"c\"}}}\n";
    s_seen_t seen;
    policy_kube_stream_t s;
    assert_int_equal(s_feed_new(&s, &seen, bad), 2);
    assert_int_equal(seen.n, 2);
    assert_string_equal(seen.names[0], "a");
    assert_string_equal(seen.names[1], "c");
    assert_int_equal(s.garbage, 7);

    // a line past max_line is dropped whole, even when it arrives in pieces
    s.max_line = 64;
    s.garbage = 0;
    memset(&seen, 0, sizeof seen);
    char big[300];
    memset(big, 'x', sizeof big);
    for (int i = 0; i < 3; i++)
        policy_kube_stream_feed(&s, big, sizeof big);
    policy_kube_stream_feed(&s, "\n{\"type\":\"BOOKMARK\",\"object\":{}}\n", 34);
    assert_int_equal(s.garbage, 1);
    assert_int_equal(seen.n, 1);
    assert_int_equal(seen.types[0], POLICY_KUBE_BOOKMARK);
    policy_kube_stream_free(&s);
}

// ---- conditions -------------------------------------------------------------------------------

static const char *s_set = "{\"apiVersion\": \"inferplane.io/v1alpha1\",\n"
                           " \"kind\": \"InferenceWorkerSet\",\n"
                           " \"metadata\": {\"name\": \"small\", \"namespace\": \"default\"},\n"
                           " \"spec\": {\"model\": \"m\", \"workers\": [{\"name\": \"w0\",\n"
                           "   \"url\": \"http://127.0.0.1:8100\"}]}}\n";
static const char *s_pool = "{\"apiVersion\": \"inferplane.io/v1alpha1\",\n"
                            " \"kind\": \"InferencePool\",\n"
                            " \"metadata\": {\"name\": \"chat\", \"namespace\": \"default\"},\n"
                            " \"spec\": {\"model\": \"m\",\n"
                            "   \"targets\": [{\"workerSet\": \"big\"}]}}\n";
static const char *s_bad = "{\"apiVersion\": \"inferplane.io/v1alpha1\",\n"
                           " \"kind\": \"InferencePool\",\n"
                           " \"metadata\": {\"name\": \"odd\", \"namespace\": \"default\"},\n"
                           " \"spec\": {\"model\": \"n\", \"colour\": 3,\n"
                           "   \"targets\": [{\"workerSet\": \"small\"}]}}\n";

static void test_want_from_errors(void **state)
{
    (void)state;
    policy_compiler_t *c = policy_compiler_new();
    policy_compiler_add_string(c, "InferenceWorkerSet/default/small", s_set, strlen(s_set));
    policy_compiler_add_string(c, "InferencePool/default/chat", s_pool, strlen(s_pool));
    policy_compiler_add_string(c, "InferencePool/default/odd", s_bad, strlen(s_bad));
    assert_true(policy_compiler_finish(c, "kubernetes") >= 2);

    policy_kube_want_t w;
    policy_kube_want(c, "InferenceWorkerSet/default/small", 3, &w);
    assert_true(w.accepted);
    assert_true(w.resolved);
    assert_string_equal(w.accepted_reason, "Accepted");
    assert_string_equal(w.resolved_reason, "ResolvedRefs");
    assert_int_equal(w.generation, 3);

    policy_kube_want(c, "InferencePool/default/chat", 1, &w); // a reference that does not exist
    assert_false(w.accepted);
    assert_false(w.resolved);
    assert_string_equal(w.accepted_reason, "Invalid");
    assert_string_equal(w.resolved_reason, "RefNotFound");
    assert_non_null(strstr(w.resolved_message, "InferencePool/default/chat:5:"));
    assert_non_null(strstr(w.resolved_message, "\"big\" does not exist"));

    policy_kube_want(c, "InferencePool/default/odd", 1, &w); // a field that does not exist
    assert_false(w.accepted);
    assert_true(w.resolved);
    assert_string_equal(w.accepted_reason, "Invalid");
    assert_non_null(strstr(w.accepted_message, "InferencePool/default/odd:4:"));
    assert_non_null(strstr(w.accepted_message, "colour"));

    // a prefix of another document's name is not that document
    policy_kube_want(c, "InferencePool/default/ch", 1, &w);
    assert_true(w.accepted);
    policy_compiler_destroy(&c);
}

static const cJSON *s_cond(const cJSON *patch, const char *type)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(patch, "status"), "conditions");
    const cJSON *c;
    cJSON_ArrayForEach(c, list)
    {
        if (!strcmp(cJSON_GetObjectItemCaseSensitive(c, "type")->valuestring, type)) return c;
    }
    return NULL;
}

static const char *s_field(const cJSON *c, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, name);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

static void test_status_patch(void **state)
{
    (void)state;
    policy_kube_want_t ok = {.accepted = true,
                             .resolved = true,
                             .accepted_reason = "Accepted",
                             .accepted_message = "",
                             .resolved_reason = "ResolvedRefs",
                             .resolved_message = "",
                             .generation = 2};
    // no status yet: both conditions, observedGeneration on the status and on each
    char *json = policy_kube_status_patch(NULL, &ok, "2026-01-01T00:00:00Z");
    assert_non_null(json);
    cJSON *patch = cJSON_Parse(json);
    free(json);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(patch, "status");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(st, "observedGeneration")->valueint, 2);
    const cJSON *a = s_cond(patch, "Accepted"), *r = s_cond(patch, "ResolvedRefs");
    assert_string_equal(s_field(a, "status"), "True");
    assert_string_equal(s_field(a, "reason"), "Accepted");
    assert_string_equal(s_field(a, "message"), "");
    assert_string_equal(s_field(a, "lastTransitionTime"), "2026-01-01T00:00:00Z");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(a, "observedGeneration")->valueint, 2);
    assert_string_equal(s_field(r, "reason"), "ResolvedRefs");

    // the object now has that status: nothing to write (no write storm)
    cJSON *have = cJSON_Duplicate(st, true);
    assert_null(policy_kube_status_patch(have, &ok, "2026-01-01T00:05:00Z"));

    // a new generation with the same verdict: written, lastTransitionTime kept
    ok.generation = 3;
    json = policy_kube_status_patch(have, &ok, "2026-01-01T00:05:00Z");
    assert_non_null(json);
    cJSON *p2 = cJSON_Parse(json);
    free(json);
    assert_string_equal(s_field(s_cond(p2, "Accepted"), "lastTransitionTime"),
                        "2026-01-01T00:00:00Z");
    cJSON_Delete(p2);

    // the verdict flips: new reason and message, a new lastTransitionTime for Accepted only
    policy_kube_want_t bad = ok;
    bad.accepted = false;
    bad.accepted_reason = "Invalid";
    bad.accepted_message = "InferencePool/default/chat:4:5: spec.colour is not a field";
    json = policy_kube_status_patch(have, &bad, "2026-01-01T00:09:00Z");
    assert_non_null(json);
    cJSON *p3 = cJSON_Parse(json);
    free(json);
    a = s_cond(p3, "Accepted");
    assert_string_equal(s_field(a, "status"), "False");
    assert_string_equal(s_field(a, "reason"), "Invalid");
    assert_string_equal(s_field(a, "message"), bad.accepted_message);
    assert_string_equal(s_field(a, "lastTransitionTime"), "2026-01-01T00:09:00Z");
    assert_string_equal(s_field(s_cond(p3, "ResolvedRefs"), "lastTransitionTime"),
                        "2026-01-01T00:00:00Z");
    // applied, it is the status: nothing more to write
    cJSON *have3 = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(p3, "status"), true);
    assert_null(policy_kube_status_patch(have3, &bad, "2026-01-01T00:10:00Z"));
    // only the message changes: written
    bad.accepted_message = "another error";
    assert_non_null(json = policy_kube_status_patch(have3, &bad, "2026-01-01T00:10:00Z"));
    free(json);

    // a status somebody else wrote (no conditions, odd types) is simply overwritten
    cJSON *odd =
        cJSON_Parse("{\"conditions\": [{\"type\": 7}, \"x\"], \"observedGeneration\": \"3\"}");
    assert_non_null(json = policy_kube_status_patch(odd, &ok, "2026-01-01T00:11:00Z"));
    free(json);
    cJSON_Delete(odd);
    cJSON_Delete(have3);
    cJSON_Delete(p3);
    cJSON_Delete(have);
    cJSON_Delete(patch);
}

// A message longer than the limit is cut in the patch, and the cut message counts as the same.
static void test_status_patch_long_message(void **state)
{
    (void)state;
    char msg[3000];
    memset(msg, 'e', sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    policy_kube_want_t w = {.accepted = false,
                            .resolved = true,
                            .accepted_reason = "Invalid",
                            .accepted_message = msg,
                            .resolved_reason = "ResolvedRefs",
                            .resolved_message = "",
                            .generation = 1};
    char *json = policy_kube_status_patch(NULL, &w, "2026-01-01T00:00:00Z");
    cJSON *patch = cJSON_Parse(json);
    free(json);
    size_t n = strlen(s_field(s_cond(patch, "Accepted"), "message"));
    assert_true(n > 0 && n < sizeof msg - 1);
    assert_null(policy_kube_status_patch(cJSON_GetObjectItemCaseSensitive(patch, "status"), &w,
                                         "2026-01-01T00:01:00Z"));
    cJSON_Delete(patch);
}

static bool s_selects(const char *selector, const char *labels)
{
    cJSON *sel = cJSON_Parse(selector), *lab = labels ? cJSON_Parse(labels) : NULL;
    assert_non_null(sel);
    bool ok = policy_kube_selects(sel, lab);
    cJSON_Delete(sel);
    cJSON_Delete(lab);
    return ok;
}

static void test_selector(void **state)
{
    (void)state;
    const char *pod = "{\"app\": \"vllm\", \"tier\": \"gpu\"}";
    assert_true(s_selects("{\"matchLabels\": {\"app\": \"vllm\"}}", pod));
    assert_false(s_selects("{\"matchLabels\": {\"app\": \"vllm\", \"x\": \"y\"}}", pod));
    assert_false(s_selects("{\"matchLabels\": {\"app\": \"sglang\"}}", pod));
    assert_false(s_selects("{\"matchLabels\": {\"app\": \"vllm\"}}", NULL));
    assert_false(s_selects("{}", pod)); // an empty selector selects nothing here
    const char *in = "{\"matchExpressions\": [{\"key\": \"tier\", \"operator\": \"In\", "
                     "\"values\": [\"cpu\", \"gpu\"]}]}";
    assert_true(s_selects(in, pod));
    assert_false(s_selects(in, "{\"tier\": \"tpu\"}"));
    assert_false(s_selects(in, "{}"));
    const char *notin = "{\"matchExpressions\": [{\"key\": \"tier\", \"operator\": "
                        "\"NotIn\", \"values\": [\"gpu\"]}]}";
    assert_false(s_selects(notin, pod));
    assert_true(s_selects(notin, "{}")); // as in Kubernetes: a missing label is not in the set
    assert_true(s_selects("{\"matchExpressions\": [{\"key\": \"app\", \"operator\": "
                          "\"Exists\"}]}",
                          pod));
    assert_false(s_selects("{\"matchExpressions\": [{\"key\": \"app\", \"operator\": "
                           "\"DoesNotExist\"}]}",
                           pod));
    assert_false(s_selects("{\"matchExpressions\": [{\"key\": \"app\", \"operator\": "
                           "\"Like\"}]}",
                           pod));
    // both parts must hold
    assert_false(s_selects("{\"matchLabels\": {\"app\": \"vllm\"}, \"matchExpressions\": "
                           "[{\"key\": \"tier\", \"operator\": \"DoesNotExist\"}]}",
                           pod));
}

static void test_config_errors(void **state)
{
    (void)state;
    char err[256];
    ipl_metrics_t *m = ipl_metrics_new();
    policy_kube_config_t cfg = {.api = "ftp://x"};
    assert_null(policy_kube_new(&cfg, m, err, sizeof err));
    assert_non_null(strstr(err, "not an http:// or https:// URL"));
    cfg.api = "";
    assert_null(policy_kube_new(&cfg, m, err, sizeof err));
    unsetenv("KUBERNETES_SERVICE_HOST");
    cfg.api = "in-cluster";
    assert_null(policy_kube_new(&cfg, m, err, sizeof err));
    assert_non_null(strstr(err, "KUBERNETES_SERVICE_HOST"));
    // a server that is not there: starts, counts connection errors, stops at once
    cfg.api = "http://127.0.0.1:1";
    cfg.backoff_min_ms = 10;
    policy_kube_t *k = policy_kube_new(&cfg, m, err, sizeof err);
    assert_non_null(k);
    assert_null(policy_kube_take(k));
    policy_kube_destroy(&k);
    assert_null(k);
    ipl_metrics_destroy(&m);
}

int main(void)
{
    ipl_log_set_level(IPL_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_split_lines), cmocka_unit_test(test_stream_error_410),
        cmocka_unit_test(test_stream_garbage),     cmocka_unit_test(test_want_from_errors),
        cmocka_unit_test(test_status_patch),       cmocka_unit_test(test_status_patch_long_message),
        cmocka_unit_test(test_selector),           cmocka_unit_test(test_config_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
