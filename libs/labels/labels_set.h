/*
 * labels_set — the semantic labels of a prompt: what the gateway calls, once per request, to
 * fill ROUTE_REQ.labels (InferencePolicy rules match them: libs/decision/decider_rules.h).
 *
 * Built once per configuration from a labels_config_t (the policy compiler fills it from the
 * policy's YAML), then read-only:
 *
 *   labels_config_t ──labels_set_new──► labels_set_t ──labels_eval(text)──► "pii", "pii:email",
 *                                                                           "code", …
 *
 * What a set gives, in this order (label ids, stable for the set's life):
 *   0 .. 7   "pii", then each detector's label ("pii:email" … "pii:ua_tax_id"; labels_pii):
 *            a detector that fires gives its label and "pii"
 *   8 ..     the operator's labels, in the order the rules, then the classes, first name them;
 *            a rule or class may reuse a label (of another rule, or a built-in one). An
 *            operator label named "pii:<anything>" also gives "pii".
 * At most LABELS_MAX labels in all, each 1..LABELS_NAME_MAX_BYTES of [A-Za-z0-9_.:/-].
 *
 * Cost of labels_eval: one pass over the bytes for the detectors (skipping to digits and
 * '@'), one for the words when a classifier or whole-word keyword is configured (both fed
 * from it), one for substring keywords when there are any, and the regexes (on at most the
 * first regex_max_bytes each) when there are any; no allocation but glibc's inside regexec.
 * The classifier reads only the last classifier_bytes (16 KiB, ~4,000 tokens) of the text: a
 * chat prompt ends with the newest user turn, after a system prompt that is the same for
 * every request, and a class is decided long before 4,000 tokens, so a longer prompt costs
 * the classifier no more. Keywords and detectors read all of it. `make bench-micro` measures
 * it (labels_10k_tokens_us, docs/tenants.md).
 *
 * Privacy: results are label names only; nothing here logs, keeps or returns any part of the
 * text.
 *
 * Threads: labels_eval may run from any number of threads at once on one set. The set owns
 * copies of everything in the configuration: the config may be freed after labels_set_new.
 */
#ifndef LABELS_SET_H
#define LABELS_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "labels_pii.h"
#include "labels_types.h"

#define LABELS_DEFAULT_THRESHOLD 0.5
#define LABELS_CLASSIFIER_WINDOW 16384 /* default: the classifier reads the last 16 KiB */

/* A keyword rule, a regex rule, or both: any of them matching gives `label`. */
typedef struct {
    const char *label;
    const char *const *keywords; /* nkeywords of them */
    size_t nkeywords;
    bool substring;    /* keywords match anywhere (default: whole words) */
    const char *regex; /* POSIX extended, or NULL */
    bool icase;        /* the regex ignores case */
} labels_rule_config_t;

/* A class of the classifier and its example prompts. */
typedef struct {
    const char *label; /* NULL or "": the background class (trained, gives no label) */
    const char *const *examples;
    size_t nexamples;
} labels_class_config_t;

typedef struct {
    uint32_t detectors; /* labels_pii bits (LABELS_PII_ALL: every detector; 0: none) */
    const labels_rule_config_t *rules;
    size_t nrules;
    const labels_class_config_t *classes; /* none, or at least two */
    size_t nclasses;
    double threshold;        /* a class's posterior must exceed it; 0: 0.5 */
    size_t classifier_bytes; /* the classifier reads the text's last this many bytes; 0:
                                LABELS_CLASSIFIER_WINDOW, SIZE_MAX: all of it */
    size_t regex_max_bytes;  /* 0: LABELS_REGEX_MAX_BYTES (16 KiB) */
    int32_t today;           /* days since 1970-01-01 for birth dates; 0: the clock */
} labels_config_t;

typedef struct labels_set labels_set_t;

/* The set for `config`, or NULL with `err` filled: which rule or class, what is wrong and how
 * to fix it ('rules[2] (label "secret"): regex "a(b": Unmatched ( or \\('). */
labels_set_t *labels_set_new(const labels_config_t *config, char *err, size_t errlen);
void labels_set_destroy(labels_set_t **self_p);

/* The labels of text[0 .. len): stores the first `max` names into out[] (borrowed from the
 * set, valid until it is destroyed), in id order, and returns how many there are (possibly
 * more than max). text may be NULL when len is 0. */
size_t labels_eval(const labels_set_t *self, const char *text, size_t len, const char **out,
                   size_t max);

/* The same as a mask of label ids. */
labels_mask_t labels_set_eval_mask(const labels_set_t *self, const char *text, size_t len);

/* The number of labels the set can give, and the name of id `id` (NULL out of range). */
size_t labels_set_nlabels(const labels_set_t *self);
const char *labels_set_label(const labels_set_t *self, size_t id);

#endif
