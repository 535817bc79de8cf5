/*
 * ipl_proto — the one catalogue of every message our processes exchange, and its codec.
 *
 * Each message is declared once below (IPL_PROTO_MESSAGES and its IPL_PROTO_FIELDS_* list).
 * From that one declaration the C structs, the field descriptor tables, the encoder, the
 * decoder and docs/protocol.md (`make proto-doc`) are all derived, so they cannot disagree.
 *
 * Wire form: every ZeroMQ frame that carries a message is one msgpack array, the envelope
 *
 *     [ version, type, field_1, field_2, ... ]          version = IPL_PROTO_VERSION
 *
 * with the fields in declaration order. A struct-array field is an array of arrays of the
 * element's fields. Evolution: a message or a struct element may gain fields at the end within
 * one version (decoders ignore extra trailing fields; a field so added is declared opt_u64,
 * opt_str or an opt_arr struct array, so that frames from senders that predate it still
 * decode, with 0, NULL or an empty array; new senders always encode it); removing,
 * reordering or retyping a field needs a new version. Decoders reject, with an IPL_E_* code and
 * without crashing or over-allocating: truncated frames, wrong types, strings/arrays beyond the
 * limits, unknown versions, unknown types, missing fields and trailing bytes after the envelope.
 *
 * Sockets: DEALER→ROUTER requests carry just the message frame from the DEALER; the ROUTER
 * sees [identity, message] and answers [identity, message]. PUB frames carry just the message
 * (subscribers subscribe to everything).
 */
#ifndef IPL_PROTO_H
#define IPL_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#define IPL_PROTO_VERSION 1
#define IPL_PROTO_MAX_FRAME (64u << 20) /* bytes */
#define IPL_PROTO_MAX_STR 65536u        /* bytes per string */
#define IPL_PROTO_MAX_ARRAY 1048576u    /* elements per array */

/* Operations of KV_EVENT. */
enum { IPL_KV_OP_STORED = 1, IPL_KV_OP_REMOVED = 2, IPL_KV_OP_CLEARED = 3 };
/* LOAD.health */
enum { IPL_HEALTH_UNKNOWN = 0, IPL_HEALTH_UP = 1, IPL_HEALTH_DOWN = 2 };
/* LOAD.kv_state: how far the index may be trusted for this worker. */
enum { IPL_KV_EXACT = 0, IPL_KV_SYNCING = 1, IPL_KV_DEGRADED = 2 };
/* ROUTE_REP.status; the gateway maps them to HTTP status codes. */
enum {
    IPL_ROUTE_OK = 0,
    IPL_ROUTE_NO_POOL = 1,     /* no pool serves the model → 404 */
    IPL_ROUTE_NO_WORKER = 2,   /* pool exists but no worker is up → 503 */
    IPL_ROUTE_OVERLOADED = 3,  /* every candidate is above the load gate → 429 */
    IPL_ROUTE_BAD_REQUEST = 4, /* → 400 */
    IPL_ROUTE_NOT_READY = 5,   /* decider has no policy or state yet → 503 */
    IPL_ROUTE_REJECTED = 6,    /* an InferencePolicy rule refused it → ROUTE_REP.http_status */
    IPL_ROUTE_DEFERRED = 7,    /* batch work while the pool is busy: ask again after
                                  ROUTE_REP.retry_after_ms (the gateway holds the request) */
};

/* ---- the catalogue ------------------------------------------------------------------------
 * M(TYPE, id, name, from, to, pattern, doc)
 * F(ctx, kind, field, doc)  kind: u64 | f64 | bool | str | u64s (array of u64)
 *                           | strs (array of strings, none nil; a NULL element is IPL_E_INVAL)
 *                           | opt_u64: a u64 added to an existing message or struct; senders
 *                             that predate it omit it and decoders read 0
 *                           | opt_str: the same for a string; decoders read NULL
 *                           | opt_strs: the same for an array of strings; decoders read none.
 *                           Optional fields come after every other field.
 * A(ctx, arr | opt_arr, element, field, doc)  an array of struct `element` (declared in
 *                           IPL_PROTO_STRUCTS); opt_arr: added to an existing message or
 *                           struct, optional like opt_u64 (absent in an older frame: empty)
 */
#define IPL_PROTO_STRUCTS(S)                                                                       \
    S(pool, "A pool of the compiled policy.")                                                      \
    S(worker, "A worker of the compiled policy.")                                                  \
    S(candidate, "One candidate's figures in a routing decision.")                                 \
    S(backend, "A GatewayBackend: where provider requests go and how the gateway authenticates "   \
               "to it. Names where its secret comes from, never the secret's value (the gateway "  \
               "reads it from that source when it runs).")                                         \
    S(provider, "An InferenceProvider: a remote provider reached through a backend.")              \
    S(provider_model, "A model an InferenceProvider offers, under its local and its remote name.") \
    S(pool_target, "One of an InferencePool's targets (spec.targets[], in list order).")           \
    S(rule, "An InferencePolicy rule, flat: every match condition and every action parameter, "    \
            "with 0, false, \"\" or an empty list for what the rule does not set.")                \
    S(alias, "A model alias of an InferencePolicy (its weighted targets are alias_target "         \
             "elements).")                                                                         \
    S(alias_target, "One weighted target of a model alias (spec.aliases[].targets[], in list "     \
                    "order).")                                                                     \
    S(limit, "A per-tenant limit of an InferencePolicy (enforced by gateways: docs/limits.md).")  \
    S(label_rule, "An operator's label rule (InferencePolicy spec.labels.rules[]): keywords "       \
                  "and/or a regular expression that give a label.")                                \
    S(tenant_usage, "One tenant's usage at one gateway replica (LIMITS_USAGE): cumulative "     \
                    "counters since the replica started (monotonic, so a lost message loses "     \
                    "nothing) and its requests in flight now.")                                    \
    S(label_class, "A class of the labels classifier (spec.labels.classifier.classes[]) and its "  \
                   "example prompts.")

