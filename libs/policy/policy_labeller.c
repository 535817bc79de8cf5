/*
 * policy_labeller — see the header.
 */
#include "policy_labeller.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labels_set.h"

struct policy_labeller {
    labels_set_t *set;
};

// POLICY's label_detectors ("email,phone", "" none, NULL all) as detector bits; -1 names one
// this gateway does not know.
static int64_t s_detectors(const char *list)
{
    if (!list) return LABELS_PII_ALL;
    uint32_t bits = 0;
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        int d = n ? labels_pii_find(p, n) : -2;
        if (d == -1 || d < -1) return -1;
        bits |= 1u << d;
        p += n + (end ? 1 : 0);
    }
    return bits;
}

policy_labeller_t *policy_labeller_new(const ipl_policy_t *policy, char *err, size_t errlen)
{
    int64_t detectors = s_detectors(policy->label_detectors);
    if (detectors < 0) {
        snprintf(err, errlen, "label_detectors \"%s\" names a detector this gateway lacks",
                 policy->label_detectors);
        return NULL;
    }
    labels_rule_config_t *rules = calloc(policy->label_rules_len + 1, sizeof *rules);
    labels_class_config_t *classes = calloc(policy->label_classes_len + 1, sizeof *classes);
    policy_labeller_t *self = calloc(1, sizeof *self);
    if (!rules || !classes || !self) {
        snprintf(err, errlen, "out of memory");
        free(rules);
        free(classes);
        free(self);
        return NULL;
    }
    for (uint32_t i = 0; i < policy->label_rules_len; i++) {
        const ipl_label_rule_t *r = &policy->label_rules[i];
        rules[i] = (labels_rule_config_t){.label = r->label,
                                          .keywords = (const char *const *)r->keywords,
                                          .nkeywords = r->keywords_len,
                                          .substring = r->substring,
                                          .regex = r->regex && *r->regex ? r->regex : NULL,
                                          .icase = r->icase};
    }
    for (uint32_t i = 0; i < policy->label_classes_len; i++) {
        const ipl_label_class_t *c = &policy->label_classes[i];
        classes[i] = (labels_class_config_t){.label = c->label && *c->label ? c->label : NULL,
                                             .examples = (const char *const *)c->examples,
                                             .nexamples = c->examples_len};
    }
    labels_config_t cfg = {.detectors = (uint32_t)detectors,
                           .rules = rules,
                           .nrules = policy->label_rules_len,
                           .classes = classes,
                           .nclasses = policy->label_classes_len,
                           .threshold = (double)policy->label_threshold_percent / 100.0};
    self->set = labels_set_new(&cfg, err, errlen); // copies what it needs
    free(rules);
    free(classes);
    if (!self->set) policy_labeller_destroy(&self);
    return self;
}

void policy_labeller_destroy(policy_labeller_t **self_p)
{
    if (!self_p || !*self_p) return;
    labels_set_destroy(&(*self_p)->set);
    free(*self_p);
    *self_p = NULL;
}

size_t policy_labeller_eval(const policy_labeller_t *self, const char *text, size_t len,
                             const char **out, size_t max)
{
    return self ? labels_eval(self->set, text, len, out, max) : 0;
}
