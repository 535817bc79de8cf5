/*
 * Unit tests of policy_digest: the content hash is what its contract says (XXH3 of the
 * POLICY encoding without version, source and hash), is the same however the resources are
 * laid out in files, and changes with anything a decider would run; the JSON of
 * /debug/policy. (GET /debug/policy through real processes: integration/test_policy.py.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <czmq.h>

#include "ipl_error.h"
#include "ipl_hash.h"
#include "ipl_log.h"
#include "ipl_policy_view.h"
#include "policy_compiler.h"
#include "policy_digest.h"
#include "policy_test.h"

#define S_SET                                                                                      \
    "apiVersion: inferplane.io/v1alpha1\n"                                                         \
    "kind: InferenceWorkerSet\n"                                                                   \
    "metadata: {name: small}\n"                                                                    \
    "spec:\n"                                                                                      \
    "  model: m\n"                                                                                 \
    "  workers:\n"                                                                                 \
    "    - {name: w0, url: 'http://h:1', kvEvents: 'tcp://h:2'}\n"                                 \
    "    - {name: w1, url: 'http://h:3'}\n"
#define S_POOL                                                                                     \
    "apiVersion: inferplane.io/v1alpha1\n"                                                         \
    "kind: InferencePool\n"                                                                        \
    "metadata: {name: chat}\n"                                                                     \
    "spec: {model: m, strategy: ttft, targets: [{workerSet: small}]}\n"

// Compiles the files {names[i]: texts[i]} with `source`; returns the hash (0: did not compile).
static uint64_t s_hash_of(size_t n, const char *const *names, const char *const *texts,
                          const char *source)
{
    policy_compiler_t *c = policy_compiler_new();
    assert_non_null(c);
    for (size_t i = 0; i < n; i++)
        policy_compiler_add_string(c, names[i], texts[i], strlen(texts[i]));
    uint64_t hash = 0;
    if (policy_compiler_finish(c, source) == 0) {
        const ipl_policy_t *p = policy_compiler_policy(c);
        hash = p->hash;
        assert_true(hash == policy_digest_hash(p)); // the compiler sets it
    }
    policy_compiler_destroy(&c);
    return hash;
}

// A one-pool, one-worker policy in *pool and *w (the caller's, to change).
static ipl_policy_t s_sample(ipl_pool_t *pool, ipl_worker_t *w)
{
    *pool = (ipl_pool_t){.name = "chat", .model = "m", .strategy = "ttft"};
    *w = (ipl_worker_t){.name = "w0",
                        .pool = "chat",
                        .model = "m",
                        .url = "http://h:1",
                        .kv_endpoint = "",
                        .replay_endpoint = "",
                        .metrics_url = "",
                        .block_size = 16,
                        .worker_set = "small"};
    return (ipl_policy_t){.pools = pool, .pools_len = 1, .workers = w, .workers_len = 1};
}

// The definition: XXH3-64 of the encoding with version 0, source nil and hash 0.
static void test_hash_is_the_encoding_without_version_source_and_hash(void **state)
{
    (void)state;
    ipl_pool_t pool;
    ipl_worker_t w;
    ipl_policy_t bare = s_sample(&pool, &w);
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    assert_int_equal(ipl_msg_encode(IPL_MSG_POLICY, &bare, &buf), IPL_OK);
    uint64_t want = ipl_hash_bytes(buf.data, buf.size);
    msgpack_sbuffer_destroy(&buf);
    assert_true(policy_digest_hash(&bare) == want);
    assert_true(want != 0);

    ipl_policy_t dressed = bare;
    dressed.version = 1764633600123;
    dressed.source = "/etc/inferplane/policy";
    dressed.hash = 42;
    assert_true(policy_digest_hash(&dressed) == want);

    w.block_size = 32; // any field of any worker counts
    assert_true(policy_digest_hash(&bare) != want);
    w.block_size = 16;
    pool.strategy = "least-loaded";
    assert_true(policy_digest_hash(&bare) != want);
    pool.strategy = "ttft";
    w.worker_set = NULL; // nil and "" are different encodings: a different policy on the wire
    assert_true(policy_digest_hash(&bare) != want);
}

// The same resources give the same hash whatever the files, their order and the source.
static void test_hash_ignores_layout_and_source(void **state)
{
    (void)state;
    const char *one[] = {S_SET "---\n" S_POOL};
    const char *one_name[] = {"all.yaml"};
    const char *two[] = {S_POOL, S_SET};
    const char *two_names[] = {"pool.yaml", "sets.yaml"};
    const char *swapped[] = {S_POOL "---\n" S_SET};
    uint64_t h = s_hash_of(1, one_name, one, "/a");
    assert_true(h != 0);
    assert_true(s_hash_of(2, two_names, two, "/b") == h);
    assert_true(s_hash_of(1, one_name, swapped, NULL) == h);
    assert_true(s_hash_of(1, one_name, one, "/a") == h); // and again: nothing random in it

    // A change a decider would see changes it.
    const char *other_url[] = {S_POOL "---\n" S_SET};
    char *changed = strdup(other_url[0]);
    memcpy(strstr(changed, "http://h:3"), "http://h:4", 10);
    const char *changed_text[] = {changed};
    uint64_t h2 = s_hash_of(1, one_name, changed_text, "/a");
    assert_true(h2 != 0 && h2 != h);
    free(changed);
    // Comments and formatting do not.
    const char *commented[] = {"# a comment\n" S_SET "---\n# another\n" S_POOL "\n\n"};
    assert_true(s_hash_of(1, one_name, commented, "/a") == h);
}

static void test_hex(void **state)
{
    (void)state;
    char hex[POLICY_DIGEST_HEX_LEN];
    assert_string_equal(policy_digest_hex(1, hex), "0000000000000001");
    assert_string_equal(policy_digest_hex(0xfedcba9876543210ULL, hex), "fedcba9876543210");
    assert_string_equal(policy_digest_hex(UINT64_MAX, hex), "ffffffffffffffff");
}

static void test_json(void **state)
{
    (void)state;
    cJSON *none = policy_digest_json(NULL);
    assert_non_null(none);
    assert_int_equal(cJSON_GetObjectItem(none, "version")->valuedouble, 0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(none, "hash")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(none, "source")));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(none, "pools")), 0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(none, "workers")), 0);
    cJSON_Delete(none);

    policy_compiler_t *c = policy_compiler_new();
    policy_compiler_add_string(c, "a.yaml", S_SET "---\n" S_POOL, strlen(S_SET "---\n" S_POOL));
    assert_int_equal(policy_compiler_finish(c, "/dir"), 0);
    ipl_policy_t p = *policy_compiler_policy(c);
    p.version = 1764633600123;
    cJSON *o = policy_digest_json(&p);
    assert_non_null(o);
    assert_true(cJSON_GetObjectItem(o, "version")->valuedouble == 1764633600123.0);
    char hex[POLICY_DIGEST_HEX_LEN];
    assert_string_equal(cJSON_GetObjectItem(o, "hash")->valuestring,
                        policy_digest_hex(p.hash, hex));
    assert_int_equal(strlen(hex), 16);
    assert_string_equal(cJSON_GetObjectItem(o, "source")->valuestring, "/dir");
    cJSON *pool = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "pools"), 0);
    assert_string_equal(cJSON_GetObjectItem(pool, "name")->valuestring, "chat");
    assert_string_equal(cJSON_GetObjectItem(pool, "strategy")->valuestring, "ttft");
    cJSON *names = cJSON_GetObjectItem(pool, "workers");
    assert_int_equal(cJSON_GetArraySize(names), 2);
    assert_string_equal(cJSON_GetArrayItem(names, 1)->valuestring, "w1");
    cJSON *w0 = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "workers"), 0);
    assert_string_equal(cJSON_GetObjectItem(w0, "kv_endpoint")->valuestring, "tcp://h:2");
    assert_string_equal(cJSON_GetObjectItem(w0, "worker_set")->valuestring, "small");
    assert_string_equal(cJSON_GetObjectItem(w0, "metrics_url")->valuestring, "http://h:1/metrics");
    assert_int_equal(cJSON_GetObjectItem(w0, "block_size")->valuedouble, 16);
    cJSON_Delete(o);

    p.hash = 0; // from a policy service that predates the hash
    o = policy_digest_json(&p);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "hash")));
    cJSON_Delete(o);
    policy_compiler_destroy(&c);
}

// GET /debug/policy of a process following the policy service: what its view holds.
static void test_http_shows_the_view(void **state)
{
    (void)state;
    zsock_t *pub = zsock_new_pub("inproc://test-digest-pub");
    assert_non_null(pub);
    ipl_policy_view_t *view = ipl_policy_view_new("inproc://test-digest-pub", NULL);
    assert_non_null(view);
    ipl_httpd_t *httpd = ipl_httpd_new("127.0.0.1:0", 0);
    assert_non_null(httpd);
    ipl_httpd_route(httpd, "GET", "/debug/policy", policy_digest_http, view);
    assert_int_equal(ipl_httpd_start(httpd), 0);
    int port = ipl_httpd_port(httpd);

    cJSON *o = s_policy_get_json(port, "/debug/policy"); // nothing yet
    assert_int_equal(cJSON_GetObjectItem(o, "version")->valuedouble, 0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "hash")));
    cJSON_Delete(o);

    ipl_pool_t pool;
    ipl_worker_t w;
    ipl_policy_t p = s_sample(&pool, &w);
    p.version = 9;
    p.source = "d";
    p.hash = policy_digest_hash(&p);
    uint64_t deadline = ipl_mono_ms() + 5000; // PUB/SUB drops messages until connected
    while (ipl_policy_view_version(view) != 9 && ipl_mono_ms() < deadline) {
        assert_int_equal(ipl_msg_send(zsock_resolve(pub), IPL_MSG_POLICY, &p, 0), 0);
        zclock_sleep(10);
    }
    assert_int_equal(ipl_policy_view_version(view), 9);
    o = s_policy_get_json(port, "/debug/policy");
    char hex[POLICY_DIGEST_HEX_LEN];
    assert_int_equal(cJSON_GetObjectItem(o, "version")->valuedouble, 9);
    assert_string_equal(cJSON_GetObjectItem(o, "hash")->valuestring,
                        policy_digest_hex(p.hash, hex));
    cJSON *pools = cJSON_GetObjectItem(o, "pools");
    assert_int_equal(cJSON_GetArraySize(pools), 1);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(pools, 0), "name")->valuestring,
                        "chat");
    cJSON_Delete(o);
    ipl_httpd_destroy(&httpd);
    ipl_policy_view_destroy(&view);
    zsock_destroy(&pub);
}

int main(void)
{
    zsys_handler_set(NULL);
    ipl_log_set_level(IPL_LOG_OFF);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_is_the_encoding_without_version_source_and_hash),
        cmocka_unit_test(test_hash_ignores_layout_and_source),
        cmocka_unit_test(test_hex),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_http_shows_the_view),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
