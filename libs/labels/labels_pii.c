/*
 * labels_pii — see labels_pii.h.
 *
 * The scan stops at each digit and each '@'. A digit starts a *run*: groups of digits joined
 * by single separators (space, '-', '.', '/'), a group possibly in parentheses, maybe after a
 * '+' — "+1 (555) 123-4567" is one run of four groups:
 *
 *     lead  start                          end
 *      │     │                              │
 *      +1 (555) 123-4567                    ▼
 *       └┘  └─┘ └─┘ └──┘   groups: len 1, 3 (paren), 3, 4;  seps before them: -, ' ', ' ', '-'
 *
 * The run is read once (s_run_read) into its groups and digits; every numeric detector then
 * looks at spans of whole groups, and the scan resumes after the run. Two capital letters
 * right before a run may begin an IBAN. An '@' is an e-mail address when a local part ends
 * there and a dotted domain follows.
 */
#include "labels_pii.h"

#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "ipl_unicode.h"
#include "labels_checksum.h"
#include "labels_simd.h"
#include "labels_words.h"

#define S_GROUPS        12 /* a run with more groups or digits is taken by no detector */
#define S_DIGITS        40
#define S_PHONE_CONTEXT 24 /* bytes before a number searched for a word such as "tel" */
#define S_ID_CONTEXT    64 /* … for a word such as "РНОКПП" (Cyrillic: 2 bytes a letter) */

static const char *const s_names[LABELS_PII_COUNT] = {
    "email", "phone", "iban", "card", "ssn", "cz_birth_number", "ua_tax_id"};
static const char *const s_labels[LABELS_PII_COUNT] = {
    "pii:email", "pii:phone",           "pii:iban",     "pii:card",
    "pii:ssn",   "pii:cz_birth_number", "pii:ua_tax_id"};

labels_pii_t labels_pii_make(uint32_t detectors)
{
    return (labels_pii_t){.detectors = detectors & LABELS_PII_ALL,
                          .today = (int32_t)(time(NULL) / 86400)};
}

const char *labels_pii_label(labels_pii_detector_t d)
{
    return (unsigned)d < LABELS_PII_COUNT ? s_labels[d] : NULL;
}

const char *labels_pii_name(labels_pii_detector_t d)
{
    return (unsigned)d < LABELS_PII_COUNT ? s_names[d] : NULL;
}

int labels_pii_find(const char *name, size_t len)
{
    for (int d = 0; d < LABELS_PII_COUNT; d++)
        if ((strlen(s_names[d]) == len && memcmp(s_names[d], name, len) == 0) ||
            (strlen(s_labels[d]) == len && memcmp(s_labels[d], name, len) == 0))
            return d;
    return -1;
}

static inline bool s_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static inline bool s_alpha(unsigned char c)
{
    return (unsigned char)((c | 0x20) - 'a') < 26;
}

/* Part of a word: a number touching one is part of an identifier, not a number of its own. */
static inline bool s_wordish(unsigned char c)
{
    return s_alpha(c) || s_digit(c) || c == '_' || c >= 0x80;
}

/* ---- numbers ------------------------------------------------------------------------------ */

typedef struct {
    size_t lead, end; /* the run's first byte ('+', '(' or a digit) and the byte after it */
    int n;            /* groups kept */
    int ndigits;
    bool plus;          /* a '+' before the first group */
    bool overflow;      /* more than S_GROUPS groups or S_DIGITS digits */
    char sep[S_GROUPS]; /* the separator before group k (0 for the first) */
    bool paren[S_GROUPS];
    uint8_t len[S_GROUPS], at[S_GROUPS]; /* group k is d[at[k] .. at[k] + len[k]) */
    char d[S_DIGITS];
} s_run_t;

