/*
 * gateway_models — the body of GET /v1/models: the models a policy's pools serve, in
 * OpenAI's list shape, each with the pools that serve it.
 *
 *   {"object": "list", "data": [{"id": "sim-model", "object": "model", "created": 1764..,
 *                                "owned_by": "inferplane", "pools": ["chat", "batch"]}, ...]}
 *
 * A model appears once, at its first pool's place; pools without a model are left out.
 * Pure function: thread-safe.
 */
#ifndef GATEWAY_MODELS_H
#define GATEWAY_MODELS_H

#include <stdint.h>

#include "ipl_proto.h"

struct cJSON;

/* The list for `policy` (borrowed), `created_s` the models' "created" (wall seconds). A new
 * cJSON tree (the caller's), or NULL when out of memory. */
struct cJSON *gateway_models_list(const ipl_policy_t *policy, uint64_t created_s);

#endif
