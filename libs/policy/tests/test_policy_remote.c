/*
 * Unit tests of policy_remote (GatewayBackend, InferenceProvider): every field compiles to
 * what it says, defaults are filled in, and every validation error — one table row each —
 * has its exact message. No message ever contains a secret.
 */
#include "policy_cases.h"

#include "policy_remote.h"

#define B(spec) PT_HEAD("GatewayBackend", "b2") "spec:\n" spec
#define V(spec) PT_HEAD("InferenceProvider", "p2") "spec:\n" spec

static void test_backend_compiles(void **state)
{
    (void)state;
    policy_compiler_t *c =
        pt_ok(PT_BASE, B("  url: https://api.example.com/v1/\n"
                         "  protocol: anthropic\n"
                         "  auth: {type: header, header: x-api-key, secretRef: {name: creds, key: "
                         "token}}\n"
                         "  tls: {caSecretRef: {name: ca, key: ca.pem}}\n"
                         "  timeouts: {connectMs: 100, responseMs: 2000}\n"
                         "  maxConnections: 8\n"));
    assert_int_equal(policy_compiler_nbackends(c), 2);
    const policy_backend_t *a = policy_compiler_backends_at(c, 0),
                           *b = policy_compiler_backends_at(c, 1);
    assert_string_equal(a->name, "b2"); // sorted by name
    assert_string_equal(a->url, "https://api.example.com/v1");
    assert_int_equal(a->protocol, POLICY_PROTOCOL_ANTHROPIC);
    assert_int_equal(a->auth, POLICY_AUTH_HEADER);
    assert_string_equal(a->auth_header, "x-api-key");
    assert_int_equal(a->secret.source, POLICY_SECRET_KUBERNETES);
    assert_string_equal(a->secret.name, "creds");
    assert_string_equal(a->secret.key, "token");
    assert_int_equal(a->ca_secret.source, POLICY_SECRET_KUBERNETES);
    assert_false(a->insecure_skip_verify);
    assert_int_equal(a->connect_ms, 100);
    assert_int_equal(a->response_ms, 2000);
    assert_int_equal(a->max_connections, 8);
    // base.yaml's "be": the defaults
    assert_string_equal(b->name, "be");
    assert_int_equal(b->protocol, POLICY_PROTOCOL_OPENAI);
    assert_int_equal(b->auth, POLICY_AUTH_BEARER);
    assert_int_equal(b->secret.source, POLICY_SECRET_ENV);
    assert_string_equal(b->secret.name, "API_KEY");
    assert_int_equal(b->connect_ms, POLICY_DEFAULT_CONNECT_MS);
    assert_int_equal(b->response_ms, POLICY_DEFAULT_RESPONSE_MS);
    assert_int_equal(b->max_connections, POLICY_DEFAULT_MAX_CONNECTIONS);
    policy_compiler_destroy(&c);
}

static void test_backend_without_auth_and_insecure_tls_warns(void **state)
{
    (void)state;
    policy_compiler_t *c =
        pt_ok(PT_BASE, B("  url: https://h\n  auth: {type: bearer, file: /run/token}\n"
                         "  tls: {insecureSkipVerify: true}\n"));
    const policy_backend_t *a = policy_compiler_backends_at(c, 0);
    assert_int_equal(a->secret.source, POLICY_SECRET_FILE);
    assert_string_equal(a->secret.name, "/run/token");
    assert_true(a->insecure_skip_verify);
    assert_int_equal(policy_compiler_nwarnings(c), 1);
    assert_string_equal(policy_compiler_warning(c, 0),
                        "p.yaml:7:29: GatewayBackend \"b2\": spec.tls.insecureSkipVerify is true: "
                        "the backend's certificate is not verified (for tests only)");
    policy_compiler_destroy(&c);
}

