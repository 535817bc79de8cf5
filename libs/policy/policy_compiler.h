/*
 * policy_compiler — turns a directory of policy YAML resources into the compiled policy.
 *
 * Resources (apiVersion inferplane.io/v1alpha1; crds/ holds their CustomResourceDefinitions,
 * which describe exactly what this compiler accepts):
 *
 *   InferenceWorkerSet  spec: {model, blockSize?, workers?: [{name, url, kvEvents?, replay?,
 *                              metrics?}], selector?, ports?, loraAdapters?, profile?}
 *   InferencePool       spec: {model, strategy?, slo?, targets: [{workerSet | provider, role?,
 *                              weight?}]}
 *   GatewayBackend      spec: {url, protocol?, auth?, tls?, timeouts?, maxConnections?}
 *   InferenceProvider   spec: {backend, models: [{name, remoteName?}], latencyHintMs?, cost?,
 *                              capacity?}
 *   InferencePolicy     spec: {priority?, rules?, aliases?, limits?}
 *
 * (docs/crds.md documents every field.) The classes behind it: policy_yaml (node walking,
 * messages, the arena), policy_remote (GatewayBackend, InferenceProvider), policy_rules
 * (InferencePolicy: rules, aliases, limits); worker sets and pools are checked here.
 *
 * One compiler object is one compilation: add files (or strings), then finish. Every problem
 * becomes one error line a person can act on, naming the place, the resource and the fix:
 *
 *   pool.yaml:14:7: InferencePool "chat": spec.targets[1].workerSet "qwen-big" does not exist
 *   (known: qwen-small)
 *
 * Lines and columns are 1-based. Unknown fields are errors (with a did-you-mean), as are
 * duplicate keys, duplicate resource names, worker names used twice anywhere (both places
 * named) and references to resources that do not exist. Compilation continues after an error
 * so that one run reports as many problems as possible (up to POLICY_COMPILER_MAX_ERRORS).
 *
 * Each compiled worker names its InferenceWorkerSet (ipl_worker_t.worker_set), the key the
 * decider calibrates its TTFT model by.
 *
 * The compiled policy is deterministic: pools sorted by name, workers by worker set name and
 * then in file order, whatever the order of files and documents. Its version is 0 (the
 * service assigns versions) and its hash is set (policy_digest_hash: the same resources give
 * the same hash in every process that compiles them). Not thread-safe; one compilation per
 * object (separate objects may compile on separate threads at once).
 *
 * Used by inferplane-policy (its directory, and POST /validate) and inferplanectl validate.
 */
#ifndef POLICY_COMPILER_H
#define POLICY_COMPILER_H

#include <stdbool.h>
#include <stddef.h>

#include "ipl_proto.h"
#include "policy_types.h"

#define POLICY_API_VERSION             "inferplane.io/v1alpha1"
#define POLICY_COMPILER_MAX_ERRORS     50
#define POLICY_COMPILER_MAX_FILE_BYTES (4u << 20)
#define POLICY_COMPILER_MAX_WORKERS    1024 /* = IPL_INDEX_MAX_WORKERS: the decider's index limit */
#define POLICY_COMPILER_MAX_TARGETS    64   /* worker sets per pool */
#define POLICY_DEFAULT_BLOCK_SIZE      16

typedef struct policy_compiler policy_compiler_t;

policy_compiler_t *policy_compiler_new(void);
void policy_compiler_destroy(policy_compiler_t **self_p);

/* Adds every resource of a YAML stream (multi-document). `name` is the file name used in
 * messages (copied). Returns the number of errors found in it (0 when clean). */
int policy_compiler_add_string(policy_compiler_t *self, const char *name, const char *yaml,
                               size_t len);
/* Reads and adds one file; `name` as above (NULL: the path). Returns the number of errors. */
int policy_compiler_add_file(policy_compiler_t *self, const char *path, const char *name);
/* Adds every file of `dir` that policy_compiler_is_policy_file accepts (not recursive), in
 * name order, each named by its file name. A directory with no such file is an error.
 * Returns the number of errors. */
int policy_compiler_add_dir(policy_compiler_t *self, const char *dir);
/* Whether add_dir reads a file of this name: *.yaml or *.yml, not starting with '.' (editors'
 * and ConfigMaps' hidden files). */
