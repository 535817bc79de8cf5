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

/* An immutable compiled policy. `policy` points into the snapshot; `attached` is what the
 * view's attach hook built from it (NULL without a hook, or when the hook returned NULL). */
typedef struct ipl_policy_snap {
    const ipl_policy_t *policy;
    void *attached;
    /* private */
    ipl_msg_t msg;
    int refs;
} ipl_policy_snap_t;

/* Connects to `sub_endpoint` (PUB of the policy service) and `req_endpoint` (its ROUTER).
 * Either may be NULL or "" to skip it. NULL on failure. */
ipl_policy_view_t *ipl_policy_view_new(const char *sub_endpoint, const char *req_endpoint);

/* Built once per policy version that the view installs, on the view's thread, before readers
 * can see it (e.g. the decider's compiled rules, which borrow the policy's strings): `attach`
 * returns the object (NULL is allowed: the snapshot carries NULL), `detach` frees it when
 * the snapshot's last reference goes. Both get `arg`. */
typedef void *(ipl_policy_view_attach_fn)(void *arg, const ipl_policy_t *policy);
typedef void(ipl_policy_view_detach_fn)(void *arg, void *attached);

/* ipl_policy_view_new with an attach hook (attach and detach both set, or both NULL). */
ipl_policy_view_t *ipl_policy_view_new_attached(const char *sub_endpoint, const char *req_endpoint,
                                                ipl_policy_view_attach_fn *attach,
                                                ipl_policy_view_detach_fn *detach, void *arg);
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
