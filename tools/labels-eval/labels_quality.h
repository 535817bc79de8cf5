/*
 * labels_quality — precision and recall of the labels library on labelled corpora
 * (libs/labels/corpus/): what tools/labels-eval prints and its unit test holds to the targets.
 *
 * A corpus is UTF-8 text, one example a line:
 *
 *   expected<TAB>text        expected: comma-separated names, or "-" for none
 *   # a comment              (so are empty lines)
 *
 * In `text`, \n, \t and \\ stand for a newline, a tab and a backslash. The personal-data
 * corpus names detectors (labels_pii_name: email, phone, …); the classifier corpus names one
 * class per line.
 *
 * Scoring is per example and per name: a name expected and given is a true positive, given
 * and not expected a false positive, expected and not given a false negative. The detectors
 * run through a labels_set_t (what the gateway calls) with every detector on; the classifier
 * is trained on three of every four examples of each class, in file order, and tested on the
 * fourth (the 4th, 8th, … of that class).
 */
#ifndef LABELS_QUALITY_H
#define LABELS_QUALITY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LABELS_QUALITY_MAX_NAMES 32

typedef struct {
    char *expected; /* the names as written ("email,iban", "-") */
    char *text;     /* unescaped */
    size_t len;
    int line;
} labels_quality_example_t;

typedef struct {
    labels_quality_example_t *examples;
    size_t n;
    char *path;
} labels_quality_corpus_t;

/* Reads the corpus at `path`. Returns 0, or IPL_E_IO / IPL_E_INVAL (a line without a tab,
 * named with its number in `err`) / IPL_E_NOMEM. */
int labels_quality_load(labels_quality_corpus_t *corpus, const char *path, char *err,
                        size_t errlen);
/* The same from text in memory (`origin` names it in errors). */
int labels_quality_parse(labels_quality_corpus_t *corpus, const char *origin, const char *text,
                         char *err, size_t errlen);
void labels_quality_free(labels_quality_corpus_t *corpus);

typedef struct {
    char name[64];
    uint32_t tp, fp, fn;
} labels_quality_score_t;

typedef struct {
    labels_quality_score_t scores[LABELS_QUALITY_MAX_NAMES];
    size_t nscores;
    size_t examples; /* scored (the test examples, for the classifier) */
    size_t trained;  /* training examples (classifier only) */
    size_t correct;  /* examples whose given names are exactly the expected ones */
} labels_quality_t;

double labels_quality_precision(const labels_quality_score_t *s); /* 1 when nothing was given */
double labels_quality_recall(const labels_quality_score_t *s);    /* 1 when nothing was expected */

/* The score named `name`, NULL when there is none. */
const labels_quality_score_t *labels_quality_find(const labels_quality_t *q, const char *name);

/* Scores every detector, and "pii" (any detector), on the personal-data corpus; `today`
 * (days since 1970-01-01, 0: the clock) bounds birth dates. When `misses` is not NULL, one
 * line per false positive or negative is written to it ("pii.tsv:12: phone false positive").
 * Returns 0, or IPL_E_INVAL with `err` filled (an unknown detector name). */
int labels_quality_pii(const labels_quality_corpus_t *corpus, int32_t today, labels_quality_t *q,
                       FILE *misses, char *err, size_t errlen);

/* Trains on three of four examples of each class, scores the rest. Returns 0, or
 * IPL_E_INVAL with `err` filled (a bad class name, a class without test examples, …). */
int labels_quality_classifier(const labels_quality_corpus_t *corpus, double threshold,
                              labels_quality_t *q, FILE *misses, char *err, size_t errlen);

#endif
