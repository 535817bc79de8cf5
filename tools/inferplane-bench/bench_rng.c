/*
 * bench_rng — xoshiro256** and length distributions. See bench_rng.h.
 */
#include "bench_rng.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"

uint64_t bench_mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void bench_rng_seed(bench_rng_t *rng, uint64_t seed)
{
    for (int i = 0; i < 4; i++) {
        seed = bench_mix64(seed);
        rng->s[i] = seed;
    }
}

static uint64_t s_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t bench_rng_next(bench_rng_t *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = s_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = s_rotl(s[3], 45);
    return result;
}

double bench_rng_uniform(bench_rng_t *rng)
{
    return (double)(bench_rng_next(rng) >> 11) * 0x1.0p-53;
}

double bench_rng_normal(bench_rng_t *rng)
{
    double u1 = bench_rng_uniform(rng), u2 = bench_rng_uniform(rng);
    return sqrt(-2 * log(1 - u1)) * cos(2 * M_PI * u2);
}

double bench_rng_exp(bench_rng_t *rng, double mean)
{
    return -mean * log(1 - bench_rng_uniform(rng));
}

int bench_len_parse(const char *spec, bench_len_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *colon = strchr(spec, ':');
    const char *nums = colon ? colon + 1 : spec;
    size_t klen = colon ? (size_t)(colon - spec) : 0;
    if (!colon || (klen == 5 && !strncmp(spec, "fixed", 5)))
        out->kind = BENCH_LEN_FIXED;
    else if (klen == 7 && !strncmp(spec, "uniform", 7))
        out->kind = BENCH_LEN_UNIFORM;
    else if (klen == 6 && !strncmp(spec, "normal", 6))
        out->kind = BENCH_LEN_NORMAL;
    else if (klen == 9 && !strncmp(spec, "lognormal", 9))
        out->kind = BENCH_LEN_LOGNORMAL;
    else if (klen == 11 && !strncmp(spec, "exponential", 11))
        out->kind = BENCH_LEN_EXPONENTIAL;
    else {
        ipl_errf(err, errlen,
                 "\"%s\": unknown distribution \"%.*s\" (fixed, uniform, normal, "
                 "lognormal, exponential)",
                 spec, (int)klen, spec);
        return IPL_E_INVAL;
    }
    double v[4];
    int n = 0;
    const char *p = nums;
    while (n < 4) {
        char *end;
        v[n] = strtod(p, &end);
        if (end == p || !isfinite(v[n]) || v[n] < 0) break;
        n++;
        p = end;
        if (*p != ',') break;
        p++;
    }
    /* how many numbers each kind takes (at least, at most); for the kinds with optional
     * bounds, one more than the least is a MIN without its MAX */
    static const int want[][2] = {{1, 1}, {2, 2}, {2, 4}, {2, 4}, {1, 3}};
    bool exp_kind = out->kind == BENCH_LEN_EXPONENTIAL;
    bool half_bounds = out->kind >= BENCH_LEN_NORMAL && n == want[out->kind][0] + 1;
    if (*p || n < want[out->kind][0] || n > want[out->kind][1] || half_bounds) {
        ipl_errf(err, errlen, "\"%s\": expected %s (non-negative numbers)", spec,
                 out->kind == BENCH_LEN_FIXED     ? "N or fixed:N"
                 : out->kind == BENCH_LEN_UNIFORM ? "uniform:MIN,MAX"
                 : exp_kind                       ? "exponential:MEAN[,MIN,MAX]"
                                                  : "normal|lognormal:MEAN,STDEV[,MIN,MAX]");
        return IPL_E_INVAL;
    }
    out->a = v[0];
    out->b = n > 1 && !exp_kind ? v[1] : 0;
    switch (out->kind) {
    case BENCH_LEN_FIXED:
        out->min = out->max = v[0];
        break;
    case BENCH_LEN_UNIFORM:
        out->min = v[0] < v[1] ? v[0] : v[1];
        out->max = v[0] < v[1] ? v[1] : v[0];
        break;
    case BENCH_LEN_EXPONENTIAL:
        out->min = n == 3 ? v[1] : 0;
        out->max = n == 3 ? v[2] : INFINITY;
        if (out->min > out->max) {
            ipl_errf(err, errlen, "\"%s\": MIN is above MAX", spec);
            return IPL_E_INVAL;
        }
        break;
    default:
        out->min = n == 4 ? v[2] : 1;
        out->max = n == 4 ? v[3] : v[0] + 5 * v[1];
        if (out->min > out->max) {
            ipl_errf(err, errlen, "\"%s\": MIN is above MAX", spec);
            return IPL_E_INVAL;
        }
    }
    return 0;
}

double bench_len_sample(const bench_len_t *len, bench_rng_t *rng)
{
    double x;
    switch (len->kind) {
    case BENCH_LEN_FIXED:
        return len->a;
    case BENCH_LEN_UNIFORM:
        x = len->min + (len->max - len->min) * bench_rng_uniform(rng);
        break;
    case BENCH_LEN_NORMAL:
        x = len->a + len->b * bench_rng_normal(rng);
        break;
    case BENCH_LEN_EXPONENTIAL:
        x = bench_rng_exp(rng, len->a);
        break;
    default: {
        /* the mean and stdev of the result give the log-space parameters */
        double m = len->a > 0 ? len->a : 1e-9;
        double s2 = log(1 + (len->b * len->b) / (m * m));
        x = exp(log(m) - s2 / 2 + sqrt(s2) * bench_rng_normal(rng));
    }
    }
    return x < len->min ? len->min : x > len->max ? len->max : x;
}

double bench_len_mean(const bench_len_t *len)
{
    return len->kind == BENCH_LEN_UNIFORM ? (len->min + len->max) / 2 : len->a;
}
