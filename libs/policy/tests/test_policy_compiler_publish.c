/*
 * Unit tests of what policy_compiler publishes in POLICY beyond pools and workers (backends,
 * providers and their models, pool targets and SLOs, rules, aliases and their targets,
 * limits): examples/policy-full compiles to a POLICY that encodes, decodes and shows every
 * part in /debug/policy's JSON, never a secret's value; the order is deterministic, so equal
 * inputs hash equally across compiles and file orders; and a change to any one resource
 * (only a rule, only a backend, ...) changes the hash.
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

#include "ipl_error.h"
#include "policy_compiler.h"
#include "policy_digest.h"

static const char *const s_files[] = {"backends.yaml", "policy.yaml", "pools.yaml",
                                      "providers.yaml", "workers.yaml"};
#define S_NFILES (sizeof s_files / sizeof s_files[0])

static char *s_text[S_NFILES];

// examples/policy-full/<name>, read once: __FILE__ is <root>/libs/policy/tests/<this file>.
static char *s_read_example(const char *name)
{
    const char *file = __FILE__, *tail = strstr(file, "libs/policy/tests/");
    char path[700];
    snprintf(path, sizeof path, "%.*sexamples/policy-full/%s", tail ? (int)(tail - file) : 0, file,
             name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = malloc(1 << 20);
    assert_non_null(buf);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static int s_setup(void **state)
{
    (void)state;
    for (size_t i = 0; i < S_NFILES; i++)
        s_text[i] = s_read_example(s_files[i]);
    return 0;
}

static int s_teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < S_NFILES; i++)
        free(s_text[i]);
    return 0;
}

// The example's files as strings, in order (reversed when `reverse`), with the first `from`
// in file `file` replaced by `to` (file NULL: unchanged). Asserts it compiles.
static policy_compiler_t *s_compile(bool reverse, const char *file, const char *from,
                                    const char *to)
{
    policy_compiler_t *c = policy_compiler_new();
    for (size_t k = 0; k < S_NFILES; k++) {
        size_t i = reverse ? S_NFILES - 1 - k : k;
        const char *text = s_text[i];
        char *edited = NULL;
        if (file && !strcmp(file, s_files[i])) {
            const char *at = strstr(text, from);
            assert_non_null(at); // the edit must apply: otherwise the test proves nothing
            size_t head = (size_t)(at - text), n = strlen(text) + strlen(to) + 1;
            edited = malloc(n);
            snprintf(edited, n, "%.*s%s%s", (int)head, text, to, at + strlen(from));
            text = edited;
        }
        assert_int_equal(policy_compiler_add_string(c, s_files[i], text, strlen(text)), 0);
        free(edited);
    }
    int n = policy_compiler_finish(c, "examples/policy-full");
    for (size_t i = 0; n && i < policy_compiler_nerrors(c); i++)
        print_error("%s\n", policy_compiler_error(c, i));
    assert_int_equal(n, 0);
    return c;
}

static uint64_t s_hash(const char *file, const char *from, const char *to)
{
    policy_compiler_t *c = s_compile(false, file, from, to);
    uint64_t h = policy_compiler_policy(c)->hash;
    assert_true(h == policy_digest_hash(policy_compiler_policy(c)));
    policy_compiler_destroy(&c);
    return h;
}

static cJSON *s_at(cJSON *root, const char *array, int i)
{
    cJSON *a = cJSON_GetObjectItem(root, array);
    assert_true(cJSON_IsArray(a));
    cJSON *o = cJSON_GetArrayItem(a, i);
    assert_non_null(o);
    return o;
}

static const char *s_get(cJSON *o, const char *key)
{
    cJSON *v = cJSON_GetObjectItem(o, key);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

static double s_num(cJSON *o, const char *key)
{
    cJSON *v = cJSON_GetObjectItem(o, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

// Every published array has what the compiler's accessors hold, in their order.
static void s_check_arrays(const ipl_policy_t *p, const policy_compiler_t *c)
{
    assert_int_equal(p->backends_len, policy_compiler_nbackends(c));
    assert_int_equal(p->providers_len, policy_compiler_nproviders(c));
    assert_int_equal(p->rules_len, policy_compiler_nrules(c));
    assert_int_equal(p->aliases_len, policy_compiler_naliases(c));
    assert_int_equal(p->limits_len, policy_compiler_nlimits(c));
    size_t models = 0, targets = 0, atargets = 0;
    for (size_t i = 0; i < policy_compiler_nproviders(c); i++)
        models += policy_compiler_providers_at(c, i)->nmodels;
    for (size_t i = 0; i < policy_compiler_npools(c); i++)
        targets += policy_compiler_pools_at(c, i)->ntargets;
    for (size_t i = 0; i < policy_compiler_naliases(c); i++)
        atargets += policy_compiler_aliases_at(c, i)->ntargets;
    assert_int_equal(p->provider_models_len, models);
    assert_int_equal(p->pool_targets_len, targets);
    assert_int_equal(p->alias_targets_len, atargets);
    for (uint32_t i = 0; i < p->rules_len; i++) {
        assert_string_equal(p->rules[i].name, policy_compiler_rules_at(c, i)->name);
        assert_string_equal(p->rules[i].policy, policy_compiler_rules_at(c, i)->policy);
    }
    for (uint32_t i = 0; i < p->backends_len; i++)
        assert_string_equal(p->backends[i].name, policy_compiler_backends_at(c, i)->name);
    for (uint32_t i = 0; i < p->limits_len; i++)
        assert_string_equal(p->limits[i].tenant, policy_compiler_limits_at(c, i)->tenant);
}

static void test_policy_full_is_published(void **state)
{
    (void)state;
    setenv("STANDIN_API_KEY", "never-on-the-wire-7f3a", 1); // the stand-in backend's secret
    policy_compiler_t *c = s_compile(false, NULL, NULL, NULL);
    const ipl_policy_t *compiled = policy_compiler_policy(c);
    s_check_arrays(compiled, c);

    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    assert_int_equal(ipl_msg_encode(IPL_MSG_POLICY, compiled, &buf), IPL_OK);
    assert_null(memmem(buf.data, buf.size, "never-on-the-wire", 17));
    ipl_msg_t msg;
    assert_int_equal(ipl_msg_decode(buf.data, buf.size, &msg), IPL_OK);
    const ipl_policy_t *p = &msg.u.policy;
    s_check_arrays(p, c);
    assert_true(policy_digest_hash(p) == compiled->hash); // the receiver computes the same

    // workers: the large set's serve /v1/messages themselves (spec.apis), the small set's not
    for (uint32_t i = 0; i < p->workers_len; i++)
        assert_int_equal(p->workers[i].messages_api, !strcmp(p->workers[i].worker_set, "large"));

    // labels: the detectors, the threshold, the rules and the classes, by policy
    assert_string_equal(p->label_detectors, "email,phone,iban,card,ssn,cz_birth_number,ua_tax_id");
    assert_int_equal(p->label_threshold_percent, 60);
    assert_int_equal(p->label_rules_len, 2);
    assert_string_equal(p->label_rules[0].label, "code");
    assert_true(p->label_rules[0].substring);
    assert_int_equal(p->label_rules[0].keywords_len, 3);
    assert_string_equal(p->label_rules[1].regex, "invoice|remittance|wire transfer");
    assert_true(p->label_rules[1].icase);
    assert_int_equal(p->label_classes_len, 2);
    assert_string_equal(p->label_classes[1].label, "complex");
    assert_int_equal(p->label_classes[1].examples_len, 3);
    assert_string_equal(p->label_classes[0].policy, "routing");

    // backends: by name; the secret's source, never its value
    assert_int_equal(p->backends_len, 2);
    const ipl_backend_t *b = &p->backends[0];
    assert_string_equal(b->name, "cloud-openai");
    assert_string_equal(b->url, "https://api.cloud.example.com/v1");
    assert_string_equal(b->protocol, "openai");
    assert_string_equal(b->auth, "bearer");
    assert_string_equal(b->secret_source, "secretRef");
    assert_string_equal(b->secret_name, "cloud-credentials");
    assert_string_equal(b->secret_key, "token");
    assert_false(b->insecure_skip_verify);
    assert_int_equal(b->connect_ms, 2000);
    assert_int_equal(b->response_ms, 60000);
    assert_int_equal(b->max_connections, 128);
    b = &p->backends[1];
    assert_string_equal(b->name, "stand-in");
    assert_string_equal(b->auth, "header");
    assert_string_equal(b->auth_header, "x-api-key");
    assert_string_equal(b->secret_source, "env");
    assert_string_equal(b->secret_name, "STANDIN_API_KEY");
    assert_string_equal(b->secret_key, "");
    assert_int_equal(b->max_connections, POLICY_DEFAULT_MAX_CONNECTIONS);

    // providers and their models (remote name defaulting to the local one)
    assert_int_equal(p->providers_len, 2);
    assert_string_equal(p->providers[0].name, "burst");
    assert_string_equal(p->providers[0].backend, "stand-in");
    assert_int_equal(p->providers[0].latency_hint_ms, 150);
    const ipl_provider_t *cloud = &p->providers[1];
    assert_string_equal(cloud->name, "cloud");
    assert_int_equal(cloud->input_micros_per_mtok, 150000);
    assert_int_equal(cloud->output_micros_per_mtok, 600000);
    assert_int_equal(cloud->concurrent_requests, 64);
    assert_int_equal(cloud->tokens_per_minute, 2000000);
    assert_int_equal(p->provider_models_len, 3);
    assert_string_equal(p->provider_models[0].provider, "burst");
    assert_string_equal(p->provider_models[0].remote_name, "small-model");
    assert_string_equal(p->provider_models[2].name, "large-model");
    assert_string_equal(p->provider_models[2].remote_name, "vendor/large-70b");

    // pools: SLO, and targets by pool then list order
    assert_int_equal(p->pools[0].ttft_slo_ms, 800);
    assert_int_equal(p->pools[1].ttft_slo_ms, 2000);
    assert_int_equal(p->pool_targets_len, 5);
    const ipl_pool_target_t *t = &p->pool_targets[0];
    assert_string_equal(t->pool, "chat");
    assert_string_equal(t->kind, "workerSet");
    assert_string_equal(t->name, "small");
    assert_string_equal(t->role, "primary");
    assert_int_equal(t->weight, 3);
    t = &p->pool_targets[2];
    assert_string_equal(t->kind, "provider");
    assert_string_equal(t->name, "burst");
    assert_string_equal(t->role, "overflow");
    assert_string_equal(p->pool_targets[4].pool, "large");

    // rules in evaluation order: guardrails (priority 100) before routing (10)
    assert_int_equal(p->rules_len, 8);
    const ipl_rule_t *r = &p->rules[0];
    assert_string_equal(r->policy, "guardrails");
    assert_string_equal(r->name, "pii-stays-local");
    assert_string_equal(r->action, "keepLocal");
    assert_int_equal(r->labels_len, 1);
    assert_string_equal(r->labels[0], "pii");
    assert_string_equal(r->reason, "personal data is processed on local workers only");
    r = &p->rules[1];
    assert_string_equal(r->action, "reject");
    assert_int_equal(r->status, 403);
    assert_string_equal(r->tenants[0], "suspended-team");
    assert_int_equal(p->rules[2].prompt_min, 100000);
    assert_true(p->rules[2].prompt_max == UINT64_MAX);
    r = &p->rules[3];
    assert_string_equal(r->name, "nightly-batch");
    assert_string_equal(r->action, "admitBatch");
    assert_int_equal(r->max_utilization_percent, 60);
    assert_int_equal(r->headers_len, 1);
    assert_string_equal(r->headers[0], "x-inferplane-class=batch");
    assert_true(r->has_time);
    assert_int_equal(r->days, 0x1f);
    assert_int_equal(r->from_minute, 22 * 60);
    assert_int_equal(r->to_minute, 6 * 60);
    r = &p->rules[4];
    assert_string_equal(r->action, "spill");
    assert_string_equal(r->provider, "burst");
    assert_true(r->while_above_slo);
    assert_int_equal(r->predicted_ttft_above_slo, 0); // unset: the rule matches below the SLO too
    assert_int_equal(r->enter_percent, 100);
    assert_int_equal(r->exit_percent, 80);
    assert_int_equal(r->min_hold_ms, 5000);
    r = &p->rules[5];
    assert_string_equal(r->action, "route");
    assert_string_equal(r->pool, "large");
    assert_int_equal(r->targets_len, 1);
    assert_string_equal(r->targets[0], "cloud");
    assert_true(r->has_queue_depth && r->has_kv_utilization);
    assert_int_equal(r->queue_depth_above, 32);
    assert_int_equal(r->kv_utilization_above_percent, 90);
    r = &p->rules[6];
    assert_string_equal(r->action, "prefer");
    assert_string_equal(r->target, "small");
    assert_string_equal(r->unless_holder, "large");
    assert_int_equal(r->models_len, 2);
    assert_int_equal(r->prompt_max, 4000);
    assert_int_equal(p->rules[7].index, 4);

    // aliases by name, their targets, limits by tenant ("*" first)
    assert_int_equal(p->aliases_len, 2);
    assert_string_equal(p->aliases[0].name, "assistant");
    assert_string_equal(p->aliases[1].name, "chat");
    assert_int_equal(p->aliases[1].failover_len, 1);
    assert_string_equal(p->aliases[1].failover[0], "large-model");
    assert_int_equal(p->alias_targets_len, 3);
    assert_string_equal(p->alias_targets[0].alias, "assistant");
    assert_string_equal(p->alias_targets[2].kind, "pool");
    assert_string_equal(p->alias_targets[2].name, "large");
    assert_int_equal(p->alias_targets[1].weight, 9);
    assert_int_equal(p->limits_len, 2);
    assert_string_equal(p->limits[0].tenant, "*");
    assert_int_equal(p->limits[0].concurrent_requests, 4);
    assert_string_equal(p->limits[1].tenant, "team-a");
    assert_int_equal(p->limits[1].input_tokens_per_minute, 2000000);
    assert_int_equal(p->limits[1].output_tokens_per_minute, 200000);

    // /debug/policy shows every part, and no secret
    cJSON *root = policy_digest_json(p);
    assert_non_null(root);
    char *text = cJSON_PrintUnformatted(root);
    assert_null(strstr(text, "never-on-the-wire"));
    free(text);
    cJSON *pool = s_at(root, "pools", 0);
    assert_int_equal(s_num(pool, "ttft_slo_ms"), 800);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(pool, "targets")), 4);
    assert_string_equal(s_get(s_at(root, "backends", 1), "secret_source"), "env");
    assert_string_equal(s_get(s_at(root, "providers", 1), "backend"), "cloud-openai");
    assert_string_equal(s_get(s_at(root, "provider_models", 2), "remote_name"), "vendor/large-70b");
    assert_string_equal(s_get(s_at(root, "pool_targets", 4), "pool"), "large");
    cJSON *rule = s_at(root, "rules", 3);
    assert_string_equal(s_get(rule, "name"), "nightly-batch");
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(rule, "headers"), 0)->valuestring,
                        "x-inferplane-class=batch");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(rule, "has_time")));
    assert_string_equal(s_get(s_at(root, "aliases", 1), "name"), "chat");
    assert_string_equal(s_get(s_at(root, "alias_targets", 2), "kind"), "pool");
    assert_int_equal(s_num(s_at(root, "limits", 1), "requests_per_minute"), 600);
    cJSON_Delete(root);

    ipl_msg_clear(&msg);
    msgpack_sbuffer_destroy(&buf);
    policy_compiler_destroy(&c);
    unsetenv("STANDIN_API_KEY");
}

// The same resources give the same bytes and hash, whatever the order of the files.
static void test_equal_inputs_publish_equally(void **state)
{
    (void)state;
    policy_compiler_t *a = s_compile(false, NULL, NULL, NULL);
    policy_compiler_t *b = s_compile(true, NULL, NULL, NULL);
    const ipl_policy_t *pa = policy_compiler_policy(a), *pb = policy_compiler_policy(b);
    assert_true(pa->hash != 0);
    assert_true(pa->hash == pb->hash);
    msgpack_sbuffer x, y;
    msgpack_sbuffer_init(&x);
    msgpack_sbuffer_init(&y);
    assert_int_equal(ipl_msg_encode(IPL_MSG_POLICY, pa, &x), IPL_OK);
    assert_int_equal(ipl_msg_encode(IPL_MSG_POLICY, pb, &y), IPL_OK);
    assert_int_equal(x.size, y.size);
    assert_memory_equal(x.data, y.data, x.size);
    msgpack_sbuffer_destroy(&x);
    msgpack_sbuffer_destroy(&y);
    policy_compiler_destroy(&a);
    policy_compiler_destroy(&b);
}

// One edit in one resource, pools and workers untouched (but for the SLO): a new hash each.
static void test_any_published_change_changes_the_hash(void **state)
{
    (void)state;
    static const struct {
        const char *file, *from, *to;
    } edits[] = {
        {"policy.yaml", "maxUtilizationPercent: 60", "maxUtilizationPercent: 61"}, // a rule
        {"policy.yaml", "tenant suspended;", "tenant blocked;"},                   // a reason
        {"policy.yaml", "value: batch", "value: bulk"},                            // a header
        {"policy.yaml", "{model: small-model, weight: 9}", "{model: small-model, weight: 8}"},
        {"policy.yaml", "concurrentRequests: 4}", "concurrentRequests: 5}"}, // a limit
        {"backends.yaml", "connectMs: 2000", "connectMs: 2001"},
        {"backends.yaml", "env: STANDIN_API_KEY", "env: OTHER_KEY"}, // a secret's source
        {"providers.yaml", "latencyHintMs: 150", "latencyHintMs: 151"},
        {"providers.yaml", "vendor/small-8b", "vendor/small-9b"},
        {"pools.yaml", "slo: {ttftMs: 800}", "slo: {ttftMs: 801}"},
        {"pools.yaml", "{provider: burst, role: overflow}", "{provider: burst, role: batch}"},
    };
    uint64_t base = s_hash(NULL, NULL, NULL);
    assert_true(base == s_hash(NULL, NULL, NULL));
    uint64_t seen[sizeof edits / sizeof edits[0]];
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        seen[i] = s_hash(edits[i].file, edits[i].from, edits[i].to);
        assert_true(seen[i] != base);
        for (size_t j = 0; j < i; j++)
            assert_true(seen[i] != seen[j]);
    }
    // a comment is not content
    assert_true(s_hash("policy.yaml", "# Every rule kind", "# Each rule kind") == base);
}

// A policy with none of the new resources publishes them empty; so does NULL's JSON.
static void test_a_minimal_policy_publishes_empty_arrays(void **state)
{
    (void)state;
    static const char yaml[] = "apiVersion: inferplane.io/v1alpha1\n"
                               "kind: InferenceWorkerSet\n"
                               "metadata: {name: small}\n"
                               "spec: {model: m, workers: [{name: w0, url: 'http://h:1'}]}\n"
                               "---\n"
                               "apiVersion: inferplane.io/v1alpha1\n"
                               "kind: InferencePool\n"
                               "metadata: {name: chat}\n"
                               "spec: {model: m, targets: [{workerSet: small}]}\n";
    policy_compiler_t *c = policy_compiler_new();
    assert_int_equal(policy_compiler_add_string(c, "a.yaml", yaml, sizeof yaml - 1), 0);
    assert_int_equal(policy_compiler_finish(c, "a"), 0);
    const ipl_policy_t *p = policy_compiler_policy(c);
    assert_int_equal(p->backends_len + p->providers_len + p->provider_models_len + p->rules_len +
                         p->aliases_len + p->alias_targets_len + p->limits_len,
                     0);
    assert_int_equal(p->pool_targets_len, 1);
    assert_int_equal(p->pools[0].ttft_slo_ms, 0);
    policy_compiler_destroy(&c);
    cJSON *root = policy_digest_json(NULL);
    static const char *const arrays[] = {"backends", "providers", "provider_models", "pool_targets",
                                         "rules",    "aliases",   "alias_targets",   "limits"};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
        cJSON *a = cJSON_GetObjectItem(root, arrays[i]);
        assert_true(cJSON_IsArray(a));
        assert_int_equal(cJSON_GetArraySize(a), 0);
    }
    cJSON_Delete(root);
}

// Workers a selector found carry their pod's node (policy_compiler_set_node, called by
// policy_kube); static workers, and names no worker has, get none; the node is content.
static void test_selected_workers_carry_their_node(void **state)
{
    (void)state;
    static const char yaml[] = "apiVersion: inferplane.io/v1alpha1\n"
                               "kind: InferenceWorkerSet\n"
                               "metadata: {name: small}\n"
                               "spec: {model: m, workers: [{name: w0, url: 'http://h:1'},\n"
                               "                           {name: pod-a, url: 'http://h:2'}]}\n"
                               "---\n"
                               "apiVersion: inferplane.io/v1alpha1\n"
                               "kind: InferencePool\n"
                               "metadata: {name: chat}\n"
                               "spec: {model: m, targets: [{workerSet: small}]}\n";
    uint64_t hashes[3];
    for (int round = 0; round < 3; round++) {
        policy_compiler_t *c = policy_compiler_new();
        assert_int_equal(policy_compiler_add_string(c, "a.yaml", yaml, sizeof yaml - 1), 0);
        if (round > 0) {
            policy_compiler_set_node(c, "nobody", "node-x"); // ignored
            policy_compiler_set_node(c, "w0", "");           // nothing recorded
            policy_compiler_set_node(c, "pod-a", round == 1 ? "node-1" : "node-2");
        }
        assert_int_equal(policy_compiler_finish(c, "a"), 0);
        const ipl_policy_t *p = policy_compiler_policy(c);
        assert_int_equal(p->workers_len, 2);
        assert_string_equal(p->workers[0].name, "w0");
        assert_null(p->workers[0].node);
        assert_string_equal(p->workers[1].name, "pod-a");
        if (round == 0)
            assert_null(p->workers[1].node);
        else
            assert_string_equal(p->workers[1].node, round == 1 ? "node-1" : "node-2");
        hashes[round] = p->hash;
        cJSON *root = policy_digest_json(p);
        cJSON *ws = cJSON_GetObjectItem(root, "workers");
        assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(ws, 0), "node"));
        cJSON *node = cJSON_GetObjectItem(cJSON_GetArrayItem(ws, 1), "node");
        if (round == 0)
            assert_null(node);
        else
            assert_string_equal(cJSON_GetStringValue(node), round == 1 ? "node-1" : "node-2");
        cJSON_Delete(root);
        policy_compiler_destroy(&c);
    }
    assert_true(hashes[0] != hashes[1] && hashes[1] != hashes[2] && hashes[0] != hashes[2]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_full_is_published),
        cmocka_unit_test(test_equal_inputs_publish_equally),
        cmocka_unit_test(test_any_published_change_changes_the_hash),
        cmocka_unit_test(test_a_minimal_policy_publishes_empty_arrays),
        cmocka_unit_test(test_selected_workers_carry_their_node),
    };
    return cmocka_run_group_tests(tests, s_setup, s_teardown);
}
