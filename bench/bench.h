/*
 * bench.h — helpers shared by the benchmarks in bench/ (header-only: the Makefile builds every
 * bench/bench_*.c into its own binary and links no bench-local library, so shared code lives
 * here as static functions).
 *
 * Output contract (read by tools/run-bench): every figure is one line on stdout,
 *
 *     {"name": "lookup_p99_us", "value": 4.21, "unit": "us"}
 *
 * optionally with more string fields (e.g. "note"); anything else a benchmark prints goes to
 * stderr. Names are stable: runs are compared by name.
 */
#ifndef BENCH_H
#define BENCH_H

#include <errno.h> /* program_invocation_short_name (GNU) */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Thread CPU time, for "per core" figures. */
static inline uint64_t bench_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Prints one figure line (see the contract above). `note` may be NULL. */
static inline void bench_figure(const char *name, double value, const char *unit, const char *note)
{
    if (note)
        printf("{\"name\": \"%s\", \"value\": %.6g, \"unit\": \"%s\", \"note\": \"%s\"}\n", name,
               value, unit, note);
    else
        printf("{\"name\": \"%s\", \"value\": %.6g, \"unit\": \"%s\"}\n", name, value, unit);
    fflush(stdout);
}

/* A progress line on stderr, prefixed with the program's name. */
#define BENCH_LOG(...)                                                                             \
    do {                                                                                           \
        fprintf(stderr, "%s: ", program_invocation_short_name);                                    \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
    } while (0)

/* Exits with a message: benchmarks have no error recovery, only clear failures. */
#define BENCH_DIE(...)                                                                             \
    do {                                                                                           \
        BENCH_LOG(__VA_ARGS__);                                                                    \
        exit(1);                                                                                   \
    } while (0)

/* xorshift64*: fast, deterministic per seed. */
typedef struct {
    uint64_t s;
} bench_rng_t;

static inline bench_rng_t bench_rng(uint64_t seed)
{
    return (bench_rng_t){seed ? seed : 0x9e3779b97f4a7c15ull};
}

static inline uint64_t bench_rand(bench_rng_t *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* Uniform in [lo, hi]. */
static inline uint64_t bench_range(bench_rng_t *r, uint64_t lo, uint64_t hi)
{
    return lo + bench_rand(r) % (hi - lo + 1);
}

/* splitmix64 finaliser: a bijection, for deterministic "random" hashes from counters. */
static inline uint64_t bench_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static int bench_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (0..1) of n samples, nearest rank; sorts `v` in place. */
static inline uint64_t bench_quantile(uint64_t *v, size_t n, double q)
{
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, bench_cmp_u64);
    size_t k = (size_t)(q * (double)n + 0.999999);
    if (k == 0) k = 1;
    if (k > n) k = n;
    return v[k - 1];
}

#define BENCH_ROUNDS 5

/* The p99 of latency samples as the median of BENCH_ROUNDS consecutive rounds' p99 (each round
 * n / BENCH_ROUNDS samples, in the order taken), so that one burst of another process on a
 * shared machine does not decide the figure alone; the rounds' p99 go to p99r[] sorted. Sorts
 * each round in place: take other quantiles of `v` afterwards (they do not depend on order). */
static inline uint64_t bench_p99_of_rounds(uint64_t *v, size_t n, uint64_t p99r[BENCH_ROUNDS])
{
    size_t m = n / BENCH_ROUNDS;
    for (int r = 0; r < BENCH_ROUNDS; r++)
        p99r[r] = bench_quantile(v + (size_t)r * m, m, 0.99);
    return bench_quantile(p99r, BENCH_ROUNDS, 0.5);
}

/* Resident set size of this process in bytes (/proc/self/statm), 0 when unreadable. */
static inline size_t bench_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long size = 0, resident = 0;
    int n = fscanf(f, "%lu %lu", &size, &resident);
    fclose(f);
    return n == 2 ? resident * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

/* CPU time (user + system) of process `pid` in seconds from /proc/<pid>/stat, -1 on error. */
static inline double bench_proc_cpu_s(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (!p) return -1;
    unsigned long utime = 0, stime = 0;
    /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
     * stime (fields 3..15 of proc(5)) */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2)
        return -1;
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/* Value of "--name" in argv (or `def`). Flags are "--name value" pairs. */
static inline const char *bench_arg(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (argv[i][0] == '-' && argv[i][1] == '-' && strcmp(argv[i] + 2, name) == 0)
            return argv[i + 1];
    return def;
}

static inline long long bench_arg_int(int argc, char **argv, const char *name, long long def)
{
    const char *v = bench_arg(argc, argv, name, NULL);
    return v ? strtoll(v, NULL, 10) : def;
}

#endif
