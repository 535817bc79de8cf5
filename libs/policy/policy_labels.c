/*
 * policy_labels — see the header.
 */
#include "policy_labels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_KIND         "InferencePolicy"
#define S_MAX_RULES    256
#define S_MAX_CLASSES  16
#define S_MAX_KEYWORDS 256
#define S_MAX_EXAMPLES 1000
#define S_MAX_TEXT     4096 /* bytes of one keyword, regex or example */

typedef struct {
    labels_rule_config_t rule;
    const char *policy;
} s_rule_t;

typedef struct {
    labels_class_config_t cls;
    const char *policy;
} s_class_t;

struct policy_labels {
    policy_yaml_t *yaml;
    s_rule_t *rules;
    size_t nrules, cap_rules;
    s_class_t *classes;
    size_t nclasses, cap_classes;
    const char *detectors; // NULL: not set
    const char *detectors_by;
    policy_loc_t detectors_loc;
    uint64_t threshold_pct; // 0: not set
    const char *threshold_by;
    bool any;
    policy_loc_t first_loc; // where the first spec.labels is
    const char *first_policy;
};

policy_labels_t *policy_labels_new(policy_yaml_t *yaml)
{
    policy_labels_t *self = calloc(1, sizeof *self);
    if (!self) abort();
    self->yaml = yaml;
    return self;
}

void policy_labels_destroy(policy_labels_t **self_p)
{
    if (!self_p || !*self_p) return;
    policy_labels_t *self = *self_p;
    free(self->rules);
    free(self->classes);
    free(self);
    *self_p = NULL;
}

// A list of strings (keywords, examples): an arena array, *n of them.
static const char *const *s_strings(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                                    const char *path, size_t max, size_t *n)
{
    *n = 0;
    yaml_node_t *list = policy_yaml_list(d, node, parent, path, "strings", false, max);
    if (!list) return NULL;
    size_t len = policy_yaml_len(list);
    const char **out = policy_yaml_alloc(d->yaml, (len + 1) * sizeof *out);
    for (size_t i = 0; i < len; i++) {
        char item[160];
        snprintf(item, sizeof item, "%s[%zu]", path, i);
        const char *s = policy_yaml_str(d, policy_yaml_item(d, list, i), list, item, true);
        if (s && strlen(s) > S_MAX_TEXT)
            policy_yaml_err(d, policy_yaml_item(d, list, i), "%s is longer than %d bytes", item,
                            S_MAX_TEXT);
        else if (s)
            out[(*n)++] = s;
    }
    return out;
}

static void s_detectors(policy_labels_t *self, policy_doc_t *d, yaml_node_t *node,
                        yaml_node_t *parent)
{
    size_t n = 0;
    const char **names = policy_yaml_words(d, node, parent, "spec.labels.detectors",
                                           LABELS_PII_COUNT, 32, false, &n);
    char list[256] = "";
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (labels_pii_find(names[i], strlen(names[i])) < 0) {
            char known[192] = "";
            for (int k = 0, o = 0; k < LABELS_PII_COUNT; k++)
                o += snprintf(known + o, sizeof known - (size_t)o, "%s%s", k ? ", " : "",
                              labels_pii_name((labels_pii_detector_t)k));
            policy_yaml_err(d, policy_yaml_item(d, node, i),
                            "spec.labels.detectors[%zu] \"%s\" is not a detector; the "
                            "detectors are %s",
                            i, names[i], known);
            continue;
        }
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", off ? "," : "", names[i]);
    }
    if (self->detectors) {
        policy_yaml_err(d, node,
                        "spec.labels.detectors is set already by InferencePolicy \"%s\" "
                        "(%s:%zu); set the detectors in one policy",
                        self->detectors_by, self->detectors_loc.file, self->detectors_loc.line);
        return;
    }
    self->detectors = policy_yaml_strdup(self->yaml, list);
    self->detectors_by = d->name;
    self->detectors_loc = policy_yaml_loc(d, node);
}

static void s_rules(policy_labels_t *self, policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent)
{
    static const char *const fields[] = {"label", "keywords",   "substring",
                                         "regex", "ignoreCase", NULL};
    yaml_node_t *list = policy_yaml_list(d, node, parent, "spec.labels.rules",
                                         "rules ({label, keywords | regex})", false, S_MAX_RULES);
    for (size_t i = 0; list && i < policy_yaml_len(list); i++) {
        yaml_node_t *f[5];
        char base[64];
        yaml_node_t *item =
            policy_yaml_entry(d, list, i, "spec.labels.rules", fields, f, base, sizeof base);
        if (!item) continue;
        char path[96];
        s_rule_t r = {.policy = d->name};
        snprintf(path, sizeof path, "%s.label", base);
        r.rule.label = policy_yaml_word(d, f[0], item, path, true, LABELS_NAME_MAX_BYTES, "label");
        snprintf(path, sizeof path, "%s.keywords", base);
        r.rule.keywords = s_strings(d, f[1], item, path, S_MAX_KEYWORDS, &r.rule.nkeywords);
        snprintf(path, sizeof path, "%s.substring", base);
        policy_yaml_bool(d, f[2], path, &r.rule.substring);
        snprintf(path, sizeof path, "%s.regex", base);
        r.rule.regex = policy_yaml_str(d, f[3], item, path, false);
        snprintf(path, sizeof path, "%s.ignoreCase", base);
        policy_yaml_bool(d, f[4], path, &r.rule.icase);
        if (!r.rule.nkeywords && !r.rule.regex) {
            policy_yaml_err(d, item, "%s needs keywords or a regex (or both)", base);
            continue;
        }
        if (!r.rule.label) continue;
        policy_yaml_reserve((void **)&self->rules, &self->cap_rules, self->nrules,
                            sizeof *self->rules);
        self->rules[self->nrules++] = r;
    }
}

