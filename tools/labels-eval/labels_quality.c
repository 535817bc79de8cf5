/*
 * labels_quality — see labels_quality.h.
 */
#include "labels_quality.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"
#include "labels_pii.h"
#include "labels_set.h"

static const char *s_base(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

void labels_quality_free(labels_quality_corpus_t *corpus)
{
    for (size_t i = 0; i < corpus->n; i++) {
        free(corpus->examples[i].expected);
        free(corpus->examples[i].text);
    }
    free(corpus->examples);
    free(corpus->path);
    memset(corpus, 0, sizeof *corpus);
}

/* text[0 .. n) with \n, \t and \\ replaced, NUL-terminated; its length in *len. */
static char *s_unescape(const char *text, size_t n, size_t *len)
{
    char *out = malloc(n + 1);
    if (!out) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (text[i] == '\\' && i + 1 < n && strchr("nt\\", text[i + 1])) {
            char c = text[++i];
            out[k++] = c == 'n' ? '\n' : c == 't' ? '\t' : '\\';
        } else {
            out[k++] = text[i];
        }
    }
    out[k] = '\0';
    *len = k;
    return out;
}

int labels_quality_parse(labels_quality_corpus_t *corpus, const char *origin, const char *text,
                         char *err, size_t errlen)
{
    memset(corpus, 0, sizeof *corpus);
    corpus->path = strdup(origin);
    bool nomem = !corpus->path;
    size_t cap = 0;
    int line = 0;
    for (const char *p = text; !nomem && *p;) {
        const char *nl = strchr(p, '\n'), *end = nl ? nl : p + strlen(p);
        size_t n = (size_t)(end - p);
        line++;
        if (n && p[n - 1] == '\r') n--;
        if (n && p[0] != '#') {
            const char *tab = memchr(p, '\t', n);
            if (!tab || tab == p) {
                snprintf(err, errlen,
                         "%s:%d: no expected names and tab before the text (want "
                         "\"names<TAB>text\", \"-\" for none)",
                         origin, line);
                labels_quality_free(corpus);
                return IPL_E_INVAL;
            }
            if (corpus->n == cap) {
                void *g =
                    realloc(corpus->examples, (cap ? cap * 2 : 256) * sizeof *corpus->examples);
                if (!g) {
                    nomem = true;
                    break;
                }
                corpus->examples = g, cap = cap ? cap * 2 : 256;
            }
            labels_quality_example_t *e = &corpus->examples[corpus->n];
            e->line = line;
            e->expected = strndup(p, (size_t)(tab - p));
            e->text = s_unescape(tab + 1, n - (size_t)(tab + 1 - p), &e->len);
            corpus->n++;
            nomem = !e->expected || !e->text;
        }
        p = nl ? nl + 1 : end;
    }
    if (nomem) {
        labels_quality_free(corpus);
        snprintf(err, errlen, "%s: out of memory", origin);
        return IPL_E_NOMEM;
    }
    return 0;
}

int labels_quality_load(labels_quality_corpus_t *corpus, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return IPL_E_IO;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += k;
        if (n + 1 == cap) {
            char *g = realloc(buf, cap *= 2);
            if (!g) {
                free(buf);
                buf = NULL;
            }
            buf = g;
        }
    }
    fclose(f);
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory", path);
        return IPL_E_NOMEM;
    }
    buf[n] = '\0';
    int rc = labels_quality_parse(corpus, path, buf, err, errlen);
    free(buf);
    return rc;
}

double labels_quality_precision(const labels_quality_score_t *s)
{
    return s->tp + s->fp ? (double)s->tp / (double)(s->tp + s->fp) : 1.0;
}

double labels_quality_recall(const labels_quality_score_t *s)
{
    return s->tp + s->fn ? (double)s->tp / (double)(s->tp + s->fn) : 1.0;
}

const labels_quality_score_t *labels_quality_find(const labels_quality_t *q, const char *name)
{
    for (size_t i = 0; i < q->nscores; i++)
        if (strcmp(q->scores[i].name, name) == 0) return &q->scores[i];
    return NULL;
}

static labels_quality_score_t *s_score(labels_quality_t *q, const char *name)
{
    for (size_t i = 0; i < q->nscores; i++)
        if (strcmp(q->scores[i].name, name) == 0) return &q->scores[i];
    if (q->nscores == LABELS_QUALITY_MAX_NAMES) return NULL;
    labels_quality_score_t *s = &q->scores[q->nscores++];
    snprintf(s->name, sizeof s->name, "%s", name);
    return s;
}

/* Adds one decision for `name`; reports a miss. */
static void s_tally(labels_quality_score_t *s, bool expected, bool given, FILE *misses,
                    const labels_quality_corpus_t *c, const labels_quality_example_t *e)
{
    if (expected && given) s->tp++;
    if (!expected && given) s->fp++;
    if (expected && !given) s->fn++;
    if (misses && expected != given)
        fprintf(misses, "%s:%d: %s false %s\n", s_base(c->path), e->line, s->name,
                given ? "positive" : "negative");
}

/* Whether the comma-separated `list` holds `name`. */
static bool s_lists(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
        if ((size_t)(end - p) == n && memcmp(p, name, n) == 0) return true;
        if (!comma) break;
        p = comma + 1;
    }
    return false;
}

