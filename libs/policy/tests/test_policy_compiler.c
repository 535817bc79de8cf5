/*
 * Unit tests of policy_compiler: a valid policy compiles to the expected sorted view, and
 * every error message appears with its file:line:column, the resource and the fix.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "policy_compiler.h"
#include "policy_digest.h"
#include "policy_cases.h"
#include "policy_test.h"

static const char *s_sets =
    "apiVersion: inferplane.io/v1alpha1\n"
    "kind: InferenceWorkerSet\n"
    "metadata: {name: small}\n"
    "spec:\n"
    "  model: sim-model\n"
    "  blockSize: 16\n"
    "  workers:\n"
    "    - name: w1\n"
    "      url: http://127.0.0.1:8101/\n"
    "      kvEvents: tcp://127.0.0.1:5601\n"
    "      replay: tcp://127.0.0.1:5701\n"
    "    - name: w0\n"
    "      url: http://127.0.0.1:8100\n"
    "      metrics: http://127.0.0.1:9100/metrics\n"
    "---\n"
    "apiVersion: inferplane.io/v1alpha1\n"
    "kind: InferenceWorkerSet\n"
    "metadata: {name: big}\n"
    "spec:\n"
    "  model: big-model\n"
    "  blockSize: 32\n"
    "  workers:\n"
    "    - {name: b0, url: http://127.0.0.1:8200, kvEvents: tcp://127.0.0.1:5800}\n";

static const char *s_pools = "apiVersion: inferplane.io/v1alpha1\n"
                             "kind: InferencePool\n"
                             "metadata:\n"
                             "  name: chat\n"
                             "  labels: {team: a}\n"
                             "spec:\n"
                             "  model: sim-model\n"
                             "  strategy: least-loaded\n"
                             "  targets:\n"
                             "    - workerSet: small\n"
                             "---\n"
                             "apiVersion: inferplane.io/v1alpha1\n"
                             "kind: InferencePool\n"
                             "metadata: {name: big-chat}\n"
                             "spec:\n"
                             "  model: big\n"
                             "  targets: [{workerSet: big}]\n";

// Compiles `a` (as a.yaml) and `b` (as b.yaml, may be NULL). The caller destroys.
static policy_compiler_t *s_compile(const char *a, const char *b, int *errors)
{
    policy_compiler_t *c = policy_compiler_new();
    assert_non_null(c);
    policy_compiler_add_string(c, "a.yaml", a, strlen(a));
    if (b) policy_compiler_add_string(c, "b.yaml", b, strlen(b));
    *errors = policy_compiler_finish(c, "test");
    return c;
}

// Asserts that one error of the compilation contains every given fragment.
static void s_expect(const char *a, const char *b, const char *frag1, const char *frag2)
{
    int n;
    policy_compiler_t *c = s_compile(a, b, &n);
    bool found = false;
    for (size_t i = 0; i < policy_compiler_nerrors(c); i++) {
        const char *e = policy_compiler_error(c, i);
        if (strstr(e, frag1) && (!frag2 || strstr(e, frag2))) found = true;
    }
    if (!found) {
        fprintf(stderr, "expected an error with [%s] [%s]; got %d:\n", frag1, frag2 ? frag2 : "",
                n);
        for (size_t i = 0; i < policy_compiler_nerrors(c); i++)
            fprintf(stderr, "  %s\n", policy_compiler_error(c, i));
    }
    assert_true(found);
    assert_true(n > 0);
    assert_null(policy_compiler_policy(c));
    policy_compiler_destroy(&c);
    assert_null(c);
}

// A one-set, one-pool policy with `spec_set` and `spec_pool` as the specs' bodies.
static char *s_doc(const char *set_body, const char *pool_body)
{
    char *out = NULL;
    int rc = asprintf(&out,
                      "apiVersion: inferplane.io/v1alpha1\n"
                      "kind: InferenceWorkerSet\n"
                      "metadata: {name: small}\n"
                      "spec:\n%s"
                      "---\n"
                      "apiVersion: inferplane.io/v1alpha1\n"
                      "kind: InferencePool\n"
                      "metadata: {name: chat}\n"
                      "spec:\n%s",
                      set_body, pool_body);
    assert_true(rc > 0);
    return out;
}

#define S_SET_OK  "  model: m\n  workers:\n    - {name: w0, url: http://h:1}\n"
#define S_POOL_OK "  model: m\n  targets:\n    - workerSet: small\n"

static void s_expect_doc(const char *set_body, const char *pool_body, const char *f1,
                         const char *f2)
{
    char *doc = s_doc(set_body, pool_body);
    s_expect(doc, NULL, f1, f2);
    free(doc);
}

static void test_valid_policy_compiles_sorted(void **state)
{
    (void)state;
    int n;
    policy_compiler_t *c = s_compile(s_pools, s_sets, &n); // order of files must not matter
    for (size_t i = 0; i < policy_compiler_nerrors(c); i++)
        fprintf(stderr, "%s\n", policy_compiler_error(c, i));
    assert_int_equal(n, 0);
    const ipl_policy_t *p = policy_compiler_policy(c);
    assert_non_null(p);
    assert_int_equal(p->version, 0);
    assert_string_equal(p->source, "test");
    assert_int_equal(p->pools_len, 2);
    assert_string_equal(p->pools[0].name, "big-chat");
    assert_string_equal(p->pools[0].model, "big");
    assert_string_equal(p->pools[0].strategy, "");
    assert_string_equal(p->pools[1].name, "chat");
    assert_string_equal(p->pools[1].strategy, "least-loaded");
    assert_int_equal(p->workers_len, 3);
    // sets sorted by name (big, small), workers in file order within a set
    assert_string_equal(p->workers[0].name, "b0");
    assert_string_equal(p->workers[0].pool, "big-chat");
    assert_string_equal(p->workers[0].model, "big-model");
    assert_int_equal(p->workers[0].block_size, 32);
    assert_string_equal(p->workers[0].replay_endpoint, "");
    assert_string_equal(p->workers[0].worker_set, "big"); // the decider's calibration key
    assert_string_equal(p->workers[1].name, "w1");
    assert_string_equal(p->workers[1].worker_set, "small");
    assert_string_equal(p->workers[1].url, "http://127.0.0.1:8101"); // trailing '/' dropped
    assert_string_equal(p->workers[1].metrics_url, "http://127.0.0.1:8101/metrics");
    assert_string_equal(p->workers[1].kv_endpoint, "tcp://127.0.0.1:5601");
    assert_string_equal(p->workers[1].replay_endpoint, "tcp://127.0.0.1:5701");
    assert_int_equal(p->workers[1].block_size, 16);
    assert_string_equal(p->workers[2].name, "w0");
    assert_string_equal(p->workers[2].kv_endpoint, "");
    assert_string_equal(p->workers[2].metrics_url, "http://127.0.0.1:9100/metrics");
    assert_int_equal(policy_compiler_nfiles(c), 2);
    assert_string_equal(policy_compiler_file(c, 0), "a.yaml");
    assert_int_equal(policy_compiler_nwarnings(c), 0);
    assert_int_equal(policy_compiler_nworker_sets(c), 2);
    assert_true(p->hash != 0 && p->hash == policy_digest_hash(p)); // test_policy_digest.c
    policy_compiler_destroy(&c);
}

static void test_default_block_size_and_unused_set_warning(void **state)
{
    (void)state;
    char *doc = s_doc(S_SET_OK, S_POOL_OK);
    const char *extra = "kind: InferenceWorkerSet\n"
                        "apiVersion: inferplane.io/v1alpha1\n"
                        "metadata: {name: spare}\n"
                        "spec: {model: m, workers: [{name: s0, url: 'https://x'}]}\n";
    int n;
    policy_compiler_t *c = s_compile(doc, extra, &n);
    assert_int_equal(n, 0);
    const ipl_policy_t *p = policy_compiler_policy(c);
    assert_int_equal(p->workers_len, 2);
    assert_int_equal(p->workers[1].block_size, POLICY_DEFAULT_BLOCK_SIZE);
    assert_string_equal(p->workers[0].pool, "chat");
    assert_string_equal(p->workers[1].name, "s0");
    assert_string_equal(p->workers[1].pool, ""); // spare: watched, not routed to
    assert_int_equal(policy_compiler_nwarnings(c), 1);
    assert_non_null(
        strstr(policy_compiler_warning(c, 0),
               "b.yaml:3:18: InferenceWorkerSet \"spare\": no InferencePool targets it"));
    policy_compiler_destroy(&c);
    free(doc);
}

static void test_missing_worker_set_reference(void **state)
{
    (void)state;
    const char *pool = "apiVersion: inferplane.io/v1alpha1\n"
                       "kind: InferencePool\n"
                       "metadata: {name: chat}\n"
                       "spec:\n"
                       "  model: sim-model\n"
                       "  targets:\n"
                       "    - workerSet: small\n"
                       "    - workerSet: qwen-big\n";
    const char *set = "apiVersion: inferplane.io/v1alpha1\n"
                      "kind: InferenceWorkerSet\n"
                      "metadata: {name: qwen-small}\n"
                      "spec: {model: m, workers: [{name: w0, url: http://h:1}]}\n";
    s_expect(pool, set,
             "a.yaml:8:18: InferencePool \"chat\": spec.targets[1].workerSet \"qwen-big\" does "
             "not exist",
             "(known: qwen-small)");
    // a close name gets a suggestion
    s_expect(pool, set, "spec.targets[0].workerSet \"small\" does not exist", NULL);
    const char *typo = "apiVersion: inferplane.io/v1alpha1\n"
                       "kind: InferencePool\n"
                       "metadata: {name: chat}\n"
                       "spec: {model: m, targets: [{workerSet: qwen-smal}]}\n";
    s_expect(typo, set, "did you mean \"qwen-small\"?", NULL);
}

static void test_unknown_fields_suggest(void **state)
{
    (void)state;
    s_expect_doc(S_SET_OK, "  model: m\n  strategyy: ttft\n  targets: [{workerSet: small}]\n",
                 "a.yaml:14:3: InferencePool \"chat\": spec.strategyy is not a known field; did "
                 "you mean \"strategy\"?",
                 "(known: model, strategy, targets, slo)");
    s_expect_doc("  model: m\n  workers:\n    - {name: w0, url: http://h:1, kvEvent: tcp://h:2}\n",
                 S_POOL_OK,
                 "spec.workers[0].kvEvent is not a known field; did you mean \"kvEvents\"?", NULL);
    s_expect("apiVersion: inferplane.io/v1alpha1\nkind: InferencePool\nmetadata: {name: p}\n"
             "spek: {}\n",
             NULL,
             "a.yaml:4:1: InferencePool \"p\": spek is not a known field; did you mean \"spec\"?",
             NULL);
    s_expect("apiVersion: inferplane.io/v1alpha1\nkind: InferencePool\n"
             "metadata: {name: p, nmae: x}\nspec: {}\n",
             NULL, "metadata.nmae is not a known field; did you mean \"name\"?", NULL);
    s_expect_doc(S_SET_OK, "  model: m\n  targets: [{workerSet: small, wieght: 2}]\n",
                 "spec.targets[0].wieght is not a known field; did you mean \"weight\"?",
                 "(known: workerSet, provider, role, weight)");
}

static void test_duplicate_worker_names_name_both_places(void **state)
{
    (void)state;
    char *doc = s_doc(S_SET_OK, S_POOL_OK);
    const char *other = "apiVersion: inferplane.io/v1alpha1\n"
                        "kind: InferenceWorkerSet\n"
                        "metadata: {name: zz}\n"
                        "spec:\n"
                        "  model: m\n"
                        "  workers:\n"
                        "    - name: w9\n"
                        "      url: http://h:9\n"
                        "    - name: w0\n"
                        "      url: http://h:2\n";
    s_expect(doc, other,
             "b.yaml:9:13: InferenceWorkerSet \"zz\": spec.workers[1].name \"w0\" is already used "
             "by InferenceWorkerSet \"small\" (spec.workers[0]) at a.yaml:7:14",
             "worker names must be unique in the cluster");
    free(doc);
    // within one set, and a duplicate url
    s_expect_doc("  model: m\n  workers:\n    - {name: w0, url: http://h:1}\n"
                 "    - {name: w0, url: http://h:2}\n",
                 S_POOL_OK,
                 "spec.workers[1].name \"w0\" is already used by InferenceWorkerSet "
                 "\"small\" (spec.workers[0]) at a.yaml:7:14",
                 NULL);
    s_expect_doc("  model: m\n  workers:\n    - {name: w0, url: http://h:1}\n"
                 "    - {name: w1, url: http://h:1/}\n",
                 S_POOL_OK, "spec.workers[1] (\"w1\") has the url http://h:1 of worker \"w0\"",
                 "each worker needs its own url");
}

static void test_duplicate_resources(void **state)
{
    (void)state;
    char *doc = s_doc(S_SET_OK, S_POOL_OK);
    const char *again = "apiVersion: inferplane.io/v1alpha1\n"
                        "kind: InferencePool\n"
                        "metadata: {name: chat}\n"
                        "spec: {model: other, targets: [{workerSet: small}]}\n";
    s_expect(doc, again,
             "b.yaml:3:18: InferencePool \"chat\": metadata.name is already used by the "
             "InferencePool at a.yaml:11:18",
             "rename one of them");
    const char *set_again = "apiVersion: inferplane.io/v1alpha1\n"
                            "kind: InferenceWorkerSet\n"
                            "metadata: {name: small}\n"
                            "spec: {model: m, workers: [{name: x0, url: http://x:1}]}\n";
    s_expect(doc, set_again,
             "InferenceWorkerSet \"small\": metadata.name is already used by the "
             "InferenceWorkerSet at",
             NULL);
    const char *same_model = "apiVersion: inferplane.io/v1alpha1\n"
                             "kind: InferencePool\n"
                             "metadata: {name: chat2}\n"
                             "spec: {model: m, targets: [{workerSet: small}]}\n";
    s_expect(doc, same_model,
             "InferencePool \"chat2\": spec.model \"m\" is already served by InferencePool "
             "\"chat\" at a.yaml:13:10",
             "one pool per model");
    s_expect(doc, same_model, "already belongs to InferencePool \"chat\"",
             "a worker set serves one pool");
    free(doc);
    s_expect_doc(S_SET_OK, "  model: m\n  targets: [{workerSet: small}, {workerSet: small}]\n",
                 "spec.targets[1].workerSet \"small\" is listed twice", NULL);
    s_expect_doc("  model: m\n  workers:\n    - {name: w0, url: http://h:1}\n"
                 "  model: n\n",
                 S_POOL_OK,
                 "a.yaml:8:3: InferenceWorkerSet \"small\": spec.model is given twice "
                 "(first at line 5)",
                 NULL);
}

static void test_block_sizes_must_match_in_pool(void **state)
{
    (void)state;
    char *doc = s_doc(S_SET_OK, "  model: m\n  targets: [{workerSet: small}, {workerSet: big}]\n");
    const char *big = "apiVersion: inferplane.io/v1alpha1\n"
                      "kind: InferenceWorkerSet\n"
                      "metadata: {name: big}\n"
                      "spec: {model: m, blockSize: 32, workers: [{name: b0, url: http://b:1}]}\n";
    s_expect(
        doc, big,
        "a.yaml:14:45: InferencePool \"chat\": spec.targets[1].workerSet \"big\" has blockSize 32 "
        "but \"small\" has 16",
        "the workers of one pool must share a block size");
    free(doc);
}

static void test_bad_values(void **state)
{
    (void)state;
    s_expect_doc(S_SET_OK, "  model: m\n  strategy: ttfx\n  targets: [{workerSet: small}]\n",
                 "a.yaml:14:13: InferencePool \"chat\": spec.strategy \"ttfx\" is not a known "
                 "strategy; did you mean \"ttft\"?",
                 "(known: ttft, oracle, random, round-robin, least-loaded, gie-default, "
                 "dynamo-cost, sglang-cache-aware, prefix-hash)");
    s_expect_doc("  model: m\n  blockSize: sixteen\n  workers: [{name: w0, url: http://h:1}]\n",
                 S_POOL_OK, "spec.blockSize must be a whole number from 1 to 1024, got \"sixteen\"",
                 NULL);
    s_expect_doc("  model: m\n  blockSize: 0\n  workers: [{name: w0, url: http://h:1}]\n",
                 S_POOL_OK, "spec.blockSize must be a whole number from 1 to 1024, got \"0\"",
                 NULL);
    s_expect_doc("  model: m\n  blockSize: [1]\n  workers: [{name: w0, url: http://h:1}]\n",
                 S_POOL_OK, "spec.blockSize must be a whole number from 1 to 1024, got a list",
                 NULL);
    s_expect_doc("  model: m\n  workers: [{name: w0, url: 'h:1'}]\n", S_POOL_OK,
                 "spec.workers[0].url \"h:1\" is not an HTTP URL; write it like http://", NULL);
    s_expect_doc("  model: m\n  workers: [{name: w0, url: http://h:1, kvEvents: 'tcp://h'}]\n",
                 S_POOL_OK, "spec.workers[0].kvEvents \"tcp://h\" is not a ZeroMQ endpoint", NULL);
    s_expect_doc("  model: m\n  workers: [{name: w0, url: http://h:1, replay: 'tcp://h:3'}]\n",
                 S_POOL_OK, "spec.workers[0].replay is set but spec.workers[0].kvEvents is not",
                 NULL);
    s_expect_doc("  model: m\n  workers: [{name: W_0, url: http://h:1}]\n", S_POOL_OK,
                 "spec.workers[0].name \"W_0\" is not a valid name: use lower-case letters", NULL);
    s_expect_doc("  model: m\n  workers: [{url: http://h:1}]\n", S_POOL_OK,
                 "a.yaml:6:13: InferenceWorkerSet \"small\": spec.workers[0].name is required",
                 NULL);
    s_expect_doc("  model: m\n  workers: []\n", S_POOL_OK,
                 "spec.workers is empty; list at least one of workers", NULL);
    s_expect_doc("  model: m\n  workers: {name: w0}\n", S_POOL_OK,
                 "spec.workers must be a list of workers", "got a mapping");
    s_expect_doc("  workers: [{name: w0, url: http://h:1}]\n", S_POOL_OK,
                 "InferenceWorkerSet \"small\": spec.model is required", NULL);
    s_expect_doc("  model: two words\n  workers: [{name: w0, url: http://h:1}]\n", S_POOL_OK,
                 "spec.model \"two words\" is not a model name", NULL);
    s_expect_doc("  model: [m]\n  workers: [{name: w0, url: http://h:1}]\n", S_POOL_OK,
                 "spec.model must be a string, got a list", NULL);
    s_expect_doc("  model: m\n  workers: [{name: w0, url: \"http://h:1\\x01\"}]\n", S_POOL_OK,
                 "spec.workers[0].url contains a control character", NULL);
    s_expect_doc("  model: m\n  workers: [{name: w0, url: http://h:1}]\n", "  model: m\n",
                 "InferencePool \"chat\": spec.targets is required: a list of targets", NULL);
    s_expect_doc(S_SET_OK, "  model: m\n  targets: [small]\n",
                 "spec.targets[0] must be a mapping (key: value lines), got a scalar", NULL);
    s_expect_doc("  model: m\n  workers: [{name: w0, url: http://h:1}]\n",
                 "  model: m\n  targets: [{workerSet: ''}]\n",
                 "spec.targets[0].workerSet is required (it is empty)", NULL);
}

static void test_resource_envelope(void **state)
{
    (void)state;
    s_expect("apiVersion: inferplane.io/v1\nkind: InferencePool\nmetadata: {name: p}\nspec: {}\n",
             NULL,
             "a.yaml:1:13: InferencePool \"p\": apiVersion \"inferplane.io/v1\" is not supported; "
             "use inferplane.io/v1alpha1",
             NULL);
    s_expect("apiVersion: inferplane.io/v1alpha1\nkind: InferencePoool\nmetadata: {name: p}\n"
             "spec: {}\n",
             NULL,
             "a.yaml:2:7: kind \"InferencePoool\" is not known; did you mean \"InferencePool\"?",
             "(known: GatewayBackend, InferencePolicy, InferencePool, InferenceProvider, "
             "InferenceWorkerSet)");
    s_expect("apiVersion: inferplane.io/v1alpha1\nmetadata: {name: p}\nspec: {}\n", NULL,
             "a.yaml:1:1: kind is required", NULL);
    s_expect("kind: InferencePool\nmetadata: {name: p}\nspec: {}\n", NULL,
             "a.yaml:1:1: InferencePool \"p\": apiVersion is required", NULL);
    s_expect("apiVersion: inferplane.io/v1alpha1\nkind: InferencePool\nspec: {}\n", NULL,
             "a.yaml:1:1: InferencePool (unnamed): metadata is required", NULL);
    s_expect("apiVersion: inferplane.io/v1alpha1\nkind: InferencePool\nmetadata: {labels: {}}\n"
             "spec: {}\n",
             NULL, "InferencePool (unnamed): metadata.name is required", NULL);
    s_expect("apiVersion: inferplane.io/v1alpha1\nkind: InferencePool\nmetadata: {name: p}\n", NULL,
             "a.yaml:1:1: InferencePool \"p\": spec is required", NULL);
    s_expect("- a\n- b\n", NULL,
             "a.yaml:1:1: a resource must be a mapping with apiVersion, kind, metadata and spec; "
             "got a list",
             NULL);
    s_expect("apiVersion: inferplane.io/v1alpha1\nkind: InferencePool\nmetadata: [p]\nspec: {}\n",
             NULL, "metadata must be a mapping (key: value lines), got a list", NULL);
    s_expect("apiVersion: inferplane.io/v1alpha1\nkind: InferencePool\nmetadata: {name: p}\n"
             "spec: {model: m, targets: [{workerSet: s}]}\n"
             "? [a]\n: b\n",
             NULL, "keys must be plain names, got a list", NULL);
}

static void test_yaml_syntax_error_has_place(void **state)
{
    (void)state;
    s_expect("apiVersion: inferplane.io/v1alpha1\nkind: InferencePool\nmetadata:\n  name: p\n"
             " spec: x\n",
             NULL, "a.yaml:5:", "YAML syntax error");
    s_expect("a: [1, 2\n", NULL, "a.yaml:2:1: YAML syntax error: did not find expected ',' or ']'",
             "(line 1, column 4)");
    s_expect("a: \"unterminated\n", NULL, "YAML syntax error", NULL);
}

static void test_no_pool_and_no_files(void **state)
{
    (void)state;
    s_expect("apiVersion: inferplane.io/v1alpha1\nkind: InferenceWorkerSet\nmetadata: {name: s}\n"
             "spec: {model: m, workers: [{name: w0, url: http://h:1}]}\n",
             NULL, "a.yaml:1:1: no InferencePool is defined", NULL);
    // an empty directory, an unreadable file
    char dir[] = "/tmp/test_policy_compiler_XXXXXX";
    assert_non_null(mkdtemp(dir));
    policy_compiler_t *c = policy_compiler_new();
    assert_int_equal(policy_compiler_add_dir(c, dir), 1);
    assert_non_null(strstr(policy_compiler_error(c, 0), "no *.yaml files in the policy directory"));
    assert_int_equal(policy_compiler_add_file(c, "/nonexistent/x.yaml", "x.yaml"), 1);
    assert_non_null(strstr(policy_compiler_error(c, 1), "x.yaml:1:1: cannot read the file"));
    assert_int_equal(policy_compiler_add_dir(c, "/nonexistent-dir"), 1);
    assert_non_null(strstr(policy_compiler_error(c, 2), "cannot open the policy directory"));
    assert_true(policy_compiler_finish(c, NULL) > 0);
    assert_null(policy_compiler_policy(c));
    policy_compiler_destroy(&c);
    rmdir(dir);
}

static void test_directory_of_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_policy_compiler_XXXXXX";
    assert_non_null(mkdtemp(dir));
    s_policy_write(dir, "pools.yaml", s_pools);
    s_policy_write(dir, "sets.yml", s_sets);
    s_policy_write(dir, ".#editor.yaml", "garbage: [");
    s_policy_write(dir, "README.txt", "not yaml: [");
    policy_compiler_t *c = policy_compiler_new();
    assert_int_equal(policy_compiler_add_dir(c, dir), 0);
    assert_int_equal(policy_compiler_finish(c, dir), 0);
    assert_int_equal(policy_compiler_nfiles(c), 2);
    assert_string_equal(policy_compiler_file(c, 0), "pools.yaml");
    assert_string_equal(policy_compiler_file(c, 1), "sets.yml");
    assert_int_equal(policy_compiler_policy(c)->workers_len, 3);
    assert_int_equal(policy_compiler_finish(c, dir), 0); // idempotent
    policy_compiler_destroy(&c);
    s_policy_unlink(dir, "pools.yaml");
    s_policy_unlink(dir, "sets.yml");
    s_policy_unlink(dir, ".#editor.yaml");
    s_policy_unlink(dir, "README.txt");
    rmdir(dir);
}

static void test_error_limit(void **state)
{
    (void)state;
    // 60 resources each with an unknown kind: the list stops at the limit and says so.
    size_t cap = 60 * 128;
    char *text = calloc(1, cap), *p = text;
    for (int i = 0; i < 60; i++)
        p += snprintf(p, cap - (size_t)(p - text),
                      "---\napiVersion: inferplane.io/v1alpha1\nkind: Nope\nmetadata: {name: "
                      "x%d}\nspec: {}\n",
                      i);
    int n;
    policy_compiler_t *c = s_compile(text, NULL, &n);
    assert_int_equal(n, POLICY_COMPILER_MAX_ERRORS + 1);
    assert_non_null(
        strstr(policy_compiler_error(c, POLICY_COMPILER_MAX_ERRORS), "... and 10 more errors"));
    policy_compiler_destroy(&c);
    free(text);
}

static void test_too_many_targets(void **state)
{
    (void)state;
    char body[4096] = "  model: m\n  targets:\n";
    for (int i = 0; i <= POLICY_COMPILER_MAX_TARGETS; i++)
        snprintf(body + strlen(body), sizeof body - strlen(body), "    - workerSet: s%d\n", i);
    s_expect_doc(S_SET_OK, body,
                 "a.yaml:15:5: InferencePool \"chat\": spec.targets lists 65 "
                 "targets, above the limit of 64",
                 NULL);
}

// ---- the extended InferenceWorkerSet and InferencePool ----------------------------------------

// spec.loraAdapters reaches every worker of its set in the POLICY message (ipl_worker_t:
// what the gateway and the decider resolve an adapter's requests with); a set without lists
// none.
static void test_lora_adapters_reach_the_policy_workers(void **state)
{
    (void)state;
    const char *doc = PT_HEAD("InferenceWorkerSet", "ad") "spec:\n  model: small-model\n"
                      "  loraAdapters: [sql-lora, tone]\n"
                      "  workers: [{name: a0, url: 'http://h:5'}, {name: a1, url: 'http://h:6'}]\n"
                      "---\n" PT_HEAD("InferencePool", "lp") "spec:\n  model: lp-model\n"
                      "  targets: [{workerSet: ad}]\n";
    policy_compiler_t *c = pt_ok(PT_BASE, doc);
    const ipl_policy_t *p = policy_compiler_policy(c);
    int seen = 0;
    for (uint32_t i = 0; i < p->workers_len; i++) {
        const ipl_worker_t *w = &p->workers[i];
        if (!strcmp(w->name, "a0") || !strcmp(w->name, "a1")) {
            assert_int_equal(w->lora_adapters_len, 2);
            assert_string_equal(w->lora_adapters[0], "sql-lora");
            assert_string_equal(w->lora_adapters[1], "tone");
            assert_string_equal(w->pool, "lp");
            seen++;
        } else {
            assert_int_equal(w->lora_adapters_len, 0);
        }
    }
    assert_int_equal(seen, 2);
    policy_compiler_destroy(&c);
}

#define WS(spec)   PT_HEAD("InferenceWorkerSet", "w2") "spec:\n" spec
#define POOL(spec) PT_HEAD("InferencePool", "p2") "spec:\n" spec

static void test_selector_worker_set_and_pool_targets_compile(void **state)
{
    (void)state;
    const char *doc = WS(
        "  model: m2\n"
        "  profile: l40s-27b-fp8\n"
        "  loraAdapters: [tone, legal]\n"
        "  apis: [openai, anthropic]\n"
        "  selector:\n"
        "    matchLabels: {app: vllm}\n"
        "    matchExpressions: [{key: tier, operator: In, values: [gpu]}, "
        "{key: spot, operator: DoesNotExist}]\n"
        "  ports: {api: http, kvEvents: 5557, replay: 5558}\n") "---\n" POOL("  model: m2\n  slo: "
                                                                             "{ttftMs: 500}\n"
                                                                             "  targets: "
                                                                             "[{workerSet: w2, "
                                                                             "weight: 3}, "
                                                                             "{provider: p3, role: "
                                                                             "batch}]\n") "---"
                                                                                          "\n" PT_HEAD("InferenceProvider",
                                                                                                       "p3") "spec: {backend: be, models: [{name: m2}]}\n";
    policy_compiler_t *c = pt_ok(PT_BASE, doc);
    const policy_workerset_t *w = NULL;
    for (size_t i = 0; i < policy_compiler_nworker_sets(c); i++)
        if (!strcmp(policy_compiler_worker_sets_at(c, i)->name, "w2"))
            w = policy_compiler_worker_sets_at(c, i);
    assert_non_null(w);
    assert_int_equal(w->nworkers, 0);
    assert_true(w->has_selector);
    assert_int_equal(w->nmatch_labels, 1);
    assert_string_equal(w->match_labels[0].key, "app");
    assert_string_equal(w->match_labels[0].value, "vllm");
    assert_int_equal(w->nmatch_exprs, 2);
    assert_int_equal(w->match_exprs[0].op, POLICY_SELECT_IN);
    assert_string_equal(w->match_exprs[0].values[0], "gpu");
    assert_int_equal(w->match_exprs[1].op, POLICY_SELECT_DOES_NOT_EXIST);
    assert_string_equal(w->api_port.name, "http");
    assert_int_equal(w->kv_events_port.number, 5557);
    assert_int_equal(w->replay_port.number, 5558);
    assert_int_equal(w->metrics_port.number, 0); // unset: the api port
    assert_null(w->metrics_port.name);
    assert_int_equal(w->nlora_adapters, 2);
    assert_string_equal(w->profile, "l40s-27b-fp8");
    assert_true(w->messages_api);
    assert_string_equal(w->pool, "p2");
    // A selector finds nothing in file mode: said as a warning.
    bool warned = false;
    for (size_t i = 0; i < policy_compiler_nwarnings(c); i++)
        warned |= strstr(policy_compiler_warning(c, i), "spec.selector finds pods only in "
                                                        "Kubernetes mode") != NULL;
    assert_true(warned);
    const policy_pool_t *p = NULL;
    for (size_t i = 0; i < policy_compiler_npools(c); i++)
        if (!strcmp(policy_compiler_pools_at(c, i)->name, "p2")) p = policy_compiler_pools_at(c, i);
    assert_non_null(p);
    assert_int_equal(p->slo_ttft_ms, 500);
    assert_int_equal(p->ntargets, 2);
    assert_int_equal(p->targets[0].kind, POLICY_TARGET_WORKER_SET);
    assert_int_equal(p->targets[0].weight, 3);
    assert_int_equal(p->targets[0].role, POLICY_ROLE_PRIMARY);
    assert_int_equal(p->targets[1].kind, POLICY_TARGET_PROVIDER);
    assert_string_equal(p->targets[1].name, "p3");
    assert_int_equal(p->targets[1].role, POLICY_ROLE_BATCH);
    assert_int_equal(p->targets[1].weight, 1);
    // The published policy is unchanged in shape: the provider is no worker.
    const ipl_policy_t *ip = policy_compiler_policy(c);
    assert_int_equal(ip->workers_len, 2); // s0 and l0 of base.yaml
    policy_compiler_destroy(&c);
}

static const pt_case_t s_kind_errors[] = {
    {"neither workers nor selector", WS("  model: m2\n"),
     "p.yaml:5:3: InferenceWorkerSet \"w2\": spec.workers is required: a list of workers ({name, "
     "url, kvEvents}), or give a spec.selector (with spec.ports) that finds them"},
    {"selector without ports", WS("  model: m2\n  selector: {matchLabels: {a: b}}\n"),
     "p.yaml:6:13: InferenceWorkerSet \"w2\": spec.selector needs spec.ports (at least api: the "
     "port of vLLM's API on the selected pods)"},
    {"empty selector", WS("  model: m2\n  selector: {}\n  ports: {api: 8000}\n"),
     "p.yaml:6:13: InferenceWorkerSet \"w2\": spec.selector needs matchLabels or matchExpressions "
     "(an empty selector would select every pod)"},
    {"matchLabels not a mapping",
     WS("  model: m2\n  selector: {matchLabels: [a]}\n  ports: {api: 8000}\n"),
     "p.yaml:6:27: InferenceWorkerSet \"w2\": spec.selector.matchLabels must be a mapping (label: "
     "value), got a list"},
    {"unknown operator",
     WS("  model: m2\n  selector: {matchExpressions: [{key: a, operator: in, values: [b]}]}\n  "
        "ports: {api: 8000}\n"),
     "p.yaml:6:52: InferenceWorkerSet \"w2\": spec.selector.matchExpressions[0].operator \"in\" is "
     "not one of the allowed values; did you mean \"In\"? (known: In, NotIn, Exists, "
     "DoesNotExist)"},
    {"In without values",
     WS("  model: m2\n  selector: {matchExpressions: [{key: a, operator: In}]}\n  ports: {api: "
        "8000}\n"),
     "p.yaml:6:33: InferenceWorkerSet \"w2\": spec.selector.matchExpressions[0].values: operator "
     "In needs a non-empty list of values"},
    {"Exists with values",
     WS("  model: m2\n  selector: {matchExpressions: [{key: a, operator: Exists, values: [b]}]}\n  "
        "ports: {api: 8000}\n"),
     "p.yaml:6:68: InferenceWorkerSet \"w2\": spec.selector.matchExpressions[0].values: operator "
     "Exists takes no values"},
    {"ports without api",
     WS("  model: m2\n  selector: {matchLabels: {a: b}}\n  ports: {kvEvents: 5557}\n"),
     "p.yaml:7:10: InferenceWorkerSet \"w2\": spec.ports.api is required: the pods' API port"},
    {"port number range",
     WS("  model: m2\n  selector: {matchLabels: {a: b}}\n  ports: {api: 70000}\n"),
     "p.yaml:7:16: InferenceWorkerSet \"w2\": spec.ports.api must be a whole number from 1 to "
     "65535, got \"70000\""},
    {"port name invalid",
     WS("  model: m2\n  selector: {matchLabels: {a: b}}\n  ports: {api: Http_Port}\n"),
     "p.yaml:7:16: InferenceWorkerSet \"w2\": spec.ports.api \"Http_Port\" is neither a port "
     "number (1..65535) nor a container port name (lower-case letters, digits and '-', at most 15 "
     "characters)"},
    {"replay port without kvEvents",
     WS("  model: m2\n  selector: {matchLabels: {a: b}}\n  ports: {api: 8000, replay: 5558}\n"),
     "p.yaml:7:30: InferenceWorkerSet \"w2\": spec.ports.replay is set but spec.ports.kvEvents is "
     "not; replay needs the KV-event stream"},
    {"unknown ports field",
     WS("  model: m2\n  selector: {matchLabels: {a: b}}\n  ports: {api: 8000, kvEvent: 1}\n"),
     "p.yaml:7:22: InferenceWorkerSet \"w2\": spec.ports.kvEvent is not a known field; did you "
     "mean \"kvEvents\"? (known: api, kvEvents, replay, metrics)"},
    {"LoRA adapter twice",
     WS("  model: m2\n  workers: [{name: x0, url: 'http://h:9'}]\n  loraAdapters: [a, a]\n"),
     "p.yaml:7:21: InferenceWorkerSet \"w2\": spec.loraAdapters[1] \"a\" is listed twice; remove "
     "one"},
    {"profile invalid",
     WS("  model: m2\n  workers: [{name: x0, url: 'http://h:9'}]\n  profile: L40S 27B\n"),
     "p.yaml:7:12: InferenceWorkerSet \"w2\": spec.profile \"L40S 27B\" is not a valid name: use "
     "lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most "
     "63 characters"},
    {"label detector unknown",
     PT_HEAD("InferencePolicy", "lp") "spec:\n  labels: {detectors: [email, passport]}\n",
     "p.yaml:5:31: InferencePolicy \"lp\": spec.labels.detectors[1] \"passport\" is not a "
     "detector; the detectors are email, phone, iban, card, ssn, cz_birth_number, ua_tax_id"},
    {"label rule without keywords or regex",
     PT_HEAD("InferencePolicy", "lp") "spec:\n  labels: {rules: [{label: x}]}\n",
     "p.yaml:5:20: InferencePolicy \"lp\": spec.labels.rules[0] needs keywords or a regex (or "
     "both)"},
    {"label regex that does not compile",
     PT_HEAD("InferencePolicy", "lp") "spec:\n  labels: {rules: [{label: x, regex: 'a(b'}]}\n",
     "p.yaml:5:11: InferencePolicy \"lp\": spec.labels (with every policy's labels): rules[0] "
     "(label \"x\"): regex \"a(b\": Unmatched ( or \\("},
    {"classifier threshold out of range",
     PT_HEAD("InferencePolicy", "lp") "spec:\n  labels: {classifier: {threshold: 2, classes: "
                                      "[{label: a, examples: [x]}]}}\n",
     "p.yaml:5:36: InferencePolicy \"lp\": spec.labels.classifier.threshold must be a number "
     "between 0 and 1 (e.g. 0.6)"},
    {"api unknown",
     WS("  model: m2\n  workers: [{name: x0, url: 'http://h:9'}]\n  apis: [openai, grpc]\n"),
     "p.yaml:7:9: InferenceWorkerSet \"w2\": spec.apis[1] \"grpc\" is not an API; use openai and, "
     "when the workers serve /v1/messages, anthropic"},
    {"apis without openai",
     WS("  model: m2\n  workers: [{name: x0, url: 'http://h:9'}]\n  apis: [anthropic]\n"),
     "p.yaml:7:9: InferenceWorkerSet \"w2\": spec.apis must list openai (every vLLM worker serves "
     "it)"},
    {"target with workerSet and provider",
     POOL("  model: m2\n  targets: [{workerSet: small, provider: cloud}]\n"),
     "p.yaml:6:42: InferencePool \"p2\": spec.targets[0] names both a workerSet and a provider; "
     "give exactly one (two targets for both)"},
    {"target with neither", POOL("  model: m2\n  targets: [{role: overflow}]\n"),
     "p.yaml:6:13: InferencePool \"p2\": spec.targets[0] names neither a workerSet nor a provider; "
     "give exactly one"},
    {"unknown role", POOL("  model: m2\n  targets: [{workerSet: w9, role: spare}]\n"),
     "p.yaml:6:35: InferencePool \"p2\": spec.targets[0].role \"spare\" is not one of the allowed "
     "values (known: primary, overflow, batch)"},
    {"weight range", POOL("  model: m2\n  targets: [{workerSet: w9, weight: 0}]\n"),
     "p.yaml:6:37: InferencePool \"p2\": spec.targets[0].weight must be a whole number from 1 to "
     "1000, got \"0\""},
    {"slo range", POOL("  model: m2\n  slo: {ttftMs: 0}\n  targets: [{workerSet: w9}]\n"),
     "p.yaml:6:17: InferencePool \"p2\": spec.slo.ttftMs must be a whole number from 1 to 600000, "
     "got \"0\""},
    {"unknown slo field", POOL("  model: m2\n  slo: {ttft: 5}\n  targets: [{workerSet: w9}]\n"),
     "p.yaml:6:9: InferencePool \"p2\": spec.slo.ttft is not a known field; did you mean "
     "\"ttftMs\"? (known: ttftMs)"},
    {"worker set in two pools", POOL("  model: m2\n  targets: [{workerSet: small}]\n"),
     "p.yaml:6:25: InferencePool \"p2\": spec.targets[0].workerSet \"small\" already belongs to "
     "InferencePool \"chat\" (base.yaml:29:25); a worker set serves one pool"},
};

static void test_every_worker_set_and_pool_error(void **state)
{
    (void)state;
    pt_run_cases(PT_BASE, s_kind_errors, sizeof s_kind_errors / sizeof *s_kind_errors);
}

// ---- the examples -----------------------------------------------------------------------------

static void s_compile_example(const char *name, size_t min_rules)
{
    // The repository's root: __FILE__ is <root>/libs/policy/tests/test_policy_compiler.c,
    // with <root> empty when make compiles it from the root.
    const char *file = __FILE__, *tail = strstr(file, "libs/policy/tests/");
    char path[700];
    snprintf(path, sizeof path, "%.*sexamples/%s", tail ? (int)(tail - file) : 0, file, name);
    policy_compiler_t *c = policy_compiler_new();
    policy_compiler_add_dir(c, path);
    int n = policy_compiler_finish(c, path);
    if (n) pt_dump(path, c);
    assert_int_equal(n, 0);
    assert_true(policy_compiler_nrules(c) >= min_rules);
    policy_compiler_destroy(&c);
}

static void test_examples_compile(void **state)
{
    (void)state;
    s_compile_example("policy", 0); // what `make run` loads
    s_compile_example("policy-full", 8);
}

/* A pool whose model did not compile has no model: the rules' and duplicates' checks that
 * look pools up by model must report, not crash (found by fuzz/fuzz_policy: the policy
 * service and `inferplanectl validate` died with SIGSEGV on this file). */
