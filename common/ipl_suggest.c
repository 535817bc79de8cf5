/* ipl_suggest — see ipl_suggest.h. */
#include "ipl_suggest.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define S_MAX_LEN 64

static int s_fold(char c)
{
    return tolower((unsigned char)c);
}

size_t ipl_suggest_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > S_MAX_LEN || lb > S_MAX_LEN) return SIZE_MAX;
    // Three rows of the (la+1) x (lb+1) table: the transposition looks two rows back.
    size_t rows[3][S_MAX_LEN + 1];
    size_t *back2 = rows[0], *back = rows[1], *row = rows[2];
    for (size_t j = 0; j <= lb; j++)
        back[j] = j;
    for (size_t i = 1; i <= la; i++) {
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = s_fold(a[i - 1]) != s_fold(b[j - 1]);
            size_t best = back[j - 1] + cost;
            if (back[j] + 1 < best) best = back[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            if (i > 1 && j > 1 && s_fold(a[i - 1]) == s_fold(b[j - 2]) &&
                s_fold(a[i - 2]) == s_fold(b[j - 1]) && back2[j - 2] + 1 < best)
                best = back2[j - 2] + 1;
            row[j] = best;
        }
        size_t *oldest = back2;
        back2 = back;
        back = row;
        row = oldest;
    }
    return back[lb];
}

void ipl_suggest_init(ipl_suggest_t *self, const char *word)
{
    *self = (ipl_suggest_t){.word = word, .best = NULL, .best_d = SIZE_MAX};
}

void ipl_suggest_add(ipl_suggest_t *self, const char *candidate)
{
    if (!candidate) return;
    size_t d = ipl_suggest_distance(self->word, candidate);
    size_t len = strlen(self->word);
    if (d > 1 && len >= 3 && strncasecmp(candidate, self->word, len) == 0) d = 1;
    if (d < self->best_d) {
        self->best_d = d;
        self->best = candidate;
    }
}

const char *ipl_suggest_best(const ipl_suggest_t *self)
{
    size_t len = strlen(self->word);
    size_t limit = len / 3 > 2 ? len / 3 : 2;
    return self->best && self->best_d <= limit ? self->best : NULL;
}

char *ipl_suggest_known(char *buf, size_t size, const char *const *cands, size_t n, size_t shown)
{
    if (!buf || size == 0) return buf;
    size_t off = 0;
    buf[0] = '\0';
#define S_PUT(...)                                                                                 \
    do {                                                                                           \
        if (off < size) {                                                                          \
            int w_ = snprintf(buf + off, size - off, __VA_ARGS__);                                 \
            off += w_ > 0 ? (size_t)w_ : 0;                                                        \
        }                                                                                          \
    } while (0)
    S_PUT("(known: ");
    size_t named = 0, put = 0;
    for (size_t i = 0; i < n; i++) {
        if (!cands[i]) continue; /* a candidate without a name is not known */
        if (put < shown) S_PUT("%s%s", put++ ? ", " : "", cands[i]);
        named++;
    }
    if (named == 0) S_PUT("none");
    if (named > shown) S_PUT("%sand %zu more", shown ? ", " : "", named - shown);
    S_PUT(")");
#undef S_PUT
    return buf;
}