#define IPL_PROTO_FIELDS_pool(F, A, X)                                                             \
    F(X, str, name, "pool name")                                                                   \
    F(X, str, model, "model name clients ask for")                                                 \
    F(X, str, strategy, "routing strategy (\"ttft\", \"least-loaded\", ...)")                      \
    F(X, opt_u64, ttft_slo_ms,                                                                     \
      "spec.slo.ttftMs: the TTFT target, ms (0: none, and from policy services that predate it)")

#define IPL_PROTO_FIELDS_worker(F, A, X)                                                           \
    F(X, str, name, "worker name, unique in the cluster")                                          \
    F(X, str, pool, "pool it belongs to")                                                          \
    F(X, str, model, "model it serves (vLLM --served-model-name)")                                 \
    F(X, str, url, "base URL of its OpenAI API, e.g. http://10.0.0.5:8000")                        \
    F(X, str, kv_endpoint, "ZeroMQ endpoint of its KV-event PUB socket")                           \
    F(X, str, replay_endpoint, "ZeroMQ endpoint of its replay ROUTER (\"\" if none)")              \
    F(X, str, metrics_url, "URL of its Prometheus /metrics")                                       \
    F(X, u64, block_size, "KV block size in tokens")                                               \
    F(X, opt_str, worker_set,                                                                      \
      "InferenceWorkerSet it belongs to (metadata.name): the decider calibrates its TTFT model "   \
      "per worker set (NULL from policy services that predate it: the served model is used)")  \
    F(X, opt_u64, messages_api,                                                                   \
      "1: it serves the Anthropic /v1/messages API itself (its InferenceWorkerSet's spec.apis "  \
      "lists anthropic), so the gateway passes those requests through; 0: it is translated to " \
      "chat completions")                                                                      \
    F(X, opt_strs, lora_adapters,                                                                 \
      "spec.loraAdapters of its InferenceWorkerSet: the LoRA adapters it serves, each under its " \
      "own model name (vLLM --lora-modules); a request for one goes to the pool of its worker "  \
      "set, hashed in the adapter's space (none from policy services that predate it)")            \
    F(X, opt_str, node,                                                                            \
      "Kubernetes node it runs on (the pod's spec.nodeName), for workers the policy service "      \
      "found through an InferenceWorkerSet's spec.selector; NULL for static workers and from "     \
      "policy services that predate it. Collectors with --node-name follow these by it")

#define IPL_PROTO_FIELDS_candidate(F, A, X)                                                        \
    F(X, str, worker, "worker name")                                                               \
    F(X, str, url, "worker base URL")                                                              \
    F(X, f64, predicted_ttft_s, "predicted time to first token, seconds")                          \
    F(X, u64, cached_tokens, "prompt tokens found in its cache (index + optimistic)")              \
    F(X, u64, running, "requests running (last sample)")                                           \
    F(X, u64, waiting, "requests waiting (last sample)")                                           \
    F(X, u64, inflight, "requests this decider routed there since the last sample")                \
    F(X, f64, kv_usage, "KV-cache usage 0..1 (last sample)")                                       \
    F(X, bool, eligible, "whether it could be chosen")                                             \
    F(X, str, note, "why not eligible, or \"\"")

#define IPL_PROTO_FIELDS_backend(F, A, X)                                                          \
    F(X, str, name, "metadata.name")                                                               \
    F(X, str, url, "base URL, e.g. https://api.example.com/v1")                                    \
    F(X, str, protocol, "\"openai\" or \"anthropic\"")                                             \
    F(X, str, auth, "\"none\", \"bearer\" (Authorization: Bearer) or \"header\" (auth_header)")    \
    F(X, str, auth_header, "the header carrying the secret when auth is \"header\", else \"\"")    \
    F(X, str, secret_source,                                                                       \
      "where the secret is read from: \"secretRef\" (a Kubernetes Secret), \"file\", \"env\", "    \
      "or \"\" without auth")                                                                      \
    F(X, str, secret_name,                                                                         \
      "the Secret's name, the file's path or the variable's name (\"\": none)")                    \
    F(X, str, secret_key, "secretRef: the key within the Secret, else \"\"")                       \
    F(X, str, ca_bundle, "tls.caBundle: a PEM file's path, or \"\"")                               \
    F(X, str, ca_secret_name, "tls.caSecretRef: the Secret holding the CA bundle, or \"\"")        \
    F(X, str, ca_secret_key, "tls.caSecretRef: its key, or \"\"")                                  \
    F(X, bool, insecure_skip_verify, "tls.insecureSkipVerify: no certificate verification")        \
    F(X, u64, connect_ms, "connect timeout, ms")                                                   \
    F(X, u64, response_ms, "response timeout, ms")                                                 \
    F(X, u64, max_connections, "connections to it at most, per gateway")

