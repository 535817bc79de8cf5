/*
 * ipl_jinja_str — Python str operations on UTF-8 text, for the Jinja engine's filters and
 * methods: case mapping, strip, split, splitlines, find, replace.
 *
 * Indices and lengths are in code points, as in Python. Results are arena strings/lists.
 * Functions that can meet text they cannot handle exactly (case mapping of scripts outside
 * the tables) return -1 and leave the error to the caller: a different prompt is worse than
 * none.
 */
#ifndef IPL_JINJA_STR_H
#define IPL_JINJA_STR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipl_jinja_value.h"

typedef enum {
    IPL_JCASE_LOWER,
    IPL_JCASE_UPPER,
    IPL_JCASE_TITLE,      /* str.title(): words are runs of cased letters */
    IPL_JCASE_CAPITALIZE, /* str.capitalize() */
    IPL_JCASE_JTITLE,     /* Jinja2's |title: words split at [-\s({[<]+ */
} ipl_jcase_t;

/* Case-maps s into *out. Returns 0, or -1 with *bad set to the first code point whose
 * mapping is not in the tables (ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic,
 * fullwidth Latin; caseless scripts such as CJK pass through). */
int ipl_jstr_case(ipl_jarena_t *a, ipl_jv_t s, ipl_jcase_t mode, ipl_jv_t *out, uint32_t *bad);

/* str.islower() / str.isupper(); -1 as above. */
int ipl_jstr_is_case(ipl_jv_t s, bool upper, bool *result, uint32_t *bad);

/* str.strip/lstrip/rstrip(chars): chars NULL strips whitespace. which: 'b', 'l' or 'r'. */
ipl_jv_t ipl_jstr_strip(ipl_jv_t s, const ipl_jv_t *chars, char which);

/* str.split / str.rsplit(sep, maxsplit): sep NULL splits at whitespace runs. Returns -1 for
 * an empty separator or more than max_items pieces. */
int ipl_jstr_split(ipl_jarena_t *a, ipl_jv_t s, const ipl_jv_t *sep, int64_t maxsplit,
                   bool from_right, size_t max_items, ipl_jv_t *out);

/* str.splitlines(keepends). */
ipl_jv_t ipl_jstr_splitlines(ipl_jarena_t *a, ipl_jv_t s, bool keepends);

/* str.find / str.rfind: code point index of sub, or -1. */
int64_t ipl_jstr_find(ipl_jv_t s, ipl_jv_t sub, bool from_right);

/* str.count(sub). */
int64_t ipl_jstr_count(ipl_jv_t s, ipl_jv_t sub);

/* str.replace(old, new, count) (count < 0: all). Returns -1 past max_bytes. */
int ipl_jstr_replace(ipl_jarena_t *a, ipl_jv_t s, ipl_jv_t old, ipl_jv_t new_, int64_t count,
                     size_t max_bytes, ipl_jv_t *out);

/* str.startswith / str.endswith for one prefix. */
bool ipl_jstr_starts(ipl_jv_t s, ipl_jv_t prefix, bool at_end);

/* str.isdigit / isalpha / isalnum / isspace (0..3). */
bool ipl_jstr_is_class(ipl_jv_t s, int which);

#endif
