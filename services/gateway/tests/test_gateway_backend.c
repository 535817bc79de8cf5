/* Unit tests of gateway_backend: every secret source, reload on change, missing and bad
 * secrets (never echoed), auth header forms, slots, CA files and the URL join. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway_backend.h"
#include "ipl_error.h"

typedef struct {
    char dir[256];
    gateway_backend_t *reg;
} s_fix_t;

static int s_setup(void **state)
{
    s_fix_t *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/test_gateway_backend.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    f->reg = gateway_backend_new(f->dir, NULL);
    assert_non_null(f->reg);
    *state = f;
    return 0;
}

static int s_teardown(void **state)
{
    s_fix_t *f = *state;
    gateway_backend_destroy(&f->reg);
    assert_null(f->reg);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static void s_write(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* Sets a file's mtime (so a rewrite is seen, or deliberately not seen, whatever the clock). */
static void s_mtime(const char *path, time_t sec)
{
    struct timespec ts[2] = {{sec, 0}, {sec, 0}};
    assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static ipl_backend_t s_backend(const char *auth, const char *source, const char *name,
                               const char *key)
{
    ipl_backend_t b = {0};
    b.name = "cloud-backend";
    b.url = "http://127.0.0.1:9/v1";
    b.protocol = "openai";
    b.auth = (char *)auth;
    b.auth_header = "";
    b.secret_source = (char *)source;
    b.secret_name = (char *)name;
    b.secret_key = (char *)key;
    b.ca_bundle = "";
    b.ca_secret_name = "";
    b.ca_secret_key = "";
    return b;
}

/* Expects a 502 backend_credentials naming the backend and `needle`, never `value`. */
static void s_expect_credentials_error(int rc, const gateway_api_error_t *err, char *secret,
                                       const char *needle, const char *value)
{
    assert_true(rc < 0);
    assert_null(secret);
    assert_int_equal(err->status, 502);
    assert_string_equal(err->type, "server_error");
    assert_string_equal(err->code, "backend_credentials");
    if (!strstr(err->message, "cloud-backend") || !strstr(err->message, needle))
        fail_msg("message lacks `cloud-backend` or `%s`: %s", needle, err->message);
    if (value && strstr(err->message, value))
        fail_msg("message shows the secret: %s", err->message);
}

/* Expects backend `b`'s secret to read `want` now. */
static void s_expect_secret(gateway_backend_t *reg, const ipl_backend_t *b, const char *want)
{
    gateway_api_error_t err = {0};
    char *secret = NULL;
    if (gateway_backend_secret(reg, b, &secret, &err) != 0) fail_msg("%s", err.message);
    assert_string_equal(secret, want);
    gateway_backend_secret_free(&secret);
    assert_null(secret);
}

static void test_env(void **state)
{
    s_fix_t *f = *state;
    ipl_backend_t b = s_backend("bearer", "env", "TEST_GW_KEY", "");
    gateway_api_error_t err = {0};
    char *secret = NULL;
    setenv("TEST_GW_KEY", "sk-env-123", 1);
    assert_int_equal(gateway_backend_secret(f->reg, &b, &secret, &err), 0);
    assert_string_equal(secret, "sk-env-123");
    char *line = NULL;
    assert_int_equal(gateway_backend_auth_line(&b, secret, &line, &err), 0);
    assert_string_equal(line, "Authorization: Bearer sk-env-123");
    gateway_backend_secret_free(&line);
    gateway_backend_secret_free(&secret);
    assert_null(secret);
    /* changed: read anew */
    setenv("TEST_GW_KEY", "sk-env-456", 1);
    s_expect_secret(f->reg, &b, "sk-env-456");
    /* unset, empty, or a value that would break the header */
    unsetenv("TEST_GW_KEY");
    int rc = gateway_backend_secret(f->reg, &b, &secret, &err);
    s_expect_credentials_error(rc, &err, secret, "environment variable `TEST_GW_KEY`", NULL);
    setenv("TEST_GW_KEY", "", 1);
    rc = gateway_backend_secret(f->reg, &b, &secret, &err);
    s_expect_credentials_error(rc, &err, secret, "not set or empty", NULL);
    setenv("TEST_GW_KEY", "sk-line\r\nX-Evil: 1", 1);
    rc = gateway_backend_secret(f->reg, &b, &secret, &err);
    s_expect_credentials_error(rc, &err, secret, "control character", "sk-line");
    unsetenv("TEST_GW_KEY");
}

static void test_file_trimmed_cached_and_reloaded(void **state)
{
    s_fix_t *f = *state;
    char path[512];
    snprintf(path, sizeof(path), "%s/token", f->dir);
    s_write(path, "sk-file-aaaa\n\n \t");
    s_mtime(path, 1000000);
    ipl_backend_t b = s_backend("bearer", "file", path, "");
    gateway_api_error_t err = {0};
    char *secret = NULL;
    s_expect_secret(f->reg, &b, "sk-file-aaaa");

    /* Same size and mtime (and inode): the cache answers, the file is not read again. */
    s_write(path, "sk-file-bbbb\n\n \t");
    s_mtime(path, 1000000);
    s_expect_secret(f->reg, &b, "sk-file-aaaa");

    /* A new mtime: re-read. */
    s_mtime(path, 1000001);
    s_expect_secret(f->reg, &b, "sk-file-bbbb");

    /* A new size, same mtime: re-read. */
    s_write(path, "sk-file-cc\n");
    s_mtime(path, 1000001);
    s_expect_secret(f->reg, &b, "sk-file-cc");

    /* Empty (only whitespace), missing, a directory, too big. */
    s_write(path, " \n\n");
    int rc = gateway_backend_secret(f->reg, &b, &secret, &err);
    s_expect_credentials_error(rc, &err, secret, "is empty", NULL);
    assert_int_equal(unlink(path), 0);
    rc = gateway_backend_secret(f->reg, &b, &secret, &err);
    s_expect_credentials_error(rc, &err, secret, path, NULL);
    assert_non_null(strstr(err.message, "No such file"));
    assert_non_null(strstr(err.message, "spec.auth.file"));
    b.secret_name = f->dir;
    rc = gateway_backend_secret(f->reg, &b, &secret, &err);
    s_expect_credentials_error(rc, &err, secret, f->dir, NULL);
    b.secret_name = path;
    char *big = malloc(GATEWAY_BACKEND_SECRET_MAX + 2);
    memset(big, 'k', GATEWAY_BACKEND_SECRET_MAX + 1);
    big[GATEWAY_BACKEND_SECRET_MAX + 1] = '\0';
    s_write(path, big);
    free(big);
    rc = gateway_backend_secret(f->reg, &b, &secret, &err);
    s_expect_credentials_error(rc, &err, secret, "16 KiB", "kkkkkkkk");
    /* A line break inside the secret never reaches a header, nor the message. */
    s_write(path, "sk-part-one\nsk-part-two\n");
    rc = gateway_backend_secret(f->reg, &b, &secret, &err);
    s_expect_credentials_error(rc, &err, secret, "control character", "sk-part");
}

/* A Kubernetes Secret volume: <dir>/<name>/<key> is a link to ..data/<key>, and an update
 * swaps the ..data link atomically. */
static void test_secret_ref_and_atomic_swap(void **state)
{
    s_fix_t *f = *state;
    char sdir[512], v1[600], v2[600], data[600], key[600], file[700];
    snprintf(sdir, sizeof(sdir), "%s/cloud-credentials", f->dir);
    assert_int_equal(mkdir(sdir, 0700), 0);
    snprintf(v1, sizeof(v1), "%s/..v1", sdir);
    snprintf(v2, sizeof(v2), "%s/..v2", sdir);
    assert_int_equal(mkdir(v1, 0700), 0);
    assert_int_equal(mkdir(v2, 0700), 0);
    snprintf(file, sizeof(file), "%s/token", v1);
    s_write(file, "sk-ref-one\n");
    snprintf(file, sizeof(file), "%s/token", v2);
    s_write(file, "sk-ref-two\n");
    snprintf(data, sizeof(data), "%s/..data", sdir);
    assert_int_equal(symlink("..v1", data), 0);
    snprintf(key, sizeof(key), "%s/token", sdir);
    assert_int_equal(symlink("..data/token", key), 0);

    ipl_backend_t b = s_backend("header", "secretRef", "cloud-credentials", "token");
    b.auth_header = "x-api-key";
    gateway_api_error_t err = {0};
    char *secret = NULL;
    assert_int_equal(gateway_backend_secret(f->reg, &b, &secret, &err), 0);
    assert_string_equal(secret, "sk-ref-one");
    char *line = NULL;
    assert_int_equal(gateway_backend_auth_line(&b, secret, &line, &err), 0);
    assert_string_equal(line, "x-api-key: sk-ref-one");
    gateway_backend_secret_free(&line);
    gateway_backend_secret_free(&secret);

    char tmp[600];
    snprintf(tmp, sizeof(tmp), "%s/..data_tmp", sdir);
    assert_int_equal(symlink("..v2", tmp), 0);
    assert_int_equal(rename(tmp, data), 0);
    s_expect_secret(f->reg, &b, "sk-ref-two");

    /* A missing key names the Secret, the key and where it is mounted. */
    b.secret_key = "nokey";
    int rc = gateway_backend_secret(f->reg, &b, &secret, &err);
    s_expect_credentials_error(rc, &err, secret, "Secret `cloud-credentials` key `nokey`", NULL);
    assert_non_null(strstr(err.message, f->dir));
}

static void test_auth_forms(void **state)
{
    s_fix_t *f = *state;
    gateway_api_error_t err = {0};
    char *secret = (char *)"x", *line = (char *)"x";
    ipl_backend_t none = s_backend("none", "", "", "");
    assert_int_equal(gateway_backend_secret(f->reg, &none, &secret, &err), 0);
    assert_null(secret);
    assert_int_equal(gateway_backend_auth_line(&none, NULL, &line, &err), 0);
    assert_null(line);
    ipl_backend_t empty = s_backend("", "", "", "");
    assert_int_equal(gateway_backend_secret(f->reg, &empty, &secret, &err), 0);
    assert_null(secret);

    ipl_backend_t h = s_backend("header", "env", "X", "");
    const char *bad[] = {"", "x api key", "x-api-key:", "x\r\ny"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        h.auth_header = (char *)bad[i];
        assert_int_equal(gateway_backend_auth_line(&h, "sk-hdr", &line, &err), IPL_E_INVAL);
        assert_null(line);
        assert_string_equal(err.code, "backend_credentials");
        assert_null(strstr(err.message, "sk-hdr"));
    }
    ipl_backend_t odd = s_backend("basic", "env", "X", "");
    assert_int_equal(gateway_backend_auth_line(&odd, "sk-odd", &line, &err), IPL_E_INVAL);
    assert_non_null(strstr(err.message, "basic"));
    assert_null(strstr(err.message, "sk-odd"));
    ipl_backend_t src = s_backend("bearer", "vault", "X", "");
    assert_int_equal(gateway_backend_secret(f->reg, &src, &secret, &err), IPL_E_INVAL);
    assert_non_null(strstr(err.message, "vault"));
}

static void test_slots(void **state)
{
    s_fix_t *f = *state;
    ipl_backend_t b = s_backend("none", "", "", "");
    b.max_connections = 2;
    gateway_backend_slot_t *a = gateway_backend_acquire(f->reg, &b);
    gateway_backend_slot_t *c = gateway_backend_acquire(f->reg, &b);
    assert_non_null(a);
    assert_non_null(c);
    assert_null(gateway_backend_acquire(f->reg, &b));
    assert_int_equal(gateway_backend_inflight(f->reg, "cloud-backend"), 2);
    gateway_backend_release(f->reg, &a);
    assert_null(a);
    gateway_backend_release(f->reg, &a); /* NULL: nothing */
    assert_int_equal(gateway_backend_inflight(f->reg, "cloud-backend"), 1);
    a = gateway_backend_acquire(f->reg, &b);
    assert_non_null(a);
    gateway_backend_release(f->reg, &a);
    gateway_backend_release(f->reg, &c);
    assert_int_equal(gateway_backend_inflight(f->reg, "cloud-backend"), 0);
    b.max_connections = 0; /* no limit */
    gateway_backend_slot_t *many[10];
    for (int i = 0; i < 10; i++)
        assert_non_null(many[i] = gateway_backend_acquire(f->reg, &b));
    for (int i = 0; i < 10; i++)
        gateway_backend_release(f->reg, &many[i]);
    assert_int_equal(gateway_backend_inflight(f->reg, "nobody"), 0);
}

static void test_ca_file(void **state)
{
    s_fix_t *f = *state;
    ipl_backend_t b = s_backend("none", "", "", "");
    char out[512], want[512];
    assert_string_equal(gateway_backend_ca_file(f->reg, &b, out, sizeof(out)), "");
    b.ca_secret_name = "ca";
    b.ca_secret_key = "ca.crt";
    snprintf(want, sizeof(want), "%s/ca/ca.crt", f->dir);
    assert_string_equal(gateway_backend_ca_file(f->reg, &b, out, sizeof(out)), want);
    b.ca_bundle = "/etc/ssl/mine.pem";
    assert_string_equal(gateway_backend_ca_file(f->reg, &b, out, sizeof(out)), "/etc/ssl/mine.pem");
    gateway_backend_warn_insecure(f->reg, &b); /* once; must not crash twice */
    gateway_backend_warn_insecure(f->reg, &b);
}

static void test_url_join(void **state)
{
    (void)state;
    static const struct {
        const char *base, *path, *want;
    } cases[] = {
        {"http://h:1/v1", "/v1/chat/completions", "http://h:1/v1/chat/completions"},
        {"http://h:1/v1/", "/v1/chat/completions", "http://h:1/v1/chat/completions"},
        {"http://h:1", "/v1/chat/completions", "http://h:1/chat/completions"},
        {"http://h:1/", "/v1/completions", "http://h:1/completions"},
        {"https://api.example.com/openai/v1", "/v1/completions",
         "https://api.example.com/openai/v1/completions"},
        {"http://h:1/v1", "/v1", "http://h:1/v1"},
        {"http://h:1/v1", "/v1//chat/completions", "http://h:1/v1/chat/completions"},
        {"http://h:1/v1", "/v10/x", "http://h:1/v1/v10/x"}, /* not a /v1 prefix */
        {"http://h:1/v1", "/other", "http://h:1/v1/other"},
    };
    char out[256];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(gateway_backend_url(cases[i].base, cases[i].path, out, sizeof(out)), 0);
        if (strcmp(out, cases[i].want))
            fail_msg("%s + %s: got %s, want %s", cases[i].base, cases[i].path, out, cases[i].want);
    }
    char tiny[16];
    assert_int_equal(
        gateway_backend_url("http://h:1/v1", "/v1/chat/completions", tiny, sizeof(tiny)),
        IPL_E_INVAL);
}

