/*
 * labels_rules — see labels_rules.h.
 *
 * Whole-word keywords: two open-addressing tables (linear probing, load <= 1/2). The word
 * table maps a word to the labels of the one-word keywords it is, and to the lengths of the
 * phrases it starts; the phrase table maps key(phrase hash, words) to labels, a phrase hash
 * chaining its words' hashes with labels_words_pair. A 4,096-bit filter of the keywords' first
 * words comes first, so most of a text's words cost one bit test, the others one probe, and a
 * phrase is hashed only after its first word was seen.
 *
 * Substring keywords: code points are mapped to classes (0: any other, 1: white space, then
 * one per distinct case-folded code point of the keywords); the automaton is a dense table
 * with every failure transition resolved at build, and out[state] the labels of the keywords
 * ending there (its failure chain's included). For the scan, step[] is the same table with
 * each entry the next state's row offset (state · nclasses), its top bit set when out[] of
 * that state is not empty: a character costs one dependent load.
 */
#include "labels_rules.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"
#include "ipl_unicode.h"
#include "labels_words.h"

#define S_OTHER       0
#define S_SPACE       1
#define S_REGEX_STACK 4096 /* a longer regex window is copied to the heap */
#define S_ACCEPT      0x80000000u
#define S_FILTER      4096 /* bits of the first-word filter: a text's word costs one bit test */

typedef struct {
    uint64_t first; /* the first word's hash */
    uint64_t key;   /* s_key(phrase hash, words) */
    labels_mask_t mask;
    unsigned words;
} s_word_t;

typedef struct {
    uint64_t *keys; /* 0: empty */
    labels_mask_t *masks;
    uint8_t *starts; /* word table: bit L for a phrase of L words starting here */
    unsigned shift;
    size_t tmask;
} s_table_t;

typedef struct {
    uint32_t *cps; /* case-folded, white space runs as one U+0020 */
    size_t n;
    int label;
} s_substring_t;

typedef struct {
    regex_t re;
    int label;
} s_regex_t;

struct labels_rules {
    bool built;
    /* whole words: collected, then the table */
    s_word_t *words;
    size_t nwords, capwords;
    s_table_t word, phrase;
    uint64_t filter[S_FILTER / 64]; /* bit (word >> 52): some keyword's first word may be it */
    /* substrings */
    s_substring_t *subs;
    size_t nsubs, capsubs;
    uint8_t ascii[128]; /* class of each ASCII byte */
    uint32_t *cp_of;    /* non-ASCII classes: sorted code points … */
    uint16_t *cls_of;   /* … and their classes */
    size_t ncps;
    size_t nclasses;
    uint16_t *delta; /* delta[state · nclasses + class]: the next state (build only) */
    uint32_t *step;  /* the same as row offsets, S_ACCEPT marking states with labels */
    labels_mask_t *out;
    labels_mask_t sub_labels;
    /* regular expressions */
    s_regex_t regexes[LABELS_RULES_MAX_REGEXES];
    size_t nregexes;
    size_t regex_max;
};

labels_rules_t *labels_rules_new(void)
{
    return calloc(1, sizeof(labels_rules_t));
}

void labels_rules_destroy(labels_rules_t **self_p)
{
    labels_rules_t *self = *self_p;
    if (!self) return;
    free(self->words);
    free(self->word.keys), free(self->word.masks), free(self->word.starts);
    free(self->phrase.keys), free(self->phrase.masks), free(self->phrase.starts);
    for (size_t i = 0; i < self->nsubs; i++)
        free(self->subs[i].cps);
    free(self->subs);
    free(self->cp_of);
    free(self->cls_of);
    free(self->delta);
    free(self->step);
    free(self->out);
    for (size_t i = 0; i < self->nregexes; i++)
        regfree(&self->regexes[i].re);
    free(self);
    *self_p = NULL;
}

static int s_fail(char *err, size_t errlen, int code, const char *fmt, const char *what)
{
    if (err && errlen) snprintf(err, errlen, fmt, what);
    return code;
}

/* The word table's key of a word: its hash, mixed already (labels_words); 0 marks an empty
 * slot. */
static inline uint64_t s_word_key(uint64_t word)
{
    return word ? word : 1;
}

/* The phrase table's key of a phrase of `nwords` words. */
static inline uint64_t s_key(uint64_t phrase, unsigned nwords)
{
    uint64_t k = labels_words_pair(phrase, nwords);
    return k ? k : 1;
}

