/*
 * sim_text — what the simulated model "says": deterministic pseudo-random English words,
 * tokenized with the shared tokenizer, and a natural stopping length.
 *
 * The same (seed, prompt) always gives the same output, so a run is repeatable with --seed.
 * Thread-safe (no state; the tokenizer is immutable).
 */
#ifndef SIM_TEXT_H
#define SIM_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "ipl_tokenizer.h"

/* A seed for one request from the server's seed, the request's own seed (0 when absent) and
 * its prompt. */
uint64_t sim_text_seed(uint64_t server_seed, uint64_t request_seed, const uint32_t *prompt,
                       size_t nprompt);

/* Exactly `n` (>= 1) output token ids. Returns a malloc'd array (the caller frees) or NULL. */
uint32_t *sim_text_generate(const ipl_tokenizer_t *tok, uint64_t seed, uint32_t n);

/* Where the model would emit end-of-sequence on its own: 1 + an exponential draw with mean
 * `mean` tokens, at least `min_tokens`. */
uint32_t sim_text_natural_length(uint64_t seed, double mean, uint32_t min_tokens);

#endif
