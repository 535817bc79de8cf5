/*
 * ipl_vllm_kv — decoder of vLLM's KV-cache event stream (docs: VLLM-INTEROP §1).
 *
 * A PUB message is three frames: topic, an 8-byte big-endian sequence number, and a msgpack
 * payload EventBatch. The envelope is an array [ts, [events...], dp_rank?] (every release
 * seen) or a map {ts, events, data_parallel_rank}; each event is a tagged array
 * ["BlockStored", ...fields in declaration order] (before vLLM 0.26) or a map with a "type"
 * key (0.26 and later) — both can appear in one batch. Unknown map keys and extra trailing
 * array positions are ignored; missing optional fields take their defaults. Hashes may be
 * ints (signed or unsigned) or bytes (normalised by ipl_mp_read_hash64).
 *
 * The decoder owns scratch arrays reused across batches, so decoding allocates only while the
 * largest batch seen grows. One decoder per thread.
 */
#ifndef IPL_VLLM_KV_H
#define IPL_VLLM_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    IPL_KV_BLOCK_STORED = 1,
    IPL_KV_BLOCK_REMOVED = 2,
    IPL_KV_ALL_CLEARED = 3,
} ipl_kv_kind_t;

/* One event. Every pointer is borrowed: valid only during the callback. */
typedef struct {
    ipl_kv_kind_t kind;
    const uint64_t *block_hashes; /* engine hashes, normalised to u64 */
    uint32_t nblocks;
    bool has_parent;              /* BlockStored: false when the chain starts at the root */
    uint64_t parent_hash;
    const uint32_t *token_ids;    /* BlockStored: nblocks * block_size ids, concatenated */
    uint32_t ntokens;
    uint32_t block_size;          /* BlockStored */
    bool has_lora_id;
    int64_t lora_id;
    const char *lora_name;        /* not NUL-terminated; NULL when absent/nil */
    uint32_t lora_name_len;
    const char *medium;           /* "GPU", "CPU", ...; NULL when absent/nil */
    uint32_t medium_len;
    int64_t group_idx;            /* -1 when absent/nil */
    bool has_extra_keys;          /* non-nil extra_keys (multimodal, cache salt, ...) */
} ipl_kv_event_t;

typedef struct {
    double ts;
    int64_t dp_rank; /* -1 when absent */
    uint32_t nevents;
} ipl_kv_batch_t;

/* Return 0 to continue; a negative value stops decoding and is returned by decode. */
typedef int(ipl_kv_event_fn)(void *arg, const ipl_kv_event_t *event);

typedef struct ipl_vllm_kv_decoder ipl_vllm_kv_decoder_t;

ipl_vllm_kv_decoder_t *ipl_vllm_kv_decoder_new(void);
void ipl_vllm_kv_decoder_destroy(ipl_vllm_kv_decoder_t **self_p);

/* Decodes one payload frame. The whole batch is validated before the first callback, so a
 * malformed batch delivers no events at all (all or nothing). Returns 0 or IPL_E_*; `batch`
 * (may be NULL) receives the envelope fields. Limits: at most 1,048,576 events or tokens and
 * 65,536 blocks per event (IPL_E_RANGE beyond). */
int ipl_vllm_kv_decode(ipl_vllm_kv_decoder_t *self, const uint8_t *payload, size_t len,
                       ipl_kv_batch_t *batch, ipl_kv_event_fn *fn, void *arg);

/* The sequence frame: exactly 8 bytes big-endian. 0 or IPL_E_INVAL. */
int ipl_vllm_kv_seq(const uint8_t *frame, size_t len, uint64_t *seq);
/* The replay end marker: eight 0xff bytes. */
bool ipl_vllm_kv_is_end_seq(const uint8_t *frame, size_t len);

#endif