static int s_grow(void **v, size_t *cap, size_t n, size_t size)
{
    if (n < *cap) return 0;
    size_t c = *cap ? *cap * 2 : 16;
    void *p = realloc(*v, c * size);
    if (!p) return IPL_E_NOMEM;
    *v = p, *cap = c;
    return 0;
}

static int s_add_words(labels_rules_t *self, int label, const char *keyword, char *err,
                       size_t errlen)
{
    uint64_t w[LABELS_RULES_MAX_PHRASE + 1];
    labels_words_t it;
    labels_words_init(&it, keyword, strlen(keyword));
    size_t n = 0, k;
    while (n <= LABELS_RULES_MAX_PHRASE && (k = labels_words_next(&it, w + n, 1)) > 0)
        n += k;
    if (n == 0)
        return s_fail(err, errlen, IPL_E_INVAL,
                      "keyword \"%s\" has no word (letters or digits); match it as a substring",
                      keyword);
    if (n > LABELS_RULES_MAX_PHRASE)
        return s_fail(err, errlen, IPL_E_INVAL,
                      "keyword \"%s\" has more than 4 words; shorten it or use a regex", keyword);
    uint64_t phrase = w[0];
    for (size_t i = 1; i < n; i++)
        phrase = labels_words_pair(phrase, w[i]);
    if (s_grow((void **)&self->words, &self->capwords, self->nwords, sizeof *self->words))
        return IPL_E_NOMEM;
    self->words[self->nwords++] =
        (s_word_t){w[0], s_key(phrase, (unsigned)n), LABELS_BIT(label), (unsigned)n};
    return 0;
}

static int s_add_substring(labels_rules_t *self, int label, const char *keyword, char *err,
                           size_t errlen)
{
    size_t len = strlen(keyword), n = 0;
    uint32_t *cps = malloc((len + 1) * sizeof *cps);
    if (!cps) return IPL_E_NOMEM;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += ipl_utf8_next((const unsigned char *)keyword + i, len - i, &cp);
        if (cp != IPL_UNICODE_INVALID && ipl_unicode_is_space(cp)) {
            if (n && cps[n - 1] != ' ') cps[n++] = ' ';
            continue;
        }
        cps[n++] = cp == IPL_UNICODE_INVALID ? cp : labels_words_fold(cp);
    }
    while (n && cps[n - 1] == ' ')
        n--;
    if (n == 0) {
        free(cps);
        return s_fail(err, errlen, IPL_E_INVAL, "substring keyword \"%s\" is empty", keyword);
    }
    if (s_grow((void **)&self->subs, &self->capsubs, self->nsubs, sizeof *self->subs)) {
        free(cps);
        return IPL_E_NOMEM;
    }
    self->subs[self->nsubs++] = (s_substring_t){cps, n, label};
    return 0;
}

int labels_rules_add_keyword(labels_rules_t *self, int label, const char *keyword, bool substring,
                             char *err, size_t errlen)
{
    if (self->built || label < 0 || label >= LABELS_MAX || !keyword)
        return s_fail(err, errlen, IPL_E_INVAL, "%s", "invalid keyword rule");
    return substring ? s_add_substring(self, label, keyword, err, errlen)
                     : s_add_words(self, label, keyword, err, errlen);
}

int labels_rules_add_regex(labels_rules_t *self, int label, const char *pattern, bool icase,
                           char *err, size_t errlen)
{
    if (self->built || label < 0 || label >= LABELS_MAX || !pattern)
        return s_fail(err, errlen, IPL_E_INVAL, "%s", "invalid regex rule");
    if (self->nregexes == LABELS_RULES_MAX_REGEXES)
        return s_fail(err, errlen, IPL_E_INVAL, "regex \"%s\": more than 64 regexes", pattern);
    for (const char *p = pattern; *p; p++)
        if (p[0] == '\\' && p[1]) {
            if (p[1] >= '1' && p[1] <= '9')
                return s_fail(err, errlen, IPL_E_INVAL,
                              "regex \"%s\": back-references (\\1 … \\9) are not allowed: they "
                              "make matching time grow without bound",
                              pattern);
            p++;
        }
    s_regex_t *r = &self->regexes[self->nregexes];
    int rc = regcomp(&r->re, pattern, REG_EXTENDED | REG_NOSUB | (icase ? REG_ICASE : 0));
    if (rc != 0) {
        char why[128];
        regerror(rc, &r->re, why, sizeof why);
        regfree(&r->re);
        if (err && errlen) snprintf(err, errlen, "regex \"%s\": %s", pattern, why);
        return IPL_E_INVAL;
    }
    r->label = label;
    self->nregexes++;
    return 0;
}

