/*
 * collector_node — everything one collector does for the workers of its node, in one loop:
 *
 *   policy (ipl_policy_view, filtered by --node-name and --worker-prefix: collector_node_follows)
 *   or  --workers static list
 *        │ worker set (reconciled on every policy change)
 *        ▼
 *   per worker: SUB ── vLLM KV events ──► collector_stream ──► KV_EVENT ─┐
 *               DEALER ◄─ replay (gaps, start-up, restarts) ─┘ (one per replay)
 *               /metrics ◄── collector_scrape (curl multi, same loop)  ──► LOAD ─┤
 *                                                                                ▼
 *               collector_upstream: PUSH to every --aggregator (active-active); the full
 *               state again to one that (re)connects (a restarted aggregator converges)
 *
 * KV_EVENTs carry seq 0 (the aggregator numbers them), the stream's epoch and the worker's
 * batch sequence (src_seq). A LOAD follows every scrape: health UP with the gauges, or DOWN
 * when the scrape failed; kv_state is the stream's exactness (RECOVERING travels as SYNCING;
 * DEGRADED for a worker whose KV events cannot be subscribed to), and a LOAD also goes out as
 * soon as it changes. A scrape that shows a new worker process (collector_sample_restarted)
 * restarts the stream at once. Every loop round lasts at most 100 ms (the streams' replay
 * timeouts and retries).
 *
 * Checkpoints (--checkpoint-dir): every `checkpoint_interval_ms`, and at destroy (shutdown),
 * each worker whose stream changed is saved (collector_stream_image + the restart evidence of
 * its last scrape → collector_checkpoint, atomically); the file of a worker that leaves the
 * worker set is deleted. A worker added with a readable checkpoint of the same name resumes
 * from it (collector_stream_resume: trusted only once a replay proves it) and its first
 * scrape is compared with the saved evidence, so a worker restarted while the collector was
 * down is caught; a checkpoint that does not decode is ignored with a log line and counted
 * (inferplane_collector_checkpoint_resumes_total{result="corrupt"}). Files are encoded on the
 * loop thread and written without the node's lock.
 *
 * Input from workers is never trusted: frames that are not [topic, seq, payload] or do not
 * decode are dropped and counted (inferplane_frames_dropped_total{reason} and
 * inferplane_collector_decode_errors_total{reason}).
 *
 * Threading: one thread runs collector_node_poll/_run; admin threads call the readiness
 * function, the /debug/workers handler and the metrics collector, which take the node's lock.
 */
#ifndef COLLECTOR_NODE_H
#define COLLECTOR_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector_stream.h"
#include "ipl_httpd.h"
#include "ipl_metrics.h"
#include "ipl_proto.h"

/* One worker to collect from. */
typedef struct {
    char *name;
    char *url;             /* base URL of its API */
    char *kv_endpoint;     /* its KV-event PUB ("" = none) */
    char *replay_endpoint; /* its replay ROUTER ("" = none) */
    char *metrics_url;     /* url + "/metrics" unless given */
} collector_worker_spec_t;

/* Parses a static worker list: `name=url|kv_endpoint[|replay_endpoint]`, comma-separated
 * (spaces around items are ignored). On success *out is a malloc'd array of *n specs (free
 * with collector_worker_specs_free). On error returns IPL_E_INVAL with a message naming the
 * item and the expected form in `err`. */
int collector_worker_specs_parse(const char *text, collector_worker_spec_t **out, size_t *n,
                                 char *err, size_t errlen);
void collector_worker_specs_free(collector_worker_spec_t **specs_p, size_t n);

typedef struct {
    const char *aggregators;        /* comma-separated ZeroMQ endpoints to PUSH to */
    const char *workers;            /* static list, or NULL/"" to follow the policy */
    const char *policy_sub;         /* policy PUB endpoint (policy mode) */
    const char *policy_req;         /* policy ROUTER endpoint (policy mode) */
    const char *worker_prefix;      /* policy mode: only workers whose name starts with it */
    const char *node_name;          /* policy mode: only workers on this Kubernetes node */
    int64_t scrape_interval_ms;     /* /metrics period (<= 0: 100) */
    const char *checkpoint_dir;     /* NULL/"": no checkpoints */
    int64_t checkpoint_interval_ms; /* (<= 0: 2000) */
} collector_config_t;

typedef struct collector_node collector_node_t;

/* Whether a collector given --worker-prefix `prefix` and --node-name `node_name` (NULL or "":
 * not given) follows policy worker `w`:
 *   neither given          every worker;
 *   only the prefix        workers whose name starts with it;
 *   only the node name     workers whose node (ipl_worker_t.node: the pod's spec.nodeName, set
 *                          for workers found through a selector) is it; none without a node;
 *   both                   a worker with a node by its node alone (the prefix is a stand-in for
 *                          a node the policy does not know), one without a node by the prefix.
 * So that with the chart's --node-name=$(NODE_NAME) and --worker-prefix=$(NODE_NAME)- each
 * worker, discovered or static, has exactly one collector. */
bool collector_node_follows(const ipl_worker_t *w, const char *prefix, const char *node_name);

/* The KV_EVENT a stream operation of `worker` becomes on the wire to the aggregators (seq 0).
 * Borrows op's hashes and the name: valid while both are. */
ipl_kv_event_t collector_node_event(const collector_op_t *op, const char *worker);

/* Connects to the aggregators, parses the static list (or starts following the policy).
 * `metrics` is borrowed and must outlive the node; whoever renders it must stop before the
 * node is destroyed. NULL with a human error in `err` on failure. */
collector_node_t *collector_node_new(const collector_config_t *config, ipl_metrics_t *metrics,
                                     char *err, size_t errlen);
void collector_node_destroy(collector_node_t **self_p);

/* Saves every worker's checkpoint now (without a --checkpoint-dir: nothing). Also done
 * periodically by the loop and by destroy. */
void collector_node_checkpoint(collector_node_t *self);

/* Registers GET /debug/workers on `httpd` (before it starts). */
void collector_node_routes(collector_node_t *self, ipl_httpd_t *httpd);

/* Readiness (an ipl_admin_ready_fn): ready once the node has its worker list. */
bool collector_node_ready(void *self, char *detail, size_t size);

/* One loop round: waits up to `timeout_ms` (and on `stop_fd` when >= 0), then handles KV
 * events, scrapes, and policy changes. Returns 0 or IPL_E_IO. */
int collector_node_poll(collector_node_t *self, int timeout_ms, int stop_fd);
/* Loops until ipl_signal_stopping(). */
int collector_node_run(collector_node_t *self);

size_t collector_node_nworkers(collector_node_t *self);

#endif