#define IPL_PROTO_FIELDS_provider(F, A, X)                                                         \
    F(X, str, name, "metadata.name")                                                               \
    F(X, str, backend, "the backend element's name")                                               \
    F(X, u64, latency_hint_ms, "expected time to first token, ms (0: unset)")                      \
    F(X, u64, input_micros_per_mtok, "cost per million input tokens, millionths of a unit")        \
    F(X, u64, output_micros_per_mtok, "cost per million output tokens, millionths of a unit")      \
    F(X, u64, concurrent_requests, "capacity: concurrent requests (0: no limit)")                  \
    F(X, u64, tokens_per_minute, "capacity: tokens per minute (0: no limit)")

#define IPL_PROTO_FIELDS_provider_model(F, A, X)                                                   \
    F(X, str, provider, "the provider element's name")                                             \
    F(X, str, name, "local name (a pool's model)")                                                 \
    F(X, str, remote_name, "the model name sent to the provider")

#define IPL_PROTO_FIELDS_pool_target(F, A, X)                                                      \
    F(X, str, pool, "the pool element's name")                                                     \
    F(X, str, kind, "\"workerSet\" or \"provider\"")                                               \
    F(X, str, name, "the worker set or provider element's name")                                   \
    F(X, str, role, "\"primary\", \"overflow\" or \"batch\"")                                      \
    F(X, u64, weight, "1..1000")

#define IPL_PROTO_FIELDS_rule(F, A, X)                                                             \
    F(X, str, policy, "the InferencePolicy's metadata.name")                                       \
    F(X, str, name, "the rule's name (unique in its policy)")                                      \
    F(X, u64, index, "its place in the policy's spec.rules")                                       \
    F(X, strs, tenants, "match: any of these tenants (none: every tenant)")                        \
    F(X, strs, models, "match: any of these models or aliases (none: every model)")                \
    F(X, strs, labels, "match: all of these labels")                                               \
    F(X, strs, headers,                                                                            \
      "match: all of these request headers, each \"name\" (present, any value) or "                \
      "\"name=value\" (split at the first '=', which a header name cannot hold)")                  \
    F(X, u64, prompt_min, "match: prompt tokens at least (0 when unset)")                          \
    F(X, u64, prompt_max, "match: prompt tokens at most (2^64-1 when unset)")                      \
    F(X, bool, has_queue_depth, "match: whether queue_depth_above is set")                         \
    F(X, u64, queue_depth_above, "match: the pool's waiting requests above this")                  \
    F(X, bool, has_kv_utilization, "match: whether kv_utilization_above_percent is set")           \
    F(X, u64, kv_utilization_above_percent, "match: the pool's KV utilization above this, %")      \
    F(X, u64, predicted_ttft_above_slo,                                                            \
      "match: 0 unset, 1 the predicted TTFT is within the pool's SLO, 2 above it")                 \
    F(X, bool, has_time, "match: whether the time window is set")                                  \
    F(X, u64, days, "match: weekdays, bit 0 Monday .. bit 6 Sunday (0x7f: every day)")             \
    F(X, u64, from_minute, "match: window start, minutes after 00:00 UTC")                         \
    F(X, u64, to_minute, "match: window end, minutes after 00:00 UTC (from > to wraps)")           \
    F(X, str, action,                                                                              \
      "\"route\", \"prefer\", \"spill\", \"keepLocal\", \"reject\" or \"admitBatch\"")             \
    F(X, str, pool, "route, prefer: the pool's name, else \"\"")                                   \
    F(X, strs, targets, "route: the subset of the pool's targets (none: all)")                     \
    F(X, str, target, "prefer: the preferred target, else \"\"")                                   \
    F(X, str, unless_holder,                                                                       \
      "prefer: the target that wins instead when it holds the prefix and predicts a lower TTFT "   \
      "(\"\": none)")                                                                              \
    F(X, str, provider, "spill: the provider's name, else \"\"")                                   \
    F(X, bool, while_above_slo, "spill: only while the predicted TTFT is above the SLO")           \
    F(X, u64, enter_percent, "spill: enter above this % of the SLO")                               \
    F(X, u64, exit_percent, "spill: leave below this % of the SLO")                                \
    F(X, u64, min_hold_ms, "spill: stay at least this long, ms")                                   \
    F(X, str, reason, "keepLocal, reject: the reason given to the client, else \"\"")              \
    F(X, u64, status, "reject: the HTTP status, else 0")                                           \
    F(X, u64, max_utilization_percent, "admitBatch: admit while utilization is under this, %")

#define IPL_PROTO_FIELDS_alias(F, A, X)                                                            \
    F(X, str, policy, "the InferencePolicy's metadata.name")                                       \
    F(X, str, name, "the name clients ask for")                                                    \
    F(X, strs, failover, "models or aliases to try, in order, when the targets fail")

#define IPL_PROTO_FIELDS_alias_target(F, A, X)                                                     \
    F(X, str, alias, "the alias element's name")                                                   \
    F(X, str, kind, "\"model\" (a pool's model or another alias) or \"pool\"")                     \
    F(X, str, name, "the model, alias or pool")                                                    \
    F(X, u64, weight, "relative weight")

