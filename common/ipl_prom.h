/*
 * ipl_prom — a parser for the Prometheus text exposition format, enough to read vLLM's
 * /metrics: sample lines `name{labels} value [timestamp]`, comments skipped, label values
 * with escapes, values including NaN/+Inf/-Inf. Malformed lines are skipped and counted.
 */
#ifndef IPL_PROM_H
#define IPL_PROM_H

#include <stddef.h>

/* name and labels are borrowed, NUL-terminated, valid during the callback. `labels` is the
 * raw text inside the braces ("" when none). */
typedef void(ipl_prom_sample_fn)(void *arg, const char *name, const char *labels, double value);

/* Parses `len` bytes (need not be NUL-terminated; the grammar is in ipl_prom.c); `fn` may be
 * NULL. Returns the number of malformed lines skipped (0 when clean), or IPL_E_NOMEM. */
int ipl_prom_parse(const char *text, size_t len, ipl_prom_sample_fn *fn, void *arg);

/* Extracts label `key` from a raw label string into buf (unescaped, NUL-terminated; the first
 * one when repeated). Returns 0, IPL_E_NOTFOUND, IPL_E_RANGE when the value does not fit in
 * `size` (buf is then ""), or IPL_E_INVAL when `labels` is malformed before the key is found. */
int ipl_prom_label(const char *labels, const char *key, char *buf, size_t size);

#endif