static void test_provider_compiles(void **state)
{
    (void)state;
    policy_compiler_t *c = pt_ok(
        PT_BASE, V("  backend: be\n"
                   "  models: [{name: small-model}]\n"
                   "  latencyHintMs: 250\n"
                   "  cost: {inputMicrosPerMillionTokens: 150000, outputMicrosPerMillionTokens: "
                   "600000}\n"
                   "  capacity: {concurrentRequests: 16, tokensPerMinute: 1000000}\n"));
    assert_int_equal(policy_compiler_nproviders(c), 2);
    const policy_provider_t *cloud = policy_compiler_providers_at(c, 0),
                            *p = policy_compiler_providers_at(c, 1);
    assert_string_equal(cloud->name, "cloud");
    assert_int_equal(cloud->nmodels, 2);
    assert_string_equal(cloud->models[0].remote_name, "vendor/small");
    assert_string_equal(cloud->models[1].remote_name, "large-model"); // default: the name
    assert_string_equal(p->name, "p2");
    assert_non_null(p->backend);
    assert_string_equal(p->backend->url, "https://api.example.com/v1");
    assert_int_equal(p->latency_hint_ms, 250);
    assert_int_equal(p->input_micros_per_mtok, 150000);
    assert_int_equal(p->output_micros_per_mtok, 600000);
    assert_int_equal(p->concurrent_requests, 16);
    assert_int_equal(p->tokens_per_minute, 1000000);
    assert_non_null(policy_remote_provider_model(p, "small-model"));
    assert_null(policy_remote_provider_model(p, "large-model"));
    policy_compiler_destroy(&c);
}