#define IPL_PROTO_FIELDS_limit(F, A, X)                                                            \
    F(X, str, policy, "the InferencePolicy's metadata.name")                                       \
    F(X, str, tenant, "the tenant, or \"*\": every tenant without its own entry")                  \
    F(X, u64, requests_per_minute, "0: no limit")                                                  \
    F(X, u64, input_tokens_per_minute, "0: no limit")                                              \
    F(X, u64, output_tokens_per_minute, "0: no limit")                                             \
    F(X, u64, concurrent_requests, "0: no limit")                                               \
    F(X, opt_u64, weight,                                                                          \
      "the tenant's share in fair queuing, 1..1000 (0 from policy services that predate it: 1)")   \
    F(X, opt_str, priority,                                                                        \
      "the tenant's highest priority class: \"interactive\", \"standard\" or \"batch\" (NULL "     \
      "from policy services that predate it: \"standard\")")                                      \
    F(X, opt_u64, cost_per_day_micros,                                                             \
      "daily cost budget in micro-USD from the providers' cost hints, reset at 00:00 UTC (0: "     \
      "none)")

#define IPL_PROTO_FIELDS_tenant_usage(F, A, X)                                                     \
    F(X, str, tenant, "the tenant")                                                                \
    F(X, u64, requests, "requests admitted")                                                       \
    F(X, u64, input_tokens, "prompt tokens admitted")                                              \
    F(X, u64, output_tokens,                                                                       \
      "output tokens charged: reserved at admission plus any excess found at settling")            \
    F(X, u64, output_refunded, "output tokens refunded at settling (reserved but not generated)")  \
    F(X, u64, cost_micros, "cost charged, micro-USD (from the targets' cost hints)")               \
    F(X, u64, inflight, "requests of the tenant in flight at the replica now (a gauge)")

#define IPL_PROTO_FIELDS_label_rule(F, A, X)                                                       \
    F(X, str, policy, "the InferencePolicy's metadata.name")                                       \
    F(X, str, label, "the label it gives")                                                         \
    F(X, strs, keywords, "keywords: any one present gives the label")                              \
    F(X, bool, substring, "keywords match anywhere (false: as whole words)")                       \
    F(X, str, regex, "a POSIX extended regular expression, or \"\"")                               \
    F(X, bool, icase, "the regex ignores case")

#define IPL_PROTO_FIELDS_label_class(F, A, X)                                                      \
    F(X, str, policy, "the InferencePolicy's metadata.name")                                       \
    F(X, str, label, "the label the class gives (\"\": a background class, giving none)")          \
    F(X, strs, examples, "example prompts of the class")

#define IPL_PROTO_MESSAGES(M)                                                                      \
    M(KV_EVENT, 1, kv_event, "collector", "aggregator; aggregator to deciders",                    \
      "PUSH→PULL; PUB→SUB",                                                                        \
      "One KV-cache event of one worker with our chained block hashes. Collectors send it "        \
      "with seq=0; the aggregator re-publishes it with its state sequence number.")                \
    M(LOAD, 2, load, "collector", "aggregator; aggregator to deciders", "PUSH→PULL; PUB→SUB",      \
      "A load sample of one worker (from its /metrics) and the exactness of its KV state.")        \
    M(SNAPSHOT_REQ, 3, snapshot_req, "decider", "aggregator", "DEALER→ROUTER",                     \
      "Asks for the full state. Answered by KV_EVENT/LOAD messages then SNAPSHOT_END.")            \
    M(SNAPSHOT_END, 4, snapshot_end, "aggregator", "decider", "ROUTER→DEALER",                     \
      "Ends a snapshot; deltas with seq > this seq apply on top of it.")                           \
    M(POLICY, 5, policy, "policy", "deciders, collectors", "PUB→SUB; ROUTER→DEALER",               \
      "The compiled policy: pools, workers, backends, providers, pool targets, rules, aliases "    \
      "and limits. Published on change and every few seconds, "                                    \
      "and sent in answer to POLICY_REQ.")                                                         \
    M(POLICY_REQ, 6, policy_req, "decider, collector", "policy", "DEALER→ROUTER",                  \
      "Asks for the current compiled policy.")                                                     \
    M(ROUTE_REQ, 7, route_req, "gateway, inferplanectl", "decider", "DEALER→ROUTER",               \
      "Where should this request go? Carries block hashes, never text.")                           \
    M(ROUTE_REP, 8, route_rep, "decider", "gateway, inferplanectl", "ROUTER→DEALER",               \
      "The decision, with every candidate's figures.")                                             \
    M(RECORD, 9, record, "gateway", "exporter", "PUSH→PULL",                                       \
      "One completed (or failed) client request, for metrics.")                                    \
    M(ROUTED, 10, routed, "decider", "other deciders", "PUB→SUB",                                  \
      "What one decider replica routed, so that every replica accounts for it: the worker "        \
      "counts it in flight until a load sample newer than ts_ms, and is assumed to hold the "      \
      "prompt's blocks for the optimistic TTL, exactly like a local decision.")                    \
    M(OBSERVED, 11, observed, "gateway", "decider", "DEALER→ROUTER",                               \
      "What became of a routed request: its measured TTFT, so the decider calibrates its "         \
      "prediction. Sent only when the ROUTE_REP asked for it (observe = 1), once per request, on " \
      "the same connection that carried the ROUTE_REQ (only the decider that decided knows the "   \
      "decision's features): when the first token arrived (streaming), or at the end (not "        \
      "streaming, or no token came). No reply.")                                                   \
    M(LIMITS_USAGE, 12, limits_usage, "gateway", "other gateways", "PUB→SUB",                      \
      "What one gateway replica admitted per tenant, every --limits-interval-ms (50), so that "    \
      "every replica charges the cluster-wide limits' buckets with it (docs/limits.md). "          \
      "Counters are cumulative per (replica, incarnation): a receiver applies the difference "     \
      "from the last it saw, and starts again from zero when the incarnation changes.")

