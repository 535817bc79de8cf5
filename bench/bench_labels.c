/*
 * bench_labels — what labelling a prompt costs (libs/labels/labels_set: labels_eval), in one
 * thread: the gateway labels every request before it asks the decider (issue 13: at most
 * 100 us for a 10,000-token prompt).
 *
 * The prompt: `--bytes` (40,000) bytes of English prose — about 10,000 tokens at the usual
 * ~4 bytes a token — from a vocabulary of common and technical words, with capitals,
 * punctuation, years, versions, prices and times, but no personal data, so no detector stops
 * early and every byte is read (the worst case of an ordinary prompt).
 *
 * The configuration: every built-in detector, 12 whole-word keyword rules (phrases among
 * them), and a classifier of three classes trained from `--examples` (900) generated example
 * prompts, reading the prompt's last 16 KiB (the default) — the shape of an operator's policy.
 * Variants add 8 substring keywords, or 2 regexes reading at most 16 KiB each.
 *
 *   labels_10k_tokens_us            labels_eval of the prompt, p50 of `--runs` (2000), each
 *                                   timed alone, in warm blocks (s_time)
 *   labels_10k_tokens_p99_us        its p99 (median of 5 rounds' p99)
 *   labels_10k_tokens_pii_us        the detectors alone, p50
 *   labels_10k_tokens_whole_us      the classifier reading the whole prompt (classifier_bytes
 *                                   SIZE_MAX), not its last 16 KiB (the default), p50
 *   labels_10k_tokens_substring_us  with the substring keywords too, p50
 *   labels_10k_tokens_regex_us      with the regexes too, p50 (of a quarter of the runs)
 *   labels_train_ms                 labels_set_new of the configuration (training included)
 *
 *   build/bench/bench_labels [--bytes 40000] [--runs 2000] [--examples 900] [--seed 1]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "labels_set.h"

static const char *const s_common[] = {
    "the",    "of",     "and",     "to",      "in",    "a",       "is",     "that",   "for",
    "it",     "as",     "with",    "be",      "by",    "on",      "not",    "this",   "are",
    "or",     "from",   "at",      "which",   "but",   "have",    "an",     "they",   "you",
    "were",   "their",  "one",     "all",     "we",    "can",     "has",    "there",  "been",
    "if",     "more",   "when",    "will",    "would", "who",     "so",     "no",     "about",
    "into",   "than",   "them",    "some",    "could", "other",   "time",   "these",  "two",
    "may",    "then",   "first",   "any",     "like",  "now",     "such",   "make",   "over",
    "our",    "even",   "most",    "me",      "state", "after",   "also",   "made",   "many",
    "before", "must",   "through", "back",    "years", "where",   "much",   "your",   "way",
    "well",   "down",   "should",  "because", "each",  "just",    "those",  "people", "how",
    "too",    "little", "good",    "very",    "new",   "between", "system", "number", "however",
    "work"};
static const char *const s_tech[] = {
    "cluster",       "latency",    "throughput",    "request",   "cache",       "prefix",
    "worker",        "scheduler",  "memory",        "kernel",    "gateway",     "decision",
    "policy",        "tenant",     "model",         "token",     "prompt",      "replica",
    "network",       "database",   "transaction",   "index",     "consistency", "availability",
    "partition",     "deployment", "configuration", "benchmark", "profile",     "allocation",
    "fragmentation", "queue",      "backpressure",  "timeout",   "retry",       "failover"};
static const char *const s_code_words[] = {
    "function", "return",  "python", "class",      "import",     "compile", "error",
    "variable", "pointer", "struct", "javascript", "query",      "select",  "loop",
    "array",    "string",  "debug",  "exception",  "typescript", "rust",    "golang",
    "refactor", "unit",    "test",   "bash",       "script"};
static const char *const s_simple_words[] = {
    "what", "who",  "capital", "translate", "how", "many", "weather", "today", "meaning", "spell",
    "joke", "name", "color",   "tall",      "far", "day",  "week",    "city",  "country", "word"};
static const char *const s_complex_words[] = {
    "analyze",   "compare",      "strategy", "trade-offs",   "evaluate",     "implications",
    "framework", "risks",        "plan",     "milestones",   "evidence",     "discuss",
    "assess",    "long-term",    "policy",   "stakeholders", "consequences", "design",
    "reasoning", "alternatives", "budget"};

#define N(a) (sizeof a / sizeof *a)

static const char *s_pick(bench_rng_t *r, const char *const *v, size_t n)
{
    return v[bench_rand(r) % n];
}

/* Appends to buf (capacity cap) a sentence of English-like prose. */
static size_t s_sentence(char *buf, size_t at, size_t cap, bench_rng_t *r)
{
    int words = (int)bench_range(r, 6, 22);
    for (int w = 0; w < words && at + 40 < cap; w++) {
        char word[40];
        uint64_t k = bench_rand(r) % 100;
        if (k < 70)
            snprintf(word, sizeof word, "%s", s_pick(r, s_common, N(s_common)));
        else if (k < 92)
            snprintf(word, sizeof word, "%s", s_pick(r, s_tech, N(s_tech)));
        else if (k < 94)
            snprintf(word, sizeof word, "%u", (unsigned)bench_range(r, 1990, 2030)); /* a year */
        else if (k < 96)
            snprintf(word, sizeof word, "v%u.%u.%u", (unsigned)bench_range(r, 1, 9),
                     (unsigned)bench_range(r, 0, 20), (unsigned)bench_range(r, 0, 9));
        else if (k < 98)
            snprintf(word, sizeof word, "$%u.%02u", (unsigned)bench_range(r, 1, 999),
                     (unsigned)bench_range(r, 0, 99));
        else
            snprintf(word, sizeof word, "%02u:%02u", (unsigned)bench_range(r, 0, 23),
                     (unsigned)bench_range(r, 0, 59));
        if (w == 0 && word[0] >= 'a' && word[0] <= 'z') word[0] = (char)(word[0] - 32);
        at += (size_t)snprintf(buf + at, cap - at, "%s%s", w ? " " : "", word);
        if (w + 1 < words && bench_rand(r) % 12 == 0) buf[at++] = ',';
    }
    at += (size_t)snprintf(buf + at, cap - at, "%s", bench_rand(r) % 8 ? ". " : "?\n");
    return at;
}

