/*
 * ipl_signal — SIGTERM/SIGINT to a stop flag plus a self-pipe, so poll loops wake at once.
 *
 *   signal ──► s_handler ──► s_stopping = 1, s_count++
 *                        └─► write(s_pipe[1], "x")  ──►  s_pipe[0] readable (ipl_signal_fd)
 *
 * Both pipe ends are non-blocking: a full pipe just means it is already readable.
 */
#include "ipl_signal.h"

#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#include "ipl_error.h"

// A lock-free atomic: read by every thread, written from the signal handler.
static atomic_int s_stopping;
static atomic_uint s_count; // stop requests: a draining service exits at once on the second
static int s_pipe[2] = {-1, -1};

static void s_wake(void)
{
    int saved_errno = errno;
    if (s_pipe[1] >= 0) {
        ssize_t rc = write(s_pipe[1], "x", 1);
        (void)rc; // EAGAIN: the pipe is full, so it is readable already
    }
    errno = saved_errno;
}

static void s_handler(int signum)
{
    (void)signum;
    atomic_store(&s_stopping, 1);
    atomic_fetch_add(&s_count, 1);
    s_wake();
}

int ipl_signal_install(void)
{
    if (s_pipe[0] >= 0) return IPL_OK; // idempotent
    // czmq would otherwise install its own SIGINT/SIGTERM handler in zsys_init and swallow
    // the signal into zsys_interrupted; this must run before our sigaction() below because
    // it restores the handlers it saved.
    zsys_handler_set(NULL);

    int fds[2];
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return IPL_E_IO;
    s_pipe[1] = fds[1];
    s_pipe[0] = fds[0];

    struct sigaction action = {0};
    action.sa_handler = s_handler;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    struct sigaction ignore = {0};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    if (sigaction(SIGTERM, &action, NULL) != 0 || sigaction(SIGINT, &action, NULL) != 0 ||
        sigaction(SIGPIPE, &ignore, NULL) != 0)
        return IPL_E_IO;
    if (atomic_load(&s_stopping))
        s_wake(); // a stop requested before install still makes the fd readable
    return IPL_OK;
}

bool ipl_signal_stopping(void)
{
    return atomic_load(&s_stopping) != 0;
}

int ipl_signal_fd(void)
{
    return s_pipe[0];
}

void ipl_signal_request_stop(void)
{
    atomic_store(&s_stopping, 1);
    atomic_fetch_add(&s_count, 1);
    s_wake();
}

unsigned ipl_signal_count(void)
{
    return atomic_load(&s_count);
}

void ipl_signal_reset(void)
{
    atomic_store(&s_stopping, 0);
    atomic_store(&s_count, 0);
    if (s_pipe[0] < 0) return;
    char drain[64];
    while (read(s_pipe[0], drain, sizeof drain) > 0) {
    }
}
