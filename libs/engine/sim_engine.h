/*
 * sim_engine — vLLM's v1 continuous-batching engine in simulated time.
 *
 * Every step the scheduler (as vLLM's Scheduler.schedule) walks the running requests in
 * admission order, giving each the tokens it needs — the rest of its prompt in chunks
 * (chunked prefill), or one token when decoding — within a budget of max_num_batched_tokens;
 * when the prefix cache has no free block for a running request it preempts the newest running
 * request (its blocks are freed, it goes back to the front of the queue and is recomputed
 * later). Then, unless something was preempted, it admits waiting requests in arrival order
 * while fewer than max_num_seqs run and budget remains, each starting after its longest cached
 * prefix (never the whole prompt: at least one token is computed). The step lasts
 *
 *     step_s + prefill_token_s·prefill_tokens + decode_seq_s·decode_seqs + context_token_s·context
 *
 * simulated seconds (sim_profile), slept as duration / time_scale of real time; at its end
 * every request whose known tokens are all computed samples one token. So TTFT grows with the
 * queue ahead and with the uncached part of the prompt, and a fully cached prompt's TTFT is
 * about one step. Newly full blocks are committed to the cache when scheduled (as vLLM does)
 * and the step's KV events are published when it ends.
 *
 * Block hashes are vLLM's (sim_hasher, --prefix-caching-hash-algo), LoRA name and cache salt
 * included as vLLM's extra keys, so the events carry exactly the values a real worker sends.
 *
 * Time: simulated seconds. In threaded mode the clock is time_scale × real time since start;
 * in manual mode (tests) a virtual clock advanced by sim_engine_step / sim_engine_advance.
 *
 * Threads: one engine thread (sim_engine_start); every other function may be called from any
 * thread (one engine lock). A request is shared by its submitter and the engine and freed when
 * both have released it.
 */
#ifndef SIM_ENGINE_H
#define SIM_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipl_metrics.h"
#include "sim_hasher.h"
#include "sim_kvbatch.h"
#include "sim_profile.h"

typedef enum {
    SIM_FINISH_NONE = 0, /* still running */
    SIM_FINISH_STOP,     /* "stop": the model's end of sequence */
    SIM_FINISH_LENGTH,   /* "length": max_tokens reached */
    SIM_FINISH_ABORT,    /* "abort": client gone or shutting down */
} sim_finish_t;

const char *sim_finish_name(sim_finish_t finish); /* "stop", "length", "abort", or NULL */

typedef struct {
    uint32_t block_size;             /* tokens per block (16) */
    uint32_t num_gpu_blocks;         /* KV capacity in blocks */
    uint32_t max_num_seqs;           /* running requests at most (256) */
    uint32_t max_num_batched_tokens; /* tokens per step at most (8192) */
    double time_scale;               /* simulated seconds per real second (> 0) */
    sim_profile_t profile;           /* copied */
    sim_hash_algo_t hash_algo;       /* --prefix-caching-hash-algo (sha256) */
    const char *pythonhashseed;      /* copied; NONE_HASH = hash_fn(it), NULL when unset */
    uint64_t seed;                   /* --seed: NONE_HASH when pythonhashseed is NULL */
    const char *model_name;          /* metric label (copied) */
    bool manual;                     /* tests: no thread, virtual clock */
    /* Where the KV events go (inferplane-sim: its ZeroMQ publisher, sim_kvpub): publish is
     * called with every step's batch, empty or not, under the engine lock; restart when the
     * engine restarts (the restart fault), so the next batch is numbered 0 again. Either NULL:
     * none. The sink is borrowed. */
    int (*kv_publish)(void *sink, const sim_kvbatch_t *batch);
    void (*kv_restart)(void *sink);
    void *kv_sink;
    ipl_metrics_t *metrics;          /* borrowed, may be NULL */
    /* In-process consumer of the KV events (clustersim): called with every non-empty batch
     * when it is published (kv_publish or not), under the engine lock — it must not call back into
     * the engine — with the engine clock; the batch is borrowed for the call. NULL: none. */
    void (*on_kv_events)(void *arg, const sim_kvbatch_t *batch, double now_s);
    void *on_kv_events_arg;
    /* Block hashes that are not vLLM's (hash_algo ignored): a chained 64-bit XXH3 of the
     * tokens and extra keys, ~10x cheaper than a CBOR/pickle digest. Only for engines whose
     * block hashes nobody compares with vLLM's (clustersim: its collector maps them as opaque
     * ids); equal prefixes still get equal hashes. false: vLLM's. */
    bool fast_hash;
} sim_engine_config_t;

