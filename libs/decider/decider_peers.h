/*
 * decider_peers — the decider replicas tell each other what they route, so that two replicas
 * never both think a worker is idle.
 *
 *   decision (any thread) ──decider_peers_publish──► PUB (bind --peer-pub) ──ROUTED──┐
 *                                                                                     ▼
 *   other replicas' PUB ──ROUTED──► SUB (connect --peers) ──decider_peers_drain──► the
 *                                    (loop thread)            ledger lent in the config
 *                                                             (decider_ledger_post)
 *
 * A received ROUTED counts exactly like a local decision: the worker has it in flight until a
 * load sample newer than its ts_ms, and is assumed to hold its blocks for the optimistic TTL.
 * ROUTED messages from this decider's own id (a --peers list that names itself) are ignored.
 * Each sender numbers its ROUTED messages; a jump counts as lost (PUB drops at its HWM), which
 * is only ever an under-count of in-flight work, never an error.
 *
 * Threads: decider_peers_publish from any thread (the PUB socket is used under a mutex);
 * everything else from the loop thread, except decider_peers_stats (any thread).
 */
#ifndef DECIDER_PEERS_H
#define DECIDER_PEERS_H

#include <stddef.h>
#include <stdint.h>

#include "decider_ledger.h"
#include "ipl_proto.h"

#define DECIDER_PEERS_MAX_HASHES 1024 /* leading block hashes sent per ROUTED */
#define DECIDER_PEERS_MAX        64   /* distinct peer ids tracked for loss counting */

typedef struct decider_peers decider_peers_t;

/* Called for a frame the SUB drops (`reason`: an ipl_strerror text, "frames",
 * "unexpected_type"). */
typedef void(decider_peers_drop_fn)(void *arg, const char *reason);

typedef struct {
    const char *id;           /* this decider's id, sent in every ROUTED (copied) */
    const char *pub;          /* endpoint to bind the PUB on; NULL or "": publish nothing */
    const char *const *peers; /* endpoints of the other replicas' PUBs to connect the SUB to */
    size_t npeers;
    decider_peers_drop_fn *on_drop; /* may be NULL */
    void *drop_arg;
    decider_ledger_t *ledger; /* borrowed, must outlive the peers: where received ROUTED go
                                 (the router's, decider_router_config_t.ledger); required
                                 when npeers > 0 */
} decider_peers_config_t;

/* Binds/connects. NULL with a human message in `err` on failure. */
decider_peers_t *decider_peers_new(const decider_peers_config_t *config, char *err, size_t errlen);
void decider_peers_destroy(decider_peers_t **self_p);

/* The raw SUB socket to poll for ZMQ_POLLIN, or NULL when there are no peers. */
void *decider_peers_socket(decider_peers_t *self);

/* One routing decided here. `hashes` are the prompt's block hashes (NULL/0 when they were
 * computed with another block size than the worker's); at most DECIDER_PEERS_MAX_HASHES are
 * sent. Any thread. Returns 0, IPL_E_AGAIN (HWM: dropped), or another IPL_E_* code; 0 also
 * when there is no PUB. */
int decider_peers_publish(decider_peers_t *self, const char *worker, const uint64_t *hashes,
                          size_t nhashes, uint64_t block_size, uint64_t prompt_tokens,
                          uint64_t uncached_tokens, uint64_t wall_ms);

/* Loop thread: receives what is waiting on the SUB (up to `budget` frames) and posts each
 * ROUTED to the ledger. */
void decider_peers_drain(decider_peers_t *self, int budget);

/* Handles one decoded ROUTED (what decider_peers_drain does per frame). `wall_ms`/`mono_ms`:
 * this process's clocks now. Returns 0 when posted to the ledger, 1 when it was our own
 * (ignored), IPL_E_INVAL when it names no worker or no decider, IPL_E_NOMEM. */
int decider_peers_receive(decider_peers_t *self, const ipl_routed_t *routed, uint64_t wall_ms,
                          uint64_t mono_ms);

typedef struct {
    uint64_t sent;        /* ROUTED published */
    uint64_t send_failed; /* not published (HWM, error) */
    uint64_t received;    /* ROUTED from peers, posted to the ledger */
    uint64_t own;         /* ROUTED from this decider's own id, ignored */
    uint64_t lost;        /* gaps in peers' sequence numbers */
    uint64_t peers_seen;  /* distinct peer ids heard from */
} decider_peers_stats_t;

void decider_peers_stats(decider_peers_t *self, decider_peers_stats_t *out);
const char *decider_peers_id(const decider_peers_t *self);

#endif