static void s_classifier(policy_labels_t *self, policy_doc_t *d, yaml_node_t *node)
{
    static const char *const fields[] = {"threshold", "classes", NULL};
    static const char *const cfields[] = {"label", "examples", NULL};
    yaml_node_t *f[2];
    if (!policy_yaml_fields(d, node, "spec.labels.classifier", fields, f)) return;
    if (f[0]) {
        uint64_t pct = 0;
        const char *v = f[0]->type == YAML_SCALAR_NODE ? (const char *)f[0]->data.scalar.value : "";
        char *end = NULL;
        double t = strtod(v, &end);
        if (!*v || *end || !(t > 0 && t < 1))
            policy_yaml_err(d, f[0],
                            "spec.labels.classifier.threshold must be a number between 0 "
                            "and 1 (e.g. 0.6)");
        else
            pct = (uint64_t)(t * 100 + 0.5);
        if (pct && self->threshold_pct)
            policy_yaml_err(d, f[0],
                            "spec.labels.classifier.threshold is set already by "
                            "InferencePolicy \"%s\"; set it in one policy",
                            self->threshold_by);
        else if (pct) {
            self->threshold_pct = pct;
            self->threshold_by = d->name;
        }
    }
    yaml_node_t *list = policy_yaml_list(d, f[1], node, "spec.labels.classifier.classes",
                                         "classes ({label, examples})", true, S_MAX_CLASSES);
    for (size_t i = 0; list && i < policy_yaml_len(list); i++) {
        yaml_node_t *c[2];
        char base[64];
        yaml_node_t *item = policy_yaml_entry(d, list, i, "spec.labels.classifier.classes", cfields,
                                              c, base, sizeof base);
        if (!item) continue;
        char path[96];
        s_class_t k = {.policy = d->name};
        snprintf(path, sizeof path, "%s.label", base);
        k.cls.label = policy_yaml_word(d, c[0], item, path, false, LABELS_NAME_MAX_BYTES, "label");
        snprintf(path, sizeof path, "%s.examples", base);
        k.cls.examples = s_strings(d, c[1], item, path, S_MAX_EXAMPLES, &k.cls.nexamples);
        if (!k.cls.nexamples) {
            policy_yaml_err(d, item, "%s needs examples: prompts of that class", base);
            continue;
        }
        policy_yaml_reserve((void **)&self->classes, &self->cap_classes, self->nclasses,
                            sizeof *self->classes);
        self->classes[self->nclasses++] = k;
    }
}

void policy_labels_add(policy_labels_t *self, policy_doc_t *d, yaml_node_t *node)
{
    static const char *const fields[] = {"detectors", "rules", "classifier", NULL};
    yaml_node_t *f[3];
    if (!policy_yaml_fields(d, node, "spec.labels", fields, f)) return;
    if (!self->any) {
        self->any = true;
        self->first_loc = policy_yaml_loc(d, node);
        self->first_policy = d->name;
    }
    if (f[0]) s_detectors(self, d, f[0], node);
    if (f[1]) s_rules(self, d, f[1], node);
    if (f[2]) s_classifier(self, d, f[2]);
}

void policy_labels_finish(policy_labels_t *self)
{
    if (!self->any || policy_yaml_error_count(self->yaml)) return;
    labels_config_t cfg = {.detectors = LABELS_PII_ALL,
                           .threshold = (double)self->threshold_pct / 100.0};
    labels_rule_config_t *rules = calloc(self->nrules + 1, sizeof *rules);
    labels_class_config_t *classes = calloc(self->nclasses + 1, sizeof *classes);
    if (!rules || !classes) abort();
    for (size_t i = 0; i < self->nrules; i++)
        rules[i] = self->rules[i].rule;
    for (size_t i = 0; i < self->nclasses; i++)
        classes[i] = self->classes[i].cls;
    cfg.rules = rules;
    cfg.nrules = self->nrules;
    cfg.classes = classes;
    cfg.nclasses = self->nclasses;
    char err[512] = "";
    labels_set_t *set = labels_set_new(&cfg, err, sizeof err);
    if (!set)
        policy_yaml_report(self->yaml, false, &self->first_loc, S_KIND, self->first_policy,
                           "spec.labels (with every policy's labels): %s", err);
    labels_set_destroy(&set);
    free(rules);
    free(classes);
}

const char *policy_labels_detectors(const policy_labels_t *self)
{
    return self->detectors;
}

uint64_t policy_labels_threshold_percent(const policy_labels_t *self)
{
    return self->threshold_pct;
}

size_t policy_labels_nrules(const policy_labels_t *self)
{
    return self->nrules;
}

const labels_rule_config_t *policy_labels_rule(const policy_labels_t *self, size_t i,
                                               const char **policy)
{
    if (i >= self->nrules) return NULL;
    if (policy) *policy = self->rules[i].policy;
    return &self->rules[i].rule;
}

size_t policy_labels_nclasses(const policy_labels_t *self)
{
    return self->nclasses;
}

const labels_class_config_t *policy_labels_class(const policy_labels_t *self, size_t i,
                                                 const char **policy)
{
    if (i >= self->nclasses) return NULL;
    if (policy) *policy = self->classes[i].policy;
    return &self->classes[i].cls;
}
