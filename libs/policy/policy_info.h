/*
 * policy_info — the info-style gauge that says which policy a process runs, by content:
 *
 *   <name>{hash="16 hex digits"} 1     the policy in use (policy_digest's hash)
 *   <name>{hash="..."} 0               every hash shown before (a registry cannot forget a
 *                                      series: one per policy change, for the process's life)
 *   <name>{hash=""} 1                  no policy yet (or one from a policy service that
 *                                      predates hashes)
 *
 * Equal policies have equal hashes in every process, so `count(count by (hash) (<name> == 1))`
 * is the number of different policies in service (the version-skew rules,
 * deploy/prometheus/inferplane-rules.yaml). Used by the deciders
 * (inferplane_decider_policy_info), and meant for every process that follows or serves the
 * policy.
 *
 * Ownership: `metrics` and a followed view are borrowed and must outlive the object; with a
 * view, the object registers a collect callback on `metrics` that cannot be removed, so
 * whoever renders `metrics` must be stopped before the object is destroyed. Thread-safe.
 */
#ifndef POLICY_INFO_H
#define POLICY_INFO_H

#include <stdint.h>

#include "ipl_metrics.h"
#include "ipl_policy_view.h"

typedef struct policy_info policy_info_t;

/* The gauge `name` with `help`, showing no policy until set. NULL when out of memory. */
policy_info_t *policy_info_new(ipl_metrics_t *metrics, const char *name, const char *help);
/* The same, kept to the newest policy of `view` at every render of `metrics`. */
policy_info_t *policy_info_new_view(ipl_metrics_t *metrics, const char *name, const char *help,
                                    ipl_policy_view_t *view);
void policy_info_destroy(policy_info_t **self_p);

/* Shows the policy of content hash `hash` (0: none) as the one in use. */
void policy_info_set(policy_info_t *self, uint64_t hash);

#endif
