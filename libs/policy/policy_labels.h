/*
 * policy_labels — InferencePolicy spec.labels: which built-in personal-data detectors run, the
 * operator's keyword and regex rules, and the classifier's example prompts (docs/crds.md;
 * libs/labels computes the labels in the gateway).
 *
 *   spec:
 *     labels:
 *       detectors: [email, phone, iban, card, ssn, cz_birth_number, ua_tax_id]  # absent: all
 *       rules:
 *         - {label: code, keywords: ["#include", "def"], substring: false}
 *         - {label: finance, regex: "invoice|remittance", ignoreCase: true}
 *       classifier:
 *         threshold: 0.6          # a class is given when its posterior exceeds it
 *         classes:
 *           - {label: simple, examples: ["what is 2+2", ...]}
 *           - {label: complex, examples: [...]}
 *
 * Rules and classes accumulate over every InferencePolicy (in policy-name order); detectors
 * and the threshold may be set by one policy only. The whole configuration is checked by
 * building it with libs/labels (every regex compiled, every label name, sizes), so the policy
 * service refuses what a gateway could not build, with file:line:col.
 *
 * Strings live in the policy_yaml_t's arena. One object per compilation.
 */
#ifndef POLICY_LABELS_H
#define POLICY_LABELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "labels_set.h"
#include "policy_yaml.h"

typedef struct policy_labels policy_labels_t;

policy_labels_t *policy_labels_new(policy_yaml_t *yaml);
void policy_labels_destroy(policy_labels_t **self_p);

/* One InferencePolicy's spec.labels (`node`, not NULL), read into the whole. */
void policy_labels_add(policy_labels_t *self, policy_doc_t *d, yaml_node_t *node);
/* Checks the whole by building it (errors at the first policy that set labels). */
void policy_labels_finish(policy_labels_t *self);

/* What is published (POLICY.label_*): the detectors as "email,phone,..." ("" none; NULL: not
 * set, i.e. all), the threshold in percent (0: the default), the rules and the classes with
 * the policy each came from. */
const char *policy_labels_detectors(const policy_labels_t *self);
uint64_t policy_labels_threshold_percent(const policy_labels_t *self);
size_t policy_labels_nrules(const policy_labels_t *self);
const labels_rule_config_t *policy_labels_rule(const policy_labels_t *self, size_t i,
                                               const char **policy);
size_t policy_labels_nclasses(const policy_labels_t *self);
const labels_class_config_t *policy_labels_class(const policy_labels_t *self, size_t i,
                                                 const char **policy);

#endif
