/*
 * labels_classifier — see labels_classifier.h.
 *
 *   bucket b ──► known[b / 64] ──► row = rank[b / 64] + popcount(known[b / 64] below bit b % 64)
 *                                  (or V, the all-zero last row, when bit b % 64 is clear)
 *            ──► weights[row * stride + c] = log(n + 1) · 2048, c < nclasses
 *
 * The index (the bitset and the ranks: 12 KiB) stays in L1; a feature costs a weights row
 * and `stride` additions, known or not, with no branch to mispredict (text mixes known and
 * unknown words at random). stride is nclasses rounded up to a multiple of 4, and the common
 * case, up to 4 classes, runs in four registers. The popcount is SWAR arithmetic: x86-64's
 * baseline has no popcount instruction, and libgcc's is a call.
 */
#include "labels_classifier.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"
#include "labels_words.h"

#define S_BUCKETS (1u << LABELS_CLASSIFIER_BITS)
#define S_SCALE   2048.0 /* fixed point of the weights */

typedef struct {
    int label;
    uint64_t examples;
    double weight; /* the examples with a feature: each adds 1 in all to counts */
    float *counts; /* S_BUCKETS, during training only */
    double log_prior;
    double log_norm; /* log(1 / (N(class) + V)) */
} s_class_t;

struct labels_classifier {
    s_class_t classes[LABELS_CLASSIFIER_MAX_CLASSES];
    size_t nclasses;
    uint64_t features; /* of all examples: their mean is the weight of one example */
    bool trained;
    double threshold;
    size_t stride;                  /* weights per row */
    uint32_t zero_row;              /* V */
    uint64_t known[S_BUCKETS / 64]; /* bit b: bucket b was seen in training */
    uint32_t rank[S_BUCKETS / 64];  /* known buckets before known[i]'s */
    uint16_t *weights;              /* V + 1 rows of stride */
};

labels_classifier_t *labels_classifier_new(void)
{
    return calloc(1, sizeof(labels_classifier_t));
}

void labels_classifier_destroy(labels_classifier_t **self_p)
{
    labels_classifier_t *self = *self_p;
    if (!self) return;
    for (size_t c = 0; c < self->nclasses; c++)
        free(self->classes[c].counts);
    free(self->weights);
    free(self);
    *self_p = NULL;
}

static inline uint32_t s_bucket(uint64_t feature)
{
    return (uint32_t)(feature >> (64 - LABELS_CLASSIFIER_BITS));
}

/* Adds `weight` to the bucket of each unigram and bigram of text (counts may be NULL);
 * returns how many there are. */
static size_t s_features(const char *text, size_t len, float *counts, float weight)
{
    labels_words_t it;
    uint64_t words[128], prev = 0;
    bool has_prev = false;
    size_t n = 0;
    labels_words_init(&it, text, len);
    for (size_t k; (k = labels_words_next(&it, words, 128)) > 0;)
        for (size_t i = 0; i < k; i++) {
            if (counts) counts[s_bucket(words[i])] += weight;
            if (has_prev && counts) counts[s_bucket(labels_words_pair(prev, words[i]))] += weight;
            n += 1 + has_prev;
            prev = words[i], has_prev = true;
        }
    return n;
}

int labels_classifier_add(labels_classifier_t *self, int label, const char *text, size_t len)
{
    if (self->trained) return IPL_E_INVAL;
    if (label < -1 || label >= LABELS_MAX) return IPL_E_RANGE;
    size_t c = 0;
    while (c < self->nclasses && self->classes[c].label != label)
        c++;
    if (c == self->nclasses) {
        if (c == LABELS_CLASSIFIER_MAX_CLASSES) return IPL_E_RANGE;
        float *counts = calloc(S_BUCKETS, sizeof *counts);
        if (!counts) return IPL_E_NOMEM;
        self->classes[c] = (s_class_t){.label = label, .counts = counts};
        self->nclasses++;
    }
    s_class_t *k = &self->classes[c];
    k->examples++;
    /* Each example weighs 1, however long: a long example must not drown a class's short ones
     * (train scales the weights by the mean length back to counts, for the smoothing). */
    size_t n = s_features(text, len, NULL, 0);
    if (n) s_features(text, len, k->counts, 1.0f / (float)n), k->weight += 1;
    self->features += n;
    return 0;
}

int labels_classifier_train(labels_classifier_t *self, double threshold)
{
    if (self->trained || self->nclasses < 2 || !(threshold > 0 && threshold < 1))
        return IPL_E_INVAL;
    uint64_t examples = 0, v = 0;
    for (size_t c = 0; c < self->nclasses; c++)
        examples += self->classes[c].examples;
    const double mean = (double)self->features / (double)examples; /* features an example */
    for (uint32_t b = 0; b < S_BUCKETS; b++)
        for (size_t c = 0; c < self->nclasses; c++)
            if (self->classes[c].counts[b]) {
                v++;
                break;
            }
    if (!v) return IPL_E_INVAL;
    self->stride = (self->nclasses + 3) & ~(size_t)3;
    self->weights = calloc((v + 1) * self->stride, sizeof *self->weights);
    if (!self->weights) return IPL_E_NOMEM;
    self->zero_row = (uint32_t)v;
    uint32_t row = 0;
    for (uint32_t b = 0; b < S_BUCKETS; b++) {
        bool known = false;
        for (size_t c = 0; c < self->nclasses; c++)
            known |= self->classes[c].counts[b] != 0;
        if (b % 64 == 0) self->rank[b / 64] = row;
        if (!known) continue;
        self->known[b / 64] |= 1ull << (b % 64);
        for (size_t c = 0; c < self->nclasses; c++) {
            double x = log((double)self->classes[c].counts[b] * mean + 1.0) * S_SCALE;
            self->weights[(size_t)row * self->stride + c] =
                (uint16_t)(x > 65535.0 ? 65535.0 : x + 0.5);
        }
        row++;
    }
    for (size_t c = 0; c < self->nclasses; c++) {
        s_class_t *k = &self->classes[c];
        k->log_prior = log((double)k->examples / (double)examples);
        k->log_norm = -log(k->weight * mean + (double)v);
        free(k->counts);
        k->counts = NULL;
    }
    self->threshold = threshold;
    self->trained = true;
    return 0;
}