static char *s_prompt(size_t bytes, bench_rng_t *r)
{
    char *p = malloc(bytes + 64);
    if (!p) BENCH_DIE("out of memory");
    size_t at = 0;
    while (at < bytes)
        at = s_sentence(p, at, bytes + 64, r);
    p[bytes] = '\0';
    return p;
}

/* n example prompts per class, from the class's words and common ones. */
static char **s_examples(const char *const *words, size_t nwords, size_t n, bench_rng_t *r)
{
    char **v = calloc(n, sizeof *v);
    if (!v) BENCH_DIE("out of memory");
    for (size_t i = 0; i < n; i++) {
        char buf[512];
        size_t at = 0;
        int len = (int)bench_range(r, 5, 40);
        for (int w = 0; w < len && at + 40 < sizeof buf; w++) {
            const char *x =
                bench_rand(r) % 3 ? s_pick(r, words, nwords) : s_pick(r, s_common, N(s_common));
            at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s", w ? " " : "", x);
        }
        v[i] = strdup(buf);
        if (!v[i]) BENCH_DIE("out of memory");
    }
    return v;
}

static const char *const s_kw_secret[] = {"password", "passphrase", "api key", "private key"};
static const char *const s_kw_health[] = {"diagnosis", "prescription", "blood pressure"};
static const char *const s_kw_legal[] = {"attorney client", "privileged and confidential"};
static const char *const s_kw_finance[] = {"wire transfer", "account balance", "salary"};
static const char *const s_kw_sub[] = {"passw",   "secret",    "token=",       "bearer ",
                                       "ssh-rsa", "BEGIN RSA", "confidential", "интерн"};

typedef struct {
    labels_set_t *set;
    const char *name;
} s_variant_t;

static labels_set_t *s_build(int variant, char **ex[3], size_t per_class, size_t window, double *ms)
{
    labels_rule_config_t rules[8] = {
        {.label = "secret", .keywords = s_kw_secret, .nkeywords = N(s_kw_secret)},
        {.label = "health", .keywords = s_kw_health, .nkeywords = N(s_kw_health)},
        {.label = "legal", .keywords = s_kw_legal, .nkeywords = N(s_kw_legal)},
        {.label = "finance", .keywords = s_kw_finance, .nkeywords = N(s_kw_finance)},
    };
    size_t nrules = 4;
    if (variant >= 2)
        rules[nrules++] = (labels_rule_config_t){
            .label = "secret", .keywords = s_kw_sub, .nkeywords = N(s_kw_sub), .substring = true};
    if (variant >= 3) {
        rules[nrules++] =
            (labels_rule_config_t){.label = "ticket", .regex = "[A-Z]{2,5}-[0-9]{3,6}"};
        rules[nrules++] = (labels_rule_config_t){.label = "jwt",
                                                 .regex = "eyJ[A-Za-z0-9_-]{10,}\\.[A-Za-z0-9_-]+"};
    }
    labels_class_config_t classes[3] = {
        {.label = "code", .examples = (const char *const *)ex[0], .nexamples = per_class},
        {.label = "simple", .examples = (const char *const *)ex[1], .nexamples = per_class},
        {.label = "complex", .examples = (const char *const *)ex[2], .nexamples = per_class},
    };
    labels_config_t c = {.detectors = LABELS_PII_ALL,
                         .rules = rules,
                         .nrules = nrules,
                         .classes = classes,
                         .nclasses = 3,
                         .threshold = 0.6,
                         .classifier_bytes = window};
    if (variant == 0) c.nrules = 0, c.nclasses = 0;
    char err[512];
    uint64_t t0 = bench_now_ns();
    labels_set_t *s = labels_set_new(&c, err, sizeof err);
    if (ms) *ms = (double)(bench_now_ns() - t0) / 1e6;
    if (!s) BENCH_DIE("labels_set_new: %s", err);
    return s;
}

