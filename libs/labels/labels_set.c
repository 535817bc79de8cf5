/*
 * labels_set — see labels_set.h.
 */
#include "labels_set.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"
#include "labels_classifier.h"
#include "labels_rules.h"
#include "labels_words.h"

#define S_WORDS_CHUNK 256

struct labels_set {
    labels_pii_t pii;
    labels_rules_t *rules;           /* NULL without rules */
    labels_classifier_t *classifier; /* NULL without classes */
    bool rules_words;
    size_t classifier_bytes;
    labels_mask_t pii_children; /* labels named "pii:…" */
    size_t nlabels;
    char names[LABELS_MAX][LABELS_NAME_MAX_BYTES + 1];
};

static bool s_valid_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > LABELS_NAME_MAX_BYTES) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == ':' || c == '/' || c == '-';
        if (!ok) return false;
    }
    return true;
}

/* The id of label `name` (interned), or -1 with `err` filled; `what` names the place. */
static int s_intern(labels_set_t *self, const char *name, const char *what, char *err,
                    size_t errlen)
{
    if (!name || !s_valid_name(name)) {
        ipl_errf(err, errlen,
              "%s: label \"%s\" is not a label name (1..%d characters of A-Z a-z 0-9 _ . : / -)",
              what, name ? name : "", LABELS_NAME_MAX_BYTES);
        return -1;
    }
    for (size_t i = 0; i < self->nlabels; i++)
        if (strcmp(self->names[i], name) == 0) return (int)i;
    if (self->nlabels == LABELS_MAX) {
        ipl_errf(err, errlen,
              "%s: label \"%s\" is one too many (at most %d labels, built-in ones "
              "included)",
              what, name, LABELS_MAX);
        return -1;
    }
    snprintf(self->names[self->nlabels], sizeof self->names[0], "%s", name);
    return (int)self->nlabels++;
}

static int s_rules(labels_set_t *self, const labels_config_t *c, char *err, size_t errlen)
{
    char what[96 + LABELS_NAME_MAX_BYTES], why[384];
    self->rules = labels_rules_new();
    if (!self->rules) return IPL_E_NOMEM;
    for (size_t i = 0; i < c->nrules; i++) {
        const labels_rule_config_t *r = &c->rules[i];
        snprintf(what, sizeof what, "rules[%zu] (label \"%.*s\")", i, LABELS_NAME_MAX_BYTES,
                 r->label ? r->label : "");
        int id = s_intern(self, r->label, what, err, errlen);
        if (id < 0) return IPL_E_INVAL;
        if (!r->nkeywords && !r->regex) {
            ipl_errf(err, errlen, "%s: has neither keywords nor a regex", what);
            return IPL_E_INVAL;
        }
        for (size_t k = 0; k < r->nkeywords; k++)
            if (labels_rules_add_keyword(self->rules, id, r->keywords[k], r->substring, why,
                                         sizeof why)) {
                ipl_errf(err, errlen, "%s: keywords[%zu]: %s", what, k, why);
                return IPL_E_INVAL;
            }
        if (r->regex &&
            labels_rules_add_regex(self->rules, id, r->regex, r->icase, why, sizeof why)) {
            ipl_errf(err, errlen, "%s: %s", what, why);
            return IPL_E_INVAL;
        }
    }
    if (labels_rules_build(self->rules, c->regex_max_bytes, why, sizeof why)) {
        ipl_errf(err, errlen, "rules: %s", why);
        return IPL_E_INVAL;
    }
    self->rules_words = labels_rules_wants_words(self->rules);
    return 0;
}

static int s_classes(labels_set_t *self, const labels_config_t *c, char *err, size_t errlen)
{
    char what[96 + LABELS_NAME_MAX_BYTES];
    self->classifier = labels_classifier_new();
    if (!self->classifier) return IPL_E_NOMEM;
    for (size_t i = 0; i < c->nclasses; i++) {
        const labels_class_config_t *k = &c->classes[i];
        bool background = !k->label || !k->label[0];
        snprintf(what, sizeof what, "classes[%zu] (%s%.*s%s)", i,
                 background ? "background" : "label \"", LABELS_NAME_MAX_BYTES,
                 background ? "" : k->label, background ? "" : "\"");
        int id = background ? -1 : s_intern(self, k->label, what, err, errlen);
        if (!background && id < 0) return IPL_E_INVAL;
        if (!k->nexamples) {
            ipl_errf(err, errlen, "%s: has no examples", what);
            return IPL_E_INVAL;
        }
        for (size_t e = 0; e < k->nexamples; e++) {
            const char *x = k->examples[e] ? k->examples[e] : "";
            int rc = labels_classifier_add(self->classifier, id, x, strlen(x));
            if (rc == IPL_E_RANGE) {
                ipl_errf(err, errlen, "%s: more than %d classes", what, LABELS_CLASSIFIER_MAX_CLASSES);
                return IPL_E_INVAL;
            }
            if (rc) return rc;
        }
    }
    double threshold = c->threshold == 0 ? LABELS_DEFAULT_THRESHOLD : c->threshold;
    if (!(threshold > 0 && threshold < 1)) {
        ipl_errf(err, errlen, "threshold %g: must lie between 0 and 1 (exclusive)", threshold);
        return IPL_E_INVAL;
    }
    int rc = labels_classifier_train(self->classifier, threshold);
    if (rc == IPL_E_INVAL)
        ipl_errf(err, errlen,
              "classes: the classifier needs at least two distinct classes (add a "
              "background class without a label) and examples with words");
    return rc;
}