size_t labels_classifier_nclasses(const labels_classifier_t *self)
{
    return self->nclasses;
}

int labels_classifier_label(const labels_classifier_t *self, size_t c)
{
    return c < self->nclasses ? self->classes[c].label : -1;
}

void labels_classifier_start(const labels_classifier_t *self, labels_classifier_acc_t *acc)
{
    (void)self;
    memset(acc, 0, sizeof *acc);
}

/* One feature's row into sum[0 .. stride): any number of classes. */
/* The weights row of a feature's bucket (the zero row when unknown), branch-free. */
static inline uint32_t s_row(const labels_classifier_t *self, uint64_t feature)
{
    uint32_t b = s_bucket(feature);
    uint64_t word = self->known[b / 64], bit = word >> (b % 64) & 1;
    uint64_t x = word & ((1ull << (b % 64)) - 1); /* SWAR popcount of the bits below b */
    x -= (x >> 1) & 0x5555555555555555ull;
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (((x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full) * 0x0101010101010101ull) >> 56;
    uint32_t row = self->rank[b / 64] + (uint32_t)x;
    return bit ? row : self->zero_row;
}

static inline void s_add_row(const labels_classifier_t *self, int64_t *sum, uint64_t *known,
                             uint64_t feature)
{
    uint32_t r = s_row(self, feature);
    const uint16_t *w = self->weights + (size_t)r * self->stride;
    for (size_t c = 0; c < self->stride; c++)
        sum[c] += w[c];
    *known += r != self->zero_row;
}

void labels_classifier_feed(const labels_classifier_t *self, labels_classifier_acc_t *acc,
                            const uint64_t *words, size_t n)
{
    if (!self->trained) return;
    uint64_t prev = acc->prev, known = acc->known;
    bool has_prev = acc->has_prev;
    const uint16_t *wt = self->weights;
    const uint32_t zero = self->zero_row;
    if (self->stride == 4) { /* up to four classes: the sums in registers */
        int64_t s0 = acc->sum[0], s1 = acc->sum[1], s2 = acc->sum[2], s3 = acc->sum[3];
#define S_ADD4(feature)                                                                            \
    do {                                                                                           \
        uint32_t r_ = s_row(self, feature);                                                        \
        const uint16_t *w_ = wt + (size_t)r_ * 4;                                                  \
        s0 += w_[0], s1 += w_[1], s2 += w_[2], s3 += w_[3];                                        \
        known += r_ != zero;                                                                       \
    } while (0)
        for (size_t i = 0; i < n; i++) {
            uint64_t w = words[i];
            S_ADD4(w);
            if (has_prev) S_ADD4(labels_words_pair(prev, w));
            prev = w, has_prev = true;
        }
#undef S_ADD4
        acc->sum[0] = s0, acc->sum[1] = s1, acc->sum[2] = s2, acc->sum[3] = s3;
    } else {
        int64_t sum[LABELS_CLASSIFIER_MAX_CLASSES];
        memcpy(sum, acc->sum, sizeof sum);
        for (size_t i = 0; i < n; i++) {
            uint64_t w = words[i];
            s_add_row(self, sum, &known, w);
            if (has_prev) s_add_row(self, sum, &known, labels_words_pair(prev, w));
            prev = w, has_prev = true;
        }
        memcpy(acc->sum, sum, sizeof sum);
    }
    acc->prev = prev, acc->known = known, acc->has_prev = has_prev;
}

labels_mask_t labels_classifier_finish(const labels_classifier_t *self,
                                       const labels_classifier_acc_t *acc, double *posterior)
{
    if (!self->trained) return 0;
    double score[LABELS_CLASSIFIER_MAX_CLASSES], best = -INFINITY, total = 0;
    for (size_t c = 0; c < self->nclasses; c++) {
        const s_class_t *k = &self->classes[c];
        score[c] = k->log_prior + (double)acc->sum[c] / S_SCALE + (double)acc->known * k->log_norm;
        if (score[c] > best) best = score[c];
    }
    for (size_t c = 0; c < self->nclasses; c++)
        total += exp(score[c] - best);
    labels_mask_t mask = 0;
    for (size_t c = 0; c < self->nclasses; c++) {
        double p = exp(score[c] - best) / total;
        if (posterior) posterior[c] = p;
        if (p > self->threshold && self->classes[c].label >= 0)
            mask |= LABELS_BIT(self->classes[c].label);
    }
    return mask;
}

labels_mask_t labels_classifier_eval(const labels_classifier_t *self, const char *text, size_t len,
                                     double *posterior)
{
    labels_classifier_acc_t acc;
    labels_words_t it;
    uint64_t words[256];
    labels_classifier_start(self, &acc);
    labels_words_init(&it, text, len);
    for (size_t n; (n = labels_words_next(&it, words, 256)) > 0;)
        labels_classifier_feed(self, &acc, words, n);
    return labels_classifier_finish(self, &acc, posterior);
}