static const pt_case_t s_errors[] = {
    // GatewayBackend
    {"backend without url", B("  protocol: openai\n"),
     "p.yaml:5:3: GatewayBackend \"b2\": spec.url is required"},
    {"backend url not http", B("  url: ftp://h\n"),
     "p.yaml:5:8: GatewayBackend \"b2\": spec.url \"ftp://h\" is not an HTTP URL; write it like "
     "http://10.0.0.5:8000"},
    {"unknown protocol", B("  url: http://h\n  protocol: opena\n"),
     "p.yaml:6:13: GatewayBackend \"b2\": spec.protocol \"opena\" is not one of the allowed "
     "values; did you mean \"openai\"? (known: openai, anthropic)"},
    {"unknown backend field", B("  url: http://h\n  maxConnection: 3\n"),
     "p.yaml:6:3: GatewayBackend \"b2\": spec.maxConnection is not a known field; did you mean "
     "\"maxConnections\"? (known: url, protocol, auth, tls, timeouts, maxConnections)"},
    {"auth without type", B("  url: http://h\n  auth: {env: K}\n"),
     "p.yaml:6:9: GatewayBackend \"b2\": spec.auth.type is required"},
    {"auth type unknown", B("  url: http://h\n  auth: {type: basic, env: K}\n"),
     "p.yaml:6:16: GatewayBackend \"b2\": spec.auth.type \"basic\" is not one of the allowed "
     "values (known: bearer, header)"},
    {"header auth without header", B("  url: http://h\n  auth: {type: header, env: K}\n"),
     "p.yaml:6:16: GatewayBackend \"b2\": spec.auth.header is required with type header: name the "
     "header that carries the secret (e.g. x-api-key)"},
    {"bearer auth with header", B("  url: http://h\n  auth: {type: bearer, header: x-k, env: K}\n"),
     "p.yaml:6:32: GatewayBackend \"b2\": spec.auth.header is only for type header; bearer uses "
     "Authorization: remove it or set type: header"},
    {"header name invalid", B("  url: http://h\n  auth: {type: header, header: 'x k', env: K}\n"),
     "p.yaml:6:32: GatewayBackend \"b2\": spec.auth.header \"x k\" is not an HTTP header name "
     "(letters, digits and -, at most 128 characters)"},
    {"no secret source", B("  url: http://h\n  auth: {type: bearer}\n"),
     "p.yaml:6:9: GatewayBackend \"b2\": spec.auth needs exactly one of secretRef, file, env "
     "(where the secret comes from); 0 given"},
    {"two secret sources", B("  url: http://h\n  auth: {type: bearer, env: K, file: /f}\n"),
     "p.yaml:6:38: GatewayBackend \"b2\": spec.auth needs exactly one of secretRef, file, env "
     "(where the secret comes from); 2 given"},
    {"env not a variable, not echoed",
     B("  url: http://h\n  auth: {type: bearer, env: 'sk-live-123 secret'}\n"),
     "p.yaml:6:29: GatewayBackend \"b2\": spec.auth.env is not an environment variable name "
     "(letters, digits and _, not starting with a digit); it names the variable that holds the "
     "secret, not the secret"},
    {"secret key not echoed",
     B("  url: http://h\n  auth: {type: bearer, secretRef: {name: s, key: 'sk live'}}\n"),
     "p.yaml:6:50: GatewayBackend \"b2\": spec.auth.secretRef.key is not a Secret key: use "
     "letters, digits, '-', '_' and '.' (it names the key, it does not hold the secret)"},
    {"secretRef without key", B("  url: http://h\n  auth: {type: bearer, secretRef: {name: s}}\n"),
     "p.yaml:6:35: GatewayBackend \"b2\": spec.auth.secretRef.key is required"},
    {"secretRef name invalid",
     B("  url: http://h\n  auth: {type: bearer, secretRef: {name: S, key: k}}\n"),
     "p.yaml:6:42: GatewayBackend \"b2\": spec.auth.secretRef.name \"S\" is not a valid name: use "
     "lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most "
     "63 characters"},
    {"two CA sources",
     B("  url: http://h\n  tls: {caBundle: /ca.pem, caSecretRef: {name: s, key: k}}\n"),
     "p.yaml:6:41: GatewayBackend \"b2\": spec.tls: give at most one of caBundle and caSecretRef"},
    {"insecureSkipVerify not a bool", B("  url: http://h\n  tls: {insecureSkipVerify: maybe}\n"),
     "p.yaml:6:29: GatewayBackend \"b2\": spec.tls.insecureSkipVerify must be true or false, got "
     "\"maybe\""},
    {"connect timeout range", B("  url: http://h\n  timeouts: {connectMs: 0}\n"),
     "p.yaml:6:25: GatewayBackend \"b2\": spec.timeouts.connectMs must be a whole number from 1 to "
     "600000, got \"0\""},
    {"response timeout range", B("  url: http://h\n  timeouts: {responseMs: 3600001}\n"),
     "p.yaml:6:26: GatewayBackend \"b2\": spec.timeouts.responseMs must be a whole number from 1 "
     "to 3600000, got \"3600001\""},
    {"maxConnections range", B("  url: http://h\n  maxConnections: 70000\n"),
     "p.yaml:6:19: GatewayBackend \"b2\": spec.maxConnections must be a whole number from 1 to "
     "65535, got \"70000\""},
    {"duplicate backend", PT_HEAD("GatewayBackend", "be") "spec: {url: 'http://h'}\n",
     "p.yaml:3:18: GatewayBackend \"be\": metadata.name is already used by the GatewayBackend at "
     "base.yaml:3:18; rename one of them"},
    // InferenceProvider
    {"provider without backend", V("  models: [{name: m}]\n"),
     "p.yaml:5:3: InferenceProvider \"p2\": spec.backend is required: name the GatewayBackend that "
     "reaches this provider"},
    {"provider naming a missing backend", V("  backend: bee\n  models: [{name: m}]\n"),
     "p.yaml:5:12: InferenceProvider \"p2\": spec.backend \"bee\" does not exist; did you mean "
     "\"be\"? (known: be); add a GatewayBackend of that name or fix the reference"},
    {"provider without models", V("  backend: be\n"),
     "p.yaml:5:3: InferenceProvider \"p2\": spec.models is required: a list of models ({name, "
     "remoteName})"},
    {"provider with empty models", V("  backend: be\n  models: []\n"),
     "p.yaml:6:11: InferenceProvider \"p2\": spec.models is empty; list at least one of models "
     "({name, remoteName})"},
    {"model listed twice", V("  backend: be\n  models: [{name: m}, {name: m}]\n"),
     "p.yaml:6:30: InferenceProvider \"p2\": spec.models[1].name \"m\" is listed twice; remove "
     "one"},
    {"remote name with a space", V("  backend: be\n  models: [{name: m, remoteName: 'a b'}]\n"),
     "p.yaml:6:34: InferenceProvider \"p2\": spec.models[0].remoteName \"a b\" is not a model name "
     "(no spaces, at most 256 characters)"},
    {"unknown model field", V("  backend: be\n  models: [{nme: m}]\n"),
     "p.yaml:6:13: InferenceProvider \"p2\": spec.models[0].nme is not a known field; did you mean "
     "\"name\"? (known: name, remoteName)"},
    {"latency hint range", V("  backend: be\n  models: [{name: m}]\n  latencyHintMs: -1\n"),
     "p.yaml:7:18: InferenceProvider \"p2\": spec.latencyHintMs must be a whole number from 0 to "
     "600000, got \"-1\""},
    {"cost not a number",
     V("  backend: be\n  models: [{name: m}]\n  cost: {inputMicrosPerMillionTokens: 0.15}\n"),
     "p.yaml:7:39: InferenceProvider \"p2\": spec.cost.inputMicrosPerMillionTokens must be a whole "
     "number from 0 to 1000000000000, got \"0.15\""},
    {"capacity unknown field",
     V("  backend: be\n  models: [{name: m}]\n  capacity: {tokensPerMinut: 5}\n"),
     "p.yaml:7:14: InferenceProvider \"p2\": spec.capacity.tokensPerMinut is not a known field; "
     "did you mean \"tokensPerMinute\"? (known: concurrentRequests, tokensPerMinute)"},
    {"duplicate provider",
     PT_HEAD("InferenceProvider", "cloud") "spec: {backend: be, models: [{name: m}]}\n",
     "p.yaml:3:18: InferenceProvider \"cloud\": metadata.name is already used by the "
     "InferenceProvider at base.yaml:8:18; rename one of them"},
    // a pool's provider targets
    {"pool target naming a missing provider",
     PT_HEAD("InferencePool", "p3") "spec: {model: m3, targets: [{provider: clod}]}\n",
     "p.yaml:4:40: InferencePool \"p3\": spec.targets[0].provider \"clod\" does not exist; did you "
     "mean \"cloud\"? (known: cloud)"},
    {"pool target whose provider lacks the model",
     PT_HEAD("InferencePool", "p3") "spec: {model: m3, targets: [{provider: cloud}]}\n",
     "p.yaml:4:40: InferencePool \"p3\": spec.targets[0].provider \"cloud\" does not offer the "
     "pool's model \"m3\" (known: small-model, large-model); add it to the provider's spec.models"},
    {"provider listed twice in a pool",
     PT_HEAD("InferencePool", "p3") "spec: {model: large-model, targets: [{provider: cloud}, "
                                    "{provider: cloud}]}\n",
     "p.yaml:4:68: InferencePool \"p3\": spec.targets[1].provider \"cloud\" is listed twice; "
     "remove one"},
};

static void test_every_validation_error(void **state)
{
    (void)state;
    pt_run_cases(PT_BASE, s_errors, sizeof s_errors / sizeof *s_errors);
}

// A secret pasted where its source belongs is never repeated in a message.
static void test_no_secret_in_messages(void **state)
{
    (void)state;
    int n;
    policy_compiler_t *c =
        pt_compile(PT_BASE, B("  url: http://h\n  auth: {type: bearer, env: 'sk-live-123'}\n"), &n);
    assert_true(n > 0);
    for (size_t i = 0; i < policy_compiler_nerrors(c); i++)
        assert_null(strstr(policy_compiler_error(c, i), "sk-live-123"));
    policy_compiler_destroy(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backend_compiles),
        cmocka_unit_test(test_backend_without_auth_and_insecure_tls_warns),
        cmocka_unit_test(test_provider_compiles),
        cmocka_unit_test(test_every_validation_error),
        cmocka_unit_test(test_no_secret_in_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
