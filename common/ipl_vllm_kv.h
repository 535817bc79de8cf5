/*
 * ipl_vllm_kv — decoder of vLLM's KV-cache event stream (vllm-project/vllm:
 * vllm/distributed/kv_events.py).
 *
 * A PUB message is three frames: topic, an 8-byte big-endian sequence number, and a msgpack
 * payload EventBatch. The envelope is an array [ts, [events...], dp_rank?] (every release
 * seen) or a map {ts, events, data_parallel_rank}; each event is a tagged array
 * ["BlockStored", ...fields in declaration order] (before vLLM 0.26) or a map with a "type"
 * key (0.26 and later) — both can appear in one batch. Unknown map keys and extra trailing
 * array positions are ignored; missing optional fields take their defaults. Hashes may be
 * ints (signed or unsigned) or bytes (normalised by ipl_mp_read_hash64).
 *
 * Required fields: BlockStored needs block_hashes, token_ids and block_size (array form: at
 * least [tag, block_hashes, parent_block_hash, token_ids, block_size]); BlockRemoved needs
 * block_hashes; the envelope needs ts and events. A missing one is IPL_E_INVAL, a value of the
 * wrong msgpack type IPL_E_TYPE, an unknown event tag IPL_E_UNKNOWN, bytes after the envelope
 * IPL_E_TRAILING. The decoder does not check ntokens == nblocks * block_size: the consumer
 * decides what a mismatch means.
 *
 * The decoder owns scratch arrays reused across batches, so decoding allocates only while the
 * largest batch seen grows. One decoder per thread.
 */
#ifndef IPL_VLLM_KV_H
#define IPL_VLLM_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits; IPL_E_RANGE beyond. */
#define IPL_VLLM_KV_MAX_EVENTS 1048576u /* events per batch */
#define IPL_VLLM_KV_MAX_TOKENS 1048576u /* token ids per event, and the largest block_size */
#define IPL_VLLM_KV_MAX_BLOCKS 65536u   /* block hashes per event */

typedef enum {
    IPL_VLLM_KV_BLOCK_STORED = 1,
    IPL_VLLM_KV_BLOCK_REMOVED = 2,
    IPL_VLLM_KV_ALL_CLEARED = 3,
} ipl_vllm_kv_kind_t;

/* One event. Every pointer is borrowed: valid only during the callback. block_hashes and
 * token_ids are never NULL (an empty array when the count is 0). Fields that do not apply to
 * the kind are zero/NULL (-1 for group_idx, sliding_window). */
typedef struct {
    ipl_vllm_kv_kind_t kind;
    const uint64_t *block_hashes; /* engine hashes, normalised to u64 */
    uint32_t nblocks;
    bool has_parent; /* BlockStored: false when the chain starts at the root */
    uint64_t parent_hash;
    const uint32_t *token_ids; /* BlockStored: nblocks * block_size ids, concatenated */
    uint32_t ntokens;
    uint32_t block_size; /* BlockStored: 1..IPL_VLLM_KV_MAX_TOKENS */
    bool has_lora_id;
    int64_t lora_id;
    const char *lora_name; /* not NUL-terminated; NULL when absent/nil */
    uint32_t lora_name_len;
    const char *medium; /* "GPU", "CPU", ...; not NUL-terminated; NULL when absent/nil */
    uint32_t medium_len;
    int64_t group_idx; /* KV-cache group (hybrid models), >= 0; -1 when absent/nil */
    /* extra_keys has at least one non-nil entry (multimodal, LoRA, cache salt, ...): the
     * engine's hash covers more than the tokens. vLLM 0.26+ sends [None] per block otherwise. */
    bool has_extra_keys;
    /* With has_extra_keys: when every non-nil entry is the same one-string tuple — a LoRA
     * request's (lora_name,) on every block — that string (not NUL-terminated); NULL when any
     * entry holds more (a cache salt or multimodal keys beside the adapter, which the
     * engine's hash covers and ours cannot). */
    const char *extra_key_str;
    uint32_t extra_key_str_len;
    const char *spec_kind; /* kv_cache_spec_kind: "full_attention", "sliding_window",
                              "mamba", ...; not NUL-terminated; NULL when absent/nil */
    uint32_t spec_kind_len;
    int64_t sliding_window; /* kv_cache_spec_sliding_window, >= 0; -1 when absent/nil */
} ipl_vllm_kv_event_t;

typedef struct {
    double ts;
    int64_t dp_rank; /* >= 0; -1 when absent/nil */
    uint32_t nevents;
} ipl_vllm_kv_batch_t;

/* Return 0 to continue; a negative value stops decoding and is returned by decode. */
typedef int(ipl_vllm_kv_event_fn)(void *arg, const ipl_vllm_kv_event_t *event);

typedef struct ipl_vllm_kv_decoder ipl_vllm_kv_decoder_t;

/* NULL on allocation failure. */
ipl_vllm_kv_decoder_t *ipl_vllm_kv_decoder_new(void);
void ipl_vllm_kv_decoder_destroy(ipl_vllm_kv_decoder_t **self_p);

/* Decodes one payload frame. The whole batch is validated before the first callback, so a
 * malformed batch delivers no events at all (all or nothing). Returns 0, IPL_E_* (see above;
 * IPL_E_TRUNCATED for a cut-short payload, IPL_E_NOMEM), or the callback's negative value.
 * `batch` (may be NULL) receives the envelope fields once the batch is valid, before the first
 * callback; it is untouched on a decoding error. `fn` may be NULL (validation only). */
int ipl_vllm_kv_decode(ipl_vllm_kv_decoder_t *self, const uint8_t *payload, size_t len,
                       ipl_vllm_kv_batch_t *batch, ipl_vllm_kv_event_fn *fn, void *arg);

/* The sequence frame: exactly 8 bytes big-endian. 0 or IPL_E_INVAL. */
int ipl_vllm_kv_seq(const uint8_t *frame, size_t len, uint64_t *seq);
/* The replay end marker: eight 0xff bytes. */
bool ipl_vllm_kv_is_end_seq(const uint8_t *frame, size_t len);

#endif
