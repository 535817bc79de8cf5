/*
 * labels_classifier — a small text classifier trained at load time from example prompts:
 * multinomial naive Bayes over lower-cased word unigrams and bigrams.
 *
 * Features: every word of the text (labels_words: case-folded, hashed) and every pair of
 * consecutive words, each hashed into one of 2^LABELS_CLASSIFIER_BITS buckets. Training
 * counts the buckets per class, each example weighing the same however long it is (its
 * counts scaled to the mean number of features an example has: otherwise a few long
 * examples decide a class's word distribution); a bucket no example reached is no feature
 * (the text's words that training never saw are ignored, as a vocabulary would drop them).
 *
 *   P(class | text) ∝ P(class) · Π P(f | class)   over the text's known features f
 *   P(class)        = examples of the class / all examples
 *   P(f | class)    = (n(f, class) + 1) / (N(class) + V)         Laplace smoothing
 *                     n: the (length-normalized) count, N(class): their sum, V: known buckets
 *
 * A class's label is given when its posterior exceeds the threshold; a class without a label
 * (the background: "anything else") is trained like the others and never gives one. The
 * posteriors sum to 1, so with a threshold >= 0.5 at most one label comes out. Long texts
 * make the posterior confident (a sum of thousands of log-likelihoods): on them the rule is
 * in effect "the most likely class".
 *
 * Layout for evaluation: a bitset of the known buckets (8 KiB, in L1), and for a known one its
 * dense row of per-class weights log(n + 1) in fixed point (uint16, 1/2048), so an unknown
 * feature costs one bit test and a known one a row of additions. Integer sums make
 * the result the same on every machine and in every order of feeding.
 *
 * Lifecycle: new, add the examples, train once; then read-only: eval (or start/feed/finish,
 * which let one pass over the words feed several consumers) from any number of threads, with
 * no allocation. Training 1,000 examples takes a few milliseconds.
 */
#ifndef LABELS_CLASSIFIER_H
#define LABELS_CLASSIFIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "labels_types.h"

#define LABELS_CLASSIFIER_BITS        16 /* buckets: 65,536 */
#define LABELS_CLASSIFIER_MAX_CLASSES 16

typedef struct labels_classifier labels_classifier_t;

labels_classifier_t *labels_classifier_new(void);
void labels_classifier_destroy(labels_classifier_t **self_p);

/* Adds one example text of the class giving label `label` (an id below LABELS_MAX, or -1 for
 * the background class); a class is created by its first example. Returns 0, IPL_E_RANGE
 * (a LABELS_CLASSIFIER_MAX_CLASSES + 1st class, or label out of range), IPL_E_INVAL (after
 * train) or IPL_E_NOMEM. */
int labels_classifier_add(labels_classifier_t *self, int label, const char *text, size_t len);

/* Builds the tables; threshold in (0, 1). Returns 0, IPL_E_INVAL (fewer than two classes, no
 * feature in any example, threshold out of range, trained already) or IPL_E_NOMEM. */
int labels_classifier_train(labels_classifier_t *self, double threshold);

size_t labels_classifier_nclasses(const labels_classifier_t *self);
int labels_classifier_label(const labels_classifier_t *self, size_t c); /* -1: background */

/* Evaluation in steps: start, feed the text's word hashes in order (any chunking), finish. */
typedef struct {
    int64_t sum[LABELS_CLASSIFIER_MAX_CLASSES];
    uint64_t known; /* features found in the table */
    uint64_t prev;  /* the previous word, for the next bigram */
    bool has_prev;
} labels_classifier_acc_t;

void labels_classifier_start(const labels_classifier_t *self, labels_classifier_acc_t *acc);
void labels_classifier_feed(const labels_classifier_t *self, labels_classifier_acc_t *acc,
                            const uint64_t *words, size_t n);
/* The labels given (a mask of ids); `posterior` (nclasses entries, or NULL) receives each
 * class's posterior, in the order classes were created. */
labels_mask_t labels_classifier_finish(const labels_classifier_t *self,
                                       const labels_classifier_acc_t *acc, double *posterior);

/* start, feed every word of text[0 .. len), finish. */
labels_mask_t labels_classifier_eval(const labels_classifier_t *self, const char *text, size_t len,
                                     double *posterior);

#endif
