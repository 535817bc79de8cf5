/*
 * sim_api — vLLM's OpenAI-compatible HTTP server, in front of the simulated engine.
 *
 *   POST /v1/completions, /v1/chat/completions   streaming (SSE) and not (vllm-project/vllm:
 *        vllm/entrypoints/openai/serving_completion.py, serving_chat.py)
 *   GET  /v1/models, /health, /version, /metrics
 *   POST /tokenize, /detokenize, /reset_prefix_cache
 *   POST /sim/restart   (simulator-only fault: an abrupt restart, see sim_api_restart)
 *   POST /sim/fault     (simulator-only faults: the next N requests answer a status or stall
 *                        before their first byte; sim_fault.h)
 *   GET  /stand-in/received, POST /stand-in/reset   (the provider stand-in, when on)
 *
 * Chat messages are rendered and prompts encoded by the shared prompt path (ipl_prompt, from
 * --tokenizer: the model folder's chat template, else ChatML), exactly as the gateway does,
 * so the blocks a worker caches are the blocks the router hashes. Output is sim_text's deterministic words.
 * Errors are vLLM's: {"error":{"message","type","param","code"}} with 400 (bad request,
 * context length exceeded), 404 (unknown model).
 *
 * Provider stand-in (cfg.standin, off by default): every /v1 route first waits the network
 * latency, then checks the API key (401 in OpenAI's error shape without touching the engine),
 * and every /v1 request is recorded (sim_standin) with its outcome, model, stream flag,
 * header names and token counts.
 *
 * Threads: handlers run on the HTTP server's connection threads; a streaming request gets a
 * writer thread of its own that turns the engine's tokens into SSE chunks as they come.
 * A request whose client goes away is aborted in the engine within a wait slice (100 ms),
 * streamed or not, before its first token too, as vLLM aborts it: its slot in
 * vllm:num_requests_running is freed (inferplane_sim_client_disconnects_total counts them).
 */
#ifndef SIM_API_H
#define SIM_API_H

#include <stdbool.h>
#include <stdint.h>

#include "ipl_httpd.h"
#include "ipl_metrics.h"
#include "ipl_prompt.h"
#include "sim_engine.h"
#include "sim_standin.h"

/* A LoRA adapter of --lora-modules: requests name it as their model. */
typedef struct {
    const char *name; /* the model name clients use */
    const char *path; /* where vLLM would load it from ("root" in /v1/models) */
} sim_lora_t;

typedef struct {
    const char *model_name;           /* --served-model-name's first name: what responses say
                                         (copied) */
    const char *const *model_aliases; /* its other names, accepted as the base model too,
                                         as vLLM (copied) */
    uint32_t nmodel_aliases;
    uint32_t max_model_len;     /* prompt + max_tokens at most */
    bool prompt_tokens_details; /* --enable-prompt-tokens-details */
    uint64_t seed;              /* --seed */
    double natural_mean_tokens; /* mean length at which the model stops on its own */
    const char *vllm_version;   /* what GET /version reports (copied) */
    const sim_lora_t *loras;    /* adapters, lora_int_id = index + 1 (copied) */
    uint32_t nloras;
    double fail_rate;       /* fault: this fraction of generation requests get a 500 */
    double startup_delay_s; /* fault: simulated seconds of "model loading" (503) at start
                               and after each restart */
    double time_scale;      /* simulated seconds per real second (for startup_delay_s) */
    const sim_standin_config_t *standin; /* the provider stand-in; NULL: off (copied) */
    bool serve_messages; /* POST /v1/messages natively (libs/api's translation inside) */
} sim_api_config_t;

typedef struct sim_api sim_api_t;

/* `engine`, `prompt` (the --tokenizer model: chat rendering, encoding, decoding) and
 * `metrics` are borrowed and must outlive the API. */
sim_api_t *sim_api_new(const sim_api_config_t *cfg, sim_engine_t *engine,
                       const ipl_prompt_t *prompt, ipl_metrics_t *metrics);
/* Registers every route on `httpd` (before ipl_httpd_start). */
void sim_api_routes(sim_api_t *self, ipl_httpd_t *httpd);
/* Fault: an abrupt restart (POST /sim/restart, SIGUSR1). Streams in flight are cut without
 * "[DONE]", waiting non-streaming requests get a 500, the engine restarts (empty cache, KV
 * sequence back to 0), and the server answers 503 for --startup-delay again. */
void sim_api_restart(sim_api_t *self);

/* Waits up to `timeout_ms` for streaming writer threads to end (stop the engine first, which
 * finishes every request). Returns the number still running. */
int sim_api_drain(sim_api_t *self, int timeout_ms);
/* Drains (1 s at most), then frees. */
void sim_api_destroy(sim_api_t **self_p);

#endif
