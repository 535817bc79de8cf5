/*
 * decider_server — see the header's diagram. The loop thread owns the listen ROUTER and the
 * state sockets (decider_follow: SUB, its monitor, the snapshot DEALER); the metrics are
 * decider_metrics'.
 */
#include "decider_server.h"

#include <cjson/cJSON.h>
#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "decider_follow.h"
#include "decider_http.h"
#include "decider_ledger.h"
#include "decider_metrics.h"
#include "decider_peers.h"
#include "decider_rules.h"
#include "decider_sync.h"
#include "decider_wire.h"
#include "ipl_clock.h"
#include "ipl_curve.h"
#include "ipl_error.h"
#include "ipl_hash.h"
#include "ipl_log.h"
#include "ipl_loop.h"
#include "ipl_policy_view.h"
#include "ipl_signal.h"
#include "ipl_split.h"
#include "ipl_prompt.h"
#include "ipl_zmq.h"
#include "policy_digest.h"

#define S_TICK_MS         100
#define S_MAX_ROUTE_FRAME (16u << 20)

// What the loop polls (decider_server_run).
enum { S_LISTEN, S_SIGNAL, S_SUB, S_MONITOR, S_DEALER, S_PEERS, S_NITEMS };

struct decider_server {
    decider_server_config_t config; // strings borrowed from main
    char *subs[DECIDER_SERVER_MAX_AGGREGATORS], *snaps[DECIDER_SERVER_MAX_AGGREGATORS];
    size_t nsources;
    char *peer_eps[DECIDER_SERVER_MAX_PEERS];
    size_t npeers;
    char id[128];
    zsock_t *listen;
    decider_follow_t *follow; // the state sockets and the replica (borrows subs, snaps)
    decider_sync_t *sync;     // the follower's replica
    ipl_policy_view_t *policy;
    decider_ledger_t *ledger; // lent to the router and the peers; destroyed after both
    decider_router_t *router;
    decider_peers_t *peers;
    ipl_prompt_t *prompt;
    decider_decision_t decision; // the loop thread's, reused
    decider_wire_t wire;         // ROUTE_REP candidates, reused
    msgpack_sbuffer reply;       // the ROUTE_REP frame, reused (loop thread; zeroed = empty)
    // A socket is quiet when a receive found nothing (EAGAIN) and it was not used since, so
    // its ZMQ_FD becomes readable when anything arrives: the loop polls that fd instead of
    // having zmq_poll ask the socket for ZMQ_EVENTS before and after every wait (a poll() and
    // a getpid() per socket and pass, most of a decision's system calls). The listen ROUTER's
    // is here, the state sockets' are the follower's (decider_follow_socket); the peers'
    // socket is never quiet (decider_peers drains it).
    bool listen_quiet;

    ipl_metrics_t *metrics;
    decider_metrics_t *decider_metrics;
};

// ---- metrics ----------------------------------------------------------------------------------

// A dropped frame (decider_follow_drop_fn; `arg` is the server). Only from the loop, which
// starts once decider_server_new has made the metrics.
static void s_drop(void *arg, const char *socket, const char *reason)
{
    decider_server_t *self = arg;
    decider_metrics_drop(self->decider_metrics, socket, reason);
}

// ---- deciding ---------------------------------------------------------------------------------

/* Tells the other replicas (ROUTED) what was just routed, as the router recorded it: the
 * hashes only when they were computed with the worker's block size. */
static void s_publish_routed(decider_server_t *self, const decider_request_t *req,
                             const decider_decision_t *d)
{
    uint64_t bs = d->worker->block_size;
    bool sizes_match = !req->block_size || req->block_size == bs;
    uint64_t prompt = req->prompt_tokens ? req->prompt_tokens : (uint64_t)req->nhashes * bs;
    uint64_t uncached = prompt > d->cached_tokens ? prompt - d->cached_tokens : 0;
    decider_peers_publish(self->peers, d->worker->name, sizes_match ? req->hashes : NULL,
                          sizes_match ? req->nhashes : 0, bs, prompt, uncached, ipl_wall_ms());
}

/* The policy view's attach hook: the rules of each policy version, compiled once, before any
 * decision can see that version. A policy whose rules do not compile gets none attached, and
 * the router then refuses its requests (503 policy_error) rather than route them unchecked. */
