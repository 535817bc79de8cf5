/*
 * ipl_policy_view — a process's live copy of the compiled policy (POLICY: pools, workers,
 * backends, providers, targets, rules, aliases, limits), kept up
 * to date from the policy service: a SUB socket for published POLICY messages plus a DEALER
 * that asks (POLICY_REQ) at start and whenever nothing was heard for a while.
 *
 * Runs its own thread (a czmq zactor). Readers call ipl_policy_view_get(), which returns a
 * reference-counted immutable snapshot that stays valid until released, so a router can use
 * one consistent policy for a whole decision while a newer one arrives.
 */
#ifndef IPL_POLICY_VIEW_H
#define IPL_POLICY_VIEW_H

#include <stdint.h>

#include "ipl_proto.h"

typedef struct ipl_policy_view ipl_policy_view_t;

/* An immutable compiled policy. `policy` points into the snapshot. */
typedef struct ipl_policy_snap {
    const ipl_policy_t *policy;
    /* private */
    ipl_msg_t msg;
    int refs;
} ipl_policy_snap_t;

/* Connects to `sub_endpoint` (PUB of the policy service) and `req_endpoint` (its ROUTER).
 * Either may be NULL or "" to skip it. NULL on failure. */
ipl_policy_view_t *ipl_policy_view_new(const char *sub_endpoint, const char *req_endpoint);
void ipl_policy_view_destroy(ipl_policy_view_t **self_p);

/* The newest policy, or NULL when none has arrived yet. Release with
 * ipl_policy_view_release. Thread-safe. */
ipl_policy_snap_t *ipl_policy_view_get(ipl_policy_view_t *self);
void ipl_policy_view_release(ipl_policy_view_t *self, ipl_policy_snap_t **snap_p);
/* Version of the newest policy (0 = none). */
uint64_t ipl_policy_view_version(ipl_policy_view_t *self);
/* Frames that failed to decode (counted, logged rate-limited, dropped). */
uint64_t ipl_policy_view_dropped(ipl_policy_view_t *self);

#endif