labels_set_t *labels_set_new(const labels_config_t *config, char *err, size_t errlen)
{
    labels_set_t *self = calloc(1, sizeof *self);
    if (!self) {
        ipl_errf(err, errlen, "out of memory");
        return NULL;
    }
    self->pii = labels_pii_make(config->detectors);
    self->classifier_bytes =
        config->classifier_bytes ? config->classifier_bytes : LABELS_CLASSIFIER_WINDOW;
    if (config->today) self->pii.today = config->today;
    s_intern(self, "pii", "", NULL, 0);
    for (int d = 0; d < LABELS_PII_COUNT; d++)
        s_intern(self, labels_pii_label((labels_pii_detector_t)d), "", NULL, 0);
    int rc = 0;
    if (config->nrules) rc = s_rules(self, config, err, errlen);
    if (!rc && config->nclasses) rc = s_classes(self, config, err, errlen);
    if (rc) {
        if (rc == IPL_E_NOMEM) ipl_errf(err, errlen, "out of memory");
        labels_set_destroy(&self);
        return NULL;
    }
    for (size_t i = 1; i < self->nlabels; i++)
        if (strncmp(self->names[i], "pii:", 4) == 0) self->pii_children |= LABELS_BIT(i);
    return self;
}

void labels_set_destroy(labels_set_t **self_p)
{
    labels_set_t *self = *self_p;
    if (!self) return;
    labels_rules_destroy(&self->rules);
    labels_classifier_destroy(&self->classifier);
    free(self);
    *self_p = NULL;
}

/* Where the classifier's window begins: `window` bytes before the end, moved forward to a
 * byte no word holds (an ASCII one other than a letter, digit or '_'), so that the words on
 * each side are the words of the whole text. At most 64 bytes further: past a longer word,
 * the window starts after it. */
static size_t s_window(const char *text, size_t len, size_t window)
{
    if (window >= len) return 0;
    size_t cut = len - window, end = cut + 64 < len ? cut + 64 : len;
    for (size_t i = cut; i < end; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x80 && !((c | 0x20) >= 'a' && (c | 0x20) <= 'z') && !(c >= '0' && c <= '9') &&
            c != '_')
            return i;
    }
    return len; /* one word of 64 bytes and more: no window (rare enough not to matter) */
}

/* Feeds the words of text[from .. to) to the rules and, when `classify`, the classifier. */
static void s_words(const labels_set_t *self, const char *text, size_t from, size_t to,
                    bool classify, labels_classifier_acc_t *cacc, labels_rules_acc_t *racc)
{
    labels_words_t it;
    uint64_t words[S_WORDS_CHUNK];
    labels_words_init(&it, text + from, to - from);
    for (size_t n; (n = labels_words_next(&it, words, S_WORDS_CHUNK)) > 0;) {
        if (classify) labels_classifier_feed(self->classifier, cacc, words, n);
        if (self->rules_words) labels_rules_feed(self->rules, racc, words, n);
    }
}

labels_mask_t labels_set_eval_mask(const labels_set_t *self, const char *text, size_t len)
{
    if (!text) len = 0;
    labels_mask_t mask = (labels_mask_t)labels_pii_scan(&self->pii, text, len, NULL) << 1;
    labels_classifier_acc_t cacc;
    labels_rules_acc_t racc;
    if (self->classifier) labels_classifier_start(self->classifier, &cacc);
    if (self->rules) labels_rules_start(self->rules, &racc);
    /* One pass over the words feeds both: the rules all of them, the classifier its window. */
    if (self->classifier || self->rules_words) {
        size_t cut = self->classifier ? s_window(text, len, self->classifier_bytes) : len;
        if (cut > 0 && self->rules_words) s_words(self, text, 0, cut, false, &cacc, &racc);
        if (cut < len) s_words(self, text, cut, len, self->classifier != NULL, &cacc, &racc);
    }
    if (self->classifier) mask |= labels_classifier_finish(self->classifier, &cacc, NULL);
    if (self->rules) mask |= labels_rules_finish(self->rules, &racc, text, len, mask);
    if (mask & self->pii_children) mask |= LABELS_BIT(0);
    return mask;
}

size_t labels_eval(const labels_set_t *self, const char *text, size_t len, const char **out,
                   size_t max)
{
    labels_mask_t mask = labels_set_eval_mask(self, text, len);
    size_t n = 0;
    for (; mask; mask &= mask - 1, n++)
        if (n < max) out[n] = self->names[__builtin_ctzll(mask)];
    return n;
}

size_t labels_set_nlabels(const labels_set_t *self)
{
    return self->nlabels;
}

const char *labels_set_label(const labels_set_t *self, size_t id)
{
    return id < self->nlabels ? self->names[id] : NULL;
}
