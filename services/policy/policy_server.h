/*
 * policy_server — the policy service's engine: watches the policy directory (policy_watch),
 * compiles it (libs/policy: policy_compiler), versions the result and serves it.
 *
 *   --dir (*.yaml) ──(inotify, debounced; or a 1 s poll)──► policy_compiler ──► POLICY frame
 *                                                           (pre-encoded, versioned, hashed)
 *                                                             ├─► PUB --pub: on change and
 *                                                             │   every --republish-ms
 *                                                             └─► ROUTER --rep: answers
 *                                                                 POLICY_REQ
 *
 * Kubernetes mode (config.kube, policy_kube): instead of the directory, each object set the
 * watcher hands over (its fd in the loop) is compiled the same way, and the compiler's verdict
 * goes back to the watcher (policy_kube_report) to be written as status conditions.
 *
 * Versions are wall-clock milliseconds of the change, forced to increase by at least 1 per
 * change (max(previous + 1, now)), so that they keep increasing across restarts of the
 * service: a subscriber (ipl_policy_view) only ever moves to a higher version. A reload
 * that compiles to the same policy keeps the version. The hash (POLICY.hash, policy_digest)
 * depends on the content only: the same files give the same hash after a restart, under a
 * new version.
 *
 * The switch is atomic: the policy in service is one pre-encoded frame, replaced whole
 * between two messages, so no reader ever sees half of one.
 *
 * A directory that fails to compile keeps the last good policy in service and says why: each
 * error is logged (policy_error, then policy_invalid with the version kept), shown in
 * /readyz detail and in /debug/policy ("valid": false, "errors"), and counted
 * (inferplane_policy_errors, inferplane_policy_files_valid 0,
 * inferplane_policy_reloads_total{result="error"}).
 *
 * Threads: policy_server_run and policy_server_reload on one thread (main); the admin
 * callbacks (policy_server_ready, policy_server_debug) on HTTP threads, under a mutex.
 */
#ifndef POLICY_SERVER_H
#define POLICY_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipl_httpd.h"
#include "ipl_metrics.h"
#include "policy_kube.h"

typedef struct {
    const char *dir;       /* the policy directory (files mode) */
    policy_kube_t *kube;   /* Kubernetes mode instead (borrowed; outlives the server): dir
                            * is ignored and each object set the watcher hands over is
                            * compiled like a directory change */
    const char *pub, *rep; /* ZeroMQ endpoints to bind */
    uint64_t republish_ms; /* 0: 2000 */
    bool poll;             /* --watch poll: poll the directory every second, never inotify */
} policy_server_config_t;

typedef struct policy_server policy_server_t;

/* Binds `pub` and `rep`, starts watching the directory and registers metrics in `metrics`
 * (borrowed; must outlive the server). Strings are copied. Does not compile the directory
 * yet. NULL with a human message in `err` on failure. */
policy_server_t *policy_server_new(const policy_server_config_t *config, ipl_metrics_t *metrics,
                                   char *err, size_t errlen);
void policy_server_destroy(policy_server_t **self_p);

/* Compiles the directory when its files changed since the last attempt (always when
 * `force`), installs the result when it is valid and different, and publishes it.
 * Returns 1 when a new version was installed, 0 when nothing changed, a negative IPL_E_INVAL
 * when the files are invalid (the last good policy stays). */
int policy_server_reload(policy_server_t *self, bool force);

/* Serves until ipl_signal_stopping(): answers POLICY_REQ, republishes, reloads on change. */
void policy_server_run(policy_server_t *self);

uint64_t policy_server_version(policy_server_t *self); /* 0: no valid policy yet */
uint64_t policy_server_hash(policy_server_t *self);    /* of that version; 0: none */
/* "inotify" or "poll", or "kubernetes" */
const char *policy_server_watch_mode(policy_server_t *self);

/* ipl_admin_ready_fn: ready once a valid policy is loaded. `arg` is the server. */
bool policy_server_ready(void *arg, char *detail, size_t size);
/* GET /debug/policy: the policy in service (policy_digest_json: version, hash, pools,
 * workers) and the service's side: "mode" (files or kubernetes), "dir", "valid" and "errors" /
 * "warnings" / "files" of the last compilation, "reloaded_at", "reloads" {changed, unchanged,
 * error}, and "watch" {mode, reason, debounce_ms, max_delay_ms, poll_ms, events} in files mode,
 * "kube" (policy_kube_debug, live) in Kubernetes mode. */
void policy_server_debug(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp);

#endif