/* ---- build -------------------------------------------------------------------------------- */

static int s_table_new(s_table_t *t, size_t entries, bool starts)
{
    size_t size = 16;
    unsigned bits = 4;
    while (size < 2 * entries)
        size *= 2, bits++;
    t->keys = calloc(size, sizeof *t->keys);
    t->masks = calloc(size, sizeof *t->masks);
    t->starts = starts ? calloc(size, sizeof *t->starts) : NULL;
    t->shift = 64 - bits, t->tmask = size - 1;
    return t->keys && t->masks && (!starts || t->starts) ? 0 : IPL_E_NOMEM;
}

/* The slot of `key`: where it is, or the empty one where it goes. */
static inline size_t s_slot(const s_table_t *t, uint64_t key)
{
    size_t j = (size_t)(key >> t->shift);
    while (t->keys[j] && t->keys[j] != key)
        j = (j + 1) & t->tmask;
    return j;
}

static int s_build_words(labels_rules_t *self)
{
    if (!self->nwords) return 0;
    if (s_table_new(&self->word, self->nwords, true) ||
        s_table_new(&self->phrase, self->nwords, false))
        return IPL_E_NOMEM;
    for (size_t i = 0; i < self->nwords; i++) {
        const s_word_t *w = &self->words[i];
        size_t j = s_slot(&self->word, s_word_key(w->first));
        self->word.keys[j] = s_word_key(w->first);
        self->filter[(w->first >> 52) / 64] |= 1ull << ((w->first >> 52) % 64);
        if (w->words == 1) {
            self->word.masks[j] |= w->mask;
            continue;
        }
        self->word.starts[j] |= (uint8_t)(1u << w->words);
        j = s_slot(&self->phrase, w->key);
        self->phrase.keys[j] = w->key;
        self->phrase.masks[j] |= w->mask;
    }
    return 0;
}

static int s_cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The class of (folded) code point cp. */
static inline unsigned s_class(const labels_rules_t *self, uint32_t cp)
{
    if (cp < 0x80) return self->ascii[cp];
    size_t lo = 0, hi = self->ncps;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (self->cp_of[mid] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < self->ncps && self->cp_of[lo] == cp ? self->cls_of[lo] : S_OTHER;
}

static int s_build_classes(labels_rules_t *self)
{
    size_t total = 0;
    for (size_t i = 0; i < self->nsubs; i++)
        total += self->subs[i].n;
    uint32_t *all = malloc(total * sizeof *all);
    if (!all) return IPL_E_NOMEM;
    size_t n = 0;
    for (size_t i = 0; i < self->nsubs; i++)
        for (size_t k = 0; k < self->subs[i].n; k++)
            if (self->subs[i].cps[k] != ' ') all[n++] = self->subs[i].cps[k];
    qsort(all, n, sizeof *all, s_cmp_u32);
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++)
        if (!distinct || all[distinct - 1] != all[i]) all[distinct++] = all[i];
    self->nclasses = 2;
    self->cp_of = malloc((distinct ? distinct : 1) * sizeof *self->cp_of);
    self->cls_of = malloc((distinct ? distinct : 1) * sizeof *self->cls_of);
    if (!self->cp_of || !self->cls_of) {
        free(all);
        return IPL_E_NOMEM;
    }
    for (unsigned c = 0; c < 128; c++)
        self->ascii[c] = c == ' ' || (c >= '\t' && c <= '\r') ? S_SPACE : S_OTHER;
    for (size_t i = 0; i < distinct; i++) {
        uint16_t cls = (uint16_t)self->nclasses++;
        if (all[i] < 0x80) {
            self->ascii[all[i]] = (uint8_t)cls;
            if (all[i] >= 'a' && all[i] <= 'z') self->ascii[all[i] - 32] = (uint8_t)cls;
        } else {
            self->cp_of[self->ncps] = all[i], self->cls_of[self->ncps++] = cls;
        }
    }
    free(all);
    return 0;
}

