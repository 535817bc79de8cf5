/*
 * policy_server — the policy service's engine: watches the policy directory, compiles it
 * (policy_compiler), versions the result and serves it.
 *
 *   --dir (*.yaml) ──(mtime poll, 1 s)──► policy_compiler ──► POLICY frame (pre-encoded)
 *                                                             ├─► PUB --pub: on change and
 *                                                             │   every --republish-ms
 *                                                             └─► ROUTER --rep: answers
 *                                                                 POLICY_REQ
 *
 * Versions are wall-clock milliseconds of the change, forced to increase by at least 1 per
 * change (max(previous + 1, now)), so that they keep increasing across restarts of the
 * service: a subscriber (ipl_policy_view) only ever moves to a higher version. A reload
 * that compiles to the same policy keeps the version.
 *
 * A directory that fails to compile keeps the last good policy in service; its errors are
 * logged, shown in /readyz detail and /debug/policy, and counted (inferplane_policy_errors).
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

typedef struct policy_server policy_server_t;

/* Binds `pub` and `rep` and registers metrics in `metrics` (borrowed; must outlive the
 * server). Does not read the directory yet. NULL with a human message in `err` on failure. */
policy_server_t *policy_server_new(const char *dir, const char *pub, const char *rep,
                                   uint64_t republish_ms, ipl_metrics_t *metrics, char *err,
                                   size_t errlen);
void policy_server_destroy(policy_server_t **self_p);

/* Compiles the directory when its files changed since the last attempt (always when
 * `force`), installs the result when it is valid and different, and publishes it.
 * Returns 1 when a new version was installed, 0 when nothing changed, a negative IPL_E_INVAL
 * when the files are invalid (the last good policy stays). */
int policy_server_reload(policy_server_t *self, bool force);

/* Serves until ipl_signal_stopping(): answers POLICY_REQ, republishes, reloads on change. */
void policy_server_run(policy_server_t *self);

uint64_t policy_server_version(policy_server_t *self); /* 0: no valid policy yet */

/* ipl_admin_ready_fn: ready once a valid policy is loaded. `arg` is the server. */
bool policy_server_ready(void *arg, char *detail, size_t size);
/* GET /debug/policy: the compiled view, the files read and the last reload's errors. */
void policy_server_debug(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp);

#endif
