/*
 * bench_data — conversations to send. See bench_data.h.
 *
 * Stream ids live in disjoint ranges so no two kinds of text ever coincide:
 *
 *   1 << 60 | bucket << 32 | prefix   synthetic shared prefixes
 *   2 << 60 | hash id                 Mooncake blocks
 *   3 << 60 | group                   our traces' prefix groups (strings hashed below 2^48)
 *   4 << 60 | conversation << 8 | turn  a turn's own text
 */
#include "bench_data.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"

#define S_PREFIX_STREAM(b, i) ((1ull << 60) | ((uint64_t)(b) << 32) | (uint64_t)(i))
#define S_BLOCK_STREAM(h)     ((2ull << 60) | (uint64_t)(h))
#define S_GROUP_STREAM(g)     ((3ull << 60) | ((uint64_t)(g) & ((1ull << 56) - 1)))
#define S_OWN_STREAM(c, t)    ((4ull << 60) | (((uint64_t)(c) & ((1ull << 52) - 1)) << 8) | (t))

/* Common two-letter words: one token each (with their leading space) in byte-level BPE
 * vocabularies and in the built-in tokenizer (pieces of at most 3 bytes). */
static const char s_words[][3] = {"of", "to", "in", "it", "is", "be", "as", "at",
                                  "so", "we", "he", "by", "or", "on", "do", "if",
                                  "me", "my", "up", "an", "go", "no", "us", "am"};
#define S_NWORDS (sizeof s_words / sizeof s_words[0])

struct bench_data {
    bench_data_config_t cfg;
    bench_trace_t *trace; /* NULL: synthetic */
    double bucket_total;
    uint8_t vocab[S_NWORDS];
    uint32_t nvocab;
};

void bench_data_config_defaults(bench_data_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->seed = 42;
    cfg->prompt = (bench_len_t){BENCH_LEN_FIXED, 128, 0, 128, 128};
    cfg->output = (bench_len_t){BENCH_LEN_FIXED, 64, 0, 64, 64};
    cfg->turns = 1;
    cfg->think_ms = (bench_len_t){BENCH_LEN_FIXED, 0, 0, 0, 0};
    cfg->trace_speed = 1;
    cfg->trace_suffix_tokens = 256;
    cfg->block_tokens = 512;
}

int bench_buckets_parse(const char *spec, bench_data_config_t *cfg, char *err, size_t errlen)
{
    const char *p = spec;
    while (*p) {
        char *end;
        double w = strtod(p, &end);
        unsigned long count = 0, tokens = 0;
        bool ok = end != p && *end == ':' && w >= 0 && isfinite(w);
        if (ok) {
            p = end + 1;
            count = strtoul(p, &end, 10);
            ok = end != p && *end == ':' && count >= 1 && count <= (1ul << 31);
        }
        if (ok) {
            p = end + 1;
            tokens = strtoul(p, &end, 10);
            ok = end != p && (*end == ',' || !*end) && tokens <= (1ul << 20);
        }
        if (!ok || cfg->nbuckets == BENCH_MAX_BUCKETS) {
            ipl_errf(err, errlen,
                     "--prefix-buckets \"%s\": expected WEIGHT:COUNT:TOKENS[,...] (at most %d "
                     "buckets, COUNT >= 1)",
                     spec, BENCH_MAX_BUCKETS);
            return IPL_E_INVAL;
        }
        cfg->buckets[cfg->nbuckets++] = (bench_bucket_t){w, (uint32_t)count, (uint32_t)tokens};
        p = *end ? end + 1 : end;
    }
    return 0;
}

static bench_data_t *s_new(const bench_data_config_t *cfg)
{
    if (cfg->turns < 1 || !(cfg->trace_speed > 0) || cfg->block_tokens < 1) return NULL;
    bench_data_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->cfg = *cfg;
    for (uint32_t i = 0; i < cfg->nbuckets; i++)
        self->bucket_total += cfg->buckets[i].weight;
    if (cfg->nbuckets && !(self->bucket_total > 0)) {
        free(self);
        return NULL;
    }
    for (uint32_t i = 0; i < S_NWORDS; i++)
        self->vocab[i] = (uint8_t)i;
    self->nvocab = S_NWORDS;
    return self;
}

bench_data_t *bench_data_new_synthetic(const bench_data_config_t *cfg)
{
    return s_new(cfg);
}

bench_data_t *bench_data_new_trace(const bench_data_config_t *cfg, bench_trace_t **trace)
{
    bench_data_t *self = s_new(cfg);
    if (self) {
        self->trace = *trace;
        *trace = NULL;
    }
    return self;
}

void bench_data_destroy(bench_data_t **self_p)
{
    assert(self_p);
    bench_data_t *self = *self_p;
    if (!self) return;
    bench_trace_destroy(&self->trace);
    free(self);
    *self_p = NULL;
}

int bench_data_use_tokenizer(bench_data_t *self, const ipl_tokenizer_t *tok)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < S_NWORDS; i++) {
        char w[4] = {' ', s_words[i][0], s_words[i][1], 0};
        size_t n1 = 0, n2 = 0;
        uint32_t *a = ipl_tokenizer_encode(tok, w, 3, &n1);
        /* twice in a row: a merge across the space would make two words one token */
        char ww[7] = {' ', w[1], w[2], ' ', w[1], w[2], 0};
        uint32_t *b = ipl_tokenizer_encode(tok, ww, 6, &n2);
        if (a && b && n1 == 1 && n2 == 2) self->vocab[k++] = (uint8_t)i;
        free(a);
        free(b);
    }
    if (k < 8) return IPL_E_INVAL;
    self->nvocab = k;
    return 0;
}

uint32_t bench_data_vocabulary(const bench_data_t *self)
{
    return self->nvocab;
}

