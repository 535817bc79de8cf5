/*
 * gateway_labels — a request's semantic labels (ROUTE_REQ.labels, matched by InferencePolicy
 * rules' `match.labels`), read from one trusted request header.
 *
 * Labels steer where data may go ("pii" keeps a request on local workers), so a client must
 * not be able to set them: they come only from the header the operator names with
 * --trusted-label-header, which a proxy in front of the gateway sets (and strips from what
 * clients send). Without that option no header is read for labels.
 *
 *   x-inferplane-labels: pii, finance ,,batch   →   ["pii", "finance", "batch"]
 *
 * The value is a comma-separated list: each label trimmed of spaces and tabs, empty ones
 * dropped, repeats dropped. More than GATEWAY_LABELS_MAX labels, one longer than
 * GATEWAY_LABEL_MAX_BYTES or one holding a control character is a 400
 * ("invalid_request_error", code "invalid_labels") naming the header.
 *
 * Pure functions: thread-safe.
 */
#ifndef GATEWAY_LABELS_H
#define GATEWAY_LABELS_H

#include <stdint.h>

#include "gateway_api.h"

#define GATEWAY_LABELS_MAX      32
#define GATEWAY_LABEL_MAX_BYTES 64

/* The parsed labels: `labels[0..len)` point into one allocation the struct owns. */
typedef struct {
    char **labels;
    uint32_t len;
} gateway_labels_t;

/* Parses `value` (NULL: no labels) of header `header` (for messages). Returns 0 with *out
 * filled (clear it with gateway_labels_clear), IPL_E_INVAL with *err filled (400), or
 * IPL_E_NOMEM. *out is empty on failure. */
int gateway_labels_parse(const char *header, const char *value, gateway_labels_t *out,
                         gateway_api_error_t *err);
void gateway_labels_clear(gateway_labels_t *labels);

/* Adds more[0..n) to *labels (copied; repeats dropped; at most GATEWAY_LABELS_MAX in all:
 * the rest are left out). 0, or IPL_E_NOMEM (*labels unchanged). */
int gateway_labels_add(gateway_labels_t *labels, const char *const *more, size_t n);

#endif
