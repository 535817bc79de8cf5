/*
 * Unit tests of policy_watch: real inotify events on a temporary directory, fed to the watch
 * with made-up times so that the debounce is checked exactly: one look 100 ms after the last
 * event of a burst, at most 1 s after its first, a compilation only when an event names a
 * policy file; the directory going away and coming back; polling when asked or when the
 * directory cannot be watched; the directory signature.
 */
#include <poll.h>
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

#include "ipl_log.h"
#include "policy_watch.h"
#include "tests/policy_test.h"

// Waits (up to 2 s) for the inotify fd to be readable, then drains it at time `now`.
static size_t s_drain_at(policy_watch_t *w, uint64_t now)
{
    struct pollfd pfd = {.fd = policy_watch_fd(w), .events = POLLIN};
    assert_int_equal(poll(&pfd, 1, 2000), 1);
    size_t n = policy_watch_drain(w, now);
    assert_true(n > 0);
    return n;
}

static policy_watch_t *s_new(const char *dir, bool poll_mode)
{
    policy_watch_config_t cfg = {.poll = poll_mode};
    policy_watch_t *w = policy_watch_new(dir, &cfg);
    assert_non_null(w);
    return w;
}

static void test_debounce(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_policy_watch_XXXXXX";
    assert_non_null(mkdtemp(dir));
    policy_watch_t *w = s_new(dir, false);
    assert_string_equal(policy_watch_mode(w), "inotify");
    assert_string_equal(policy_watch_reason(w), "");
    assert_true(policy_watch_fd(w) >= 0);
    assert_int_equal(policy_watch_config(w)->debounce_ms, 100);
    assert_int_equal(policy_watch_config(w)->max_delay_ms, 1000);
    assert_int_equal(policy_watch_due(w, 1000), POLICY_WATCH_LOOK); // a first look at once
    assert_int_equal(policy_watch_due(w, 1001), POLICY_WATCH_IDLE);
    assert_int_equal(policy_watch_wait_ms(w, 1001), -1); // only an event brings the next

    // One event: looked at 100 ms later, compiled (it names a policy file).
    s_policy_write(dir, "a.yaml", "x: 1\n");
    s_drain_at(w, 2000);
    assert_int_equal(policy_watch_wait_ms(w, 2000), 100);
    assert_int_equal(policy_watch_due(w, 2099), POLICY_WATCH_IDLE);
    assert_int_equal(policy_watch_wait_ms(w, 2099), 1);
    assert_int_equal(policy_watch_due(w, 2100), POLICY_WATCH_COMPILE);
    assert_int_equal(policy_watch_due(w, 2200), POLICY_WATCH_IDLE); // once

    // A burst (write + rename, then more writes 80 ms apart): one look after the last.
    s_policy_write(dir, "b.yaml.tmp", "x: 2\n");
    char from[512], to[512];
    s_policy_path(from, sizeof from, dir, "b.yaml.tmp");
    s_policy_path(to, sizeof to, dir, "b.yaml");
    assert_int_equal(rename(from, to), 0);
    s_drain_at(w, 3000);
    s_policy_write(dir, "c.yml", "x: 3\n");
    s_drain_at(w, 3080);
    assert_int_equal(policy_watch_due(w, 3150), POLICY_WATCH_IDLE); // 3000 + 100 is not enough
    assert_int_equal(policy_watch_due(w, 3180), POLICY_WATCH_COMPILE);

    // Events that name no policy file: a look (the signature decides), no forced compile.
    s_policy_write(dir, ".swap", "x");
    s_policy_write(dir, "notes.txt", "x");
    s_drain_at(w, 4000);
    assert_int_equal(policy_watch_due(w, 4100), POLICY_WATCH_LOOK);

    // A directory written to without pause (every 80 ms): looked at 1 s after the first event.
    for (uint64_t t = 5000; t < 6000; t += 80) {
        s_policy_write(dir, "a.yaml", t % 160 ? "x: 4\n" : "x: 5\n");
        s_drain_at(w, t);
        assert_int_equal(policy_watch_due(w, t), POLICY_WATCH_IDLE);
    }
    assert_int_equal(policy_watch_wait_ms(w, 5990), 10); // 5000 + 1000, not 5960 + 100
    assert_int_equal(policy_watch_due(w, 6000), POLICY_WATCH_COMPILE);
    assert_true(policy_watch_events(w) >= 10);

    policy_watch_destroy(&w);
    assert_null(w);
    policy_watch_destroy(&w); // NULL is fine
    s_policy_unlink(dir, "a.yaml");
    s_policy_unlink(dir, "b.yaml");
    s_policy_unlink(dir, "c.yml");
    s_policy_unlink(dir, ".swap");
    s_policy_unlink(dir, "notes.txt");
    rmdir(dir);
}

