/*
 * Unit tests of gateway_isolation, the test playing the policy service (a PUB on inproc): the
 * routing-headers switch (off by default, --expose-routing-headers on); a tenant the policy
 * isolates gets its salt, folded with the client's own, in the request and its upstream body;
 * others keep what they sent; a reserved client salt is refused for everyone; no policy yet
 * means no isolation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <czmq.h>

#include "gateway_isolation.h"
#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_prompt.h"
#include "policy_isolation.h"

static ipl_prompt_t *s_prompt;

static void test_routing_headers_are_off_by_default(void **state)
{
    (void)state;
    ipl_config_t *cfg = ipl_config_new("gw", "test");
    gateway_isolation_options(cfg);
    char err[256];
    char *none[] = {"gw", NULL};
    assert_int_equal(ipl_config_parse(cfg, 1, none, err, sizeof err), 0);
    assert_false(gateway_isolation_routing_headers());
    char *on[] = {"gw", "--expose-routing-headers", NULL};
    assert_int_equal(ipl_config_parse(cfg, 2, on, err, sizeof err), 0);
    assert_true(gateway_isolation_routing_headers());
    gateway_isolation_set_routing_headers(false); /* a test's override wins */
    assert_false(gateway_isolation_routing_headers());
    ipl_config_destroy(&cfg);
}

static ipl_policy_view_t *s_view(zsock_t **pub_p, const char *endpoint)
{
    zsock_t *pub = *pub_p = zsock_new_pub(endpoint);
    assert_non_null(pub);
    ipl_policy_view_t *view = ipl_policy_view_new(endpoint, "");
    ipl_pool_t pool = {.name = "chat", .model = "m", .strategy = "ttft"};
    char *isolated[] = {"team-a"};
    ipl_policy_t p = {.version = 1,
                      .source = "test",
                      .pools = &pool,
                      .pools_len = 1,
                      .cache_isolated_tenants = isolated,
                      .cache_isolated_tenants_len = 1};
    for (int i = 0; i < 500 && ipl_policy_view_version(view) != 1; i++) {
        assert_int_equal(ipl_msg_send(zsock_resolve(pub), IPL_MSG_POLICY, &p, 0), 0);
        zclock_sleep(10);
    }
    assert_int_equal(ipl_policy_view_version(view), 1);
    return view;
}

/* Parses `body` as a completions request, applies isolation for `tenant`; the rc. */
static int s_apply(ipl_policy_view_t *view, const char *tenant, const char *body,
                   gateway_api_req_t **api, gateway_api_error_t *err)
{
    assert_int_equal(
        gateway_api_parse(GATEWAY_API_COMPLETIONS, body, strlen(body), s_prompt, api, err), 0);
    return gateway_isolation_apply(view, tenant, *api, err);
}

/* The "cache_salt" of the upstream body, or NULL (malloc'd). */
static char *s_upstream_salt(const gateway_api_req_t *api, const char *model)
{
    size_t len;
    char *body = gateway_api_upstream_body(api, model, &len);
    assert_non_null(body);
    cJSON *root = cJSON_Parse(body);
    free(body);
    assert_non_null(root);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "cache_salt");
    char *out = cJSON_IsString(s) ? strdup(s->valuestring) : NULL;
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(root, "prompt")->valuestring, "hello");
    cJSON_Delete(root);
    return out;
}

static void test_isolated_tenant_gets_its_salt(void **state)
{
    (void)state;
    zsock_t *pub;
    ipl_policy_view_t *view = s_view(&pub, "inproc://test-isolation-1");
    gateway_api_req_t *api = NULL;
    gateway_api_error_t err = {0};
    char want[POLICY_SALT_SIZE];

    assert_int_equal(s_apply(view, "team-a", "{\"model\":\"m\",\"prompt\":\"hello\"}", &api, &err),
                     0);
    assert_string_equal(api->cache_salt, policy_isolation_salt("team-a", NULL, want));
    char *up = s_upstream_salt(api, NULL);
    assert_string_equal(up, want);
    free(up);
    up = s_upstream_salt(api, "remote-name"); /* and with another model name upstream */
    assert_string_equal(up, want);
    free(up);
    gateway_api_req_destroy(&api);

    /* the client's own salt is folded in, never sent as is */
    assert_int_equal(s_apply(view, "team-a",
                             "{\"model\":\"m\",\"prompt\":\"hello\",\"cache_salt\":\"c1\"}", &api,
                             &err),
                     0);
    assert_string_equal(api->cache_salt, policy_isolation_salt("team-a", "c1", want));
    up = s_upstream_salt(api, NULL);
    assert_string_equal(up, want);
    free(up);
    gateway_api_req_destroy(&api);

    /* a tenant the policy does not isolate: as sent */
    assert_int_equal(s_apply(view, "team-b",
                             "{\"model\":\"m\",\"prompt\":\"hello\",\"cache_salt\":\"c1\"}", &api,
                             &err),
                     0);
    assert_string_equal(api->cache_salt, "c1");
    up = s_upstream_salt(api, NULL);
    assert_string_equal(up, "c1");
    free(up);
    gateway_api_req_destroy(&api);
    assert_int_equal(s_apply(view, "", "{\"model\":\"m\",\"prompt\":\"hello\"}", &api, &err), 0);
    assert_null(api->cache_salt);
    assert_null(s_upstream_salt(api, NULL));
    gateway_api_req_destroy(&api);

    /* a reserved salt: refused, for the isolated tenant and the others alike */
    const char *body = "{\"model\":\"m\",\"prompt\":\"hello\",\"cache_salt\":\"inferplane-tenant:"
                       "0000\"}";
    for (int i = 0; i < 2; i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(s_apply(view, i ? "team-b" : "team-a", body, &api, &err), IPL_E_INVAL);
        assert_int_equal(err.status, 400);
        assert_string_equal(err.param, "cache_salt");
        assert_non_null(strstr(err.message, "\"inferplane-tenant:\""));
        gateway_api_req_destroy(&api);
    }
    ipl_policy_view_destroy(&view);
    zsock_destroy(&pub);
}

static void test_no_policy_no_isolation(void **state)
{
    (void)state;
    ipl_policy_view_t *view = ipl_policy_view_new("inproc://test-isolation-none", "");
    gateway_api_req_t *api = NULL;
    gateway_api_error_t err = {0};
    assert_int_equal(s_apply(view, "team-a", "{\"model\":\"m\",\"prompt\":\"hello\"}", &api, &err),
                     0);
    assert_null(api->cache_salt);
    gateway_api_req_destroy(&api);
    assert_int_equal(s_apply(NULL, "team-a", "{\"model\":\"m\",\"prompt\":\"hello\"}", &api, &err),
                     0);
    gateway_api_req_destroy(&api);
    ipl_policy_view_destroy(&view);
}

int main(void)
{
    ipl_log_set_level(IPL_LOG_OFF);
    char err[256];
    s_prompt = ipl_prompt_open("builtin", err, sizeof err);
    assert_non_null(s_prompt);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routing_headers_are_off_by_default),
        cmocka_unit_test(test_isolated_tenant_gets_its_salt),
        cmocka_unit_test(test_no_policy_no_isolation),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    ipl_prompt_destroy(&s_prompt);
    zsys_shutdown();
    return rc;
}