static void test_shown_url_and_find(void **state)
{
    (void)state;
    char out[128];
    assert_string_equal(gateway_backend_shown_url("https://user:pw@h:1/v1", out, sizeof(out)),
                        "https://h:1/v1");
    assert_string_equal(gateway_backend_shown_url("http://h:1/v1?a=b@c", out, sizeof(out)),
                        "http://h:1/v1?a=b@c");
    assert_string_equal(gateway_backend_shown_url("http://h:1", out, sizeof(out)), "http://h:1");
    ipl_backend_t bs[2] = {s_backend("none", "", "", ""), s_backend("none", "", "", "")};
    bs[1].name = "other";
    ipl_policy_t p = {0};
    p.backends = bs;
    p.backends_len = 2;
    assert_ptr_equal(gateway_backend_find(&p, "other"), &bs[1]);
    assert_ptr_equal(gateway_backend_find(&p, "cloud-backend"), &bs[0]);
    assert_null(gateway_backend_find(&p, "nope"));
    assert_null(gateway_backend_find(NULL, "nope"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_env, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_file_trimmed_cached_and_reloaded, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_secret_ref_and_atomic_swap, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_auth_forms, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_slots, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_ca_file, s_setup, s_teardown),
        cmocka_unit_test(test_url_join),
        cmocka_unit_test(test_shown_url_and_find),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