static void *s_attach_rules(void *arg, const ipl_policy_t *policy)
{
    (void)arg;
    if (!policy->rules_len) return NULL;
    decider_rules_t *rules = NULL;
    char err[512] = "";
    if (decider_rules_new(policy, &rules, err, sizeof err) != IPL_OK) {
        IPL_ERROR("policy_rules_invalid", "version=%llu error=\"%s\"",
                  (unsigned long long)policy->version, err);
        return NULL;
    }
    IPL_INFO("policy_rules", "version=%llu rules=%zu", (unsigned long long)policy->version,
             decider_rules_count(rules));
    return rules;
}

static void s_detach_rules(void *arg, void *attached)
{
    (void)arg;
    decider_rules_t *rules = attached;
    decider_rules_destroy(&rules);
}

/* Decides with the newest policy and the replica; the caller keeps *snap_p referenced while it
 * uses the decision and releases it. Thread-safe. */
static int s_decide(decider_server_t *self, ipl_policy_snap_t *snap, const decider_request_t *req,
                    decider_decision_t *d)
{
    uint64_t t0 = ipl_mono_ns();
    decider_sync_stats_t st;
    decider_sync_stats(self->sync, &st);
    decider_request_t q = *req;
    q.rules = snap ? snap->attached : NULL; // built with this very policy (s_attach_rules)
    decider_sync_rdlock(self->sync);
    int rc =
        decider_router_route(self->router, snap ? snap->policy : NULL,
                             decider_sync_state(self->sync), decider_follow_lag_ms(&st), &q, d);
    decider_sync_unlock(self->sync);
    decider_metrics_decision(self->decider_metrics, d->reason, (double)(ipl_mono_ns() - t0) / 1e9);
    if (rc == IPL_ROUTE_OK && d->target == DECIDER_TARGET_WORKER && d->worker)
        s_publish_routed(self, req, d);
    return rc;
}

