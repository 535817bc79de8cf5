/*
 * labels_rules — operator-defined labels: keyword rules and regular-expression rules, each
 * giving a label id when it matches.
 *
 * Keywords match case-insensitively (labels_words_fold: ASCII, Latin, Greek, Cyrillic):
 *  - whole words (the default): the keyword is cut into words as the text is (labels_words),
 *    1..LABELS_RULES_MAX_PHRASE of them, and matches where the text has the same words in a
 *    row: "password" matches "Password:" but not "passwords"; "credit card" matches
 *    "CREDIT-CARD" (the dash is no word character) and "credit  card". One hash-table probe
 *    per word (and one per phrase whose first word appeared), fed from the words labels_set
 *    already cuts for the classifier. Words are compared by their 64-bit hashes (labels_words): two
 * different words of more than 8 bytes may collide, with probability ~2^-64.
 *  - substrings: the keyword anywhere, inside words too ("passw" in "mypassword123"); a run of
 *    white space in the keyword matches any run of white space in the text. All substring
 *    keywords form one Aho-Corasick automaton over case-folded code points: one table step per
 *    character, whatever the number of keywords.
 * Regular expressions are POSIX extended (regcomp, REG_EXTENDED | REG_NOSUB, REG_ICASE on
 * request), compiled once at build; back-references are refused (they make matching
 * exponential). Each is tried on at most the first `regex_max_bytes` bytes of the text (cut
 * at a character boundary; LABELS_REGEX_MAX_BYTES by default), which bounds the time a
 * pathological pattern can take: glibc's matcher is polynomial in the input for patterns
 * without back-references. A regex whose label the text has already (from a keyword, the
 * classifier or a detector: `have`) is not run. A regex reads a C string: a NUL byte in the
 * window ends it, and the window is copied (on the stack up to 4 KiB, else to the heap).
 * glibc's regexec also allocates and locks the pattern per call: the only allocations and
 * locks a labels_set_t takes per evaluation, and only when the operator configured a regex.
 *
 * Lifecycle: new, add rules, build once; then read-only, any number of threads. Errors from
 * add and build name the problem in `err` ("regex \"a(b\": Unmatched ( or \\("); labels_set
 * prefixes the rule.
 */
#ifndef LABELS_RULES_H
#define LABELS_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "labels_types.h"

/* (LABELS_RULES_MAX_PHRASE <= 4 and <= 7: a ring slot is a byte of a uint32_t, a phrase
 * length a bit of it.) */

#define LABELS_RULES_MAX_PHRASE  4    /* words of a whole-word keyword */
#define LABELS_RULES_MAX_STATES  8192 /* automaton states: code points of all substrings + 1 */
#define LABELS_RULES_MAX_REGEXES 64
#define LABELS_REGEX_MAX_BYTES   16384 /* default bound of the text a regex reads */

typedef struct labels_rules labels_rules_t;

labels_rules_t *labels_rules_new(void);
void labels_rules_destroy(labels_rules_t **self_p);

/* A keyword giving label id `label` (< LABELS_MAX). Returns 0, IPL_E_INVAL (no word in it,
 * too many words, an empty substring, built already) or IPL_E_NOMEM, with `err` filled. */
int labels_rules_add_keyword(labels_rules_t *self, int label, const char *keyword, bool substring,
                             char *err, size_t errlen);

/* A regular expression giving label id `label`. Returns 0, IPL_E_INVAL (does not compile,
 * has a back-reference, too many, built already) or IPL_E_NOMEM, with `err` filled. */
int labels_rules_add_regex(labels_rules_t *self, int label, const char *pattern, bool icase,
                           char *err, size_t errlen);

/* Builds the tables; regex_max_bytes 0 means LABELS_REGEX_MAX_BYTES. Returns 0, IPL_E_RANGE
 * (the automaton would pass LABELS_RULES_MAX_STATES) or IPL_E_NOMEM, with `err` filled. */
int labels_rules_build(labels_rules_t *self, size_t regex_max_bytes, char *err, size_t errlen);

/* True when some keyword matches whole words (the caller then feeds the text's words). */
bool labels_rules_wants_words(const labels_rules_t *self);

/* Evaluation in steps: start, feed the text's word hashes in order, finish with the text. */
typedef struct {
    uint64_t ring[LABELS_RULES_MAX_PHRASE]; /* the last words, ring[(seen - 1) % MAX] the newest */
    uint32_t starts; /* byte k: the lengths of the phrases ring[k] starts (a bit each) */
    uint64_t seen;
    labels_mask_t mask;
} labels_rules_acc_t;

void labels_rules_start(const labels_rules_t *self, labels_rules_acc_t *acc);
void labels_rules_feed(const labels_rules_t *self, labels_rules_acc_t *acc, const uint64_t *words,
                       size_t n);
/* The labels of the words fed, of the substring keywords and of the regexes in text[0 .. len)
 * (regexes whose label is in `have` or found already are skipped). */
labels_mask_t labels_rules_finish(const labels_rules_t *self, const labels_rules_acc_t *acc,
                                  const char *text, size_t len, labels_mask_t have);

/* start, feed every word of text, finish. */
labels_mask_t labels_rules_eval(const labels_rules_t *self, const char *text, size_t len);

#endif
