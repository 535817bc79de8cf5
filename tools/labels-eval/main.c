/*
 * labels-eval — the quality of the semantic labels (libs/labels): precision and recall of
 * every personal-data detector and of the classifier on the labelled corpora kept in the
 * repository (libs/labels/corpus/), as one JSON object on stdout (docs/tenants.md, "Labels").
 *
 *   build/labels-eval [--pii FILE] [--classes FILE] [--threshold 0.5] [--today YYYY-MM-DD]
 *                     [--misses]
 *
 * --misses lists every false positive and negative on stderr (file:line: name false …), for
 * whoever improves a detector or the corpus. Exit status: 0, or 2 when a corpus cannot be
 * read or names something unknown.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_config.h"
#include "labels_checksum.h"
#include "labels_quality.h"

static void s_json_scores(const labels_quality_t *q)
{
    for (size_t i = 0; i < q->nscores; i++) {
        const labels_quality_score_t *s = &q->scores[i];
        printf("%s\n      \"%s\": {\"tp\": %u, \"fp\": %u, \"fn\": %u, \"precision\": %.4f, "
               "\"recall\": %.4f}",
               i ? "," : "", s->name, s->tp, s->fp, s->fn, labels_quality_precision(s),
               labels_quality_recall(s));
    }
}

/* 0 for "" (the clock), else days since 1970-01-01; -1 when malformed. */
static int32_t s_today(const char *s)
{
    int y, m, d;
    char tail;
    if (!s || !*s) return 0;
    if (sscanf(s, "%d-%d-%d%c", &y, &m, &d, &tail) != 3 || !labels_checksum_date_valid(y, m, d))
        return -1;
    return labels_checksum_days(y, m, d);
}

int main(int argc, char **argv)
{
    char *pii_path = NULL, *classes_path = NULL, *today_s = NULL;
    double threshold = 0.5;
    bool misses = false;
    ipl_config_t *c = ipl_config_new("labels-eval", "precision and recall of the semantic labels "
                                                    "on their labelled corpora, as JSON");
    ipl_config_add(c, "pii", IPL_OPT_STR, &pii_path, "libs/labels/corpus/pii.tsv",
                   "the personal-data corpus (detectors<TAB>text a line)");
    ipl_config_add(c, "classes", IPL_OPT_STR, &classes_path, "libs/labels/corpus/classes.tsv",
                   "the classifier corpus (class<TAB>text a line; 3 of 4 train, 1 tests)");
    ipl_config_add(c, "threshold", IPL_OPT_DOUBLE, &threshold, "0.5",
                   "the classifier's decision threshold on the posterior");
    ipl_config_range(c, "threshold", 0.001, 0.999);
    ipl_config_add(c, "today", IPL_OPT_STR, &today_s, "",
                   "the date bounding birth dates, YYYY-MM-DD (default: the clock)");
    ipl_config_add(c, "misses", IPL_OPT_BOOL, &misses, "false",
                   "list every false positive and negative on stderr");
    char err[512];
    int rc = ipl_config_parse(c, argc, argv, err, sizeof err);
    if (rc) {
        if (rc < 0) fprintf(stderr, "labels-eval: %s\n", err);
        ipl_config_destroy(&c);
        return rc < 0 ? 2 : 0;
    }
    int32_t today = s_today(today_s);
    labels_quality_corpus_t pii = {0}, classes = {0};
    labels_quality_t qp, qc;
    if (today < 0) {
        snprintf(err, sizeof err, "flag --today: \"%s\" is no date (want YYYY-MM-DD)", today_s);
        rc = 2;
    }
    if (!rc && (labels_quality_load(&pii, pii_path, err, sizeof err) ||
                labels_quality_pii(&pii, today, &qp, misses ? stderr : NULL, err, sizeof err) ||
                labels_quality_load(&classes, classes_path, err, sizeof err) ||
                labels_quality_classifier(&classes, threshold, &qc, misses ? stderr : NULL, err,
                                          sizeof err)))
        rc = 2;
    if (!rc) {
        printf("{\n  \"pii\": {\n    \"corpus\": \"%s\", \"examples\": %zu, \"exact\": %zu,\n"
               "    \"scores\": {",
               pii_path, qp.examples, qp.correct);
        s_json_scores(&qp);
        printf("\n    }\n  },\n  \"classifier\": {\n    \"corpus\": \"%s\", \"train\": %zu, "
               "\"test\": %zu, \"exact\": %zu, \"threshold\": %g,\n    \"scores\": {",
               classes_path, qc.trained, qc.examples, qc.correct, threshold);
        s_json_scores(&qc);
        printf("\n    }\n  }\n}\n");
    } else {
        fprintf(stderr, "labels-eval: %s\n", err);
    }
    labels_quality_free(&pii);
    labels_quality_free(&classes);
    ipl_config_destroy(&c);
    return rc;
}