static int s_build_automaton(labels_rules_t *self, char *err, size_t errlen)
{
    if (!self->nsubs) return 0;
    int rc = s_build_classes(self);
    if (rc) return rc;
    if (self->nclasses > 255)
        return s_fail(err, errlen, IPL_E_RANGE,
                      "%s: substring keywords use more than 253 distinct characters",
                      "substring keywords");
    size_t states = 1;
    for (size_t i = 0; i < self->nsubs; i++)
        states += self->subs[i].n;
    if (states > LABELS_RULES_MAX_STATES)
        return s_fail(err, errlen, IPL_E_RANGE,
                      "%s: more than 8191 characters in all; use fewer or shorter ones",
                      "substring keywords");
    const size_t nc = self->nclasses;
    self->delta = calloc(states * nc, sizeof *self->delta);
    self->out = calloc(states, sizeof *self->out);
    uint16_t *fail = calloc(states, sizeof *fail), *queue = calloc(states, sizeof *queue);
    if (!self->delta || !self->out || !fail || !queue) {
        free(fail);
        free(queue);
        return IPL_E_NOMEM;
    }
    size_t used = 1; /* the trie: delta holds the children (0: none; the root is no child) */
    for (size_t i = 0; i < self->nsubs; i++) {
        size_t s = 0;
        for (size_t k = 0; k < self->subs[i].n; k++) {
            uint32_t cp = self->subs[i].cps[k];
            unsigned c = cp == ' ' ? S_SPACE : s_class(self, cp);
            if (!self->delta[s * nc + c]) self->delta[s * nc + c] = (uint16_t)used++;
            s = self->delta[s * nc + c];
        }
        self->out[s] |= LABELS_BIT(self->subs[i].label);
        self->sub_labels |= LABELS_BIT(self->subs[i].label);
    }
    /* Breadth first: each state's failure and its missing transitions from shallower ones. */
    size_t head = 0, tail = 0;
    for (size_t c = 0; c < nc; c++)
        if (self->delta[c]) queue[tail++] = self->delta[c]; /* fail = root */
    while (head < tail) {
        uint16_t s = queue[head++];
        self->out[s] |= self->out[fail[s]];
        for (size_t c = 0; c < nc; c++) {
            uint16_t child = self->delta[s * nc + c];
            if (child) {
                fail[child] = self->delta[fail[s] * nc + c];
                queue[tail++] = child;
            } else {
                self->delta[s * nc + c] = self->delta[fail[s] * nc + c];
            }
        }
    }
    free(fail);
    free(queue);
    self->step = malloc(states * nc * sizeof *self->step);
    if (!self->step) return IPL_E_NOMEM;
    for (size_t i = 0; i < states * nc; i++) {
        uint32_t next = self->delta[i];
        self->step[i] = (uint32_t)(next * nc) | (self->out[next] ? S_ACCEPT : 0);
    }
    free(self->delta);
    self->delta = NULL;
    return 0;
}

int labels_rules_build(labels_rules_t *self, size_t regex_max_bytes, char *err, size_t errlen)
{
    if (self->built) return s_fail(err, errlen, IPL_E_INVAL, "%s", "rules built already");
    int rc = s_build_words(self);
    if (!rc) rc = s_build_automaton(self, err, errlen);
    if (rc == IPL_E_NOMEM) s_fail(err, errlen, rc, "%s", "out of memory");
    self->regex_max = regex_max_bytes ? regex_max_bytes : LABELS_REGEX_MAX_BYTES;
    self->built = rc == 0;
    return rc;
}

/* ---- evaluation --------------------------------------------------------------------------- */

bool labels_rules_wants_words(const labels_rules_t *self)
{
    return self->built && self->nwords > 0;
}

void labels_rules_start(const labels_rules_t *self, labels_rules_acc_t *acc)
{
    (void)self;
    memset(acc, 0, sizeof *acc);
}

