/*
 * policy_kube — the policy service's Kubernetes mode: lists and watches our custom resources
 * on a Kubernetes API server and hands every new object set to policy_server, which compiles
 * and publishes it like a directory change; writes each object's status conditions back.
 *
 *   kube thread (libcurl multi)                            main thread (policy_server)
 *   ─────────────────────────────────────────────          ───────────────────────────────
 *   per kind: LIST ──► WATCH ?resourceVersion=RV           policy_kube_fd readable
 *             ▲  &allowWatchBookmarks=true                  └► policy_kube_take → set
 *             │   ADDED/MODIFIED/DELETED → objects            └► policy_kube_set_add_to(compiler)
 *             │   BOOKMARK → RV                                └► finish, install, publish
 *             │   stream ended → WATCH again from RV            └► policy_kube_report(set, c)
 *             └── 410 (HTTP or ERROR event) → relist          ┌──────────────┘
 *   errors (refused, 5xx, ...) → backoff 100 ms ×2 … 5 s  ◄───┘ the conditions each object
 *   with ±25 % jitter                                         should have; PATCH …/status
 *                                                             (merge patch) where they differ
 *
 * Kinds are data (s_kinds in policy_kube.c: kind, plural, group/version; adding one is a
 * line). Pods are followed too but not compiled: an InferenceWorkerSet with spec.selector gets
 * the serving pods it selects (Running, an IP, Ready unless absent) appended to spec.workers
 * (name: the pod's; url/kvEvents/replay/metrics from the pod IP and spec.ports, a number or a
 * container port name) before it is compiled, and each such worker carries its pod's
 * spec.nodeName (ipl_worker_t.node, policy_compiler_set_node: collectors with --node-name
 * follow the workers of their node). A kind whose CRD is not installed (404)
 * counts as empty and is listed again every backoff maximum. The first object set is handed
 * over once every kind has been listed; later ones after each change of an object's compiled
 * part (apiVersion, kind, metadata.name/namespace, spec; not status, so our own writes do not
 * recompile; of a pod: its labels, serving IP, named ports and node), at most 20 ms after a
 * burst of events ends and 200 ms after its first.
 *
 * Each object is compiled as one document named "<Kind>/<namespace>/<name>" (cluster-scoped:
 * "<Kind>/-/<name>"); the compiler prefixes each error with that name, which is how an error
 * is mapped back to its object. The conditions (docs/kubernetes.md, "The policy service in
 * Kubernetes mode"):
 *
 *   Accepted      True  Accepted  the object compiled without errors
 *                 False Invalid   it has errors (message: the first, cut at 1024 bytes)
 *   ResolvedRefs  True  ResolvedRefs   every name it references exists
 *                 False RefNotFound    one does not (message: that error)
 *
 * both with observedGeneration = the metadata.generation compiled, and lastTransitionTime kept
 * while the status stays the same. A write is sent only when a condition differs from the
 * object's status as last seen (watch or PATCH answer), at most S_MAX_WRITES_PER_S a second.
 *
 * Threads: policy_kube_new starts one thread that owns the connections and the object set;
 * every other function may be called from any one other thread (the policy server's loop).
 * policy_kube_debug is safe from any thread (admin HTTP threads). The metrics are updated from
 * the kube thread.
 *
 * Connection: `api` is a URL (http:// for the in-repo stand-in, tools/kube-apiserver-standin;
 * https:// for a cluster) or "in-cluster": https://$KUBERNETES_SERVICE_HOST:
 * $KUBERNETES_SERVICE_PORT with the service account's token and CA under
 * /var/run/secrets/kubernetes.io/serviceaccount/ (token_file and ca_file default to those).
 * The token is read again before every request (projected tokens rotate).
 */
#ifndef POLICY_KUBE_H
#define POLICY_KUBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "ipl_metrics.h"
#include "policy_compiler.h"

#define POLICY_KUBE_GROUP_VERSION "inferplane.io/v1alpha1"
#define POLICY_KUBE_SA_DIR        "/var/run/secrets/kubernetes.io/serviceaccount"

typedef struct {
    const char *api;        /* base URL, or "in-cluster" */
    const char *namespace;  /* NULL or "": every namespace */
    const char *token_file; /* NULL: none (in-cluster: the service account's) */
    const char *ca_file;    /* NULL: the system's (in-cluster: the service account's) */
    uint64_t backoff_min_ms, backoff_max_ms; /* 0: 100 and 5000 */
    int watch_timeout_s;                     /* timeoutSeconds of each watch; 0: 300 */
} policy_kube_config_t;

typedef struct policy_kube policy_kube_t;
typedef struct policy_kube_set policy_kube_set_t;