static void s_reply(decider_server_t *self, void *raw, zmq_msg_t *identity, uint64_t req_id,
                    const decider_decision_t *d, bool observe, bool brief)
{
    msgpack_sbuffer_clear(&self->reply);
    int rc = decider_wire_reply(&self->wire, req_id, d, observe, brief, &self->reply);
    // Encoded before the identity frame goes out, so that a failure leaves no half message.
    if (rc == IPL_OK) {
        if (zmq_send(raw, zmq_msg_data(identity), zmq_msg_size(identity),
                     ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
            return;
        if (zmq_send(raw, self->reply.data, self->reply.size, ZMQ_DONTWAIT) < 0)
            rc = zmq_errno() == EAGAIN ? IPL_E_AGAIN : IPL_E_IO;
    }
    if (rc != IPL_OK)
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "route_reply_failed", "reason=%s", ipl_strerror(rc));
    if (self->reply.alloc > (1u << 20)) { // one huge reply
        msgpack_sbuffer_destroy(&self->reply);
        msgpack_sbuffer_init(&self->reply);
    }
}

// The connection a ROUTER message came on, for decider_router_remember/_feedback: req_ids are
// only unique per gateway, and a gateway reports on the connection it asked on.
static uint64_t s_conn(zmq_msg_t *identity)
{
    return ipl_hash_bytes(zmq_msg_data(identity), zmq_msg_size(identity));
}

// Whether decisions are logged (--log-level debug): one relaxed atomic load per decision, and
// only then are decisions explained (the notes and detail a terse decision skips).
static bool s_log_decisions(void)
{
    return ipl_log_get_level() <= IPL_LOG_DEBUG;
}

// The debug line of one decision: `request_id` (ROUTE_REQ.request_id, the HTTP request's
// x-request-id; NULL or "": "-") ties it to the gateway's, the worker's and the exporter's
// lines about the same request; `detail` is the router's explanation.
static void s_log_decision(const char *via, const char *request_id, const decider_request_t *req,
                           const decider_decision_t *d)
{
    char id[160], detail[sizeof d->detail + 16], tenant[160];
    const char *where = d->target == DECIDER_TARGET_PROVIDER && d->provider ? d->provider->name
                        : d->worker                                         ? d->worker->name
                                                                            : "-";
    IPL_DEBUG("decision",
              "id=%s via=%s tenant=%s model=%s status=%d reason=%s strategy=%s pool=%s "
              "target=%s predicted_ttft_ms=%.2f cached=%" PRIu64 " prompt=%" PRIu64
              " rule=%s%s%s detail=%s",
              ipl_log_quote(id, sizeof id, request_id && *request_id ? request_id : "-"), via,
              ipl_log_quote(tenant, sizeof tenant, req->tenant && *req->tenant ? req->tenant : "-"),
              req->model ? req->model : "-", d->status, d->reason ? d->reason : "-",
              d->strategy ? d->strategy : "-", d->pool ? d->pool->name : "-", where,
              d->predicted_ttft_s * 1e3, d->cached_tokens, d->prompt_tokens,
              d->rule ? d->rule->policy : "-", d->rule ? "/" : "", d->rule ? d->rule->name : "",
              ipl_log_quote(detail, sizeof detail, d->detail));
}

// A ROUTE_REQ: decide, remember the decision for its OBSERVED, answer.
static void s_route_req(decider_server_t *self, void *raw, zmq_msg_t *identity,
                        const ipl_route_req_t *rq)
{
    decider_request_t req = decider_wire_request(rq);
    bool log = s_log_decisions();
    if (log) req.terse = false; // the explanation is what the line is for
    ipl_policy_snap_t *snap = ipl_policy_view_get(self->policy);
    decider_decision_t *d = &self->decision;
    bool observe = s_decide(self, snap, &req, d) == IPL_ROUTE_OK &&
                   decider_router_remember(self->router, s_conn(identity), rq->req_id, d,
                                           ipl_mono_ms()) == IPL_OK;
    s_reply(self, raw, identity, rq->req_id, d, observe, rq->brief && !rq->explain);
    if (log) s_log_decision("route_req", rq->request_id, &req, d);
    ipl_policy_view_release(self->policy, &snap);
}

// One message from the ROUTER: [identity, ROUTE_REQ] (answered) or [identity, OBSERVED].
// False when none was waiting.
static bool s_serve_route(decider_server_t *self)
{
    void *raw = zsock_resolve(self->listen);
    zmq_msg_t parts[2];
    int kept;
    size_t n = ipl_zmq_recv_parts(raw, parts, 2, &kept);
    self->listen_quiet = n == 0 && zmq_errno() == EAGAIN;
    if (n == 2) {
        ipl_msg_t msg = {0};
        int rc = ipl_msg_decode(zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), &msg);
        if (rc != IPL_OK) {
            s_drop(self, "listen", ipl_strerror(rc));
        } else if (msg.type == IPL_MSG_ROUTE_REQ) {
            s_route_req(self, raw, &parts[0], &msg.u.route_req);
        } else if (msg.type == IPL_MSG_OBSERVED) {
            decider_router_feedback(self->router, s_conn(&parts[0]), &msg.u.observed,
                                    ipl_mono_ms());
        } else {
            s_drop(self, "listen", "unexpected_type");
        }
        if (rc == IPL_OK) ipl_msg_clear(&msg);
    } else if (n != 0) {
        s_drop(self, "listen", "frames");
    }
    ipl_zmq_close_parts(parts, kept);
    return n != 0;
}

// ---- life cycle and loop ----------------------------------------------------------------------

static void s_drop_peer(void *arg, const char *reason)
{
    s_drop(arg, "peers", reason);
}

// Binds the ROUTER to every endpoint of `list` (e.g. tcp:// for gateways elsewhere and ipc://
// for one on the same host; a reply goes back on the connection its request came on). 0, or
// -1 with `err` set.
static int s_bind_listen(decider_server_t *self, const char *list, char *err, size_t errlen)
{
    char *eps[DECIDER_SERVER_MAX_LISTEN] = {0};
    int n = ipl_split_dup(list, eps, DECIDER_SERVER_MAX_LISTEN), rc = 0;
    if (n <= 0 || n > DECIDER_SERVER_MAX_LISTEN) {
        snprintf(err, errlen, "--listen takes 1 to %d comma-separated endpoints",
                 DECIDER_SERVER_MAX_LISTEN);
        rc = -1;
    }
    for (int i = 0; i < n && i < DECIDER_SERVER_MAX_LISTEN && rc == 0; i++)
        if (ipl_zmq_bind(zsock_resolve(self->listen), eps[i], "--listen", NULL,
                         "use a free tcp://host:port or an ipc:// path", err, errlen) != 0)
            rc = -1;
    for (int i = 0; i < DECIDER_SERVER_MAX_LISTEN; i++)
        free(eps[i]);
    return rc;
}