void labels_rules_feed(const labels_rules_t *self, labels_rules_acc_t *acc, const uint64_t *words,
                       size_t n)
{
    if (!labels_rules_wants_words(self)) return;
    const s_table_t *wt = &self->word, *pt = &self->phrase;
    labels_rules_acc_t a = *acc; /* a local copy: stores to it alias nothing */
    for (size_t i = 0; i < n; i++) {
        uint64_t w = words[i];
        unsigned slot = (unsigned)(a.seen % LABELS_RULES_MAX_PHRASE);
        a.ring[slot] = w;
        a.seen++;
        if (a.starts) a.starts &= ~(0xFFu << (8 * slot));           /* the word this one replaces */
        if (self->filter[(w >> 52) / 64] >> ((w >> 52) % 64) & 1) { /* rarely */
            size_t j = s_slot(wt, s_word_key(w));
            a.mask |= wt->masks[j]; /* 0 in an empty slot */
            a.starts |= (uint32_t)wt->starts[j] << (8 * slot);
        }
        if (!a.starts) continue; /* no phrase began in the last words: the common case */
        /* The phrases that started len - 1 words ago and would end here. */
        for (unsigned len = 2; len <= LABELS_RULES_MAX_PHRASE && len <= a.seen; len++) {
            unsigned from = (unsigned)((a.seen - len) % LABELS_RULES_MAX_PHRASE);
            if (!(a.starts >> (8 * from + len) & 1)) continue;
            uint64_t p = a.ring[from];
            for (unsigned k = 1; k < len; k++)
                p = labels_words_pair(p, a.ring[(from + k) % LABELS_RULES_MAX_PHRASE]);
            a.mask |= pt->masks[s_slot(pt, s_key(p, len))];
        }
    }
    *acc = a;
}

static labels_mask_t s_substrings(const labels_rules_t *self, const unsigned char *t, size_t len)
{
    const size_t nc = self->nclasses;
    labels_mask_t mask = 0;
    size_t s = 0;
    bool space = false;
    for (size_t i = 0; i < len;) {
        unsigned c;
        if (t[i] < 0x80) {
            c = self->ascii[t[i++]];
        } else {
            uint32_t cp;
            i += ipl_utf8_next(t + i, len - i, &cp);
            c = cp != IPL_UNICODE_INVALID && ipl_unicode_is_space(cp)
                    ? S_SPACE
                    : s_class(self, cp == IPL_UNICODE_INVALID ? cp : labels_words_fold(cp));
        }
        if (c == S_SPACE) {
            if (space) continue;
            space = true;
        } else {
            space = false;
        }
        uint32_t v = self->step[s + c];
        s = v & ~S_ACCEPT;
        if (v & S_ACCEPT) {
            mask |= self->out[s / nc];
            if (mask == self->sub_labels) break;
        }
    }
    return mask;
}

/* The regexes' labels not in `have`, on a NUL-terminated copy of the first regex_max bytes
 * (regexec reads a C string: REG_STARTEND would spare the copy, but the sanitizers' regexec
 * reads to the NUL regardless). */
static labels_mask_t s_regexes(const labels_rules_t *self, const char *text, size_t len,
                               labels_mask_t have)
{
    size_t n = len < self->regex_max ? len : self->regex_max;
    while (n < len && n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
        n--; /* the bound falls inside a character: end before it */
    char small[S_REGEX_STACK + 1], *copy = n <= S_REGEX_STACK ? small : malloc(n + 1);
    if (!copy) return 0; /* out of memory: no regex label rather than no answer */
    if (n) memcpy(copy, text, n);
    copy[n] = '\0';
    labels_mask_t mask = 0;
    for (size_t i = 0; i < self->nregexes; i++) {
        const s_regex_t *r = &self->regexes[i];
        if ((have | mask) & LABELS_BIT(r->label)) continue;
        if (regexec(&r->re, copy, 0, NULL, 0) == 0) mask |= LABELS_BIT(r->label);
    }
    if (copy != small) free(copy);
    return mask;
}

labels_mask_t labels_rules_finish(const labels_rules_t *self, const labels_rules_acc_t *acc,
                                  const char *text, size_t len, labels_mask_t have)
{
    if (!self->built) return 0;
    labels_mask_t mask = acc->mask;
    if (self->nsubs && text) mask |= s_substrings(self, (const unsigned char *)text, len);
    if (self->nregexes) mask |= s_regexes(self, text, len, have | mask);
    return mask;
}

labels_mask_t labels_rules_eval(const labels_rules_t *self, const char *text, size_t len)
{
    labels_rules_acc_t acc;
    labels_rules_start(self, &acc);
    if (labels_rules_wants_words(self)) {
        labels_words_t it;
        uint64_t words[256];
        labels_words_init(&it, text, len);
        for (size_t n; (n = labels_words_next(&it, words, 256)) > 0;)
            labels_rules_feed(self, &acc, words, n);
    }
    return labels_rules_finish(self, &acc, text, len, 0);
}
