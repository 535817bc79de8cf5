/*
 * exporter_values — see the header. A zhashx keyed by the escaped value (so lookups cost one
 * escape and one hash probe, and a value longer than EXPORTER_VALUES_MAX_LEN costs no more).
 */
#include "exporter_values.h"

#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_log.h"

struct exporter_values {
    zhashx_t *values; /* escaped value → an owned copy of it (what callers borrow) */
    size_t cap;
    char *dimension;         /* owned */
    ipl_metric_t *overflows; /* borrowed from the registry */
};

static void s_free(void **item)
{
    free(*item);
    *item = NULL;
}

exporter_values_t *exporter_values_new(ipl_metrics_t *metrics, const char *dimension, size_t cap)
{
    assert(metrics && dimension && cap >= 1);
    exporter_values_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->cap = cap;
    self->values = zhashx_new();
    self->dimension = strdup(dimension);
    if (!self->values || !self->dimension) {
        exporter_values_destroy(&self);
        return NULL;
    }
    zhashx_set_destructor(self->values, s_free);
    char labels[128];
    snprintf(labels, sizeof labels, "dimension=\"%s\"", dimension);
    self->overflows = ipl_metrics_counter(
        metrics, "inferplane_exporter_label_values_overflow_total",
        "Records whose label value was counted as __overflow__ because the label already has "
        "as many distinct values as its cap (--max-tenants, --max-models, ...).",
        labels);
    return self;
}

void exporter_values_destroy(exporter_values_t **self_p)
{
    assert(self_p);
    exporter_values_t *self = *self_p;
    if (!self) return;
    zhashx_destroy(&self->values);
    free(self->dimension);
    free(self);
    *self_p = NULL;
}

const char *exporter_values_get(exporter_values_t *self, const char *value)
{
    assert(self);
    char esc[EXPORTER_VALUES_MAX_LEN];
    ipl_metrics_escape(esc, sizeof esc, value ? value : "");
    const char *kept = zhashx_lookup(self->values, esc);
    if (kept) return kept;
    if (zhashx_size(self->values) < self->cap) {
        char *copy = strdup(esc);
        if (copy && zhashx_insert(self->values, esc, copy) == 0) return copy;
        free(copy);
    }
    ipl_metric_inc(self->overflows);
    IPL_LOG_EVERY(60, IPL_LOG_WARN, "label_values_full", "dimension=%s max=%zu", self->dimension,
                  self->cap);
    return EXPORTER_VALUES_OVERFLOW;
}

size_t exporter_values_size(const exporter_values_t *self)
{
    return zhashx_size(self->values);
}

double exporter_values_overflowed(const exporter_values_t *self)
{
    return ipl_metric_value(self->overflows);
}