/* Every name of the list is a detector's (or the list is "-"). */
static bool s_known_detectors(const char *list, const char **bad, size_t *badlen)
{
    if (strcmp(list, "-") == 0) return true;
    for (const char *p = list;;) {
        const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
        if (labels_pii_find(p, (size_t)(end - p)) < 0) {
            *bad = p, *badlen = (size_t)(end - p);
            return false;
        }
        if (!comma) return true;
        p = comma + 1;
    }
}

int labels_quality_pii(const labels_quality_corpus_t *corpus, int32_t today, labels_quality_t *q,
                       FILE *misses, char *err, size_t errlen)
{
    memset(q, 0, sizeof *q);
    labels_config_t config = {.detectors = LABELS_PII_ALL, .today = today};
    labels_set_t *set = labels_set_new(&config, err, errlen);
    if (!set) return IPL_E_NOMEM;
    for (int d = 0; d < LABELS_PII_COUNT; d++)
        s_score(q, labels_pii_name((labels_pii_detector_t)d));
    s_score(q, "pii");
    for (size_t i = 0; i < corpus->n; i++) {
        const labels_quality_example_t *e = &corpus->examples[i];
        const char *bad;
        size_t badlen;
        if (!s_known_detectors(e->expected, &bad, &badlen)) {
            snprintf(err, errlen,
                     "%s:%d: \"%.*s\" names no detector (email, phone, iban, card, ssn, "
                     "cz_birth_number, ua_tax_id; - for none)",
                     corpus->path, e->line, (int)badlen, bad);
            labels_set_destroy(&set);
            return IPL_E_INVAL;
        }
        labels_mask_t got = labels_set_eval_mask(set, e->text, e->len);
        bool exact = true;
        for (int d = 0; d < LABELS_PII_COUNT; d++) {
            const char *name = labels_pii_name((labels_pii_detector_t)d);
            bool want = s_lists(e->expected, name), given = got & LABELS_BIT(d + 1);
            s_tally(&q->scores[d], want, given, misses, corpus, e);
            exact &= want == given;
        }
        s_tally(&q->scores[LABELS_PII_COUNT], strcmp(e->expected, "-") != 0, got & LABELS_BIT(0),
                NULL, corpus, e);
        q->examples++;
        q->correct += exact;
    }
    labels_set_destroy(&set);
    return 0;
}

int labels_quality_classifier(const labels_quality_corpus_t *corpus, double threshold,
                              labels_quality_t *q, FILE *misses, char *err, size_t errlen)
{
    memset(q, 0, sizeof *q);
    const char **examples = calloc(corpus->n ? corpus->n : 1, sizeof *examples);
    bool *test = calloc(corpus->n ? corpus->n : 1, sizeof *test);
    labels_class_config_t classes[LABELS_QUALITY_MAX_NAMES];
    size_t seen[LABELS_QUALITY_MAX_NAMES] = {0}, ntest[LABELS_QUALITY_MAX_NAMES] = {0}, k = 0;
    int rc = examples && test ? 0 : IPL_E_NOMEM;
    /* The classes in order of appearance; each class's training examples side by side. */
    for (size_t c = 0; !rc && c < LABELS_QUALITY_MAX_NAMES; c++) {
        const char *name = NULL;
        size_t first = k;
        for (size_t i = 0; i < corpus->n; i++) {
            const char *x = corpus->examples[i].expected;
            if (!name && !labels_quality_find(q, x)) name = x;
            if (!name || strcmp(x, name) != 0) continue;
            test[i] = seen[c]++ % 4 == 3;
            if (test[i])
                ntest[c]++;
            else
                examples[k++] = corpus->examples[i].text;
        }
        if (!name) break;
        if (!s_score(q, name)) {
            snprintf(err, errlen, "%s: more than %d classes", corpus->path,
                     LABELS_QUALITY_MAX_NAMES);
            rc = IPL_E_INVAL;
            break;
        }
        if (!ntest[c]) {
            snprintf(err, errlen,
                     "%s: class \"%s\" has %zu examples: at least 4 are needed (one of "
                     "four is for testing)",
                     corpus->path, name, seen[c]);
            rc = IPL_E_INVAL;
        }
        classes[c] = (labels_class_config_t){
            .label = q->scores[c].name, .examples = examples + first, .nexamples = k - first};
    }
    labels_set_t *set = NULL;
    if (!rc) {
        labels_config_t config = {
            .classes = classes, .nclasses = q->nscores, .threshold = threshold};
        set = labels_set_new(&config, err, errlen);
        if (!set) rc = IPL_E_INVAL;
    }
    size_t id[LABELS_QUALITY_MAX_NAMES] = {0};
    for (size_t c = 0; set && c < q->nscores; c++)
        for (size_t l = 0; l < labels_set_nlabels(set); l++)
            if (strcmp(labels_set_label(set, l), q->scores[c].name) == 0) id[c] = l;
    q->trained = k;
    for (size_t i = 0; set && i < corpus->n; i++) {
        if (!test[i]) continue;
        const labels_quality_example_t *e = &corpus->examples[i];
        labels_mask_t got = labels_set_eval_mask(set, e->text, e->len);
        bool exact = true;
        for (size_t c = 0; c < q->nscores; c++) {
            bool want = strcmp(e->expected, q->scores[c].name) == 0,
                 given = got & LABELS_BIT(id[c]);
            s_tally(&q->scores[c], want, given, misses, corpus, e);
            exact &= want == given;
        }
        q->examples++;
        q->correct += exact;
    }
    labels_set_destroy(&set);
    free(examples);
    free(test);
    return rc;
}
