/*
 * policy_remote — the remote side of a policy: GatewayBackends (an external backend, its
 * protocol, credentials' source, TLS, timeouts) and InferenceProviders (the models a remote
 * provider offers through a backend, its latency, cost and capacity).
 *
 * One object per compilation: add each resource's spec as its document is read, then
 * finish (sorts by name, reports duplicate names and providers naming a missing backend,
 * resolves policy_provider_t.backend). Secrets are never read: a backend records where its
 * secret comes from, and no message ever contains a secret's value.
 *
 * Every string and array is in the policy_yaml_t's arena (borrowed; it outlives this).
 */
#ifndef POLICY_REMOTE_H
#define POLICY_REMOTE_H

#include "policy_types.h"
#include "policy_yaml.h"

#define POLICY_MAX_PROVIDER_MODELS 256

typedef struct policy_remote policy_remote_t;

policy_remote_t *policy_remote_new(policy_yaml_t *yaml);
void policy_remote_destroy(policy_remote_t **self_p);

/* The spec of a GatewayBackend / InferenceProvider named d->name (metadata.name at name_node). */
void policy_remote_add_backend(policy_remote_t *self, policy_doc_t *d, yaml_node_t *spec,
                               yaml_node_t *name_node);
void policy_remote_add_provider(policy_remote_t *self, policy_doc_t *d, yaml_node_t *spec,
                                yaml_node_t *name_node);

/* Cross-resource checks; call once, after every document. */
void policy_remote_finish(policy_remote_t *self);

size_t policy_remote_nbackends(const policy_remote_t *self);
const policy_backend_t *policy_remote_backend(const policy_remote_t *self, size_t i);
size_t policy_remote_nproviders(const policy_remote_t *self);
const policy_provider_t *policy_remote_provider(const policy_remote_t *self, size_t i);
const policy_provider_t *policy_remote_find_provider(const policy_remote_t *self, const char *name);
/* The provider's model whose local name is `model`, or NULL. */
const policy_provider_model_t *policy_remote_provider_model(const policy_provider_t *provider,
                                                            const char *model);

#endif