/* Reads the run whose first digit is t[p] (p is no digit's successor: runs are read whole). */
static void s_run_read(const unsigned char *t, size_t len, size_t p, s_run_t *r)
{
    r->lead = p, r->n = 0, r->ndigits = 0, r->plus = false, r->overflow = false;
    bool paren = false;
    if (p > 0 && t[p - 1] == '(') {
        paren = true, r->lead = p - 1;
        if (p > 1 && t[p - 2] == '+') r->plus = true, r->lead = p - 2;
    } else if (p > 0 && t[p - 1] == '+') {
        r->plus = true, r->lead = p - 1;
    }
    size_t i = p;
    char sep = 0;
    for (;;) {
        size_t s = i;
        while (i < len && s_digit(t[i]))
            i++;
        size_t glen = i - s;
        bool closed = paren && i < len && t[i] == ')';
        if (closed) i++;
        if (paren && !closed && r->n == 0 && !r->plus) r->lead = p; /* a '(' that is no group's */
        if (r->n < S_GROUPS && (size_t)r->ndigits + glen <= S_DIGITS) {
            int k = r->n++;
            r->sep[k] = sep, r->paren[k] = closed;
            r->len[k] = (uint8_t)glen, r->at[k] = (uint8_t)r->ndigits;
            for (size_t k = 0; k < glen; k++)
                r->d[r->ndigits + (int)k] = (char)t[s + k];
            r->ndigits += (int)glen;
        } else {
            r->overflow = true;
        }
        paren = false;
        if (i + 1 < len && (t[i] == ' ' || t[i] == '-' || t[i] == '.' || t[i] == '/') &&
            s_digit(t[i + 1])) {
            sep = (char)t[i++];
        } else if (i + 2 < len && t[i] == ' ' && t[i + 1] == '(' && s_digit(t[i + 2])) {
            sep = ' ', paren = true, i += 2;
        } else if (i + 1 < len && t[i] == '(' && s_digit(t[i + 1])) {
            sep = ' ', paren = true, i += 1; /* "+1(555)…" */
        } else if (closed && i < len && s_digit(t[i])) {
            sep = ' '; /* "(555)123-4567" */
        } else {
            break;
        }
    }
    r->end = i;
}

/* Nothing before the run makes it part of something else. */
static bool s_left_ok(const unsigned char *t, const s_run_t *r)
{
    if (r->lead == 0) return true;
    unsigned char c = t[r->lead - 1];
    if (s_wordish(c)) return false;
    if (r->plus) return true; /* "Tel:+420 …" */
    switch (c) {              /* "#4111…", "$100", "?id=…", "/orders/…", "x@…", "50%" … */
    case '#':
    case '$':
    case '&':
    case '?':
    case '\\':
    case '@':
    case '%':
    case '+':
    case '~':
    case '^':
    case '*':
    case '/':
        return false;
    default:
        break;
    }
    if (r->lead < 2) return true;
    unsigned char b = t[r->lead - 2]; /* "ID-1234…", "v.2…"; "10:30", "1,234" */
    return !(((c == '-' || c == '.') && s_wordish(b)) || ((c == ':' || c == ',') && s_digit(b)));
}

/* Nothing after the run makes it part of something else. */
static bool s_right_ok(const unsigned char *t, size_t len, size_t e)
{
    if (e >= len) return true;
    unsigned char c = t[e];
    if (s_wordish(c) || c == '@' || c == '%' || c == '$') return false;
    if (e + 1 >= len) return true;
    unsigned char a = t[e + 1]; /* "…-ABCD", "10:30", "1,234" */
    return !(((c == '-' || c == '.') && s_wordish(a)) || ((c == ':' || c == ',') && s_digit(a)));
}

/* The code point at s[*i] (of n), case-folded; advances *i. */
static uint32_t s_folded(const unsigned char *s, size_t n, size_t *i)
{
    uint32_t cp;
    *i += ipl_utf8_next(s + *i, n - *i, &cp);
    return labels_words_fold(cp);
}

/* One of `words` (lower case UTF-8, NULL-terminated list) at the start of a word in the
 * `window` bytes before t[at], case-insensitively (labels_words_fold): "Telefon" and "TEL."
 * announce a phone, "Bestellnummer" and "hotel" do not. */