// Endpoint lists and the id. 0, or -1 with `err` set.
static int s_parse_config(decider_server_t *self, const decider_server_config_t *config, char *err,
                          size_t errlen)
{
    int nsub = ipl_split_dup(config->state_sub, self->subs, DECIDER_SERVER_MAX_AGGREGATORS);
    int nsnap = ipl_split_dup(config->state_snapshot, self->snaps, DECIDER_SERVER_MAX_AGGREGATORS);
    int npeers = ipl_split_dup(config->peers, self->peer_eps, DECIDER_SERVER_MAX_PEERS);
    if (nsub < 0 || nsnap < 0 || nsub > DECIDER_SERVER_MAX_AGGREGATORS ||
        nsnap > DECIDER_SERVER_MAX_AGGREGATORS) {
        snprintf(err, errlen, "--state-sub and --state-snapshot take at most %d endpoints",
                 DECIDER_SERVER_MAX_AGGREGATORS);
        return -1;
    }
    if (npeers < 0 || npeers > DECIDER_SERVER_MAX_PEERS) {
        snprintf(err, errlen, "--peers takes at most %d endpoints", DECIDER_SERVER_MAX_PEERS);
        return -1;
    }
    if (nsub == 0 || nsub != nsnap) {
        snprintf(err, errlen,
                 "--state-sub lists %d endpoint(s) and --state-snapshot %d: give one of each per "
                 "aggregator, in the same order (e.g. --state-sub tcp://a:7002,tcp://b:7002 "
                 "--state-snapshot tcp://a:7003,tcp://b:7003)",
                 nsub, nsnap);
        return -1;
    }
    self->nsources = (size_t)nsub;
    self->npeers = (size_t)npeers;
    if (config->id && *config->id) {
        snprintf(self->id, sizeof self->id, "%s", config->id);
    } else {
        char host[64] = "decider";
        gethostname(host, sizeof host - 1);
        snprintf(self->id, sizeof self->id, "%s-%ld", host, (long)getpid());
    }
    return 0;
}

decider_server_t *decider_server_new(const decider_server_config_t *config, ipl_metrics_t *metrics,
                                     char *err, size_t errlen)
{
    decider_server_t *self = calloc(1, sizeof *self);
    if (!self) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    self->config = *config;
    self->metrics = metrics;
    decider_decision_init(&self->decision);
    if (s_parse_config(self, config, err, errlen) != 0) {
        decider_server_destroy(&self);
        return NULL;
    }
    self->listen = zsock_new(ZMQ_ROUTER);
    decider_follow_config_t fc = {.subs = (const char *const *)self->subs,
                                  .snaps = (const char *const *)self->snaps,
                                  .nsources = self->nsources,
                                  .max_buffered = config->max_buffered,
                                  .snapshot_timeout_ms = config->snapshot_timeout_ms,
                                  .silence_ms = config->silence_ms,
                                  .on_drop = s_drop,
                                  .drop_arg = self};
    self->follow = decider_follow_new(&fc);
    self->sync = self->follow ? decider_follow_sync(self->follow) : NULL;
    // One ledger, lent to the router (its decisions) and the peers (the other replicas').
    self->ledger = decider_ledger_new(config->router.optimistic_ttl_ms);
    decider_router_config_t rc = config->router;
    rc.ledger = self->ledger;
    self->router = self->ledger ? decider_router_new(&rc) : NULL;
    char tok_err[512] = "";
    self->prompt = ipl_prompt_open(config->tokenizer, tok_err, sizeof tok_err);
    if (!self->prompt) {
        snprintf(err, errlen, "--tokenizer: %s", tok_err);
        decider_server_destroy(&self);
        return NULL;
    }
    if (!self->listen || !self->sync || !self->router) {
        snprintf(err, errlen, "out of memory");
        decider_server_destroy(&self);
        return NULL;
    }
    zsock_set_linger(self->listen, 0);
    zsock_set_maxmsgsize(self->listen, S_MAX_ROUTE_FRAME);
    zsock_set_sndhwm(self->listen, 100000);
    zsock_set_rcvhwm(self->listen, 100000);
    ipl_curve_server(self->listen); /* CURVE with --curve-dir (ipl_curve.h) */
    if (s_bind_listen(self, config->listen, err, errlen) != 0) {
        decider_server_destroy(&self);
        return NULL;
    }
    if (decider_follow_start(self->follow) != 0) {
        snprintf(err, errlen, "cannot connect --state-sub \"%s\"; use tcp://host:port",
                 self->subs[0]);
        decider_server_destroy(&self);
        return NULL;
    }
    decider_peers_config_t pc = {.id = self->id,
                                 .pub = config->peer_pub,
                                 .peers = (const char *const *)self->peer_eps,
                                 .npeers = self->npeers,
                                 .on_drop = s_drop_peer,
                                 .drop_arg = self,
                                 .ledger = self->ledger};
    self->peers = decider_peers_new(&pc, err, errlen);
    if (!self->peers) {
        decider_server_destroy(&self);
        return NULL;
    }
    self->policy = ipl_policy_view_new_attached(config->policy_sub, config->policy_req,
                                                s_attach_rules, s_detach_rules, NULL);
    if (!self->policy) {
        snprintf(err, errlen,
                 "cannot start the policy view (--policy-sub \"%s\", --policy-req "
                 "\"%s\")",
                 config->policy_sub, config->policy_req);
        decider_server_destroy(&self);
        return NULL;
    }
    decider_metrics_sources_t ms = {
        .sync = self->sync, .peers = self->peers, .policy = self->policy, .router = self->router};
    if (!(self->decider_metrics = decider_metrics_new(metrics, &ms))) {
        snprintf(err, errlen, "out of memory");
        decider_server_destroy(&self);
        return NULL;
    }
    return self;
}