/* KV_EVENT, LOAD and SNAPSHOT_END from an aggregator carry its incarnation: a random number
 * drawn when the aggregator process starts. A subscriber that sees it change knows the
 * aggregator restarted (its seq may coincide with ours) and resyncs from a snapshot. */
#define IPL_PROTO_INCARNATION_DOC                                                                  \
    "aggregator process incarnation, random per start (0 from collectors, and from senders "       \
    "older than this field); a change means the state stream restarted"

#define IPL_PROTO_FIELDS_kv_event(F, A, X)                                                         \
    F(X, u64, seq, "aggregator state sequence (0 from a collector)")                               \
    F(X, str, worker, "worker name")                                                               \
    F(X, u64, epoch, "incarnation of the worker's event stream; changes when it restarts")         \
    F(X, u64, src_seq, "the worker's KV-event batch sequence number")                              \
    F(X, u64, op, "1 stored, 2 removed, 3 all cleared")                                            \
    F(X, u64s, hashes, "our chained block hashes, in chain order")                                 \
    F(X, u64, block_size, "tokens per block")                                                      \
    F(X, opt_u64, incarnation, IPL_PROTO_INCARNATION_DOC)                                          \
    F(X, opt_u64, parent,                                                                          \
      "STORED: our hash of the block before hashes[0] in its chain (0: the chain starts there, "   \
      "unknown, or a sender older than this field); a hint that lets the index store a chain's "   \
      "blocks next to each other")

#define IPL_PROTO_FIELDS_load(F, A, X)                                                             \
    F(X, u64, seq, "aggregator state sequence (0 from a collector)")                               \
    F(X, str, worker, "worker name")                                                               \
    F(X, u64, ts_ms, "wall-clock time of the sample, ms since the epoch")                          \
    F(X, u64, running, "vllm:num_requests_running")                                                \
    F(X, u64, waiting, "vllm:num_requests_waiting")                                                \
    F(X, f64, kv_usage, "vllm:kv_cache_usage_perc (0..1)")                                         \
    F(X, u64, block_size, "from vllm:cache_config_info")                                           \
    F(X, u64, num_blocks, "num_gpu_blocks from vllm:cache_config_info")                            \
    F(X, u64, health, "0 unknown, 1 up, 2 down (scrape failing)")                                  \
    F(X, u64, kv_state, "0 exact, 1 syncing, 2 degraded")                                          \
    F(X, opt_u64, incarnation, IPL_PROTO_INCARNATION_DOC)

#define IPL_PROTO_FIELDS_snapshot_req(F, A, X) F(X, u64, flags, "reserved, 0")

#define IPL_PROTO_FIELDS_snapshot_end(F, A, X)                                                     \
    F(X, u64, seq, "state sequence the snapshot reflects")                                         \
    F(X, u64, workers, "workers sent")                                                             \
    F(X, u64, blocks, "block memberships sent")                                                    \
    F(X, opt_u64, incarnation, IPL_PROTO_INCARNATION_DOC)

#define IPL_PROTO_FIELDS_policy(F, A, X)                                                           \
    F(X, u64, version, "increases with every change")                                              \
    F(X, str, source, "where it was loaded from")                                                  \
    A(X, arr, pool, pools, "pools")                                                                \
    A(X, arr, worker, workers, "workers")                                                          \
    F(X, opt_u64, hash,                                                                            \
      "content hash of every field but version and source (pools, workers and every element "      \
      "array after this field): XXH3-64 of this message encoded with version 0, source nil and "   \
      "hash 0 (libs/policy/policy_digest), so equal policies have equal hashes in every process "  \
      "and across restarts of the policy service; shown as 16 hex digits in /debug/policy. 0 "     \
      "from policy services that predate it")                                                      \
    A(X, opt_arr, backend, backends, "GatewayBackends, by name")                                   \
    A(X, opt_arr, provider, providers, "InferenceProviders, by name")                              \
    A(X, opt_arr, provider_model, provider_models,                                                 \
      "the providers' models: by provider, then in spec.models order")                             \
    A(X, opt_arr, pool_target, pool_targets,                                                       \
      "the pools' targets (worker sets and providers): by pool, then in spec.targets order")       \
    A(X, opt_arr, rule, rules,                                                                     \
      "every InferencePolicy rule in evaluation order (spec.priority highest first, then policy "  \
      "name, then list order); the first that matches decides")                                    \
    A(X, opt_arr, alias, aliases, "model aliases, by name")                                        \
    A(X, opt_arr, alias_target, alias_targets, "the aliases' targets: by alias, then list order")  \
    A(X, opt_arr, limit, limits, "per-tenant limits, by tenant (\"*\" first)")                         \
    F(X, opt_str, label_detectors,                                                                \
      "spec.labels.detectors: the personal-data detectors the gateway runs, comma-separated "     \
      "(\"\": none); NULL when no policy sets them (and from policy services that predate it): "  \
      "every detector")                                                                           \
    F(X, opt_u64, label_threshold_percent,                                                        \
      "spec.labels.classifier.threshold, in percent (0: the default, 50)")                        \
    A(X, opt_arr, label_rule, label_rules, "the operators' label rules, by policy, in list order") \
    A(X, opt_arr, label_class, label_classes, "the classifier's classes, by policy, in list order") \
    F(X, opt_strs, cache_isolated_tenants,                                                        \
      "spec.cacheIsolation.tenants of every policy, sorted, each once: the tenants whose prompts " \
      "are cached apart from everyone else's (gateways set vLLM's cache_salt from the tenant, "   \
      "docs/security.md); \"*\": every tenant; none (and from policy services that predate it): " \
      "one cache shared by all")

