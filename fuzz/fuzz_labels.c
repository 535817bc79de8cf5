/* libFuzzer target: the semantic labels of any bytes (libs/labels), checked against what must
 * hold whatever the text:
 *   - labels_eval on a set with every part configured (detectors, whole-word and substring
 *     keywords, a regex, a classifier) gives valid names, in id order, the same each time,
 *     and as many as the mask has bits;
 *   - the detectors find the same with and without counting (the early stop changes nothing),
 *     and a detector counted at least once is one that fired;
 *   - the words are the same in chunks of 1 and of 64.
 * With the first byte odd, the lines of the input after it also become the keywords of a new
 * set (whole-word and substring), built and evaluated on the rest: the automaton's builder
 * and the keyword tokenizer meet arbitrary keywords. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "labels_pii.h"
#include "labels_set.h"
#include "labels_words.h"

static labels_set_t *s_set;

static const char *const s_kw[] = {"password", "credit card", "rodné číslo", "пароль"};
static const char *const s_sub[] = {"passw", "top  secret", "ЖУК"};
static const char *const s_code[] = {"fix this python function", "my c code segfaults",
                                     "javascript error undefined"};
static const char *const s_chat[] = {"tell me a joke", "what is the capital of france",
                                     "write a poem"};

static labels_set_t *s_build(void)
{
    labels_rule_config_t rules[] = {
        {.label = "secret", .keywords = s_kw, .nkeywords = 4},
        {.label = "secret", .keywords = s_sub, .nkeywords = 3, .substring = true},
        {.label = "ticket", .regex = "[A-Z]{2,5}-[0-9]{3,6}"},
    };
    labels_class_config_t classes[] = {{.label = "code", .examples = s_code, .nexamples = 3},
                                       {.examples = s_chat, .nexamples = 3}};
    labels_config_t c = {.detectors = LABELS_PII_ALL,
                         .rules = rules,
                         .nrules = 3,
                         .classes = classes,
                         .nclasses = 2,
                         .regex_max_bytes = 1024,
                         .classifier_bytes = 512};
    char err[256];
    labels_set_t *s = labels_set_new(&c, err, sizeof err);
    if (!s) abort();
    return s;
}

static void s_check_eval(const labels_set_t *s, const char *text, size_t len)
{
    const char *out[LABELS_MAX], *again[LABELS_MAX];
    size_t n = labels_eval(s, text, len, out, LABELS_MAX);
    if (n > labels_set_nlabels(s)) abort();
    if (labels_eval(s, text, len, again, LABELS_MAX) != n) abort();
    labels_mask_t mask = labels_set_eval_mask(s, text, len);
    if ((size_t)__builtin_popcountll(mask) != n) abort();
    for (size_t i = 0; i < n; i++) {
        if (out[i] != again[i] || !out[i] || !out[i][0]) abort();
        if (i && strcmp(out[i], out[i - 1]) == 0) abort();
    }
}

static void s_check_detectors(const char *text, size_t len)
{
    labels_pii_t pii = labels_pii_make(LABELS_PII_ALL);
    uint32_t counts[LABELS_PII_COUNT] = {0};
    uint32_t a = labels_pii_scan(&pii, text, len, NULL);
    uint32_t b = labels_pii_scan(&pii, text, len, counts);
    if (a != b) abort();
    for (int d = 0; d < LABELS_PII_COUNT; d++)
        if ((counts[d] > 0) != ((a >> d) & 1)) abort();
}

static void s_check_words(const char *text, size_t len)
{
    static uint64_t one[70000], many[70000];
    size_t n1 = 0, n2 = 0, k;
    labels_words_t it;
    labels_words_init(&it, text, len);
    while ((k = labels_words_next(&it, one + n1, 1)) > 0)
        if ((n1 += k) > sizeof one / sizeof *one - 1) abort();
    labels_words_init(&it, text, len);
    while ((k = labels_words_next(&it, many + n2, 64)) > 0)
        if ((n2 += k) > sizeof many / sizeof *many - 64) abort();
    if (n1 != n2 || memcmp(one, many, n1 * sizeof *one) != 0) abort();
}

/* Keywords from the input's first lines (up to 8, each up to 64 bytes), the rest as text. */
static void s_check_keywords(const uint8_t *data, size_t size)
{
    char kws[8][65];
    const char *whole[8], *sub[8];
    size_t nk = 0, at = 0;
    while (nk < 8 && at < size) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t l = nl ? (size_t)(nl - data - at) : size - at;
        if (l > 64) l = 64;
        memcpy(kws[nk], data + at, l);
        kws[nk][l] = '\0';
        if (strlen(kws[nk]) == l) whole[nk] = sub[nk] = kws[nk], nk++; /* no NUL inside */
        at += l + 1;
        if (!nl) break;
    }
    labels_rule_config_t rules[2] = {
        {.label = "w", .keywords = whole, .nkeywords = nk},
        {.label = "s", .keywords = sub, .nkeywords = nk, .substring = true}};
    labels_config_t c = {.rules = rules, .nrules = nk ? 2 : 0};
    char err[256];
    labels_set_t *s = labels_set_new(&c, err, sizeof err); /* may fail: a keyword of no word */
    if (!s) {
        rules[0] = rules[1], c.nrules = nk ? 1 : 0; /* substrings only */
        s = labels_set_new(&c, err, sizeof err);
    }
    if (s) {
        size_t rest = at < size ? size - at : 0;
        s_check_eval(s, (const char *)data + (size - rest), rest);
        labels_set_destroy(&s);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!s_set) s_set = s_build();
    const char *text = (const char *)data;
    s_check_eval(s_set, text, size);
    s_check_detectors(text, size);
    s_check_words(text, size);
    if (size > 1 && (data[0] & 1)) s_check_keywords(data + 1, size - 1);
    return 0;
}
