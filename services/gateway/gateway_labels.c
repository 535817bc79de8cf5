/*
 * gateway_labels — the trusted label header. See gateway_labels.h.
 *
 * One allocation holds the pointer array and, after it, a copy of the value that the labels
 * are cut out of in place.
 */
#include "gateway_labels.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"

#define S_CODE "invalid_labels"

void gateway_labels_clear(gateway_labels_t *labels)
{
    free(labels->labels);
    labels->labels = NULL;
    labels->len = 0;
}

int gateway_labels_add(gateway_labels_t *labels, const char *const *more, size_t n)
{
    const char *all[GATEWAY_LABELS_MAX];
    size_t count = 0, bytes = 0;
    for (uint32_t i = 0; i < labels->len && count < GATEWAY_LABELS_MAX; i++)
        all[count++] = labels->labels[i];
    size_t had = count;
    for (size_t i = 0; i < n && count < GATEWAY_LABELS_MAX; i++) {
        bool seen = false;
        for (size_t k = 0; k < count && !seen; k++)
            seen = !strcmp(all[k], more[i]);
        if (!seen) all[count++] = more[i];
    }
    if (count == had) return 0;
    for (size_t i = 0; i < count; i++)
        bytes += strlen(all[i]) + 1;
    char *block = malloc((GATEWAY_LABELS_MAX + 1) * sizeof(char *) + bytes);
    if (!block) return IPL_E_NOMEM;
    char **ptrs = (char **)block;
    char *text = block + (GATEWAY_LABELS_MAX + 1) * sizeof(char *);
    for (size_t i = 0; i < count; i++) {
        size_t len = strlen(all[i]) + 1;
        memcpy(text, all[i], len);
        ptrs[i] = text;
        text += len;
    }
    ptrs[count] = NULL;
    free(labels->labels);
    labels->labels = ptrs;
    labels->len = (uint32_t)count;
    return 0;
}

static bool s_blank(char c)
{
    return c == ' ' || c == '\t';
}

static int s_invalid(gateway_labels_t *out)
{
    gateway_labels_clear(out);
    return IPL_E_INVAL;
}

int gateway_labels_parse(const char *header, const char *value, gateway_labels_t *out,
                         gateway_api_error_t *err)
{
    out->labels = NULL;
    out->len = 0;
    if (!value) return 0;
    size_t vlen = strlen(value);
    char *block = malloc((GATEWAY_LABELS_MAX + 1) * sizeof(char *) + vlen + 1);
    if (!block) return IPL_E_NOMEM;
    out->labels = (char **)(void *)block;
    char *text = block + (GATEWAY_LABELS_MAX + 1) * sizeof(char *);
    memcpy(text, value, vlen + 1);
    for (char *p = text;;) {
        char *comma = strchr(p, ',');
        char *end = comma ? comma : p + strlen(p);
        while (p < end && s_blank(*p))
            p++;
        while (end > p && s_blank(end[-1]))
            end--;
        size_t n = (size_t)(end - p);
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f) {
                gateway_api_error_set(err, 400, "invalid_request_error", NULL, S_CODE,
                                      "header %s: a label holds a control character", header);
                return s_invalid(out);
            }
        if (n > GATEWAY_LABEL_MAX_BYTES) {
            gateway_api_error_set(err, 400, "invalid_request_error", NULL, S_CODE,
                                  "header %s: label \"%.24s...\" is %zu bytes long, at most %d "
                                  "are accepted",
                                  header, p, n, GATEWAY_LABEL_MAX_BYTES);
            return s_invalid(out);
        }
        bool seen = n == 0;
        for (uint32_t i = 0; !seen && i < out->len; i++)
            seen = strlen(out->labels[i]) == n && !memcmp(out->labels[i], p, n);
        if (!seen) {
            if (out->len == GATEWAY_LABELS_MAX) {
                gateway_api_error_set(err, 400, "invalid_request_error", NULL, S_CODE,
                                      "header %s: more than %d labels (a comma-separated list "
                                      "of at most %d)",
                                      header, GATEWAY_LABELS_MAX, GATEWAY_LABELS_MAX);
                return s_invalid(out);
            }
            p[n] = '\0'; /* end <= comma: cutting here never loses the rest */
            out->labels[out->len++] = p;
        }
        if (!comma) break;
        p = comma + 1;
    }
    if (out->len == 0) gateway_labels_clear(out);
    return 0;
}