// The directory deleted: polling until it exists again, then inotify again.
static void test_directory_goes_and_comes_back(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_policy_watch_XXXXXX";
    assert_non_null(mkdtemp(dir));
    policy_watch_t *w = s_new(dir, false);
    assert_int_equal(policy_watch_due(w, 1000), POLICY_WATCH_LOOK);
    assert_int_equal(rmdir(dir), 0);
    s_drain_at(w, 2000);
    assert_string_equal(policy_watch_mode(w), "poll");
    assert_non_null(strstr(policy_watch_reason(w), "deleted or moved"));
    assert_int_equal(policy_watch_due(w, 2000), POLICY_WATCH_LOOK); // the files are gone: look
    assert_string_equal(policy_watch_mode(w), "poll");              // and cannot watch yet
    assert_non_null(strstr(policy_watch_reason(w), "cannot watch the directory"));
    assert_int_equal(policy_watch_due(w, 2500), POLICY_WATCH_IDLE);
    assert_int_equal(policy_watch_wait_ms(w, 2500), 500);
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(policy_watch_due(w, 3000), POLICY_WATCH_LOOK); // watched again
    assert_string_equal(policy_watch_mode(w), "inotify");
    s_policy_write(dir, "a.yaml", "x: 1\n");
    s_drain_at(w, 4000);
    assert_int_equal(policy_watch_due(w, 4100), POLICY_WATCH_COMPILE);
    policy_watch_destroy(&w);
    s_policy_unlink(dir, "a.yaml");
    rmdir(dir);
}

static void test_polling(void **state)
{
    (void)state;
    policy_watch_t *w = s_new("/tmp", true); // asked for
    assert_string_equal(policy_watch_mode(w), "poll");
    assert_non_null(strstr(policy_watch_reason(w), "--watch poll"));
    assert_int_equal(policy_watch_fd(w), -1);
    assert_int_equal(policy_watch_drain(w, 1), 0);
    assert_int_equal(policy_watch_due(w, 10000), POLICY_WATCH_LOOK);
    assert_int_equal(policy_watch_due(w, 10500), POLICY_WATCH_IDLE);
    assert_int_equal(policy_watch_wait_ms(w, 10500), 500);
    assert_int_equal(policy_watch_due(w, 11000), POLICY_WATCH_LOOK);
    assert_string_equal(policy_watch_mode(w), "poll"); // for good
    policy_watch_destroy(&w);

    // A directory that does not exist yet: polled, watched once it exists.
    char dir[] = "/tmp/test_policy_watch_XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(rmdir(dir), 0);
    w = s_new(dir, false);
    assert_string_equal(policy_watch_mode(w), "poll");
    assert_non_null(strstr(policy_watch_reason(w), "No such file or directory"));
    assert_true(policy_watch_fd(w) >= 0);
    assert_int_equal(policy_watch_due(w, 1000), POLICY_WATCH_LOOK);
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(policy_watch_due(w, 2000), POLICY_WATCH_LOOK);
    assert_string_equal(policy_watch_mode(w), "inotify");
    policy_watch_destroy(&w);
    rmdir(dir);
}

static void test_signature(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_policy_watch_XXXXXX";
    assert_non_null(mkdtemp(dir));
    uint64_t empty = policy_watch_signature(dir);
    assert_true(empty > 1);
    s_policy_write(dir, "a.yaml", "x: 1\n");
    uint64_t one = policy_watch_signature(dir);
    assert_true(one != empty);
    assert_true(policy_watch_signature(dir) == one); // nothing changed
    s_policy_write(dir, ".a.yaml", "hidden");
    s_policy_write(dir, "README", "not policy");
    assert_true(policy_watch_signature(dir) == one); // not policy files
    s_policy_write(dir, "a.yaml", "x: 12\n");        // another size
    uint64_t two = policy_watch_signature(dir);
    assert_true(two != one);
    char from[512], to[512];
    s_policy_path(from, sizeof from, dir, "a.yaml");
    s_policy_path(to, sizeof to, dir, "b.yml");
    assert_int_equal(rename(from, to), 0); // another name
    assert_true(policy_watch_signature(dir) != two);
    assert_int_equal(policy_watch_signature("/nonexistent-policy-dir"), 1);
    s_policy_unlink(dir, "b.yml");
    s_policy_unlink(dir, ".a.yaml");
    s_policy_unlink(dir, "README");
    rmdir(dir);
}

int main(void)
{
    ipl_log_set_level(IPL_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_debounce),
        cmocka_unit_test(test_directory_goes_and_comes_back),
        cmocka_unit_test(test_polling),
        cmocka_unit_test(test_signature),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