#define IPL_PROTO_FIELDS_policy_req(F, A, X) F(X, u64, have_version, "version the asker has, or 0")

#define IPL_PROTO_FIELDS_route_req(F, A, X)                                                        \
    F(X, u64, req_id, "echoed in the reply")                                                       \
    F(X, str, model, "model the client asked for")                                                 \
    F(X, str, tenant, "tenant (\"\" if anonymous)")                                                \
    F(X, u64, prompt_tokens, "prompt length in tokens")                                            \
    F(X, u64, block_size, "block size the hashes were computed with")                              \
    F(X, u64s, hashes, "chained hashes of the prompt's full blocks")                               \
    F(X, str, strategy, "strategy override (\"\" for the pool's)")                                 \
    F(X, opt_u64, explain,                                                                         \
      "1: explain the decision (every candidate's note, the detail), as inferplanectl asks; 0 "    \
      "(gateways, and senders that predate it): decide tersely, notes and detail empty, every "    \
      "candidate's figures as ever")                                                               \
    F(X, opt_u64, brief,                                                                           \
      "1: the reply's candidates list is empty unless explain is 1 (gateways read only the "       \
      "winner; 64 candidates' figures are 3.4 KB and a fifth of a decision's work); 0 (and "       \
      "senders that predate it): every candidate's figures")                                   \
    F(X, opt_strs, labels,                                                                        \
      "the request's semantic labels (e.g. \"pii\"), matched by InferencePolicy rules; none "     \
      "from senders that predate it")                                                             \
    F(X, opt_strs, headers,                                                                       \
      "the request headers InferencePolicy rules name, each \"name=value\" (name lower-case; "    \
      "split at the first '='); only those the policy's rules list are sent")                     \
    F(X, opt_strs, avoid,                                                                         \
      "worker, provider and GatewayBackend names the decider must not choose (a retry's failed "  \
      "targets, open circuit breakers); none from senders that predate it: anything may be "     \
      "chosen")                                                                                  \
    F(X, opt_str, request_id,                                                                     \
      "the gateway's request id (the client's x-request-id, or one the gateway made), written in " \
      "the decider's log lines about the request; NULL from senders that predate it")

#define IPL_PROTO_FIELDS_route_rep(F, A, X)                                                        \
    F(X, u64, req_id, "from the request")                                                          \
    F(X, u64, status, "IPL_ROUTE_* code, 0 = routed")                                              \
    F(X, str, reason, "machine-readable reason (\"cache_hit\", \"least_loaded\", \"no_pool\"...)") \
    F(X, str, detail, "human explanation")                                                         \
    F(X, str, worker, "chosen worker")                                                             \
    F(X, str, url, "chosen worker's base URL")                                                     \
    F(X, str, pool, "pool of the chosen worker")                                                   \
    F(X, str, model, "model name to send upstream")                                                \
    F(X, f64, predicted_ttft_s, "winner's predicted TTFT, seconds")                                \
    F(X, u64, cached_tokens, "winner's cached prompt tokens")                                      \
    F(X, u64, state_seq, "state sequence the decision saw")                                        \
    A(X, arr, candidate, candidates, "every candidate considered (none for a brief request)")      \
    F(X, opt_u64, observe,                                                                         \
      "1: the decider remembers this decision and wants an OBSERVED for req_id on this "           \
      "connection; 0 (and deciders that predate OBSERVED): send none")                          \
    F(X, opt_str, target_kind,                                                                    \
      "what was chosen: \"worker\" (a local worker: worker, url), \"provider\" (an "              \
      "InferenceProvider: worker is its name, url its backend's, model the remote name) or "     \
      "\"\" (not routed); NULL from deciders that predate it: a worker")                           \
    F(X, opt_str, backend,                                                                        \
      "provider decisions: the GatewayBackend to send it through (its credentials); else \"\"")   \
    F(X, opt_str, rule,                                                                           \
      "the InferencePolicy rule that decided, \"policy/rule\" (\"\": none matched)")                \
    F(X, opt_u64, http_status,                                                                    \
      "REJECTED: the HTTP status the rule gives (403, 413, 503...); else 0")                      \
    F(X, opt_u64, retry_after_ms, "DEFERRED: ask again after this long, ms; else 0")               \
    F(X, opt_str, strategy,                                                                        \
      "the routing strategy that decided (the pool's or the request's override: \"ttft\", "         \
      "\"least-loaded\"...; \"\" when no pool was found); NULL from deciders that predate it")

