/*
 * policy_labeller — the semantic labels of a prompt's text, as a compiled policy configures
 * them (the gateway labels every request with it; inferplanectl explain a --prompt) (InferencePolicy spec.labels, published in POLICY's label_* fields):
 * the built-in personal-data detectors, the operators' keyword and regex rules and the
 * classifier trained from their example prompts (libs/labels does the work).
 *
 * Built once per policy version (the gateway: its policy view's attachment), then read-only: any
 * number of request threads evaluate it at once, with no allocation. Label names only: the
 * text is never kept or logged.
 */
#ifndef POLICY_LABELLER_H
#define POLICY_LABELLER_H

#include <stddef.h>

#include "ipl_proto.h"

typedef struct policy_labeller policy_labeller_t;

/* The labeller of `policy` (read during the call only). NULL with err when its labels do not
 * build (the policy service checks them with the same code: a version mismatch). */
policy_labeller_t *policy_labeller_new(const ipl_policy_t *policy, char *err, size_t errlen);
void policy_labeller_destroy(policy_labeller_t **self_p);

/* The labels of text[0..len): up to `max` names into out[] (borrowed from self); returns how
 * many there are. self may be NULL (none). */
size_t policy_labeller_eval(const policy_labeller_t *self, const char *text, size_t len,
                             const char **out, size_t max);

#endif