static bool s_context(const unsigned char *t, size_t at, size_t window, const char *const *words)
{
    size_t from = at > window ? at - window : 0;
    while (from < at && (t[from] & 0xC0) == 0x80) /* start at a character */
        from++;
    for (size_t i = from; i < at; i++) {
        if ((t[i] & 0xC0) == 0x80) continue;
        if (i > 0 && (s_alpha(t[i - 1]) || s_digit(t[i - 1]) || t[i - 1] >= 0x80)) continue;
        for (const char *const *w = words; *w; w++) {
            const unsigned char *k = (const unsigned char *)*w;
            size_t kn = strlen(*w), a = i, b = 0;
            bool same = true;
            while (same && b < kn)
                same = a < at && s_folded(t, at, &a) == s_folded(k, kn, &b);
            if (same) return true;
        }
    }
    return false;
}

/* Words announcing a phone number (the bytes before it) and a Ukrainian taxpayer number. */
static const char *const s_phone_words[] = {"tel",      "phone", "mobil", "cell", "call", "fax",
                                            "whatsapp", "handy", "ruf",   "тел",  "моб",  NULL};
static const char *const s_cz_words[] = {"rodn",  "rč",     "r.č",   "r. č",  "rc",
                                         "birth", "geburt", "narod", "naroz", NULL};
static const char *const s_ua_words[] = {"рнокпп",      "іпн",         "інн",  "инн", "податк",
                                         "ідентифікац", "идентификац", "дрфо", "код", "tax",
                                         "tin",         "rnokpp",      "ipn",  NULL};

/* The separator shared by groups i+1 .. j-1 of the span [i, j): 0 for one group, -1 when
 * they differ or a group of the span is in parentheses. */
static int s_span_sep(const s_run_t *r, int i, int j)
{
    int sep = 0;
    for (int k = i; k < j; k++) {
        if (r->paren[k]) return -1;
        if (k == i) continue;
        if (sep && r->sep[k] != sep) return -1;
        sep = r->sep[k];
    }
    return sep;
}

/* The span [i, j) stands alone in its run: each neighbouring group is joined to it by a
 * space, and its own separator is not a space. */
static bool s_isolated(const s_run_t *r, int i, int j, int sep)
{
    if (i > 0 && (r->sep[i] != ' ' || sep == ' ')) return false;
    if (j < r->n && (r->sep[j] != ' ' || sep == ' ')) return false;
    return !(i == 0 && r->plus);
}

static int s_span_digits(const s_run_t *r, int i, int j)
{
    return r->at[j - 1] + r->len[j - 1] - r->at[i];
}

/* 4-4-4-4 (the last group 1..4 digits), 4-6-5, 4-6-4, or one group. */
static bool s_card_groups(const s_run_t *r, int i, int j)
{
    if (j - i == 1) return true;
    if (j - i == 3 && r->len[i] == 4 && r->len[i + 1] == 6 &&
        (r->len[i + 2] == 5 || r->len[i + 2] == 4))
        return true;
    for (int k = i; k < j - 1; k++)
        if (r->len[k] != 4) return false;
    return r->len[j - 1] <= 4;
}

static int s_cards(const s_run_t *r)
{
    int found = 0;
    for (int i = 0; i < r->n; i++)
        for (int j = i + 1; j <= r->n; j++) {
            int nd = s_span_digits(r, i, j);
            if (nd > 19) break;
            int sep = s_span_sep(r, i, j);
            if (nd < 13 || (sep != 0 && sep != ' ' && sep != '-')) continue;
            if (s_card_groups(r, i, j) && s_isolated(r, i, j, sep) &&
                labels_checksum_card(r->d + r->at[i], (size_t)nd)) {
                found++;
                i = j - 1; /* a match is not reused by the next span */
                break;
            }
        }
    return found;
}

static int s_ssns(const s_run_t *r)
{
    int found = 0;
    for (int i = 0; i + 3 <= r->n; i++) {
        int sep = s_span_sep(r, i, i + 3);
        if (r->len[i] == 3 && r->len[i + 1] == 2 && r->len[i + 2] == 4 &&
            (sep == '-' || sep == ' ') && s_isolated(r, i, i + 3, sep) &&
            labels_checksum_ssn(r->d + r->at[i]))
            found++, i += 2;
    }
    return found;
}