#define IPL_PROTO_FIELDS_record(F, A, X)                                                           \
    F(X, str, request_id, "gateway request id")                                                    \
    F(X, str, model, "model asked for")                                                            \
    F(X, str, tenant, "tenant")                                                                    \
    F(X, str, pool, "pool routed to (\"\" if none)")                                               \
    F(X, str, worker, "worker routed to (\"\" if none)")                                           \
    F(X, str, endpoint, "worker URL")                                                              \
    F(X, str, api, "\"chat\" or \"completions\"")                                                  \
    F(X, u64, status_code, "HTTP status returned to the client")                                   \
    F(X, str, reason, "decision reason or error type")                                             \
    F(X, bool, stream, "streamed response")                                                        \
    F(X, f64, ttft_s, "time to first token as the client saw it (gateway), seconds")               \
    F(X, f64, e2e_s, "end-to-end latency, seconds")                                                \
    F(X, f64, itl_s, "mean inter-token latency, seconds (0 if < 2 tokens)")                        \
    F(X, u64, prompt_tokens, "prompt tokens (usage)")                                              \
    F(X, u64, cached_tokens, "cached prompt tokens (usage.prompt_tokens_details)")                 \
    F(X, u64, completion_tokens, "completion tokens (usage)")                                      \
    F(X, f64, predicted_ttft_s, "decider's prediction, for calibration")                          \
    F(X, opt_strs, labels,                                                                        \
      "the request's semantic labels (names only: the gateway's and the trusted header's); none " \
      "from gateways that predate it")                                                            \
    F(X, opt_str, outcome,                                                                         \
      "what became of the request: \"ok\", \"rejected\" (refused by policy, routing or the "        \
      "request's own fault), \"rate_limited\" (a tenant limit), \"queue_timeout\" (waited in the "  \
      "gateway's queue too long), \"failed_over\" (answered after another target failed), "        \
      "\"spilled\" (answered by a provider a spill or overflow chose), \"error\" or \"cancelled\" (the "\
      "client hung up; docs/metrics.md,"\
      " Outcomes); NULL from gateways that predate it: the exporter derives it from status_code, "  \
      "reason, attempts and target_kind")                                                          \
    F(X, opt_u64, queue_wait_us,                                                                   \
      "microseconds the request waited in the gateway's fair queue or deferral before it was "     \
      "routed or given up (0: it did not wait, and from gateways that predate it)")                \
    F(X, opt_u64, attempts,                                                                        \
      "upstream attempts made, the first included (0: none were made, or a gateway that "         \
      "predates it)")                                                                              \
    F(X, opt_str, target_kind,                                                                     \
      "what answered: \"worker\", \"provider\" or \"\" (nothing was chosen); NULL from gateways "  \
      "that predate it")                                                                           \
    F(X, opt_str, backend,                                                                         \
      "provider requests: the GatewayBackend they went through; else \"\" (NULL: older gateways)") \
    F(X, opt_u64, cost_micros,                                                                     \
      "what the request cost at the provider, micro-USD, from its InferenceProvider's cost hints " \
      "and the usage (0: a local worker, unknown, or an older gateway)")                           \
    F(X, opt_str, rule,                                                                            \
      "the InferencePolicy rule that decided, \"policy/rule\" (ROUTE_REP.rule; \"\" or NULL: none)") \
    F(X, opt_str, strategy,                                                                        \
      "the routing strategy that chose (the pool's or the request's override; \"\" or NULL: "       \
      "unknown)")

#define IPL_PROTO_FIELDS_routed(F, A, X)                                                           \
    F(X, str, decider, "id of the decider that routed (its --id)")                                 \
    F(X, str, worker, "worker routed to")                                                          \
    F(X, u64, ts_ms, "wall-clock time of the decision, ms since the epoch")                        \
    F(X, u64, block_size, "tokens per block of the hashes")                                        \
    F(X, u64, blocks, "the prompt's full blocks (may exceed the hashes sent)")                     \
    F(X, u64s, hashes,                                                                             \
      "the prompt's leading chained block hashes (the sender may cap them; "                       \
      "none when the request's block size is not the worker's)")                                   \
    F(X, u64, prompt_tokens, "prompt tokens")                                                      \
    F(X, u64, uncached_tokens, "prompt tokens the worker must prefill (not cached there)")         \
    F(X, u64, seq, "the sending decider's ROUTED sequence number (1, 2, ...; gaps = lost)")

#define IPL_PROTO_FIELDS_limits_usage(F, A, X)                                                     \
    F(X, str, replica, "the sending gateway's replica id (--limits-id; unique in the cluster)")    \
    F(X, u64, incarnation, "random per start of the sender; a change resets its counters")        \
    F(X, u64, seq, "the sender's message sequence number (1, 2, ...; gaps = lost, harmless)")      \
    F(X, u64, interval_ms, "the sender's gossip interval, ms")                                     \
    F(X, u64, epoch,                                                                               \
      "the interval it was sent at the start of (wall-clock ms / interval_ms): the counters "      \
      "cover every admission before it")                                                           \
    A(X, arr, tenant_usage, tenants, "every tenant it has admitted or holds in flight")

#define IPL_PROTO_FIELDS_observed(F, A, X)                                                         \
    F(X, u64, req_id, "the ROUTE_REQ's req_id (the decision observed)")                            \
    F(X, str, worker, "worker the request was sent to (the decision's winner)")                    \
    F(X, u64, status, "HTTP status of the worker's response (0: none); learned from 2xx only")     \
    F(X, bool, stream, "a streamed response: ttft_s ends at its first content event")              \
    F(X, f64, ttft_s,                                                                              \
      "seconds from the gateway starting the upstream request to the first content event "         \
      "(streaming) or the first body byte (not streaming: that includes generating every "         \
      "completion token, so the decider learns from it only with completion_tokens = 1); 0 if "    \
      "none arrived. The closest the gateway gets to the worker's own TTFT: it leaves out the "    \
      "client and the routing, and includes the network and the worker's API server")              \
    F(X, u64, prompt_tokens, "prompt tokens (usage if known when sent, else the gateway's count)") \
    F(X, u64, cached_tokens,                                                                       \
      "cached prompt tokens (usage.prompt_tokens_details; 0 when unknown, e.g. a stream observed " \
      "at its first token)")                                                                       \
    F(X, u64, completion_tokens, "completion tokens (usage; 0 when unknown)")