bool policy_compiler_is_policy_file(const char *name);

/* Records the Kubernetes node a worker runs on (ipl_worker_t.node): policy_kube calls it for
 * each pod an InferenceWorkerSet's spec.selector picks, so that collectors can follow the
 * workers of their own node. There is no YAML field for it: static workers have no node.
 * A name no compiled worker has is ignored; NULL or "" records nothing; give each name once
 * (of two calls for one name, either may be used). Strings are copied. Call before finish. */
void policy_compiler_set_node(policy_compiler_t *self, const char *worker, const char *node);

/* Cross-resource checks and compilation. `source` becomes policy.source (copied; may be NULL).
 * Returns the total number of errors (0: the policy is available). Call once. */
int policy_compiler_finish(policy_compiler_t *self, const char *source);

/* The compiled policy (version 0), borrowed from the compiler; NULL unless finish returned 0. */
const ipl_policy_t *policy_compiler_policy(const policy_compiler_t *self);

size_t policy_compiler_nerrors(const policy_compiler_t *self);
const char *policy_compiler_error(const policy_compiler_t *self, size_t i); /* borrowed */
/* Things that are legal but probably unintended (a worker set no pool targets). */
size_t policy_compiler_nwarnings(const policy_compiler_t *self);
const char *policy_compiler_warning(const policy_compiler_t *self, size_t i);
size_t policy_compiler_nfiles(const policy_compiler_t *self);
/* The InferenceWorkerSet resources read (those of the policy once finish returned 0). */
size_t policy_compiler_nworker_sets(const policy_compiler_t *self);
const char *policy_compiler_file(const policy_compiler_t *self, size_t i);

/* ---- The compiled resources (policy_types.h) ---------------------------------------------
 * Available once finish returned 0 (before that, and after errors, the counts below are 0
 * and the _at accessors NULL). Every pointer is borrowed from the compiler and valid until
 * policy_compiler_destroy. All of it is published to other processes in ipl_policy_t (the
 * POLICY message: pools, workers, backends, providers, pool targets, rules, aliases, limits;
 * not yet the worker sets' selector, ports, LoRA adapters and profile); what enforces each
 * part is in docs/crds.md ("validated and compiled; not yet enforced" where nothing does). */

/* GatewayBackend, sorted by name. A backend says where its secret comes from, never the
 * secret itself (the compiler does not read it, and no message contains it). */
size_t policy_compiler_nbackends(const policy_compiler_t *self);
const policy_backend_t *policy_compiler_backends_at(const policy_compiler_t *self, size_t i);

/* InferenceProvider, sorted by name; .backend is resolved. */
size_t policy_compiler_nproviders(const policy_compiler_t *self);
const policy_provider_t *policy_compiler_providers_at(const policy_compiler_t *self, size_t i);

/* InferenceWorkerSet, sorted by name (i < policy_compiler_nworker_sets): selector, ports,
 * LoRA adapters, profile and the pool that targets it (its static workers are
 * ipl_policy_t.workers). */
const policy_workerset_t *policy_compiler_worker_sets_at(const policy_compiler_t *self,
                                                         size_t i);

/* InferencePool, sorted by name, with every target (worker sets and providers), its role and
 * weight, and the SLO. */
size_t policy_compiler_npools(const policy_compiler_t *self);
const policy_pool_t *policy_compiler_pools_at(const policy_compiler_t *self, size_t i);

/* Every InferencePolicy rule in evaluation order: spec.priority highest first, then policy
 * name, then list order. The first rule that matches decides. */
size_t policy_compiler_nrules(const policy_compiler_t *self);
const policy_rule_t *policy_compiler_rules_at(const policy_compiler_t *self, size_t i);

/* Model aliases of every InferencePolicy, sorted by name (acyclic, every name resolved). */
size_t policy_compiler_naliases(const policy_compiler_t *self);
const policy_alias_t *policy_compiler_aliases_at(const policy_compiler_t *self, size_t i);

/* Per-tenant limits of every InferencePolicy, sorted by tenant ("*" first). */
size_t policy_compiler_nlimits(const policy_compiler_t *self);
const policy_limit_t *policy_compiler_limits_at(const policy_compiler_t *self, size_t i);

#endif