/* YYMMDD/XXXX stands out; ten bare digits pass the check for about 1 in 150 numbers (a date,
 * then 1 in 11), so without the slash a word such as "rodné číslo" or "RČ" must come first. */
static int s_cz_birth_numbers(const s_run_t *r, const unsigned char *t, int32_t today)
{
    int found = 0;
    for (int i = 0; i < r->n; i++) {
        int j = i + 1, sep = 0;
        if (r->len[i] == 6 && i + 1 < r->n && r->sep[i + 1] == '/' &&
            (r->len[i + 1] == 4 || r->len[i + 1] == 3))
            j = i + 2, sep = '/';
        else if (r->len[i] != 10)
            continue;
        if (s_span_sep(r, i, j) == sep && s_isolated(r, i, j, sep) &&
            labels_checksum_cz_birth_number(r->d + r->at[i], (size_t)s_span_digits(r, i, j),
                                            today) &&
            (sep || s_context(t, r->lead, S_ID_CONTEXT, s_cz_words)))
            found++, i = j - 1;
    }
    return found;
}

/* The check digit passes for 1 in 10 numbers, and a birth date for about a third of them: a
 * bare 10-digit number is no taxpayer number unless a word names it just before. */
static int s_ua_tax_ids(const s_run_t *r, const unsigned char *t, int32_t today)
{
    int found = 0;
    for (int i = 0; i < r->n; i++)
        if (r->len[i] == 10 && !r->paren[i] && s_isolated(r, i, i + 1, 0) &&
            labels_checksum_ua_tax_id(r->d + r->at[i], today) &&
            s_context(t, r->lead, S_ID_CONTEXT, s_ua_words))
            found++;
    return found;
}

/* AAA-GG-SSSS (or with spaces): a social security number's shape, whatever its ranges. */
static bool s_ssn_shape(const s_run_t *r)
{
    int sep = s_span_sep(r, 0, r->n);
    return r->n == 3 && r->len[0] == 3 && r->len[1] == 2 && r->len[2] == 4 &&
           (sep == '-' || sep == ' ');
}

/* Three groups with one of '.', '/', '-' shaped like a date: 2-2-4, 4-2-2, 1-1-4, 2-2-2 … */
static bool s_date_shape(const s_run_t *r)
{
    if (r->n != 3) return false;
    int sep = s_span_sep(r, 0, 3);
    if (sep != '.' && sep != '/' && sep != '-') return false;
    int a = r->len[0], b = r->len[1], c = r->len[2];
    return (a <= 2 && b <= 2 && (c == 4 || c == 2)) || (a == 4 && b <= 2 && c <= 2);
}

static bool s_phone(const s_run_t *r, const unsigned char *t)
{
    if (r->overflow || r->ndigits > 17) return false;
    bool slash = false, dot = false, short_group = false;
    for (int k = 0; k < r->n; k++) {
        slash |= r->sep[k] == '/', dot |= r->sep[k] == '.';
        short_group |= r->len[k] < 2;
    }
    const char *d = r->d;
    if (r->plus) /* E.164: +<country code><number>, 8..15 digits */
        return r->ndigits >= 8 && r->ndigits <= 15 && d[0] != '0' && !slash;
    if (r->len[0] >= 3 && d[0] == '0' && d[1] == '0') /* 00<country code>… */
        return d[2] != '0' && r->n >= 2 && !slash && r->ndigits >= 10;
    if (r->ndigits > 15) return false;
    /* North American: [1] (NXX) NXX-XXXX, NXX-NXX-XXXX, NXX.NXX.XXXX */
    int k = r->n == 4 && r->len[0] == 1 && d[0] == '1' && !r->paren[0];
    if (r->n - k == 3 && r->len[k] == 3 && r->len[k + 1] == 3 && r->len[k + 2] == 4 &&
        d[r->at[k]] >= '2' && !slash && !r->paren[k + 1] && !r->paren[k + 2] &&
        (r->paren[k] || r->sep[k + 1] == r->sep[k + 2]))
        return true;
    /* National with a trunk 0: 030 1234567, (050) 123-45-67, 020 7946 0958, 030/1234567 */
    if (r->len[0] >= 2 && r->len[0] <= 5 && d[0] == '0' && d[1] != '0' && r->n >= 2 &&
        r->ndigits >= 9 && r->ndigits <= 12 && !dot && !short_group && !s_date_shape(r) &&
        !s_ssn_shape(r)) {
        bool ok = true;
        for (int g = 2; g < r->n; g++)
            ok &= r->sep[g] != '/' && !r->paren[g];
        if (ok) return true;
    }
    /* Announced: "tel. 777 123 456", "Handy: 0171/1234567" */
    return r->ndigits >= 7 && r->n <= 6 && !s_date_shape(r) && !s_ssn_shape(r) &&
           s_context(t, r->lead, S_PHONE_CONTEXT, s_phone_words);
}

