/*
 * policy_test — helpers shared by the policy tests (libs/policy/tests and services/policy/tests;
 * header only, like ipl_test_http.h): files in a temporary policy directory, and a GET that
 * answers JSON.
 *
 *   s_policy_write(dir, "a.yaml", text);     // in place (same inode), as cp does
 *   s_policy_replace(dir, "a.yaml", text);   // .tmp + rename (a new inode), as editors do
 *   cJSON *o = s_policy_get_json(port, "/debug/policy");   // asserts 200
 *
 * Include after <cmocka.h>; call curl_global_init() in main before s_policy_get_json.
 */
#ifndef POLICY_TEST_H
#define POLICY_TEST_H

#include <stdio.h>
#include <unistd.h>

#include "tests/ipl_test_http.h"

S_TEST_FN void s_policy_path(char *buf, size_t size, const char *dir, const char *name)
{
    snprintf(buf, size, "%s/%s", dir, name);
}

S_TEST_FN void s_policy_write(const char *dir, const char *name, const char *text)
{
    char path[512];
    s_policy_path(path, sizeof path, dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

S_TEST_FN void s_policy_replace(const char *dir, const char *name, const char *text)
{
    char hidden[256], tmp[512], path[512];
    snprintf(hidden, sizeof hidden, ".%s.tmp", name); // hidden: the compiler never reads it
    s_policy_write(dir, hidden, text);
    s_policy_path(tmp, sizeof tmp, dir, hidden);
    s_policy_path(path, sizeof path, dir, name);
    assert_int_equal(rename(tmp, path), 0);
}

S_TEST_FN void s_policy_unlink(const char *dir, const char *name)
{
    char path[512];
    s_policy_path(path, sizeof path, dir, name);
    unlink(path);
}

S_TEST_FN cJSON *s_policy_get_json(int port, const char *path)
{
    s_reply_t r = {0};
    assert_int_equal(s_http(port, "GET", path, NULL, &r), CURLE_OK);
    assert_int_equal(r.status, 200);
    cJSON *o = cJSON_Parse(r.body);
    assert_non_null(o);
    s_reply_free(&r);
    return o;
}

#endif