void decider_server_destroy(decider_server_t **self_p)
{
    if (!self_p || !*self_p) return;
    decider_server_t *self = *self_p;
    decider_metrics_destroy(&self->decider_metrics); // reads the parts below
    ipl_policy_view_destroy(&self->policy);
    zsock_destroy(&self->listen);
    decider_follow_destroy(&self->follow); // the state sockets and the replica (self->sync)
    self->sync = NULL;
    decider_peers_destroy(&self->peers);
    decider_router_destroy(&self->router);
    decider_ledger_destroy(&self->ledger); // after the two that borrow it
    ipl_prompt_destroy(&self->prompt);
    decider_decision_clear(&self->decision);
    for (size_t i = 0; i < DECIDER_SERVER_MAX_AGGREGATORS; i++) {
        free(self->subs[i]);
        free(self->snaps[i]);
    }
    for (size_t i = 0; i < DECIDER_SERVER_MAX_PEERS; i++)
        free(self->peer_eps[i]);
    decider_wire_clear(&self->wire);
    msgpack_sbuffer_destroy(&self->reply);
    free(self);
    *self_p = NULL;
}

// zmq_poll for items that are all plain fds, in one poll(2) (zmq_poll makes a non-blocking
// pass first, a second system call per wait).
static int s_poll_fds(zmq_pollitem_t *items, int n, long timeout_ms)
{
    struct pollfd fds[S_NITEMS];
    for (int i = 0; i < n; i++)
        fds[i] = (struct pollfd){.fd = items[i].fd, .events = POLLIN};
    int rc = poll(fds, (nfds_t)n, (int)timeout_ms);
    if (rc < 0) return -1; // errno, which zmq_errno() reads
    for (int i = 0; i < n; i++)
        items[i].revents = fds[i].revents & POLLIN ? ZMQ_POLLIN : 0;
    return rc;
}

// Waits for any item (at most S_TICK_MS). With busy_poll_us, first polls without sleeping for
// that long: a message arriving meanwhile is served without the scheduler waking this thread
// (5-15 us a wake-up on a shared VM, two of them per round trip on the decider's side).
static int s_wait(decider_server_t *self, zmq_pollitem_t *items, int nitems, bool only_fds,
                  long timeout_ms)
{
    if (self->config.busy_poll_us) {
        uint64_t end = ipl_mono_ns() + self->config.busy_poll_us * 1000;
        do {
            int n = only_fds ? s_poll_fds(items, nitems, 0) : zmq_poll(items, nitems, 0);
            if (n != 0) return n;
        } while (ipl_mono_ns() < end && !ipl_signal_stopping());
    }
    return only_fds ? s_poll_fds(items, nitems, timeout_ms) : zmq_poll(items, nitems, timeout_ms);
}