/* ---- IBAN and e-mail ---------------------------------------------------------------------- */

/* The end of the IBAN whose country code is t[c0 .. c0+2), or 0. Electronic form (no spaces)
 * or print form (a space after every four characters); letters of either case (people type
 * "cz65 …"; the check is over upper case). */
static size_t s_iban(const unsigned char *t, size_t len, size_t c0)
{
    if (c0 > 0 && s_wordish(t[c0 - 1])) return 0;
    const char cc[2] = {(char)(t[c0] & ~0x20), (char)(t[c0 + 1] & ~0x20)};
    int want = labels_checksum_iban_length(cc);
    if (!want) return 0;
    char buf[40];
    int n = 0;
    bool spaced = false;
    size_t i = c0;
    while (n < want && i < len) {
        if (n > 0 && n % 4 == 0) {
            if (n == 4) spaced = t[i] == ' ';
            if (spaced) {
                if (t[i] != ' ') return 0;
                i++;
                if (i >= len) return 0;
            }
        }
        unsigned char c = t[i];
        if (!s_digit(c) && !s_alpha(c)) return 0;
        buf[n++] = (char)(s_alpha(c) ? c & ~0x20 : c), i++;
    }
    if (n < want || (i < len && s_wordish(t[i]))) return 0;
    return labels_checksum_iban(buf, (size_t)n) ? i : 0;
}

static inline bool s_local_char(unsigned char c)
{
    return s_alpha(c) || s_digit(c) || c >= 0x80 || (c && strchr(".!#$%&'*+-/=?^_`{|}~", c));
}

static inline bool s_label_char(unsigned char c)
{
    return s_alpha(c) || s_digit(c) || c == '-' || c >= 0x80;
}

/* An address whose '@' is t[at]. */
static bool s_email(const unsigned char *t, size_t len, size_t at)
{
    size_t j = at;
    while (j > 0 && at - j < 64 && s_local_char(t[j - 1]))
        j--;
    if (j > 0 && at - j == 64 && s_local_char(t[j - 1])) return false; /* too long */
    while (j < at && t[j] == '.') /* dots before the address are the sentence's */
        j++;
    if (j == at || t[at - 1] == '.') return false;
    for (size_t k = j; k + 1 < at; k++)
        if (t[k] == '.' && t[k + 1] == '.') return false;
    size_t k = at + 1, label = 0, labels = 0, total = 0;
    bool tld_alpha = false;
    for (;;) {
        size_t s = k;
        while (k < len && s_label_char(t[k]) && k - s < 64)
            k++;
        if (k == s || k - s > 63 || t[s] == '-' || t[k - 1] == '-') return false;
        labels++, label = k - s, total += label + 1;
        tld_alpha = true;
        for (size_t m = s; m < k; m++)
            tld_alpha &= s_alpha(t[m]) || t[m] >= 0x80;
        if (k + 1 < len && t[k] == '.' && s_label_char(t[k + 1]))
            k++;
        else
            break;
    }
    return labels >= 2 && label >= 2 && tld_alpha && total <= 254 && (k >= len || t[k] != '@');
}

/* ---- the scan ----------------------------------------------------------------------------- */