uint64_t bench_data_count(const bench_data_t *self)
{
    return self->trace ? bench_trace_count(self->trace) : 0;
}

const char *bench_data_kind(const bench_data_t *self)
{
    return self->trace ? "trace" : "synthetic";
}

void bench_conv_clear(bench_conv_t *conv)
{
    free(conv->turns);
    free(conv->segs);
    memset(conv, 0, sizeof *conv);
}

static int s_seg(bench_conv_t *c, uint64_t stream, uint32_t words)
{
    if (!words) return 0;
    if (c->nsegs == c->segs_cap) {
        uint32_t cap = c->segs_cap ? c->segs_cap * 2 : 8;
        bench_seg_t *g = realloc(c->segs, cap * sizeof *g);
        if (!g) return IPL_E_NOMEM;
        c->segs = g;
        c->segs_cap = cap;
    }
    c->segs[c->nsegs++] = (bench_seg_t){stream, words};
    return 0;
}

static uint32_t s_round(double x)
{
    return x < 0 ? 0 : x > 4e9 ? 4000000000u : (uint32_t)llround(x);
}

/* Opens turn t of c (its segments follow). */
static int s_turn(bench_conv_t *c, uint32_t t, uint32_t output, double think_s)
{
    bench_turn_t *g = realloc(c->turns, (t + 1) * sizeof *g);
    if (!g) return IPL_E_NOMEM;
    c->turns = g;
    c->turns[t] = (bench_turn_t){c->nsegs, 0, 0, output ? output : 1, think_s};
    c->nturns = t + 1;
    return 0;
}

static void s_close_turn(bench_conv_t *c)
{
    bench_turn_t *t = &c->turns[c->nturns - 1];
    t->nseg = c->nsegs - t->seg_off;
    t->words = 0;
    for (uint32_t i = t->seg_off; i < c->nsegs; i++)
        t->words += c->segs[i].words;
}

static int s_synthetic(const bench_data_t *self, uint64_t index, bench_conv_t *c)
{
    const bench_data_config_t *cfg = &self->cfg;
    bench_rng_t rng;
    bench_rng_seed(&rng, cfg->seed ^ bench_mix64(index + 1));
    for (uint32_t t = 0; t < cfg->turns; t++) {
        uint32_t words = s_round(bench_len_sample(&cfg->prompt, &rng));
        uint32_t out = s_round(bench_len_sample(&cfg->output, &rng));
        double think = t ? bench_len_sample(&cfg->think_ms, &rng) / 1000.0 : 0;
        int rc = s_turn(c, t, out, think);
        if (rc == 0 && t == 0 && cfg->nbuckets) {
            double pick = bench_rng_uniform(&rng) * self->bucket_total, acc = 0;
            uint32_t b = 0;
            for (; b + 1 < cfg->nbuckets; b++) {
                acc += cfg->buckets[b].weight;
                if (pick < acc) break;
            }
            uint32_t which = (uint32_t)(bench_rng_next(&rng) % cfg->buckets[b].count);
            rc = s_seg(c, S_PREFIX_STREAM(b, which), cfg->buckets[b].tokens);
        }
        if (rc == 0) rc = s_seg(c, S_OWN_STREAM(index, t), words ? words : 1);
        if (rc != 0) return rc;
        s_close_turn(c);
    }
    return 0;
}

static int s_traced(const bench_data_t *self, uint64_t index, bench_conv_t *c)
{
    const bench_trace_rec_t *r = bench_trace_rec(self->trace, (size_t)index);
    if (!r) return IPL_E_RANGE;
    c->arrival_s = r->arrival_s / self->cfg.trace_speed;
    int rc = s_turn(c, 0, r->output_tokens, 0);
    uint32_t left = r->prompt_tokens;
    if (rc == 0 && r->mooncake) {
        const uint32_t *ids = bench_trace_hash_ids(self->trace, r);
        for (uint32_t i = 0; i < r->nhash && left && rc == 0; i++) {
            uint32_t n = left < self->cfg.block_tokens ? left : self->cfg.block_tokens;
            rc = s_seg(c, S_BLOCK_STREAM(ids[i]), n);
            left -= n;
        }
    } else if (rc == 0 && r->group >= 0) {
        uint32_t own = self->cfg.trace_suffix_tokens < left ? self->cfg.trace_suffix_tokens : left;
        uint32_t prefix = r->prefix_tokens >= 0 ? (uint32_t)r->prefix_tokens : left - own;
        rc = s_seg(c, S_GROUP_STREAM(r->group), prefix);
        left -= prefix;
    }
    if (rc == 0) rc = s_seg(c, S_OWN_STREAM(index, 0), left);
    if (rc == 0) s_close_turn(c);
    return rc;
}

int bench_data_conv(const bench_data_t *self, uint64_t index, bench_conv_t *out)
{
    out->index = index;
    out->arrival_s = 0;
    out->nturns = 0;
    out->nsegs = 0;
    return self->trace ? s_traced(self, index, out) : s_synthetic(self, index, out);
}

size_t bench_data_text_len(const bench_seg_t *segs, uint32_t n)
{
    size_t words = 0;
    for (uint32_t i = 0; i < n; i++)
        words += segs[i].words;
    return 3 * words;
}

size_t bench_data_text(const bench_data_t *self, const bench_seg_t *segs, uint32_t n, char *dst)
{
    char *p = dst;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t base = bench_mix64(self->cfg.seed ^ bench_mix64(segs[i].stream));
        for (uint32_t w = 0; w < segs[i].words; w++) {
            const char *word = s_words[self->vocab[bench_mix64(base + w) % self->nvocab]];
            p[0] = ' ';
            p[1] = word[0];
            p[2] = word[1];
            p += 3;
        }
    }
    return (size_t)(p - dst);
}
