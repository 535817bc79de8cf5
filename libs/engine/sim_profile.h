/*
 * sim_profile — the calibrated cost model of a simulated GPU + model pair.
 *
 * The engine charges every step
 *
 *     duration = step_s + prefill_token_s · prefill_tokens + decode_seq_s · decode_seqs
 *                       + context_token_s · total_context                       (seconds)
 *
 * where prefill_tokens are the prompt (or recomputed) tokens computed in the step, decode_seqs
 * the sequences producing their next token, and total_context the sum over the step's sequences
 * of the tokens their attention reads (computed + new). A request also waits request_s once
 * between arrival and the scheduler (API server, tokenisation, IPC: latency that is not GPU
 * work). Capacity: num_gpu_blocks blocks of KV cache. Every figure and its source is in
 * sim_profile.c and docs/simulator.md.
 */
#ifndef SIM_PROFILE_H
#define SIM_PROFILE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;        /* "l40s-27b-fp8" */
    const char *summary;     /* one line for --help and docs */
    double step_s;           /* fixed cost of a step: weights streamed once (seconds) */
    double prefill_token_s;  /* per prompt token computed (seconds) */
    double decode_seq_s;     /* per decoding sequence (sampling, per-seq kernels) */
    double context_token_s;  /* per token of context read by attention (KV bandwidth) */
    double request_s;        /* per request, once, before it reaches the scheduler */
    uint32_t num_gpu_blocks; /* KV capacity in blocks of 16 tokens */
} sim_profile_t;

/* The profile named `name`, or NULL. NULL or "" gives the default (l40s-27b-fp8). */
const sim_profile_t *sim_profile_find(const char *name);
/* Writes the known names, comma-separated, into buf (for error messages). Returns buf. */
char *sim_profile_names(char *buf, size_t size);

/* Step duration in simulated seconds for the given work. */
double sim_profile_step_s(const sim_profile_t *p, uint64_t prefill_tokens, uint32_t decode_seqs,
                          uint64_t total_context);

#endif
