/*
 * sim_options — inferplane-sim's settings: vLLM's command line (the names, defaults and
 * meaning of `vllm serve`'s engine arguments,
 * https://docs.vllm.ai/en/v0.8.5/serving/engine_args.html) plus the simulator-only ones,
 * declared once on an ipl_config_t, checked, and turned into the engine's, the API's and the
 * KV publisher's configs.
 *
 *   sim_options_t o;
 *   sim_options_add(&o, config);                  // before ipl_config_parse
 *   char **args = sim_options_argv(argc, argv, &n, &joined);   // vLLM's nargs='+'
 *   ...parse args...
 *   if (sim_options_check(&o, config, stderr) != 0) ...exit 2...
 *   sim_engine_config_t ecfg;  sim_options_engine_config(&o, &ecfg);
 *   sim_api_config_t acfg;     sim_options_api_config(&o, &acfg);
 *   ...sim_kvpub_new(&o.kv_config, &o.kv_opts, ...) when o.kv_config.enabled...
 *   sim_options_clear(&o);                        // frees the LoRA adapters
 *
 * Lifetime: the flag strings are the config's (valid until ipl_config_destroy); the struct
 * must outlive the config, which keeps pointers to its fields. The configs filled borrow
 * strings from the struct and the config (their consumers copy what they keep).
 * Not thread-safe; use from main before threads start (it reads the environment).
 */
#ifndef SIM_OPTIONS_H
#define SIM_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ipl_config.h"
#include "sim_api.h"
#include "sim_engine.h"
#include "sim_hasher.h"
#include "sim_kvpub.h"
#include "sim_profile.h"
#include "sim_standin.h"

typedef struct {
    /* vLLM's flags, names and defaults */
    char *host;
    int64_t port;
    char *served_model_name;
    char *tokenizer;
    int64_t block_size;
    int64_t num_gpu_blocks_override;
    int64_t max_num_seqs;
    int64_t max_num_batched_tokens;
    int64_t max_model_len; /* capped to the KV-cache capacity by sim_options_check */
    bool enable_prompt_tokens_details;
    int64_t seed;
    char *kv_events_config;
    char *prefix_caching_hash_algo;
    bool enable_lora;
    char *lora_modules;
    int64_t max_loras;
    /* simulator-only */
    double time_scale;
    char *profile;
    char *kv_events_format;
    char *kv_events_bind;
    int64_t replay_layout;
    int64_t drop_every_n_batches;
    double fail_rate;
    bool serve_messages; /* --serve-messages: /v1/messages natively, as recent vLLM */
    double startup_delay;
    double step_s, prefill_token_s, decode_seq_s, context_token_s, request_s;
    /* the provider stand-in (off unless one of these is given) */
    char *api_key; /* vLLM's --api-key: one or more keys (newline-joined); VLLM_API_KEY */
    bool accept_x_api_key;
    int64_t network_latency_ms;
    int64_t network_jitter_ms;
    bool stand_in;
    int64_t stand_in_history;
    char *stand_in_headers;

    /* Filled by sim_options_check. */
    sim_profile_t prof;         /* --profile's costs, with the --sim-* overrides and
                                   --num-gpu-blocks-override applied */
    sim_kvconfig_t kv_config;   /* --kv-events-config */
    sim_kvpub_opts_t kv_opts;   /* --kv-events-format, --kv-events-bind, --replay-layout,
                                   --drop-every-n-batches, VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES */
    sim_hash_algo_t hash_algo;  /* --prefix-caching-hash-algo */
    const char *pythonhashseed; /* the environment's PYTHONHASHSEED (NULL: unset) */
    sim_lora_t *loras;          /* --lora-modules (owned: sim_options_clear frees them) */
    uint32_t nloras;
    char **model_names; /* --served-model-name's names (owned); [0] is the one
                           responses and metrics report, as vLLM */
    uint32_t nmodel_names;
    char **api_keys; /* --api-key or VLLM_API_KEY (owned) */
    uint32_t napi_keys;
    bool standin_on;              /* --stand-in, a key, or a latency was given */
    sim_standin_config_t standin; /* borrows api_keys and the config's strings */
} sim_options_t;

/* Zeroes `self` and declares every option (and its range) on `config`. */
void sim_options_add(sim_options_t *self, ipl_config_t *config);

/* vLLM takes --lora-modules, --served-model-name and --api-key with several values (argparse
 * nargs='+'); ipl_config takes one. Returns a copy of argv where the values after each of
 * them are one newline-joined argument, its length in *nargc; the caller frees the array and
 * *joined (one block holding every joined argument; NULL when none). NULL on allocation
 * failure. The strings are borrowed from argv but those in *joined. */
char **sim_options_argv(int argc, char **argv, int *nargc, char **joined);

/* After parsing (which checked every numeric range): checks what the ranges cannot (profile,
 * overrides, time scale, KV-event settings, hash algorithm, LoRA adapters) and fills the
 * derived fields. 0, or -1 with one line per problem written to `errors` (each
 * "inferplane-sim: ...\n"). Logs a warning when max-model-len is capped and when a CBOR hash
 * runs without PYTHONHASHSEED. After a failure call sim_options_clear all the same. */
int sim_options_check(sim_options_t *self, const ipl_config_t *config, FILE *errors);

/* Fills `cfg` (every field; the KV sink, metrics and the in-process hooks left NULL for the
 * caller) after a successful sim_options_check. Strings borrowed from `self`. */
void sim_options_engine_config(const sim_options_t *self, sim_engine_config_t *cfg);

/* Fills `cfg` (every field) after a successful sim_options_check; the LoRA adapters and
 * strings are borrowed from `self`. */
void sim_options_api_config(const sim_options_t *self, sim_api_config_t *cfg);

/* Frees the LoRA adapters, model names and keys (safe on a struct sim_options_add zeroed,
 * and twice). */
void sim_options_clear(sim_options_t *self);

#endif
