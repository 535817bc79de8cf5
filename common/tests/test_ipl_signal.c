/*
 * Unit tests of ipl_signal: SIGTERM, SIGINT and ipl_signal_request_stop() set the flag and make
 * the fd readable, and each is counted (a draining service's second signal); SIGPIPE is ignored;
 * czmq's own handler stays out of the way even after czmq initialises; and a separate process
 * blocked in poll(2) wakes when another process signals it. Tests run in order: the first one
 * checks the state before install.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <czmq.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ipl_clock.h"
#include "ipl_signal.h"

static bool s_readable(int fd, int timeout_ms)
{
    struct pollfd item = {.fd = fd, .events = POLLIN};
    return poll(&item, 1, timeout_ms) == 1 && (item.revents & POLLIN);
}

static void test_before_install(void **state)
{
    (void)state;
    assert_int_equal(ipl_signal_fd(), -1);
    assert_false(ipl_signal_stopping());
    assert_int_equal(ipl_signal_count(), 0);
}

static void test_install_is_idempotent(void **state)
{
    (void)state;
    assert_int_equal(ipl_signal_install(), 0);
    int fd = ipl_signal_fd();
    assert_true(fd >= 0);
    assert_int_equal(ipl_signal_install(), 0);
    assert_int_equal(ipl_signal_fd(), fd);
    assert_false(ipl_signal_stopping());
    assert_false(s_readable(fd, 0));
}

static void s_check_stop_then_reset(void)
{
    assert_true(ipl_signal_stopping());
    assert_true(s_readable(ipl_signal_fd(), 1000));
    ipl_signal_reset();
    assert_false(ipl_signal_stopping());
    assert_false(s_readable(ipl_signal_fd(), 0));
}

static void test_sigterm(void **state)
{
    (void)state;
    assert_int_equal(raise(SIGTERM), 0); // would kill the test without the handler
    s_check_stop_then_reset();
}

static void test_sigint(void **state)
{
    (void)state;
    assert_int_equal(raise(SIGINT), 0);
    s_check_stop_then_reset();
}

static void test_request_stop_and_repeated_signals(void **state)
{
    (void)state;
    ipl_signal_request_stop();
    s_check_stop_then_reset();
    // Many stops (more than a pipe holds is not needed: each is one byte) drain in one reset.
    for (int i = 0; i < 100; i++)
        ipl_signal_request_stop();
    s_check_stop_then_reset();
}

static void test_signals_are_counted(void **state)
{
    (void)state;
    assert_int_equal(ipl_signal_count(), 0);
    assert_int_equal(raise(SIGTERM), 0);
    assert_int_equal(ipl_signal_count(), 1);
    assert_int_equal(raise(SIGINT), 0); // the second: a draining service stops waiting
    assert_int_equal(ipl_signal_count(), 2);
    ipl_signal_request_stop();
    assert_int_equal(ipl_signal_count(), 3);
    s_check_stop_then_reset();
    assert_int_equal(ipl_signal_count(), 0);
}

static void test_sigpipe_ignored(void **state)
{
    (void)state;
    struct sigaction current;
    assert_int_equal(sigaction(SIGPIPE, NULL, &current), 0);
    assert_ptr_equal(current.sa_handler, SIG_IGN);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    close(fds[0]);
    errno = 0;
    assert_int_equal(write(fds[1], "x", 1), -1); // alive: no SIGPIPE death
    assert_int_equal(errno, EPIPE);
    close(fds[1]);
}

static void test_czmq_does_not_take_over(void **state)
{
    (void)state;
    struct sigaction before, after;
    sigaction(SIGTERM, NULL, &before);
    // The first socket runs zsys_init(), which installs czmq's handler unless disabled.
    zsock_t *sock = zsock_new(ZMQ_PAIR);
    assert_non_null(sock);
    zsock_destroy(&sock);
    sigaction(SIGTERM, NULL, &after);
    assert_ptr_equal(after.sa_handler, before.sa_handler);
    raise(SIGTERM);
    assert_false(zsys_interrupted);
    s_check_stop_then_reset();
}

static void test_other_process_wakes_poll(void **state)
{
    (void)state;
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        // A fresh process image is not needed: install is idempotent and the flag is clear.
        close(ready[0]);
        ssize_t rc = write(ready[1], "r", 1);
        (void)rc;
        // poll(2) is never restarted: the signal may surface as EINTR, then the fd is readable.
        struct pollfd item = {.fd = ipl_signal_fd(), .events = POLLIN};
        int n;
        uint64_t deadline = ipl_mono_ms() + 5000;
        do
            n = poll(&item, 1, 100);
        while ((n == 0 || (n < 0 && errno == EINTR)) && ipl_mono_ms() < deadline);
        _exit(n == 1 && (item.revents & POLLIN) && ipl_signal_stopping() ? 0 : 3);
    }
    close(ready[1]);
    char byte;
    assert_int_equal(read(ready[0], &byte, 1), 1);
    close(ready[0]);
    ipl_sleep_ms(20); // let the child reach poll (it is correct either way)
    assert_int_equal(kill(child, SIGTERM), 0);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_false(ipl_signal_stopping()); // the parent was not signalled
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_before_install),
        cmocka_unit_test(test_install_is_idempotent),
        cmocka_unit_test(test_sigterm),
        cmocka_unit_test(test_sigint),
        cmocka_unit_test(test_request_stop_and_repeated_signals),
        cmocka_unit_test(test_signals_are_counted),
        cmocka_unit_test(test_sigpipe_ignored),
        cmocka_unit_test(test_czmq_does_not_take_over),
        cmocka_unit_test(test_other_process_wakes_poll),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
