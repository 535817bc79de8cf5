/*
 * policy_digest — a compiled policy's identity and what every process shows of it: the
 * content hash the policy service sends in POLICY.hash, and GET /debug/policy of the
 * processes that follow the policy service (deciders, gateways).
 *
 * The hash is XXH3-64 (ipl_hash_bytes) of the policy's POLICY encoding (ipl_msg_encode) with
 * version 0, source nil and hash 0: it covers every field of every element POLICY carries —
 * pools (with their SLO), workers, backends (secret sources, never values), providers and
 * their models, pool targets, rules, aliases and their targets, limits — in the compiler's
 * deterministic order (pools by name, workers by worker set then file order, rules in
 * evaluation order, the rest by name; policy_compiler.h), and nothing else. So the same
 * resources give the same hash whatever their files, their order in a directory, the
 * directory's path, the time, the process or a restart, and any change to what a decider or
 * gateway would run changes it. It is 0 only when the policy cannot be encoded (beyond the
 * catalogue's limits); a computed 0 is written 1, as 0 in a POLICY means "from a policy
 * service that predates the hash". It is a fingerprint for people and checks, not a security
 * measure; a new IPL_PROTO_VERSION (or a field added to POLICY or to one of its elements)
 * changes every hash.
 *
 * Shown as 16 lower-case hex digits (policy_digest_hex), in JSON as a string.
 */
#ifndef POLICY_DIGEST_H
#define POLICY_DIGEST_H

#include <stdint.h>

#include "ipl_httpd.h"
#include "ipl_proto.h"

#define POLICY_DIGEST_HEX_LEN 17 /* 16 hex digits and the NUL */

/* The content hash of `p` (its version, source and hash fields are ignored). */
uint64_t policy_digest_hash(const ipl_policy_t *p);

/* Writes `hash` as 16 hex digits into `buf` (POLICY_DIGEST_HEX_LEN bytes); returns buf. */
const char *policy_digest_hex(uint64_t hash, char buf[POLICY_DIGEST_HEX_LEN]);

/* The policy as /debug/policy shows it (a cJSON tree, the caller's; NULL when out of memory):
 *
 *   {"version": n, "hash": "16 hex" | null (a sender without hashes), "source": str,
 *    "pools":   [{"name", "model", "strategy", "ttft_slo_ms", "workers": [worker names],
 *                 "targets": [{"kind", "name", "role", "weight"}]}],
 *    "workers": [{"name", "pool", "model", "url", "kv_endpoint", "replay_endpoint",
 *                 "metrics_url", "block_size", "worker_set", "lora_adapters"?, "node"?}],
 *                 (lora_adapters and node only when set; node: the pod's Kubernetes node)
 *    "backends": [...], "providers": [...], "provider_models": [...], "pool_targets": [...],
 *    "rules": [...], "aliases": [...], "alias_targets": [...], "limits": [...]}
 *
 * The arrays after "workers" are POLICY's trailing element arrays, one object per element
 * with the element's wire field names (docs/protocol.md): numbers, booleans, strings, lists
 * of strings. A backend shows where its secret comes from, never a value (POLICY holds none).
 * `p` NULL (no policy yet): version 0, hash and source null, every array empty. */
struct cJSON;
struct cJSON *policy_digest_json(const ipl_policy_t *p);

/* Adds what a compilation found to `root` (a JSON object), as the policy service's
 * /debug/policy and POST /validate show it: "errors", "warnings" and "files" (the files read),
 * arrays of strings in the compiler's order; empty arrays when `c` is NULL. */
struct policy_compiler;
void policy_digest_add_report(struct cJSON *root, const struct policy_compiler *c);

/* An ipl_http_handler_fn for GET /debug/policy in a process that follows the policy service:
 * `arg` is its ipl_policy_view_t (which must outlive the server); answers 200 with
 * policy_digest_json of the view's newest policy (version 0 before the first), 500 when out
 * of memory. Any thread. */
void policy_digest_http(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp);

#endif