#define S_VARIANTS 5
#define S_BLOCKS   4 /* each variant's runs in blocks, the variants' blocks interleaved */

/* Times labels_eval of every set `runs` times (a quarter of that for sets with skip[k] 4):
 * in S_BLOCKS blocks per set, each after a warm-up of its own, the sets' blocks interleaved
 * (0, 1, …, 0, 1, …), so that a set runs warm, as a gateway's one set does, and whatever else
 * the machine does falls on all of them alike. v[k][i] is set k's i-th time. */
static void s_time(labels_set_t *const *sets, const unsigned *skip, const char *p, size_t len,
                   size_t runs, uint64_t *v[S_VARIANTS], size_t *nlabels)
{
    const char *out[LABELS_MAX];
    size_t at[S_VARIANTS] = {0};
    for (int b = 0; b < S_BLOCKS; b++)
        for (int k = 0; k < S_VARIANTS; k++) {
            size_t n = runs / skip[k] / S_BLOCKS;
            for (size_t i = 0; i < 50 / skip[k]; i++)
                labels_eval(sets[k], p, len, out, LABELS_MAX);
            for (size_t i = 0; i < n; i++) {
                uint64_t t0 = bench_now_ns();
                size_t got = labels_eval(sets[k], p, len, out, LABELS_MAX);
                v[k][at[k]++] = bench_now_ns() - t0;
                if (k == 0) *nlabels = got;
            }
        }
}

int main(int argc, char **argv)
{
    size_t bytes = (size_t)bench_arg_int(argc, argv, "bytes", 40000);
    size_t runs = (size_t)bench_arg_int(argc, argv, "runs", 2000);
    size_t examples = (size_t)bench_arg_int(argc, argv, "examples", 900);
    bench_rng_t rng = bench_rng((uint64_t)bench_arg_int(argc, argv, "seed", 1));
    if (bytes < 100 || runs < 10 || examples < 6)
        BENCH_DIE("--bytes, --runs or --examples too small");
    char *prompt = s_prompt(bytes, &rng);
    size_t per = examples / 3;
    char **ex[3] = {s_examples(s_code_words, N(s_code_words), per, &rng),
                    s_examples(s_simple_words, N(s_simple_words), per, &rng),
                    s_examples(s_complex_words, N(s_complex_words), per, &rng)};
    double train_ms;
    labels_set_t *full = s_build(1, ex, per, 0, &train_ms), *pii = s_build(0, ex, per, 0, NULL),
                 *whole = s_build(1, ex, per, SIZE_MAX, NULL), *sub = s_build(2, ex, per, 0, NULL),
                 *rx = s_build(3, ex, per, 0, NULL);
    labels_set_t *sets[S_VARIANTS] = {full, pii, whole, sub, rx};
    static const unsigned skip[S_VARIANTS] = {1, 1, 1, 1, 4};
    uint64_t *v[S_VARIANTS], r99[BENCH_ROUNDS];
    for (int k = 0; k < S_VARIANTS; k++)
        if (!(v[k] = malloc(runs * sizeof *v[k]))) BENCH_DIE("out of memory");
    size_t n = 0;
    s_time(sets, skip, prompt, bytes, runs, v, &n);
    BENCH_LOG("%zu bytes, %zu example prompts, %zu labels on the prompt", bytes, per * 3, n);
    double p99 = (double)bench_p99_of_rounds(v[0], runs / S_BLOCKS * S_BLOCKS, r99) / 1e3;
#define P50(k) ((double)bench_quantile(v[k], runs / skip[k] / S_BLOCKS * S_BLOCKS, 0.5) / 1e3)
    bench_figure("labels_10k_tokens_us", P50(0), "us",
                 "40 KB prompt: detectors, 4 keyword rules, classifier");
    bench_figure("labels_10k_tokens_p99_us", p99, "us", NULL);
    bench_figure("labels_10k_tokens_pii_us", P50(1), "us", NULL);
    bench_figure("labels_10k_tokens_whole_us", P50(2), "us",
                 "the classifier over all 40 KB, not its last 16 KiB");
    bench_figure("labels_10k_tokens_substring_us", P50(3), "us", "+ 8 substring keywords");
    bench_figure("labels_10k_tokens_regex_us", P50(4), "us",
                 "+ substring keywords and 2 regexes on 16 KiB");
#undef P50
    bench_figure("labels_train_ms", train_ms, "ms", "labels_set_new, 900 example prompts");
    for (int k = 0; k < S_VARIANTS; k++)
        free(v[k]);
    labels_set_destroy(&full);
    labels_set_destroy(&pii);
    labels_set_destroy(&whole);
    labels_set_destroy(&sub);
    labels_set_destroy(&rx);
    for (int c = 0; c < 3; c++) {
        for (size_t i = 0; i < per; i++)
            free(ex[c][i]);
        free(ex[c]);
    }
    free(prompt);
    return 0;
}
