/* libFuzzer target: ipl_index under any sequence of operations, checked against a brute-force
 * model. Each 4 input bytes are one operation on a small key space (so operations collide):
 *   b0: low 2 bits the kind (0-1 add, 2 remove, 3 clear or match), next 2 bits the worker
 *   b1: the first key of a run of consecutive keys (a chain), b2: its length - 1 (mod 16)
 *   b3: the parent hint (0: none, 1: the key before the run, else an arbitrary key)
 * Every add reserves slack, so a few hundred operations reach the arena's compaction too.
 * After each operation the counts must agree with the model; matches are checked as we go
 * and, for every start key, at the end. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_index.h"

#define S_W 4
#define S_K 256
#define S_MATCH 24

static uint64_t s_key(unsigned k)
{
    return ((uint64_t)(k % S_K) + 1) * 0x9e3779b97f4a7c15ULL;
}

static void s_check_match(const ipl_index_t *ix, uint8_t model[S_W][S_K], unsigned start)
{
    uint64_t h[S_MATCH];
    uint32_t prefix[S_W];
    for (unsigned i = 0; i < S_MATCH; i++)
        h[i] = s_key(start + i);
    size_t best = ipl_index_match(ix, h, S_MATCH, prefix, S_W), want_best = 0;
    for (int w = 0; w < S_W; w++) {
        size_t p = 0;
        while (p < S_MATCH && model[w][(start + p) % S_K])
            p++;
        if (prefix[w] != p) abort();
        if (p > want_best) want_best = p;
    }
    if (best != want_best) abort();
}

static void s_check_counts(const ipl_index_t *ix, uint8_t model[S_W][S_K])
{
    size_t members = 0, blocks = 0;
    for (unsigned k = 0; k < S_K; k++) {
        int any = 0;
        for (int w = 0; w < S_W; w++) {
            members += model[w][k];
            any |= model[w][k];
        }
        blocks += any != 0;
    }
    if (ipl_index_memberships(ix) != members || ipl_index_blocks(ix) != blocks) abort();
}

static int s_count(void *arg, uint64_t hash)
{
    (void)hash;
    (*(size_t *)arg)++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t model[S_W][S_K];
    memset(model, 0, sizeof model);
    ipl_index_t *ix = ipl_index_new();
    if (!ix) return 0;
    const char *names[S_W] = {"a", "b", "c", "d"};
    for (int w = 0; w < S_W; w++)
        if (ipl_index_worker(ix, names[w]) != w) abort();
    for (size_t at = 0; at + 4 <= size; at += 4) {
        const uint8_t *op = data + at;
        int kind = op[0] & 3, w = (op[0] >> 2) & 3;
        unsigned start = op[1], n = 1u + (op[2] & 15u);
        uint64_t h[16];
        for (unsigned i = 0; i < n; i++)
            h[i] = s_key(start + i);
        if (kind <= 1) {
            uint64_t parent = op[3] == 0 ? 0 : op[3] == 1 ? s_key(start + S_K - 1) : s_key(op[3]);
            if (ipl_index_add_chain(ix, w, parent, h, n) != 0) abort();
            for (unsigned i = 0; i < n; i++)
                model[w][(start + i) % S_K] = 1;
        } else if (kind == 2) {
            if (ipl_index_remove(ix, w, h, n) != 0) abort();
            for (unsigned i = 0; i < n; i++)
                model[w][(start + i) % S_K] = 0;
        } else if (op[3] & 1) {
            ipl_index_clear_worker(ix, w);
            memset(model[w], 0, S_K);
        } else {
            s_check_match(ix, model, start);
        }
        s_check_counts(ix, model);
    }
    for (unsigned s = 0; s < S_K; s++)
        s_check_match(ix, model, s);
    for (int w = 0; w < S_W; w++) {
        size_t n = 0, want = 0;
        ipl_index_foreach(ix, w, s_count, &n);
        for (unsigned k = 0; k < S_K; k++)
            want += model[w][k];
        if (n != want || ipl_index_worker_blocks(ix, w) != want) abort();
    }
    ipl_index_destroy(&ix);
    return 0;
}
