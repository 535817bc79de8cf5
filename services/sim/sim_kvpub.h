/*
 * sim_kvpub — publishes the engine's KV-cache events exactly as vLLM does (vllm-project/vllm:
 * vllm/distributed/kv_events.py).
 *
 *   PUB socket, one 3-frame message per engine step that changed the cache:
 *       [topic] [seq: u64 big-endian, from 0] [msgpack [ts, [events...], dp_rank=0]]
 *   replay ROUTER (optional, always binds) keeping the last `buffer_steps` batches:
 *       request  [identity, "", start_seq8]
 *       layout 3 (vLLM >= 0.26): [identity, "", topic, seq8, payload] per batch with
 *                                seq >= start, then [identity, "", "", ff*8, ""]
 *       layout 2 (vLLM <= 0.25): [identity, "", seq8, payload], then [identity, "", ff*8, ""]
 *
 * Block hashes are sent as vLLM's maybe_convert_block_hash does: by default the digest's last 8
 * bytes as an unsigned int (smallest msgpack int), or the raw digest (msgpack bin) when
 * VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0 (int_hashes false). lora_id / lora_name are the
 * request's adapter (nil without LoRA); extra_keys (map form only) has one entry per block:
 * nil, or the tuple (array) of [lora_name] plus [cache_salt] on a chain's first block.
 *
 * Event encodings (--kv-events-format):
 *   map           vLLM >= 0.26 (PR #42892): each event a map with "type" first:
 *                 BlockStored {type, block_hashes, parent_block_hash, token_ids, block_size,
 *                 lora_id, medium, lora_name, extra_keys, group_idx, kv_cache_spec_kind},
 *                 BlockRemoved {type, block_hashes, medium, group_idx}, AllBlocksCleared {type}
 *   array         vLLM 0.13-0.25: tagged arrays ["BlockStored", block_hashes, parent,
 *                 token_ids, block_size, lora_id, medium, lora_name],
 *                 ["BlockRemoved", block_hashes, medium], ["AllBlocksCleared"]
 *   array-legacy  vLLM 0.10-0.12: as array without lora_name (added by vllm-project/vllm #27577)
 *
 * The PUB socket binds or connects by vLLM's rule (bind when the endpoint contains '*' or
 * "::" or starts with ipc:// or inproc://, else connect), unless the simulator-only
 * --kv-events-bind forces one. Fault injection: drop_every_n > 0 skips sending every Nth batch
 * (seq % N == N-1) on the PUB socket while keeping it in the replay buffer, as a lossy network
 * would, so a consumer can detect the gap and recover through replay.
 *
 * Threads: sim_kvpub_publish may be called from any thread (it takes a lock). The replay
 * ROUTER is served by a thread of its own.
 */
#ifndef SIM_KVPUB_H
#define SIM_KVPUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim_kvbatch.h"
#include "sim_kvwire.h"

typedef enum { SIM_KV_BIND_AUTO = 0, SIM_KV_BIND_BIND, SIM_KV_BIND_CONNECT } sim_kv_bind_t;

/* vLLM's KVEventsConfig (--kv-events-config JSON). */
typedef struct {
    bool enabled;              /* enable_kv_cache_events and publisher "zmq" (or unset) */
    char endpoint[256];        /* default: every interface, port 5557 (binds) */
    char replay_endpoint[256]; /* "" = no replay */
    char topic[256];           /* default "" */
    int64_t buffer_steps;      /* default 10000 */
    int64_t hwm;               /* default 100000 */
} sim_kvconfig_t;

/* Parses the JSON (NULL or "" gives the defaults, disabled). Unknown keys are accepted (vLLM
 * versions differ) and ignored. 0, or IPL_E_INVAL with a human message in `err`. */
int sim_kvconfig_parse(const char *json, sim_kvconfig_t *out, char *err, size_t errlen);
/* "auto" | "bind" | "connect". 0 or IPL_E_INVAL. */
int sim_kv_bind_parse(const char *text, sim_kv_bind_t *out);
/* vLLM's rule: true when the PUB socket binds `endpoint`. */
bool sim_kv_endpoint_binds(const char *endpoint);

typedef struct {
    sim_kv_format_t format;
    bool bytes_hashes; /* VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0: raw digests on the wire */
    sim_kv_bind_t bind;
    int replay_layout;    /* 2 or 3 */
    int64_t drop_every_n; /* 0: never */
} sim_kvpub_opts_t;

typedef struct sim_kvpub sim_kvpub_t;

/* Creates the sockets (binding/connecting now) and starts the replay thread. NULL with a
 * human message in `err` on failure. `cfg->enabled` must be true. */
sim_kvpub_t *sim_kvpub_new(const sim_kvconfig_t *cfg, const sim_kvpub_opts_t *opts, char *err,
                           size_t errlen);
void sim_kvpub_destroy(sim_kvpub_t **self_p);

/* Publishes a non-empty batch with ts = now (wall clock) under the next sequence number.
 * Empty batches are skipped (vLLM publishes only steps with events). Thread-safe.
 * 0, or IPL_E_NOMEM (the batch is lost and counted). */
int sim_kvpub_publish(sim_kvpub_t *self, const sim_kvbatch_t *batch);

/* Fault: a restarted publisher. The next batch is sequence 0 again and the replay buffer is
 * empty, as in a new vLLM process (subscribers detect the restart by the drop to 0). The
 * sockets stay bound. Thread-safe. */
void sim_kvpub_restart(sim_kvpub_t *self);

/* The address a socket is bound or connected to (ZMQ_LAST_ENDPOINT: the real port when the
 * config said tcp://127.0.0.1:* ). `replay` picks the ROUTER. 0, or IPL_E_NOTFOUND. */
int sim_kvpub_last_endpoint(sim_kvpub_t *self, bool replay, char *buf, size_t size);

typedef struct {
    uint64_t next_seq;        /* sequence number of the next batch */
    uint64_t dropped;         /* batches withheld by drop_every_n */
    uint64_t replay_requests; /* valid replay requests served */
    uint64_t replay_invalid;  /* malformed replay requests dropped */
} sim_kvpub_stats_t;
void sim_kvpub_stats(sim_kvpub_t *self, sim_kvpub_stats_t *out);

#endif