// One round of the loop (ipl_loop_round_fn): the state's timers, then a wait on every socket
// that exists now and `stop_fd`, then what is ready.
static int s_round(void *arg, long timeout_ms, int stop_fd)
{
    decider_server_t *self = arg;
    decider_follow_tick(self->follow);
    // Every socket that exists now; `at[k]` is item k's slot in `items`, or -1. A quiet
    // socket is polled by its ZMQ_FD (see `listen_quiet`), any other one as a ZeroMQ
    // socket.
    bool quiet[S_NITEMS] = {[S_LISTEN] = self->listen_quiet};
    void *socks[S_NITEMS] = {
        zsock_resolve(self->listen),
        NULL,
        decider_follow_socket(self->follow, DECIDER_FOLLOW_SUB, &quiet[S_SUB]),
        decider_follow_socket(self->follow, DECIDER_FOLLOW_MONITOR, &quiet[S_MONITOR]),
        decider_follow_socket(self->follow, DECIDER_FOLLOW_DEALER, &quiet[S_DEALER]),
        decider_peers_socket(self->peers),
    };
    zmq_pollitem_t items[S_NITEMS];
    int at[S_NITEMS], nitems = 0;
    bool only_fds = true;
    for (int k = 0; k < S_NITEMS; k++) {
        at[k] = -1;
        int fd = k == S_SIGNAL ? stop_fd : -1;
        if (k == S_SIGNAL ? fd < 0 : !socks[k]) continue;
        size_t len = sizeof fd;
        if (k != S_SIGNAL && quiet[k] && zmq_getsockopt(socks[k], ZMQ_FD, &fd, &len) == 0) {
            items[nitems] = (zmq_pollitem_t){NULL, fd, ZMQ_POLLIN, 0};
        } else {
            items[nitems] = (zmq_pollitem_t){socks[k], fd, ZMQ_POLLIN, 0};
            only_fds &= !socks[k];
        }
        at[k] = nitems++;
    }
    int n = s_wait(self, items, nitems, only_fds, timeout_ms);
    if (n < 0 && zmq_errno() != EINTR) {
        IPL_ERROR("poll_failed", "error=%s", zmq_strerror(zmq_errno()));
        return IPL_E_IO;
    }
    if (n <= 0) return 0;
        // A quiet socket's fd may be readable without a message (a command): draining finds
        // nothing and leaves it quiet again.
#define S_READY(k) (at[k] >= 0 && (items[at[k]].revents & ZMQ_POLLIN))
    const bool state_ready[DECIDER_FOLLOW_NSOCKETS] = {
        [DECIDER_FOLLOW_SUB] = S_READY(S_SUB),
        [DECIDER_FOLLOW_MONITOR] = S_READY(S_MONITOR),
        [DECIDER_FOLLOW_DEALER] = S_READY(S_DEALER),
    };
    decider_follow_serve(self->follow, state_ready);
    if (S_READY(S_PEERS)) decider_peers_drain(self->peers, 10000);
    // Until nothing waits, at most 1000 before the state gets its turn (then the socket
    // is not quiet: the next poll asks it).
    if (S_READY(S_LISTEN))
        for (int i = 0; i < 1000 && s_serve_route(self); i++) {
        }
#undef S_READY
    return 0;
}

void decider_server_run(decider_server_t *self)
{
    (void)ipl_loop_run_rounds(s_round, self, S_TICK_MS);
}

// ---- admin ------------------------------------------------------------------------------------

bool decider_server_ready(void *arg, char *detail, size_t size)
{
    decider_server_t *self = arg;
    decider_sync_stats_t st;
    decider_sync_stats(self->sync, &st);
    uint64_t version = ipl_policy_view_version(self->policy);
    if (version && st.synced) {
        snprintf(detail, size, "state_seq=%llu lag_ms=%llu policy_version=%llu state_sub=%s%s",
                 (unsigned long long)st.seq, (unsigned long long)decider_follow_lag_ms(&st),
                 (unsigned long long)version, self->subs[st.source],
                 st.syncing ? " resyncing" : "");
        return true;
    }
    snprintf(detail, size, "waiting for%s%s", version ? "" : " a policy from the policy service",
             st.synced ? ""
             : version ? " a state snapshot from the aggregator"
                       : " and a state snapshot from the aggregator");
    return false;
}

