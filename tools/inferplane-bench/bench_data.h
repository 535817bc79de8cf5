/*
 * bench_data — what the benchmark sends: conversations of one or more turns, each turn a new
 * user message described by text *segments* and an output length, built on demand and
 * deterministically from the seed.
 *
 * Text. A segment is n words of a text stream; word i of stream s is a fixed function of
 * (seed, s, i), so two prompts share exactly the segments they name — a shared prefix is the
 * same stream, a request's own text a stream of its own. Every word is a common two-letter
 * English word preceded by a space (" of", " to", ...): one token each for the built-in
 * tokenizer and for byte-level BPE vocabularies (Llama-3, Qwen, ...), so a word count is a
 * token count. With a tokenizer (bench_data_use_tokenizer), the vocabulary is cut to the
 * words that are exactly one token in it, which makes the counts exact for that model.
 *
 * Synthetic workloads (GuideLLM's synthetic_text options):
 *   prompt, output        length distributions (bench_rng.h) of each turn's new text and
 *                         answer, in tokens;
 *   prefix buckets        [{weight, count, tokens}]: a conversation picks a bucket by weight
 *                         and one of its `count` prefixes uniformly; the prefix (`tokens`
 *                         words) opens its first turn;
 *   turns, think          turns per conversation, and the think time (ms) before each
 *                         follow-up; a follow-up resends the history (every earlier prompt
 *                         and answer) plus its new text.
 * Traces (bench_trace.h): one single-turn conversation per line, arriving at its time divided
 * by the speed; ours: the prefix group's stream then the request's own; Mooncake: block_tokens
 * words of stream h for each hash id h, cut to input_length, then the request's own.
 *
 * Immutable after construction but for the tokenizer call; conversations are the caller's.
 */
#ifndef BENCH_DATA_H
#define BENCH_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench_rng.h"
#include "bench_trace.h"
#include "ipl_tokenizer.h"

#define BENCH_MAX_BUCKETS 16

typedef struct {
    double weight;
    uint32_t count;  /* distinct prefixes */
    uint32_t tokens; /* words per prefix */
} bench_bucket_t;

typedef struct {
    uint64_t seed;
    bench_len_t prompt, output; /* tokens of each turn's new text and of its answer */
    uint32_t turns;             /* >= 1 */
    bench_len_t think_ms;       /* before each follow-up turn */
    bench_bucket_t buckets[BENCH_MAX_BUCKETS];
    uint32_t nbuckets;
    /* traces */
    double trace_speed;           /* arrival times are divided by it (> 0) */
    uint32_t trace_suffix_tokens; /* ours without prefix_tokens: the request's own tokens */
    uint32_t block_tokens;        /* Mooncake: tokens per hash id */
} bench_data_config_t;

/* Defaults: seed 42, prompt 128, output 64, one turn, think 0, no prefix, speed 1, suffix 256,
 * 512-token blocks. */
void bench_data_config_defaults(bench_data_config_t *cfg);

/* "WEIGHT:COUNT:TOKENS[,...]" (e.g. "100:8:2048"), appended to cfg's buckets. 0 or
 * IPL_E_INVAL with a message. */
int bench_buckets_parse(const char *spec, bench_data_config_t *cfg, char *err, size_t errlen);

typedef struct {
    uint64_t stream;
    uint32_t words;
} bench_seg_t;

typedef struct {
    uint32_t seg_off, nseg; /* the new text's segments in the conversation's table */
    uint32_t words;         /* their words (= tokens) */
    uint32_t output_tokens;
    double think_s; /* before this turn, after the previous one's answer (turn 0: 0) */
} bench_turn_t;

typedef struct {
    uint64_t index;
    double arrival_s; /* traces: when its first turn is due; synthetic: 0 */
    bench_turn_t *turns;
    uint32_t nturns;
    bench_seg_t *segs;
    uint32_t nsegs, segs_cap;
} bench_conv_t;

typedef struct bench_data bench_data_t;

/* NULL on allocation failure or a config that cannot generate (turns 0, no bucket weight). */
bench_data_t *bench_data_new_synthetic(const bench_data_config_t *cfg);
/* Replays a trace; ownership of *trace moves in (NULLed). */
bench_data_t *bench_data_new_trace(const bench_data_config_t *cfg, bench_trace_t **trace);
void bench_data_destroy(bench_data_t **self_p);

/* Keeps only the words that are one token in `tok` (borrowed during the call). 0, or
 * IPL_E_INVAL when fewer than 8 are (the counts could not be exact). */
int bench_data_use_tokenizer(bench_data_t *self, const ipl_tokenizer_t *tok);
/* The words in use (for tests and the report). */
uint32_t bench_data_vocabulary(const bench_data_t *self);

/* Conversations available: a trace's lines; 0 for synthetic (unbounded). */
uint64_t bench_data_count(const bench_data_t *self);
/* "synthetic" or "trace". */
const char *bench_data_kind(const bench_data_t *self);

/* Builds conversation `index` into *out (whose arrays are reused; zero it before the first
 * use). 0, IPL_E_RANGE past a trace's end, IPL_E_NOMEM. */
int bench_data_conv(const bench_data_t *self, uint64_t index, bench_conv_t *out);
void bench_conv_clear(bench_conv_t *conv);

/* Bytes of the text of n segments: 3 per word (a space and two letters). */
size_t bench_data_text_len(const bench_seg_t *segs, uint32_t n);
/* Writes that text (no NUL) into dst, which holds bench_data_text_len bytes; returns them. */
size_t bench_data_text(const bench_data_t *self, const bench_seg_t *segs, uint32_t n, char *dst);

#endif
