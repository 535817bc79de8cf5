/*
 * Unit tests of policy_isolation: which tenants a policy isolates ("*" and names, the anonymous
 * tenant), the derived salt (stable, per tenant, folding the client's own salt in, the prefix),
 * reserved client salts, and the effective salt of a request.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "policy_isolation.h"

static void test_which_tenants(void **state)
{
    (void)state;
    char *named[] = {"team-a", "team-b"};
    ipl_policy_t p = {.cache_isolated_tenants = named, .cache_isolated_tenants_len = 2};
    assert_true(policy_isolation_isolated(&p, "team-a"));
    assert_true(policy_isolation_isolated(&p, "team-b"));
    assert_false(policy_isolation_isolated(&p, "team-c"));
    assert_false(policy_isolation_isolated(&p, ""));
    assert_false(policy_isolation_isolated(&p, NULL));
    assert_false(policy_isolation_isolated(NULL, "team-a"));
    char *every[] = {"*"};
    ipl_policy_t all = {.cache_isolated_tenants = every, .cache_isolated_tenants_len = 1};
    assert_true(policy_isolation_isolated(&all, "anyone"));
    assert_true(policy_isolation_isolated(&all, NULL)); /* the anonymous tenant too */
    ipl_policy_t none = {0};
    assert_false(policy_isolation_isolated(&none, "team-a"));
}

static void test_salts(void **state)
{
    (void)state;
    char a[POLICY_SALT_SIZE], a2[POLICY_SALT_SIZE], b[POLICY_SALT_SIZE], ac[POLICY_SALT_SIZE],
        anon[POLICY_SALT_SIZE];
    policy_isolation_salt("team-a", NULL, a);
    policy_isolation_salt("team-a", NULL, a2);
    policy_isolation_salt("team-b", NULL, b);
    policy_isolation_salt("team-a", "conv-1", ac);
    policy_isolation_salt(NULL, NULL, anon);
    assert_int_equal(strlen(a), POLICY_SALT_SIZE - 1);
    assert_int_equal(strncmp(a, POLICY_SALT_PREFIX, strlen(POLICY_SALT_PREFIX)), 0);
    assert_string_equal(a, a2);       /* the same in every process */
    assert_string_not_equal(a, b);    /* per tenant */
    assert_string_not_equal(a, ac);   /* the client's salt still separates */
    assert_string_not_equal(a, anon); /* "" is a tenant of its own */
    /* a tenant name cannot run into the client's salt: ("ab", "c") is not ("a", "bc") */
    char x[POLICY_SALT_SIZE], y[POLICY_SALT_SIZE];
    assert_string_not_equal(policy_isolation_salt("ab", "c", x),
                            policy_isolation_salt("a", "bc", y));
    /* a known answer, so that a change of the derivation (which every process must share) is
     * seen: SHA-256("inferplane cache salt v1\0team-a\0") */
    assert_string_equal(a, "inferplane-tenant:"
                           "8419948c5956440b4d1b0131be4baa9b9b139b511c12861bc7840926aff3a0e3");
}

static void test_reserved_and_effective(void **state)
{
    (void)state;
    assert_true(policy_isolation_reserved("inferplane-tenant:abc"));
    assert_false(policy_isolation_reserved("inferplane-tenan"));
    assert_false(policy_isolation_reserved("my-salt"));
    assert_false(policy_isolation_reserved(NULL));
    char *named[] = {"team-a"};
    ipl_policy_t p = {.cache_isolated_tenants = named, .cache_isolated_tenants_len = 1};
    char out[POLICY_SALT_SIZE], want[POLICY_SALT_SIZE];
    assert_string_equal(policy_isolation_effective(&p, "team-a", NULL, out),
                        policy_isolation_salt("team-a", NULL, want));
    assert_string_equal(policy_isolation_effective(&p, "team-a", "s", out),
                        policy_isolation_salt("team-a", "s", want));
    const char *salt = "s";
    assert_ptr_equal(policy_isolation_effective(&p, "team-b", salt, out), salt); /* shared */
    assert_null(policy_isolation_effective(&p, "team-b", NULL, out));
    assert_null(policy_isolation_effective(NULL, "team-a", NULL, out));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_which_tenants),
        cmocka_unit_test(test_salts),
        cmocka_unit_test(test_reserved_and_effective),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