static void s_http_route(void *arg, const ipl_http_req_t *hreq, ipl_http_resp_t *resp)
{
    decider_server_t *self = arg;
    size_t len = 0;
    const char *body = ipl_http_req_body(hreq, &len);
    decider_http_request_t r;
    char err[384];
    if (decider_http_parse(body ? body : "", len, self->prompt, &r, err, sizeof err) != IPL_OK) {
        decider_metrics_decision(self->decider_metrics, "bad_request", -1);
        ipl_http_resp_error(resp, 400, "invalid_request_error", err);
        return;
    }
    ipl_policy_snap_t *snap = ipl_policy_view_get(self->policy);
    uint64_t bs = decider_http_block_size(snap ? snap->policy : NULL, r.model);
    if (decider_http_hash_for(&r, self->prompt, snap ? snap->policy : NULL, bs) != IPL_OK) {
        ipl_policy_view_release(self->policy, &snap);
        decider_http_request_clear(&r);
        ipl_http_resp_error(resp, 500, "server_error", "out of memory");
        return;
    }
    decider_decision_t d;
    decider_decision_init(&d);
    s_decide(self, snap, &r.req, &d);
    if (s_log_decisions())
        s_log_decision("http", ipl_http_req_header(hreq, "x-request-id"), &r.req, &d);
    uint64_t prompt_tokens =
        r.req.prompt_tokens ? r.req.prompt_tokens : (uint64_t)r.req.nhashes * bs;
    char *json = decider_http_render(&d, prompt_tokens);
    int status = d.status == IPL_ROUTE_REJECTED && d.http_status ? (int)d.http_status
                                                                 : decider_http_status(d.status);
    decider_decision_clear(&d);
    ipl_policy_view_release(self->policy, &snap);
    decider_http_request_clear(&r);
    if (!json) {
        ipl_http_resp_error(resp, 500, "server_error", "out of memory");
        return;
    }
    ipl_http_resp_take(resp, status, "application/json", &json, strlen(json));
}

static const char *s_health(uint64_t h)
{
    return h == IPL_HEALTH_UP ? "up" : h == IPL_HEALTH_DOWN ? "down" : "unknown";
}

static const char *s_kv_state(uint64_t k)
{
    return k == IPL_KV_EXACT ? "exact" : k == IPL_KV_SYNCING ? "syncing" : "degraded";
}