/* Checks the config, registers the metrics (`metrics` borrowed; outlives the object) and starts
 * the thread. NULL with a human message in `err` on failure. Strings are copied. */
policy_kube_t *policy_kube_new(const policy_kube_config_t *config, ipl_metrics_t *metrics,
                               char *err, size_t errlen);
/* Stops the thread (open requests are abandoned) and frees everything. */
void policy_kube_destroy(policy_kube_t **self_p);

/* Readable when a new object set waits (poll it for reading; policy_kube_take drains it). */
int policy_kube_fd(const policy_kube_t *self);
/* The newest object set not yet taken (ownership moves to the caller), or NULL. */
policy_kube_set_t *policy_kube_take(policy_kube_t *self);

void policy_kube_set_destroy(policy_kube_set_t **set_p);
size_t policy_kube_set_size(const policy_kube_set_t *set);
/* Adds every object of the set to the compiler, in name order. Returns the errors found. */
int policy_kube_set_add_to(const policy_kube_set_t *set, policy_compiler_t *c);

/* After policy_compiler_finish(c) on `set`: works out every object's conditions from the
 * compiler's errors and queues the status writes (sent by the kube thread). */
void policy_kube_report(policy_kube_t *self, const policy_kube_set_t *set,
                        const policy_compiler_t *c);

/* {"mode": "kubernetes", "api", "namespace", "kinds": [{kind, plural, resourceVersion, state,
 * objects, lists, relists, errors}], "objects", "relists", "errors", "status_writes",
 * "last_error", "last_error_at"}. Caller deletes. Any thread. */
cJSON *policy_kube_debug(policy_kube_t *self);

/* ---- The pieces, for unit tests -------------------------------------------------------- */

/* A watch stream: bytes in (chunks cut anywhere), one call per complete JSON line out. */
typedef enum {
    POLICY_KUBE_ADDED,
    POLICY_KUBE_MODIFIED,
    POLICY_KUBE_DELETED,
    POLICY_KUBE_BOOKMARK,
    POLICY_KUBE_ERROR
} policy_kube_event_type_t;

/* `object` is borrowed for the call (the caller may cJSON_DetachItemFromObject it). For an
 * ERROR, `code` is the Status code (0 when absent) and object the Status. */
typedef void(policy_kube_event_fn)(void *arg, policy_kube_event_type_t type, cJSON *object,
                                   int code);

typedef struct {
    char *buf; /* the partial line */
    size_t len, cap;
    size_t max_line; /* 0: 16 MiB; a longer line is dropped whole (counted as garbage) */
    bool skipping;   /* inside a line too long */
    uint64_t events, garbage;
    policy_kube_event_fn *fn;
    void *arg;
} policy_kube_stream_t;

void policy_kube_stream_init(policy_kube_stream_t *s, policy_kube_event_fn *fn, void *arg);
/* Feeds bytes; calls fn for each complete line that is an event. A line that is not JSON, not
 * an object or has no known type counts in `garbage` and is skipped. Returns the events. */
size_t policy_kube_stream_feed(policy_kube_stream_t *s, const char *data, size_t len);
void policy_kube_stream_reset(policy_kube_stream_t *s); /* drops a partial line */
void policy_kube_stream_free(policy_kube_stream_t *s);

/* The conditions one object should have. */
typedef struct {
    bool accepted, resolved;
    const char *accepted_reason, *accepted_message; /* borrowed */
    const char *resolved_reason, *resolved_message;
    int64_t generation;
} policy_kube_want_t;

/* The merge patch ({"status": {...}}) that gives an object whose status is `status` (NULL: none)
 * the conditions `want`; NULL when it already has them (same status, reason, message and
 * observedGeneration of both). `now` (RFC 3339) becomes the lastTransitionTime of a condition
 * whose status changes. Caller frees. */
char *policy_kube_status_patch(const cJSON *status, const policy_kube_want_t *want,
                               const char *now);

/* Whether a Kubernetes label selector ({matchLabels, matchExpressions: [{key, operator In |
 * NotIn | Exists | DoesNotExist, values}]}) selects `labels` (an object; NULL: none). An empty
 * selector selects nothing (the compiler refuses one). */
bool policy_kube_selects(const cJSON *selector, const cJSON *labels);

/* Fills `want` for the document `doc` ("<Kind>/<ns>/<name>") from the compiler's errors: an
 * error whose text starts with doc + ":" is the object's; "does not exist" in it makes it a
 * reference error. Messages point into the compiler (valid while it lives). */
void policy_kube_want(const policy_compiler_t *c, const char *doc, int64_t generation,
                      policy_kube_want_t *want);

#endif
