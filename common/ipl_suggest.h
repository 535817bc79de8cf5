/*
 * ipl_suggest — "did you mean" for a name a person typed: a flag, a YAML key, a kind, a
 * strategy, a worker set.
 *
 * The candidate nearest to the typed word by edit distance is suggested when it is close
 * enough to be a plausible typo: at most max(2, strlen(word) / 3) edits, where an edit is an
 * insertion, deletion, substitution or swap of two adjacent characters (optimal string
 * alignment: "listne" is one edit from "listen"), letters compare case-insensitively, and a
 * word of 3 or more characters that starts a candidate ("max-body" for "max-body-bytes",
 * "InferencePol") counts as one edit. Ties go to the candidate added first.
 *
 *   ipl_suggest_t s;
 *   ipl_suggest_init(&s, word);
 *   for (size_t i = 0; i < n; i++)
 *       ipl_suggest_add(&s, names[i]);
 *   const char *close = ipl_suggest_best(&s);   // NULL: nothing is close
 *
 * No allocation; an ipl_suggest_t borrows the word and the candidates, which must outlive
 * it. Any thread (one ipl_suggest_t per thread).
 */
#ifndef IPL_SUGGEST_H
#define IPL_SUGGEST_H

#include <stddef.h>

typedef struct {
    const char *word;
    const char *best; /* nearest candidate so far, or NULL */
    size_t best_d;
} ipl_suggest_t;

/* The edit distance above between a and b (without the prefix rule); SIZE_MAX when either is
 * longer than 64 bytes (too long to be a typo of a name). */
size_t ipl_suggest_distance(const char *a, const char *b);

void ipl_suggest_init(ipl_suggest_t *self, const char *word);
/* A NULL candidate (a resource whose name did not compile) is ignored. */
void ipl_suggest_add(ipl_suggest_t *self, const char *candidate);
/* The nearest candidate added (borrowed) when it is close enough, else NULL. */
const char *ipl_suggest_best(const ipl_suggest_t *self);

/* Writes "(known: a, b, c)" into buf: the first `shown` candidates, then ", and N more" for
 * the rest; NULL entries are skipped; "(known: none)" when none is left. Truncated to fit, always NUL-terminated. Returns
 * buf. */
char *ipl_suggest_known(char *buf, size_t size, const char *const *cands, size_t n, size_t shown);

#endif
