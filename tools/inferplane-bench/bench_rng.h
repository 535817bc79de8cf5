/*
 * bench_rng — seeded random numbers and the length distributions of synthetic data.
 *
 * The generator is xoshiro256** seeded through splitmix64: the same seed gives the same
 * numbers on every machine (no libc rand). bench_mix64 is splitmix64's finaliser, a stateless
 * hash for deriving per-item seeds (conversation i of seed s: bench_mix64(s ^ bench_mix64(i))).
 *
 * Length specs (tokens, or milliseconds of think time), as a flag value:
 *   "128" or "fixed:128"              always 128
 *   "uniform:64,256"                  uniform over [64, 256]
 *   "normal:128,32[,MIN,MAX]"         mean 128, stdev 32 (GuideLLM's prompt_tokens_stdev);
 *                                     MIN defaults to 1 and MAX to mean + 5 stdev
 *   "lognormal:128,64[,MIN,MAX]"      a log-normal with that mean and stdev (long tails,
 *                                     as real prompt lengths have); same bounds
 *   "exponential:5000[,MIN,MAX]"      an exponential with that mean (memoryless think times,
 *                                     as the cluster simulator's multi-turn users have);
 *                                     MIN defaults to 0 and MAX to none
 * Samples are clamped to [MIN, MAX] (fixed and uniform: their own bounds).
 *
 * Not thread-safe per generator; generators are plain values.
 */
#ifndef BENCH_RNG_H
#define BENCH_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t s[4];
} bench_rng_t;

uint64_t bench_mix64(uint64_t x);
void bench_rng_seed(bench_rng_t *rng, uint64_t seed);
uint64_t bench_rng_next(bench_rng_t *rng);
double bench_rng_uniform(bench_rng_t *rng); /* [0, 1) */
double bench_rng_normal(bench_rng_t *rng);  /* mean 0, stdev 1 */
double bench_rng_exp(bench_rng_t *rng, double mean);

typedef enum {
    BENCH_LEN_FIXED = 0,
    BENCH_LEN_UNIFORM,
    BENCH_LEN_NORMAL,
    BENCH_LEN_LOGNORMAL,
    BENCH_LEN_EXPONENTIAL
} bench_len_kind_t;

typedef struct {
    bench_len_kind_t kind;
    double a, b;     /* fixed: a; uniform: [a, b]; normal/lognormal: mean a, stdev b;
                        exponential: mean a */
    double min, max; /* clamp */
} bench_len_t;

/* Parses a spec (above). 0, or IPL_E_INVAL with a message naming the spec in err. */
int bench_len_parse(const char *spec, bench_len_t *out, char *err, size_t errlen);
/* One sample, clamped (not rounded). */
double bench_len_sample(const bench_len_t *len, bench_rng_t *rng);
/* The distribution's mean before clamping (a, or the middle of uniform). */
double bench_len_mean(const bench_len_t *len);

#endif