/* ---- derived C types ----------------------------------------------------------------------- */
#define IPL_PROTO_DECL_u64(n) uint64_t n;
#define IPL_PROTO_DECL_opt_u64(n) uint64_t n;
#define IPL_PROTO_DECL_opt_str(n) char *n;
#define IPL_PROTO_DECL_opt_strs(n)                                                                 \
    char **n;                                                                                      \
    uint32_t n##_len;
#define IPL_PROTO_DECL_f64(n) double n;
#define IPL_PROTO_DECL_bool(n) bool n;
#define IPL_PROTO_DECL_str(n) char *n; /* NULL encodes as nil */
#define IPL_PROTO_DECL_strs(n)                                                                     \
    char **n;                                                                                      \
    uint32_t n##_len;
#define IPL_PROTO_DECL_u64s(n)                                                                     \
    uint64_t *n;                                                                                   \
    uint32_t n##_len;
#define IPL_PROTO_F_DECL(X, kind, n, doc) IPL_PROTO_DECL_##kind(n)
#define IPL_PROTO_A_DECL(X, kind, elem, n, doc)                                                    \
    struct ipl_##elem *n;                                                                          \
    uint32_t n##_len;

#define IPL_PROTO_STRUCT_DECL(name, doc)                                                           \
    typedef struct ipl_##name {                                                                    \
        IPL_PROTO_FIELDS_##name(IPL_PROTO_F_DECL, IPL_PROTO_A_DECL, _)                             \
    } ipl_##name##_t;
IPL_PROTO_STRUCTS(IPL_PROTO_STRUCT_DECL)
#define IPL_PROTO_MSG_DECL(T, id, name, from, to, pat, doc) IPL_PROTO_STRUCT_DECL(name, doc)
IPL_PROTO_MESSAGES(IPL_PROTO_MSG_DECL)

typedef enum {
#define IPL_PROTO_ENUM(T, id, name, from, to, pat, doc) IPL_MSG_##T = id,
    IPL_PROTO_MESSAGES(IPL_PROTO_ENUM)
#undef IPL_PROTO_ENUM
} ipl_msg_type_t;

/* A decoded message. Strings and arrays point into `arena`, which ipl_msg_clear frees. */
typedef struct {
    ipl_msg_type_t type;
    void *arena;
    union {
#define IPL_PROTO_UNION(T, id, name, from, to, pat, doc) ipl_##name##_t name;
        IPL_PROTO_MESSAGES(IPL_PROTO_UNION)
#undef IPL_PROTO_UNION
    } u;
} ipl_msg_t;

/* ---- descriptors (for the codec, tests and docs) ------------------------------------------ */
typedef enum {
    IPL_FT_U64,
    IPL_FT_F64,
    IPL_FT_BOOL,
    IPL_FT_STR,
    IPL_FT_U64S,
    IPL_FT_STRUCTS,
    IPL_FT_STRS, /* array of strings */
} ipl_ftype_t;

typedef struct ipl_proto_struct ipl_proto_struct_t;
typedef struct {
    const char *name;
    const char *doc;
    ipl_ftype_t type;
    size_t offset;
    size_t len_offset;              /* U64S / STRS / STRUCTS: offset of the uint32_t count */
    const ipl_proto_struct_t *elem; /* STRUCTS */
    bool optional; /* may be absent at the end of a frame from an older sender (0 / NULL) */
} ipl_proto_field_t;

struct ipl_proto_struct {
    const char *name;
    const char *doc;
    size_t size;
    const ipl_proto_field_t *fields;
    size_t nfields;
};

typedef struct {
    ipl_msg_type_t type;
    const char *type_name; /* "ROUTE_REQ" */
    const char *from, *to, *pattern, *doc;
    const ipl_proto_struct_t *body;
} ipl_proto_msg_desc_t;

/* All messages, in catalogue order; *n receives the count. */
const ipl_proto_msg_desc_t *ipl_proto_messages(size_t *n);
/* NULL for an unknown type. */
const ipl_proto_msg_desc_t *ipl_proto_msg_desc(int type);
const char *ipl_msg_type_name(int type); /* "ROUTE_REQ", or "unknown" */
/* Struct element descriptors (pool, worker, candidate, ...); *n receives the count. */
const ipl_proto_struct_t *const *ipl_proto_structs(size_t *n);

/* ---- codec --------------------------------------------------------------------------------- */
/* Appends the envelope of message `type` with body `body` (a pointer to its ipl_<name>_t) to
 * `out`. Returns 0, IPL_E_UNKNOWN for a bad type, IPL_E_RANGE when an array or string exceeds
 * the limits (nothing useful is appended then; reset the buffer). */
int ipl_msg_encode(int type, const void *body, msgpack_sbuffer *out);

/* Decodes one frame into `out` (which must be zeroed or cleared). On success the caller owns
 * out->arena and must ipl_msg_clear(out). On failure `out` holds nothing to free. */
int ipl_msg_decode(const void *buf, size_t len, ipl_msg_t *out);
void ipl_msg_clear(ipl_msg_t *msg);

/* Encodes and sends one message frame on a raw libzmq socket (zsock_resolve(zsock)) using a
 * per-thread buffer. `zmq_flags` e.g. ZMQ_DONTWAIT. Returns 0, IPL_E_AGAIN (would block /
 * HWM reached: the message is dropped by the caller's choice), IPL_E_IO, or a codec error. */
int ipl_msg_send(void *zmq_socket, int type, const void *body, int zmq_flags);

#endif
