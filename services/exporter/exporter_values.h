/*
 * exporter_values — the distinct values one label may take, capped.
 *
 * A label value comes from remote input (a tenant name, a model, a worker URL), so every label
 * of the exporter's series goes through one of these: the first `cap` distinct values are kept
 * as they are (escaped for the exposition format), every later one becomes "__overflow__" and
 * is counted in inferplane_exporter_label_values_overflow_total{dimension} (the issue's `other`
 * bucket; the name is the one inferplane_request_labels_total and the label-set cap already
 * use, and no tenant or model can be confused with it). A value once kept stays kept, so a
 * series never changes its labels.
 *
 *   values = exporter_values_new(metrics, "tenant", 1000);
 *   const char *v = exporter_values_get(values, rec->tenant);   // "team-a" or "__overflow__"
 *
 * Threading: one thread calls exporter_values_get (the exporter's receive loop); the overflow
 * counter may be rendered from any thread.
 */
#ifndef EXPORTER_VALUES_H
#define EXPORTER_VALUES_H

#include <stddef.h>

#include "ipl_metrics.h"

#define EXPORTER_VALUES_OVERFLOW "__overflow__"
#define EXPORTER_VALUES_MAX_LEN  256 /* escaped bytes kept per value (longer ones are cut) */

typedef struct exporter_values exporter_values_t;

/* `metrics` is borrowed and must outlive the object; `dimension` (a label name, copied) names
 * the overflow counter's series. `cap` >= 1. NULL when out of memory. */
exporter_values_t *exporter_values_new(ipl_metrics_t *metrics, const char *dimension, size_t cap);
void exporter_values_destroy(exporter_values_t **self_p);

/* The escaped label value for `value` (NULL reads as ""), or EXPORTER_VALUES_OVERFLOW when the
 * cap is reached and the value is new (or memory ran out). Borrowed: valid as long as self. */
const char *exporter_values_get(exporter_values_t *self, const char *value);

size_t exporter_values_size(const exporter_values_t *self);       /* distinct values kept */
double exporter_values_overflowed(const exporter_values_t *self); /* values sent to overflow */

#endif
