/*
 * Unit tests of ipl_log: the exact line format, level filtering, quoting, the rate limiter and
 * IPL_LOG_EVERY (suppressed=N), and whole lines under concurrent writers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_log.h"

#define S_TS "ts=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "

static FILE *s_out;

static int s_setup(void **state)
{
    (void)state;
    s_out = tmpfile();
    assert_non_null(s_out);
    ipl_log_init("testsvc", IPL_LOG_INFO);
    ipl_log_set_stream(s_out);
    return 0;
}

static int s_teardown(void **state)
{
    (void)state;
    ipl_log_set_stream(NULL);
    fclose(s_out);
    return 0;
}

// Everything written since the last call (caller frees).
static char *s_take(void)
{
    fflush(s_out);
    long size = ftell(s_out);
    char *text = calloc(1, (size_t)size + 1);
    rewind(s_out);
    assert_int_equal(fread(text, 1, (size_t)size, s_out), (size_t)size);
    rewind(s_out);
    assert_int_equal(ftruncate(fileno(s_out), 0), 0);
    return text;
}

static bool s_matches(const char *text, const char *pattern)
{
    regex_t re;
    assert_int_equal(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0);
    int rc = regexec(&re, text, 0, NULL, 0);
    regfree(&re);
    return rc == 0;
}

static int s_count_lines(const char *text)
{
    int n = 0;
    for (const char *p = text; *p; p++)
        n += *p == '\n';
    return n;
}

static void test_line_format(void **state)
{
    (void)state;
    ipl_log(IPL_LOG_INFO, "listening", "addr=%s port=%d", "127.0.0.1", 8080);
    char *text = s_take();
    assert_true(s_matches(text, "^" S_TS "level=info svc=testsvc msg=listening "
                                "addr=127\\.0\\.0\\.1 port=8080\n$"));
    free(text);

    IPL_WARN("no_fields", NULL);
    IPL_ERROR("failed", "errno=%d", 5);
    text = s_take();
    assert_true(s_matches(text, "^" S_TS "level=warn svc=testsvc msg=no_fields\n" S_TS
                                "level=error svc=testsvc msg=failed errno=5\n$"));
    free(text);
}

static void test_levels(void **state)
{
    (void)state;
    IPL_DEBUG("hidden", "x=%d", 1);
    char *text = s_take();
    assert_string_equal(text, "");
    free(text);

    ipl_log_set_level(IPL_LOG_DEBUG);
    assert_int_equal(ipl_log_get_level(), IPL_LOG_DEBUG);
    IPL_DEBUG("shown", "x=%d", 1);
    text = s_take();
    assert_true(s_matches(text, "^" S_TS "level=debug svc=testsvc msg=shown x=1\n$"));
    free(text);

    ipl_log_set_level(IPL_LOG_ERROR);
    IPL_WARN("hidden", NULL);
    IPL_ERROR("shown", NULL);
    text = s_take();
    assert_int_equal(s_count_lines(text), 1);
    assert_non_null(strstr(text, "level=error"));
    free(text);

    ipl_log_set_level(IPL_LOG_OFF);
    IPL_ERROR("hidden", NULL);
    ipl_log(IPL_LOG_OFF, "hidden", NULL); // OFF is not a level to write at
    text = s_take();
    assert_string_equal(text, "");
    free(text);
    ipl_log_set_level(IPL_LOG_INFO);
}

static void test_level_parse(void **state)
{
    (void)state;
    static const char *names[] = {"debug", "info", "warn", "error", "off"};
    for (int i = 0; i < 5; i++) {
        ipl_log_level_t level = IPL_LOG_ERROR;
        assert_int_equal(ipl_log_level_parse(names[i], &level), IPL_OK);
        assert_int_equal(level, i);
    }
    ipl_log_level_t level = IPL_LOG_WARN;
    assert_int_equal(ipl_log_level_parse("verbose", &level), IPL_E_INVAL);
    assert_int_equal(ipl_log_level_parse("INFO ", &level), IPL_E_INVAL);
    assert_int_equal(ipl_log_level_parse("", &level), IPL_E_INVAL);
    assert_int_equal(ipl_log_level_parse(NULL, &level), IPL_E_INVAL);
    assert_int_equal(level, IPL_LOG_WARN); // untouched on error
}

static void test_quote(void **state)
{
    (void)state;
    char buf[64];
    assert_string_equal(ipl_log_quote(buf, sizeof buf, "plain"), "\"plain\"");
    assert_string_equal(ipl_log_quote(buf, sizeof buf, "two words"), "\"two words\"");
    assert_string_equal(ipl_log_quote(buf, sizeof buf, "a\"b\\c"), "\"a\\\"b\\\\c\"");
    assert_string_equal(ipl_log_quote(buf, sizeof buf, "l1\nl2\r\t\x01\x7f"),
                        "\"l1\\nl2\\r\\t\\x01\\x7f\"");
    assert_string_equal(ipl_log_quote(buf, sizeof buf, "caf\xc3\xa9"), "\"caf\xc3\xa9\"");
    assert_string_equal(ipl_log_quote(buf, sizeof buf, ""), "\"\"");
    assert_string_equal(ipl_log_quote(buf, sizeof buf, NULL), "\"\"");

    // Truncation keeps both quotes and never splits an escape.
    char small[6];
    assert_string_equal(ipl_log_quote(small, sizeof small, "abcdef"), "\"abc\"");
    assert_string_equal(ipl_log_quote(small, sizeof small, "ab\"c"), "\"ab\"");
    assert_string_equal(ipl_log_quote(small, sizeof small, "a\nb"), "\"a\\n\"");
    char tiny[3];
    assert_string_equal(ipl_log_quote(tiny, sizeof tiny, "abc"), "\"\"");
    char two[2] = "x";
    assert_string_equal(ipl_log_quote(two, sizeof two, "abc"), "");
}

static void test_errno_preserved_and_long_lines(void **state)
{
    (void)state;
    char big[6000];
    memset(big, 'v', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    errno = ERANGE;
    IPL_INFO("long", "value=%s", big);
    assert_int_equal(errno, ERANGE);
    char *text = s_take();
    assert_int_equal(s_count_lines(text), 1);
    size_t len = strlen(text);
    assert_true(len > 1000 && len <= 4096);
    assert_int_equal(text[len - 1], '\n');
    free(text);
}

static void test_limiter(void **state)
{
    (void)state;
    ipl_log_limiter_t lim = {0};
    unsigned long sup = 99;
    assert_int_equal(ipl_log_limiter_pass(&lim, 0.2, &sup), 1);
    assert_int_equal(sup, 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(ipl_log_limiter_pass(&lim, 0.2, &sup), 0);
    ipl_sleep_ms(250);
    assert_int_equal(ipl_log_limiter_pass(&lim, 0.2, &sup), 1);
    assert_int_equal(sup, 5);
    assert_int_equal(ipl_log_limiter_pass(&lim, 0.2, NULL), 0);

    // A zero window lets everything through.
    ipl_log_limiter_t open = {0};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ipl_log_limiter_pass(&open, 0, &sup), 1);
        assert_int_equal(sup, 0);
    }
}

static void s_flood(int n)
{
    for (int i = 0; i < n; i++)
        IPL_LOG_EVERY(0.2, IPL_LOG_WARN, "bad_frame", "i=%d", i);
}

static void test_log_every(void **state)
{
    (void)state;
    s_flood(10);
    char *text = s_take();
    assert_int_equal(s_count_lines(text), 1);
    assert_true(s_matches(text, "^" S_TS "level=warn svc=testsvc msg=bad_frame i=0\n$"));
    free(text);

    ipl_sleep_ms(250);
    s_flood(3);
    text = s_take();
    assert_int_equal(s_count_lines(text), 1);
    assert_true(s_matches(text, "msg=bad_frame i=0 suppressed=9\n$"));
    free(text);
}

#define S_THREADS 4
#define S_LINES   300

static void *s_writer(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < S_LINES; i++)
        IPL_INFO("tick", "thread=%d i=%d pad=%s", id, i,
                 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    return NULL;
}

static void test_concurrent_lines_do_not_interleave(void **state)
{
    (void)state;
    pthread_t threads[S_THREADS];
    for (int t = 0; t < S_THREADS; t++)
        assert_int_equal(pthread_create(&threads[t], NULL, s_writer, (void *)(intptr_t)t), 0);
    for (int t = 0; t < S_THREADS; t++)
        pthread_join(threads[t], NULL);
    char *text = s_take();
    assert_int_equal(s_count_lines(text), S_THREADS * S_LINES);
    int seen[S_THREADS] = {0};
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        assert_true(s_matches(line, "^" S_TS "level=info svc=testsvc msg=tick thread=[0-9] "
                                    "i=[0-9]+ pad=x{40}$"));
        int id = atoi(strstr(line, "thread=") + 7);
        assert_true(id >= 0 && id < S_THREADS);
        seen[id]++;
    }
    for (int t = 0; t < S_THREADS; t++)
        assert_int_equal(seen[t], S_LINES);
    free(text);
}

static void test_init_copies_service(void **state)
{
    (void)state;
    char name[16] = "gateway";
    ipl_log_init(name, IPL_LOG_INFO);
    strcpy(name, "changed");
    IPL_INFO("started", NULL);
    char *text = s_take();
    assert_non_null(strstr(text, " svc=gateway msg=started\n"));
    free(text);
    ipl_log_init("testsvc", IPL_LOG_INFO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_line_format, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_levels, s_setup, s_teardown),
        cmocka_unit_test(test_level_parse),
        cmocka_unit_test(test_quote),
        cmocka_unit_test_setup_teardown(test_errno_preserved_and_long_lines, s_setup, s_teardown),
        cmocka_unit_test(test_limiter),
        cmocka_unit_test_setup_teardown(test_log_every, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_lines_do_not_interleave, s_setup,
                                        s_teardown),
        cmocka_unit_test_setup_teardown(test_init_copies_service, s_setup, s_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