static void s_debug_state(void *arg, const ipl_http_req_t *hreq, ipl_http_resp_t *resp)
{
    (void)hreq;
    decider_server_t *self = arg;
    decider_sync_stats_t st;
    decider_sync_stats(self->sync, &st);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddBoolToObject(root, "synced", st.synced);
    cJSON_AddBoolToObject(root, "resyncing", st.synced && st.syncing);
    cJSON_AddNumberToObject(root, "state_seq", (double)st.seq);
    cJSON_AddNumberToObject(root, "lag_ms", (double)decider_follow_lag_ms(&st));
    char hex[24];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)st.incarnation);
    cJSON_AddStringToObject(root, "incarnation", hex);
    cJSON *src = cJSON_AddObjectToObject(root, "source");
    cJSON_AddNumberToObject(src, "index", (double)st.source);
    cJSON_AddStringToObject(src, "state_sub", self->subs[st.source]);
    cJSON_AddStringToObject(src, "state_snapshot", self->snaps[st.source]);
    cJSON_AddBoolToObject(src, "connected", decider_follow_connected(self->follow));
    cJSON_AddNumberToObject(src, "switches", (double)st.switches);
    cJSON_AddNumberToObject(root, "snapshots", (double)st.snapshots);
    cJSON_AddNumberToObject(root, "deltas", (double)st.deltas);
    cJSON_AddNumberToObject(root, "buffered", (double)st.buffered);
    cJSON_AddNumberToObject(root, "apply_errors", (double)st.apply_errors);
    cJSON *rs = cJSON_AddObjectToObject(root, "resyncs");
    for (int r = 1; r < DECIDER_RESYNC_NREASONS; r++)
        cJSON_AddNumberToObject(rs, decider_sync_reason_name(r), (double)st.resyncs[r]);
    cJSON_AddNumberToObject(root, "policy_version", (double)ipl_policy_view_version(self->policy));
    decider_peers_stats_t ps;
    decider_peers_stats(self->peers, &ps);
    cJSON *peers = cJSON_AddObjectToObject(root, "peers");
    cJSON_AddStringToObject(peers, "id", self->id);
    cJSON_AddStringToObject(peers, "peer_pub", self->config.peer_pub ? self->config.peer_pub : "");
    cJSON *eps = cJSON_AddArrayToObject(peers, "peers");
    for (size_t i = 0; i < self->npeers; i++)
        cJSON_AddItemToArray(eps, cJSON_CreateString(self->peer_eps[i]));
    cJSON_AddNumberToObject(peers, "sent", (double)ps.sent);
    cJSON_AddNumberToObject(peers, "send_failed", (double)ps.send_failed);
    cJSON_AddNumberToObject(peers, "received", (double)ps.received);
    cJSON_AddNumberToObject(peers, "own", (double)ps.own);
    cJSON_AddNumberToObject(peers, "lost", (double)ps.lost);
    cJSON_AddNumberToObject(peers, "peers_heard", (double)ps.peers_seen);
    cJSON_AddNumberToObject(root, "optimistic_blocks",
                            (double)decider_router_optimistic_blocks(self->router));
    cJSON_AddNumberToObject(root, "mean_request_tokens",
                            decider_router_mean_request_tokens(self->router));
    cJSON *workers = cJSON_AddArrayToObject(root, "workers");
    uint64_t now = ipl_mono_ms();
    decider_sync_rdlock(self->sync);
    const decider_state_t *state = decider_sync_state(self->sync);
    if (state) {
        const ipl_index_t *index = decider_state_index(state);
        cJSON *ix = cJSON_AddObjectToObject(root, "index");
        cJSON_AddNumberToObject(ix, "blocks", (double)ipl_index_blocks(index));
        cJSON_AddNumberToObject(ix, "memberships", (double)ipl_index_memberships(index));
        cJSON_AddNumberToObject(ix, "memory_bytes", (double)ipl_index_memory_bytes(index));
        for (int id = 0; id < ipl_index_nworkers(index); id++) {
            const decider_worker_t *w = decider_state_worker(state, id);
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "name", ipl_index_worker_name(index, id));
            cJSON_AddBoolToObject(o, "has_load", w->has_load);
            cJSON_AddStringToObject(o, "health", s_health(w->health));
            cJSON_AddStringToObject(o, "kv_state", s_kv_state(w->kv_state));
            cJSON_AddNumberToObject(o, "running", (double)w->running);
            cJSON_AddNumberToObject(o, "waiting", (double)w->waiting);
            cJSON_AddNumberToObject(o, "kv_usage", w->kv_usage);
            cJSON_AddNumberToObject(o, "blocks", (double)ipl_index_worker_blocks(index, id));
            cJSON_AddNumberToObject(o, "kv_events", (double)w->kv_events);
            cJSON_AddNumberToObject(o, "sample_ts_ms", (double)w->ts_ms);
            cJSON_AddNumberToObject(o, "age_ms",
                                    (double)(now > w->updated_ms ? now - w->updated_ms : 0));
            cJSON_AddItemToArray(workers, o);
        }
    }
    decider_sync_unlock(self->sync);
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) {
        ipl_http_resp_error(resp, 500, "server_error", "out of memory");
        return;
    }
    ipl_http_resp_take(resp, 200, "application/json", &json, strlen(json));
}

void decider_server_register(decider_server_t *self, ipl_httpd_t *httpd)
{
    ipl_httpd_route(httpd, "POST", "/v1/route", s_http_route, self);
    ipl_httpd_route(httpd, "GET", "/debug/state", s_debug_state, self);
    decider_http_register_model(httpd, self->router); // GET /debug/model
    // GET /debug/policy: the version, hash and pools of the policy this decider runs
    ipl_httpd_route(httpd, "GET", "/debug/policy", policy_digest_http, self->policy);
    decider_router_register_metrics(self->router, self->metrics);
}