typedef struct {
    const uint32_t *prompt;       /* copied */
    uint32_t nprompt;             /* >= 1 */
    const uint32_t *output;       /* the tokens the model will produce, copied */
    uint32_t noutput;             /* >= 1 */
    sim_finish_t finish;          /* STOP or LENGTH: the reason when all output is produced */
    const sim_block_keys_t *keys; /* LoRA adapter / cache salt, copied; NULL = none */
} sim_req_spec_t;

typedef struct {
    uint32_t prompt_tokens;
    uint32_t cached_tokens; /* prefix-cache hit at first scheduling (whole blocks) */
    uint32_t emitted;       /* output tokens produced so far */
    sim_finish_t finish;    /* NONE while in flight */
    uint32_t preemptions;
    double arrival_s;     /* simulated clock */
    double first_token_s; /* < 0 until the first token */
    double last_token_s;
    double finish_s; /* < 0 until finished */
} sim_req_status_t;

typedef struct {
    uint32_t running;
    uint32_t waiting;
    uint32_t free_blocks;
    uint32_t cached_blocks;
    double kv_usage;
    uint64_t steps;
    uint64_t preemptions;
    uint64_t prefix_queries; /* tokens */
    uint64_t prefix_hits;    /* tokens */
    double now_s;
    double last_step_s; /* duration of the last step */
} sim_engine_stats_t;

typedef struct sim_engine sim_engine_t;
typedef struct sim_req sim_req_t;

/* NULL on allocation failure. */
sim_engine_t *sim_engine_new(const sim_engine_config_t *cfg);
/* Starts the engine thread (not in manual mode). 0 or IPL_E_IO. */
int sim_engine_start(sim_engine_t *self);
/* Aborts every request (waking their waiters) and joins the engine thread. Idempotent. */
void sim_engine_stop(sim_engine_t *self);
void sim_engine_destroy(sim_engine_t **self_p);

/* Queues a request. Returns the caller's handle (release it with sim_engine_release), or NULL
 * when stopping or out of memory. */
sim_req_t *sim_engine_submit(sim_engine_t *self, const sim_req_spec_t *spec);
/* Waits until more than `seen` tokens are out, the request finished, or `timeout_ms` passed
 * (real time); fills *st either way. 0, or IPL_E_TIMEOUT. */
int sim_engine_wait(sim_engine_t *self, sim_req_t *req, uint32_t seen, int timeout_ms,
                    sim_req_status_t *st);
void sim_engine_status(sim_engine_t *self, sim_req_t *req, sim_req_status_t *st);
/* The request's output tokens (the planned ones; `emitted` of them are out). Borrowed until
 * release; immutable. */
const uint32_t *sim_req_output(const sim_req_t *req, uint32_t *n);
/* Finishes the request as "abort" (its blocks are freed at once). */
void sim_engine_abort(sim_engine_t *self, sim_req_t *req);
void sim_engine_release(sim_engine_t *self, sim_req_t **req_p);

/* POST /reset_prefix_cache: forgets every cached block and publishes AllBlocksCleared. */
void sim_engine_reset_prefix_cache(sim_engine_t *self);

/* Fault: an abrupt restart, as a vLLM process that died and came back. Every request in
 * flight finishes as "abort"; the KV cache comes back empty without any event (a new process
 * announces nothing about the old one's blocks); the publisher's sequence restarts at 0 with
 * an empty replay buffer (kv_restart); step and cache counters start again. The
 * engine keeps running. */
void sim_engine_restart(sim_engine_t *self);

void sim_engine_stats(sim_engine_t *self, sim_engine_stats_t *out);
double sim_engine_now(sim_engine_t *self);

/* Manual mode. Runs one step at the virtual clock (jumping over idle time to the next
 * request's arrival at the scheduler); returns its duration, 0 when there was nothing to do. */
double sim_engine_step(sim_engine_t *self);
/* Manual mode: lets `seconds` of idle time pass. */
void sim_engine_advance(sim_engine_t *self, double seconds);

#endif