/* The end of the digits and separators from t[p]: how a number inside a word is skipped. */
static size_t s_skip(const unsigned char *t, size_t len, size_t p)
{
    size_t i = p;
    while (i < len &&
           (s_digit(t[i]) || ((t[i] == ' ' || t[i] == '-' || t[i] == '.' || t[i] == '/') &&
                              i + 1 < len && s_digit(t[i + 1]))))
        i++;
    return i;
}

/* Looks at the run starting at digit t[p] with the detectors in `want`; adds what it finds to
 * *found (and counts). Returns where the scan resumes. */
static size_t s_number(const labels_pii_t *self, const unsigned char *t, size_t len, size_t p,
                       uint32_t want, uint32_t *found, uint32_t *counts)
{
    /* Tried whenever the detector is on, found or not, so that the rest of an IBAN is never
     * read as numbers of its own: the mask does not depend on `counts`. */
    if ((self->detectors & (1u << LABELS_PII_IBAN)) && p >= 2 && s_alpha(t[p - 2]) &&
        s_alpha(t[p - 1])) {
        size_t e = s_iban(t, len, p - 2);
        if (e) {
            *found |= 1u << LABELS_PII_IBAN;
            if (counts) counts[LABELS_PII_IBAN]++;
            size_t k = s_skip(t, len, p);
            return e > k ? e : k;
        }
    }
    if (p > 0 && s_wordish(t[p - 1])) return s_skip(t, len, p); /* "abc123", "v1.2" */
    s_run_t r;
    s_run_read(t, len, p, &r);
    /* No detector takes fewer than 7 digits: years, times, prices and versions end here. */
    if (r.overflow || r.ndigits < 7 || !s_left_ok(t, &r) || !s_right_ok(t, len, r.end))
        return r.end;
    int hits[LABELS_PII_COUNT] = {0};
    if (want & (1u << LABELS_PII_CARD)) hits[LABELS_PII_CARD] = s_cards(&r);
    if (want & (1u << LABELS_PII_SSN)) hits[LABELS_PII_SSN] = s_ssns(&r);
    if (want & (1u << LABELS_PII_CZ_BIRTH_NUMBER))
        hits[LABELS_PII_CZ_BIRTH_NUMBER] = s_cz_birth_numbers(&r, t, self->today);
    if (want & (1u << LABELS_PII_UA_TAX_ID))
        hits[LABELS_PII_UA_TAX_ID] = s_ua_tax_ids(&r, t, self->today);
    if (want & (1u << LABELS_PII_PHONE)) hits[LABELS_PII_PHONE] = s_phone(&r, t);
    for (int d = 0; d < LABELS_PII_COUNT; d++)
        if (hits[d]) {
            *found |= 1u << d;
            if (counts) counts[d] += (uint32_t)hits[d];
        }
    return r.end;
}

uint32_t labels_pii_scan(const labels_pii_t *self, const char *text, size_t len, uint32_t *counts)
{
    const uint32_t on = self->detectors & LABELS_PII_ALL;
    const uint32_t numeric = on & ~(1u << LABELS_PII_EMAIL);
    if (!on || !text) return 0;
    const unsigned char *t = (const unsigned char *)text;
    uint32_t found = 0, want = on;
    size_t next = 0; /* bytes before it are read (the last run's end) */
    for (size_t base = 0; base < len; base += 64) {
        uint64_t m = labels_simd_block(t, len, base, labels_simd_digits_at);
        if (next > base) m = next - base >= 64 ? 0 : m & (~0ull << (next - base));
        while (m) {
            size_t i = base + (unsigned)__builtin_ctzll(m);
            m &= m - 1;
            if (t[i] == '@') {
                if ((want & (1u << LABELS_PII_EMAIL)) && s_email(t, len, i)) {
                    found |= 1u << LABELS_PII_EMAIL;
                    if (counts) counts[LABELS_PII_EMAIL]++;
                }
            } else if (want & numeric) {
                next = s_number(self, t, len, i, want & numeric, &found, counts);
                m = next - base >= 64 ? 0 : m & (~0ull << (next - base));
            }
            if (!counts) {
                want = on & ~found;
                if (!want) return found;
            }
        }
    }
    return found;
}
