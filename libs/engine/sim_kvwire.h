/*
 * sim_kvwire — a KV batch (sim_kvbatch) as the payload frame vLLM's ZMQ publisher sends:
 * msgpack [ts, [events...], dp_rank=0], in one of the event encodings vLLM has used
 * (vllm-project/vllm: vllm/distributed/kv_events.py). The publisher around
 * it (PUB socket, replay) is inferplane-sim's sim_kvpub; benchmarks encode with it directly.
 */
#ifndef SIM_KVWIRE_H
#define SIM_KVWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim_kvbatch.h"

typedef enum {
    SIM_KV_FORMAT_MAP = 0,
    SIM_KV_FORMAT_ARRAY,
    SIM_KV_FORMAT_ARRAY_LEGACY,
} sim_kv_format_t;

/* "map" | "array" | "array-legacy". 0 or IPL_E_INVAL. */
int sim_kv_format_parse(const char *text, sim_kv_format_t *out);

/* Encodes a batch as the payload frame; `int_hashes` picks vLLM's default int hashes over raw
 * bytes. Returns a malloc'd buffer (the caller frees) and its length, or NULL on allocation
 * failure. */
uint8_t *sim_kvwire_encode(const sim_kvbatch_t *batch, double ts, sim_kv_format_t format,
                           bool int_hashes, size_t *len);

#endif