static void test_pool_without_model_and_a_rule_do_not_crash(void **state)
{
    (void)state;
    const char *yaml = "apiVersion: inferplane.io/v1alpha1\n"
                       "kind: InferencePool\n"
                       "metadata: {name: chat}\n"
                       "spec:\n"
                       "  model: [not, a, string]\n"
                       "  targets: []\n"
                       "---\n"
                       "apiVersion: inferplane.io/v1alpha1\n"
                       "kind: InferencePool\n"
                       "metadata: {name: chat2}\n"
                       "spec:\n"
                       "  model: {}\n"
                       "  targets: []\n"
                       "---\n"
                       "apiVersion: inferplane.io/v1alpha1\n"
                       "kind: InferencePolicy\n"
                       "metadata: {name: p}\n"
                       "spec:\n"
                       "  rules:\n"
                       "    - name: r\n"
                       "      match: {models: [x]}\n"
                       "      reject: {status: 403, reason: no}\n";
    s_expect(yaml, NULL, "match.models[0] \"x\" is neither a pool's model nor an alias",
             "(known: none)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_policy_compiles_sorted),
        cmocka_unit_test(test_default_block_size_and_unused_set_warning),
        cmocka_unit_test(test_missing_worker_set_reference),
        cmocka_unit_test(test_unknown_fields_suggest),
        cmocka_unit_test(test_duplicate_worker_names_name_both_places),
        cmocka_unit_test(test_duplicate_resources),
        cmocka_unit_test(test_block_sizes_must_match_in_pool),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_resource_envelope),
        cmocka_unit_test(test_yaml_syntax_error_has_place),
        cmocka_unit_test(test_no_pool_and_no_files),
        cmocka_unit_test(test_directory_of_files),
        cmocka_unit_test(test_error_limit),
        cmocka_unit_test(test_too_many_targets),
        cmocka_unit_test(test_selector_worker_set_and_pool_targets_compile),
        cmocka_unit_test(test_lora_adapters_reach_the_policy_workers),
        cmocka_unit_test(test_every_worker_set_and_pool_error),
        cmocka_unit_test(test_examples_compile),
        cmocka_unit_test(test_pool_without_model_and_a_rule_do_not_crash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
