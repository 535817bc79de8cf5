/*
 * fakeclock — an LD_PRELOAD shim for instruction counts that do not move between runs.
 *
 * Every clock_gettime (monotonic and wall alike) reads one virtual clock that advances
 * FAKECLOCK_STEP_NS nanoseconds per call (default 2000), so the decider's time-dependent work
 * (backlog drains, ledger rotations, pending-prefix expiry) happens at the same decisions in
 * every run: two runs of one binary under callgrind give the same counts, and two builds can
 * be compared instruction for instruction. 2000 ns is about one decision per 10 µs (native
 * speed); 200000 about what a decision sees under callgrind with the real clock.
 *
 *   make build/bench/fakeclock.so
 *   FAKECLOCK_STEP_NS=2000 LD_PRELOAD=build/bench/fakeclock.so \
 *       valgrind --tool=callgrind build/bench/bench_router --requests 5000
 *
 * For measurement only: timestamps are fake, so wall-clock figures printed meanwhile are not.
 */
#include <stdlib.h>
#include <time.h>

static unsigned long long s_ns = 1764000000ull * 1000000000ull;
static unsigned long long s_step;

int clock_gettime(clockid_t clock, struct timespec *ts)
{
    (void)clock;
    if (!s_step) {
        const char *e = getenv("FAKECLOCK_STEP_NS");
        s_step = e ? strtoull(e, NULL, 10) : 2000;
        if (!s_step) s_step = 1;
    }
    s_ns += s_step;
    ts->tv_sec = (time_t)(s_ns / 1000000000ull);
    ts->tv_nsec = (long)(s_ns % 1000000000ull);
    return 0;
}
