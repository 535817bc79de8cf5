/* inferplanectl tokenize --bench — what encoding costs, cold and warm, side by side in one
 * run (issue 14; docs/benchmarks.md):
 *
 *   --bench < text          the gateway's chain for a plain prompt (ipl_prompt_blocks:
 *                           encode with the post-processor's specials when asked, then
 *                           block hashes), rounds of ~1 s each: cold (the section cache off:
 *                           every byte encoded) and warm (cache on, after one priming
 *                           encode: the text seen before, e.g. a shared document)
 *   --chat --bench < chat   render + encode + hash of the chat (a messages array), cold (cache
 *                           off) and warm (cache on, primed once); every round appends its
 *                           own " #N" to the last message, so each chat is distinct and only
 *                           what came before it (system prompt, earlier turns) can be warm
 *
 * Times are the process's CPU time (CLOCK_PROCESS_CPUTIME_ID), per encode (median of the
 * rounds) and as throughput. One JSON line per figure, then a summary line.
 */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "ipl_bpe.h"
#include "ipl_prompt.h"

#define S_MAX_ROUNDS 100000
#define S_SECONDS    1.0
#define S_BLOCK      16

static double s_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    double median_s, total_s;
    size_t rounds, tokens;
} s_run_t;

/* One round: the chain on `text` (a chat's rendering is done by the caller's round fn). */
typedef int (*s_round_fn)(ipl_prompt_t *model, void *arg, size_t round, size_t *tokens);

static int s_measure(ipl_prompt_t *model, s_round_fn fn, void *arg, s_run_t *out)
{
    double *t = malloc(S_MAX_ROUNDS * sizeof *t);
    if (!t) return 1;
    *out = (s_run_t){0};
    double start = s_cpu();
    while (out->rounds < S_MAX_ROUNDS && s_cpu() - start < S_SECONDS) {
        double t0 = s_cpu();
        size_t n = 0;
        if (fn(model, arg, out->rounds + 1, &n) != 0) {
            free(t);
            return 1;
        }
        t[out->rounds++] = s_cpu() - t0;
        out->tokens += n;
    }
    out->total_s = s_cpu() - start;
    qsort(t, out->rounds, sizeof *t, s_cmp);
    out->median_s = out->rounds ? t[out->rounds / 2] : 0;
    free(t);
    return 0;
}

typedef struct {
    const char *text;
    size_t len;
    bool special;
} s_plain_t;

static int s_plain_round(ipl_prompt_t *model, void *arg, size_t round, size_t *tokens)
{
    (void)round;
    s_plain_t *p = arg;
    uint64_t *hashes = NULL;
    size_t nh = 0;
    int rc = ipl_prompt_blocks(model, p->text, p->len, !p->special, S_BLOCK, NULL, NULL, SIZE_MAX,
                               &hashes, &nh, tokens);
    free(hashes);
    return rc;
}

typedef struct {
    cJSON *msgs;
    cJSON *last; /* the last message's content string */
    char *base;  /* its original text */
    size_t bytes;
} s_chat_t;

static int s_chat_round(ipl_prompt_t *model, void *arg, size_t round, size_t *tokens)
{
    s_chat_t *c = arg;
    size_t blen = strlen(c->base);
    char *text = malloc(blen + 32);
    if (!text) return 1;
    snprintf(text, blen + 32, "%s #%zu", c->base, round);
    cJSON_SetValuestring(c->last, text);
    free(text);
    char *prompt = NULL, err[512] = "";
    size_t len = 0;
    if (ipl_prompt_render(model, c->msgs, NULL, true, false, NULL, &prompt, &len, err,
                          sizeof err)) {
        fprintf(stderr, "tokenize: --chat --bench: %s\n", *err ? err : "out of memory");
        return 1;
    }
    c->bytes = len;
    uint64_t *hashes = NULL;
    size_t nh = 0;
    int rc = ipl_prompt_blocks(model, prompt, len, true, S_BLOCK, NULL, NULL, SIZE_MAX, &hashes,
                               &nh, tokens);
    free(hashes);
    free(prompt);
    return rc;
}

static void s_print(const char *name, const s_run_t *r, size_t bytes)
{
    double per = r->median_s;
    printf("{\"name\": \"%s\", \"per_encode_us\": %.1f, \"mb_per_s\": %.2f, \"tokens\": %zu, "
           "\"bytes\": %zu, \"rounds\": %zu}\n",
           name, per * 1e6, per > 0 ? (double)bytes / per / 1e6 : 0,
           r->rounds ? r->tokens / r->rounds : 0, bytes, r->rounds);
}

int ctl_tokenize_bench(ipl_prompt_t *model, const char *text, size_t len, bool chat, bool special)
{
    s_plain_t plain = {text, len, special};
    s_chat_t c = {0};
    if (chat) {
        c.msgs = cJSON_ParseWithLength(text, len);
        cJSON *m = cJSON_IsArray(c.msgs)
                       ? cJSON_GetArrayItem(c.msgs, -1 + cJSON_GetArraySize(c.msgs))
                       : NULL;
        c.last = m ? cJSON_GetObjectItemCaseSensitive(m, "content") : NULL;
        if (!cJSON_IsString(c.last) || !(c.base = strdup(c.last->valuestring))) {
            fprintf(stderr, "tokenize: --chat --bench: stdin must be a messages array whose last "
                            "message has string content\n");
            cJSON_Delete(c.msgs);
            return 2;
        }
    }
    s_round_fn fn = chat ? s_chat_round : s_plain_round;
    void *arg = chat ? (void *)&c : (void *)&plain;
    s_run_t cold, warm;
    int rc = ipl_prompt_set_cache(model, 0, 0) || s_measure(model, fn, arg, &cold) ||
             ipl_prompt_set_cache(model, IPL_BPE_CACHE_ENTRIES, IPL_BPE_CACHE_BYTES);
    size_t primer = 0;
    rc = rc || fn(model, arg, 0, &primer) || s_measure(model, fn, arg, &warm);
    if (!rc) {
        size_t bytes = chat ? c.bytes : len;
        s_print(chat ? "chat_cold" : "encode_cold", &cold, bytes);
        s_print(chat ? "chat_warm" : "encode_warm", &warm, bytes);
        printf("%s: %zu bytes, %zu tokens; cold %.1f us (%.2f MB/s), warm %.1f us: warm costs "
               "%.1f%% of cold\n",
               chat ? "render+encode+hash of a chat" : "encode+hash", bytes,
               cold.rounds ? cold.tokens / cold.rounds : 0, cold.median_s * 1e6,
               cold.median_s > 0 ? (double)bytes / cold.median_s / 1e6 : 0, warm.median_s * 1e6,
               cold.median_s > 0 ? 100 * warm.median_s / cold.median_s : 0);
    } else {
        fprintf(stderr, "tokenize: --bench failed (out of memory?)\n");
    }
    free(c.base);
    cJSON_Delete(c.msgs);
    return rc ? 1 : 0;
}
