/*
 * sim_text — a splitmix64 stream over a small word list.
 */
#include "sim_text.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_hash.h"

static const char *const s_words[] = {
    "the",    "model",  "cache",   "token",   "prefix", "request", "worker", "router",
    "block",  "stream", "fast",    "latency", "queue",  "batch",   "engine", "memory",
    "simple", "answer", "because", "every",   "system", "with",    "from",   "into",
    "about",  "which",  "their",   "would",   "there",  "could",   "other",  "these",
    "first",  "water",  "people",  "little",  "world",  "house",   "under",  "light",
    "again",  "place",  "where",   "great",   "still",  "small",   "found",  "think",
    "of",     "and",    "a",       "to",      "in",     "is",      "it",     "that",
    "for",    "on",     "as",      "was",     "at",     "by",      "an",     "be",
};

#define S_NWORDS (sizeof s_words / sizeof s_words[0])

/* splitmix64: ipl_mix64 of the state before its golden-ratio step. */
static uint64_t s_next(uint64_t *state)
{
    uint64_t z = *state;
    *state += 0x9e3779b97f4a7c15ULL;
    return ipl_mix64(z);
}

uint64_t sim_text_seed(uint64_t server_seed, uint64_t request_seed, const uint32_t *prompt,
                       size_t nprompt)
{
    uint64_t h = ipl_hash_bytes(prompt, nprompt * sizeof *prompt);
    uint64_t s = server_seed ^ (request_seed * 0x9e3779b97f4a7c15ULL) ^ h;
    return s_next(&s);
}

/* Appends space-separated words to text until it is at least `target` bytes long. */
static int s_append_words(char **text, size_t *len, size_t *cap, uint64_t *state, size_t target)
{
    while (*len < target) {
        const char *w = s_words[s_next(state) % S_NWORDS];
        size_t wl = strlen(w);
        if (*len + wl + 2 > *cap) {
            size_t ncap = (*cap ? *cap : 64) * 2;
            char *p = realloc(*text, ncap);
            if (!p) return -1;
            *text = p;
            *cap = ncap;
        }
        if (*len) (*text)[(*len)++] = ' ';
        memcpy(*text + *len, w, wl);
        *len += wl;
    }
    return 0;
}

uint32_t *sim_text_generate(const ipl_tokenizer_t *tok, uint64_t seed, uint32_t n)
{
    uint64_t state = seed;
    char *text = NULL;
    size_t len = 0, cap = 0;
    uint32_t *out = malloc((size_t)n * sizeof *out);
    /* Pieces are at most 3 bytes, so 3 bytes of text per token is normally enough; grow the
     * text and tokenize again if a tokenizer ever packs more. */
    for (size_t target = (size_t)n * 3 + 8; out; target *= 2) {
        if (s_append_words(&text, &len, &cap, &state, target) != 0) break;
        size_t nids = 0;
        uint32_t *ids = ipl_tokenizer_encode(tok, text, len, &nids);
        if (!ids) break;
        if (nids >= n) {
            memcpy(out, ids, (size_t)n * sizeof *out);
            free(ids);
            free(text);
            return out;
        }
        free(ids);
    }
    free(text);
    free(out);
    return NULL;
}

uint32_t sim_text_natural_length(uint64_t seed, double mean, uint32_t min_tokens)
{
    uint64_t state = seed ^ 0x656f73ULL;                                    /* "eos" */
    double u = ((double)(s_next(&state) >> 11) + 0.5) / 9007199254740992.0; /* (0,1) */
    double n = 1.0 + floor(-log(u) * mean);
    if (n > 1e9) n = 1e9;
    uint32_t len = (uint32_t)n;
    return len < min_tokens ? min_tokens : len;
}
