/*
 * Unit tests of tenants_store: a key added to the file works without a restart, a removed one
 * stops working, an invalid change keeps the last good table (and says why), a file replaced
 * by rename (as kubelet swaps a mounted Secret) is seen.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tenants_store.h"

static char s_dir[64], s_path[128];

static void s_write(const char *text)
{
    // a new inode each time (write + rename), and a distinct size, so the change is seen
    // even within one timestamp tick
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", s_path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(rename(tmp, s_path), 0);
}

#define A "  - {name: team-a, keys: [ipk-test-team-a-0123456789]}\n"
#define B "  - {name: team-b, keys: [ipk-test-team-b-0123456789]}\n"

static tenants_result_t s_who(tenants_store_t *s, const char *key, char *who)
{
    return tenants_store_lookup(s, key, strlen(key), who, 64);
}

static void test_reload(void **state)
{
    (void)state;
    snprintf(s_dir, sizeof s_dir, "/tmp/ipl-tenants-XXXXXX");
    assert_non_null(mkdtemp(s_dir));
    snprintf(s_path, sizeof s_path, "%s/keys.yaml", s_dir);
    s_write("tenants:\n" A);
    char err[256], who[64];
    tenants_store_t *s = tenants_store_new(s_path, 60000, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(s_who(s, "ipk-test-team-a-0123456789", who), TENANTS_OK);
    assert_string_equal(who, "team-a");
    assert_int_equal(s_who(s, "ipk-test-team-b-0123456789", who), TENANTS_UNKNOWN);
    assert_string_equal(who, "");
    assert_int_equal(tenants_store_check(s, err, sizeof err), 0); // unchanged

    s_write("tenants:\n" A B); // a key added
    assert_int_equal(tenants_store_check(s, err, sizeof err), 1);
    assert_int_equal(s_who(s, "ipk-test-team-b-0123456789", who), TENANTS_OK);
    assert_string_equal(who, "team-b");

    s_write("tenants:\n  - {name: team-a, keys: [short]}\n"); // invalid: the last good stays
    assert_int_equal(tenants_store_check(s, err, sizeof err), -1);
    assert_non_null(strstr(err, "keys.yaml:2:"));
    assert_int_equal(s_who(s, "ipk-test-team-b-0123456789", who), TENANTS_OK);
    tenants_store_stats_t st;
    tenants_store_stats(s, &st);
    assert_int_equal(st.version, 2);
    assert_int_equal(st.failures, 1);
    assert_int_equal(st.tenants, 2);
    assert_non_null(strstr(st.last_error, "a key must be"));
    assert_int_equal(tenants_store_check(s, err, sizeof err), 0); // not retried until it changes

    s_write("tenants:\n" B); // team-a's key removed
    assert_int_equal(tenants_store_check(s, err, sizeof err), 1);
    assert_int_equal(s_who(s, "ipk-test-team-a-0123456789", who), TENANTS_UNKNOWN);
    tenants_store_stats(s, &st);
    assert_int_equal(st.version, 3);
    assert_string_equal(st.last_error, "");

    unlink(s_path); // gone: counted as a failed reload, the last good stays
    assert_int_equal(tenants_store_check(s, err, sizeof err), -1);
    assert_int_equal(s_who(s, "ipk-test-team-b-0123456789", who), TENANTS_OK);
    tenants_store_destroy(&s);
    assert_null(s);
    rmdir(s_dir);
    assert_null(tenants_store_new("/nonexistent/k.yaml", 0, err, sizeof err));
}

/* Lookups themselves notice a change after check_ms. */
static void test_lookups_notice_changes(void **state)
{
    (void)state;
    snprintf(s_dir, sizeof s_dir, "/tmp/ipl-tenants-XXXXXX");
    assert_non_null(mkdtemp(s_dir));
    snprintf(s_path, sizeof s_path, "%s/keys.yaml", s_dir);
    s_write("tenants:\n" A);
    char err[256], who[64];
    tenants_store_t *s = tenants_store_new(s_path, 20, err, sizeof err);
    assert_non_null(s);
    s_write("tenants:\n" A B);
    tenants_result_t r = TENANTS_UNKNOWN;
    for (int i = 0; i < 200 && r != TENANTS_OK; i++) { // bounded: 2 s
        usleep(10000);
        r = s_who(s, "ipk-test-team-b-0123456789", who);
    }
    assert_int_equal(r, TENANTS_OK);
    tenants_store_destroy(&s);
    unlink(s_path);
    rmdir(s_dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reload),
        cmocka_unit_test(test_lookups_notice_changes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
