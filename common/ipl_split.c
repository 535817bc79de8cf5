/* ipl_split — see ipl_split.h. */
#include "ipl_split.h"

#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"

static bool s_blank(char c)
{
    return c == ' ' || c == '\t';
}

bool ipl_split_next(const char **cursor, const char **item, size_t *len)
{
    const char *p = *cursor ? *cursor : "";
    while (*p) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        const char *start = p;
        p = comma ? comma + 1 : end;
        while (start < end && s_blank(*start))
            start++;
        while (end > start && s_blank(end[-1]))
            end--;
        if (end > start) {
            *cursor = p;
            *item = start;
            *len = (size_t)(end - start);
            return true;
        }
    }
    *cursor = p;
    return false;
}

int ipl_split_dup(const char *list, char **out, size_t max)
{
    const char *cursor = list, *item;
    size_t len, n = 0;
    while (ipl_split_next(&cursor, &item, &len)) {
        if (n < max && !(out[n] = strndup(item, len))) {
            for (size_t i = 0; i < n; i++) {
                free(out[i]);
                out[i] = NULL;
            }
            return IPL_E_NOMEM;
        }
        n++;
    }
    return (int)n;
}
