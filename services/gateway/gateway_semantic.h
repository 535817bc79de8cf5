/*
 * gateway_semantic — the semantic labels the gateway computes from a prompt's text, as the
 * policy configures them (InferencePolicy spec.labels, published in POLICY's label_* fields):
 * the built-in personal-data detectors, the operators' keyword and regex rules and the
 * classifier trained from their example prompts (libs/labels does the work).
 *
 * Built once per policy version (the gateway's policy view attachment), then read-only: any
 * number of request threads evaluate it at once, with no allocation. Label names only: the
 * text is never kept or logged.
 */
#ifndef GATEWAY_SEMANTIC_H
#define GATEWAY_SEMANTIC_H

#include <stddef.h>

#include "ipl_proto.h"

typedef struct gateway_semantic gateway_semantic_t;

/* The labeller of `policy` (read during the call only). NULL with err when its labels do not
 * build (the policy service checks them with the same code: a version mismatch). */
gateway_semantic_t *gateway_semantic_new(const ipl_policy_t *policy, char *err, size_t errlen);
void gateway_semantic_destroy(gateway_semantic_t **self_p);

/* The labels of text[0..len): up to `max` names into out[] (borrowed from self); returns how
 * many there are. self may be NULL (none). */
size_t gateway_semantic_eval(const gateway_semantic_t *self, const char *text, size_t len,
                             const char **out, size_t max);

#endif
