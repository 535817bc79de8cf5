/*
 * decider_server — see the header's diagram. The loop thread owns listen/sub/dealer; the
 * snapshot DEALER is recreated for every snapshot request, so replies to an abandoned
 * request can never mix into the next snapshot.
 */
#include "decider_server.h"

#include <cjson/cJSON.h>
#include <czmq.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decider_http.h"
#include "decider_sync.h"
#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_policy_view.h"
#include "ipl_signal.h"
#include "ipl_tokenizer.h"

#define S_TICK_MS                 100
#define S_FIRST_SNAPSHOT_DELAY_MS 100 // let the SUB's subscription reach the aggregator first
#define S_MAX_ROUTE_FRAME         (16u << 20)
#define S_MAX_STATE_FRAME         IPL_PROTO_MAX_FRAME

static const char *const s_reasons[] = {"cache_hit",   "least_loaded", "load_gate", "load_only",
                                        "random",      "no_pool",      "no_worker", "not_ready",
                                        "bad_request", "overloaded"};
#define S_NREASONS (sizeof s_reasons / sizeof s_reasons[0])

struct decider_server {
    decider_server_config_t config; // endpoint strings borrowed from main
    zsock_t *listen, *sub, *dealer;
    zsock_t *sub_monitor; // PAIR receiving the SUB's connect events
    ipl_policy_view_t *policy;
    decider_sync_t *sync;
    decider_router_t *router;
    ipl_tokenizer_t *tok;
    uint64_t start_ms;
    decider_decision_t decision; // the loop thread's, reused
    ipl_candidate_t *wire;       // ROUTE_REP candidates, reused
    uint32_t wire_cap;

    ipl_metrics_t *metrics;
    ipl_metric_t *m_decisions[S_NREASONS + 1]; // + "other"
    ipl_metric_t *m_latency;
    ipl_metric_t *m_resyncs[DECIDER_RESYNC_NREASONS];
};

// ---- metrics ----------------------------------------------------------------------------------

static void s_drop(decider_server_t *self, const char *socket, const char *reason)
{
    char labels[128];
    snprintf(labels, sizeof labels, "socket=\"%s\",reason=\"%s\"", socket, reason);
    ipl_metric_inc(ipl_metrics_counter(self->metrics, "inferplane_frames_dropped_total",
                                       "Malformed or unexpected frames dropped, by socket and "
                                       "reason.",
                                       labels));
    IPL_LOG_EVERY(10, IPL_LOG_WARN, "frame_dropped", "socket=%s reason=%s", socket, reason);
}

static void s_count_decision(decider_server_t *self, const char *reason, double seconds)
{
    size_t i = 0;
    while (i < S_NREASONS && (!reason || strcmp(s_reasons[i], reason)))
        i++;
    ipl_metric_inc(self->m_decisions[i]);
    if (seconds >= 0) ipl_metric_observe(self->m_latency, seconds);
}

static void s_count_resync(decider_server_t *self, int rc)
{
    if (rc != DECIDER_SYNC_RESYNC) return;
    decider_sync_stats_t st;
    decider_sync_stats(self->sync, &st);
    decider_resync_reason_t r = decider_sync_last_reason(self->sync);
    if (st.synced && r != DECIDER_RESYNC_START) ipl_metric_inc(self->m_resyncs[r]);
}

static uint64_t s_age_ms(const decider_sync_stats_t *st)
{
    uint64_t now = ipl_mono_ms();
    return st->last_delta_ms && now > st->last_delta_ms ? now - st->last_delta_ms : 0;
}

static void s_collect(void *arg, ipl_metrics_t *m)
{
    decider_server_t *self = arg;
    decider_sync_stats_t st;
    decider_sync_stats(self->sync, &st);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_state_seq",
                                     "State sequence number of the replica.", NULL),
                   (double)st.seq);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_state_lag_seconds",
                                     "Time since the last message from the aggregator.", NULL),
                   st.synced ? (double)s_age_ms(&st) / 1000.0 : 0);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_state_synced",
                                     "1 once a state snapshot was applied.", NULL),
                   st.synced);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_state_buffered",
                                     "Deltas buffered while a snapshot is received.", NULL),
                   (double)st.buffered);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_snapshots",
                                     "State snapshots applied since start.", NULL),
                   (double)st.snapshots);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_state_apply_errors",
                                     "State messages the replica rejected since start.", NULL),
                   (double)st.apply_errors);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_policy_version",
                                     "Version of the policy in use (0: none).", NULL),
                   (double)ipl_policy_view_version(self->policy));
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_optimistic_blocks",
                                     "Block memberships assumed after routing, not yet "
                                     "expired.",
                                     NULL),
                   (double)decider_router_optimistic_blocks(self->router));
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_mean_request_tokens",
                                     "Mean uncached prompt tokens per routed request (EWMA), "
                                     "used for queue wait.",
                                     NULL),
                   decider_router_mean_request_tokens(self->router));
    double workers = 0, blocks = 0, memberships = 0;
    decider_sync_rdlock(self->sync);
    const decider_state_t *state = decider_sync_state(self->sync);
    if (state) {
        const ipl_index_t *index = decider_state_index(state);
        workers = ipl_index_nworkers(index);
        blocks = (double)ipl_index_blocks(index);
        memberships = (double)ipl_index_memberships(index);
    }
    decider_sync_unlock(self->sync);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_state_workers",
                                     "Workers the replica knows.", NULL),
                   workers);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_index_blocks",
                                     "Distinct blocks in the replica's prefix index.", NULL),
                   blocks);
    ipl_metric_set(ipl_metrics_gauge(m, "inferplane_decider_index_memberships",
                                     "(block, worker) pairs in the replica's prefix index.", NULL),
                   memberships);
}

static void s_metrics_init(decider_server_t *self)
{
    ipl_metrics_t *m = self->metrics;
    char labels[64];
    for (size_t i = 0; i <= S_NREASONS; i++) {
        snprintf(labels, sizeof labels, "reason=\"%s\"", i < S_NREASONS ? s_reasons[i] : "other");
        self->m_decisions[i] = ipl_metrics_counter(m, "inferplane_decider_decisions_total",
                                                   "Routing decisions by reason.", labels);
    }
    static const double bounds[] = {5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4,
                                    5e-4, 1e-3, 5e-3,   1e-2, 0.1};
    self->m_latency = ipl_metrics_histogram(m, "inferplane_decider_decision_seconds",
                                            "Time to decide one route request (ZeroMQ and HTTP).",
                                            NULL, bounds, sizeof bounds / sizeof bounds[0]);
    for (int r = 1; r < DECIDER_RESYNC_NREASONS; r++) {
        snprintf(labels, sizeof labels, "reason=\"%s\"", decider_sync_reason_name(r));
        self->m_resyncs[r] = ipl_metrics_counter(m, "inferplane_decider_resyncs_total",
                                                 "State resynchronisations from a snapshot, by "
                                                 "reason.",
                                                 labels);
    }
    ipl_metrics_on_collect(m, s_collect, self);
}

// ---- deciding ---------------------------------------------------------------------------------

/* Decides with the newest policy and the replica; the caller keeps *snap_p referenced while it
 * uses the decision and releases it. Thread-safe. */
static int s_decide(decider_server_t *self, ipl_policy_snap_t *snap, const decider_request_t *req,
                    decider_decision_t *d)
{
    uint64_t t0 = ipl_mono_ns();
    decider_sync_stats_t st;
    decider_sync_stats(self->sync, &st);
    decider_sync_rdlock(self->sync);
    int rc = decider_router_route(self->router, snap ? snap->policy : NULL,
                                  decider_sync_state(self->sync), s_age_ms(&st), req, d);
    decider_sync_unlock(self->sync);
    s_count_decision(self, d->reason, (double)(ipl_mono_ns() - t0) / 1e9);
    return rc;
}

static void s_reply(decider_server_t *self, void *raw, zmq_msg_t *identity, uint64_t req_id,
                    const decider_decision_t *d)
{
    if (d->ncands > self->wire_cap) {
        ipl_candidate_t *w = realloc(self->wire, d->ncands * sizeof *w);
        if (!w) return;
        self->wire = w;
        self->wire_cap = d->ncands;
    }
    for (uint32_t i = 0; i < d->ncands; i++)
        self->wire[i] = d->cands[i].c;
    const ipl_worker_t *w = d->status == IPL_ROUTE_OK ? d->worker : NULL;
    ipl_route_rep_t rep = {
        .req_id = req_id,
        .status = (uint64_t)d->status,
        .reason = (char *)(d->reason ? d->reason : ""),
        .detail = (char *)d->detail,
        .worker = w ? w->name : "",
        .url = w ? w->url : "",
        .pool = d->pool ? d->pool->name : "",
        .model = w ? w->model : "",
        .predicted_ttft_s = w ? d->predicted_ttft_s : 0,
        .cached_tokens = w ? d->cached_tokens : 0,
        .state_seq = d->state_seq,
        .candidates = self->wire,
        .candidates_len = d->ncands,
    };
    if (zmq_send(raw, zmq_msg_data(identity), zmq_msg_size(identity), ZMQ_SNDMORE | ZMQ_DONTWAIT) <
        0)
        return;
    int rc = ipl_msg_send(raw, IPL_MSG_ROUTE_REP, &rep, ZMQ_DONTWAIT);
    if (rc != IPL_OK)
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "route_reply_failed", "reason=%s", ipl_strerror(rc));
}

// One message from the ROUTER: [identity, ROUTE_REQ].
static void s_serve_route(decider_server_t *self)
{
    void *raw = zsock_resolve(self->listen);
    zmq_msg_t parts[2];
    int n = 0;
    bool more = true;
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, raw, n == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close(&part);
            break;
        }
        more = zmq_msg_more(&part);
        if (n < 2)
            parts[n] = part;
        else
            zmq_msg_close(&part);
        n++;
    }
    if (n == 0) return;
    if (n != 2) {
        s_drop(self, "listen", "frames");
    } else {
        ipl_msg_t msg = {0};
        int rc = ipl_msg_decode(zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), &msg);
        if (rc != IPL_OK) {
            s_drop(self, "listen", ipl_strerror(rc));
        } else if (msg.type != IPL_MSG_ROUTE_REQ) {
            s_drop(self, "listen", "unexpected_type");
        } else {
            const ipl_route_req_t *rq = &msg.u.route_req;
            decider_request_t req = {
                .model = rq->model ? rq->model : "",
                .tenant = rq->tenant,
                .strategy = rq->strategy,
                .prompt_tokens = rq->prompt_tokens,
                .block_size = rq->block_size,
                .hashes = rq->hashes,
                .nhashes = rq->hashes_len,
            };
            ipl_policy_snap_t *snap = ipl_policy_view_get(self->policy);
            s_decide(self, snap, &req, &self->decision);
            s_reply(self, raw, &parts[0], rq->req_id, &self->decision);
            ipl_policy_view_release(self->policy, &snap);
        }
        if (rc == IPL_OK) ipl_msg_clear(&msg);
    }
    for (int i = 0; i < n && i < 2; i++)
        zmq_msg_close(&parts[i]);
}

// ---- state ------------------------------------------------------------------------------------

// Receives one state message (a single frame) from `sock`; decodes it into `msg`.
// Returns 1 with a message, 0 when nothing is waiting, -1 for a dropped frame.
static int s_recv_state(decider_server_t *self, zsock_t *sock, const char *name, ipl_msg_t *msg)
{
    void *raw = zsock_resolve(sock);
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    if (zmq_msg_recv(&frame, raw, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&frame);
        return 0;
    }
    if (zmq_msg_more(&frame)) {
        while (zmq_msg_more(&frame)) {
            zmq_msg_close(&frame);
            zmq_msg_init(&frame);
            if (zmq_msg_recv(&frame, raw, 0) < 0) break;
        }
        zmq_msg_close(&frame);
        s_drop(self, name, "frames");
        return -1;
    }
    memset(msg, 0, sizeof *msg);
    int rc = ipl_msg_decode(zmq_msg_data(&frame), zmq_msg_size(&frame), msg);
    zmq_msg_close(&frame);
    if (rc != IPL_OK) {
        s_drop(self, name, ipl_strerror(rc));
        return -1;
    }
    bool ok = msg->type == IPL_MSG_KV_EVENT || msg->type == IPL_MSG_LOAD ||
              (sock == self->dealer && msg->type == IPL_MSG_SNAPSHOT_END);
    if (!ok) {
        ipl_msg_clear(msg);
        s_drop(self, name, "unexpected_type");
        return -1;
    }
    return 1;
}

static void s_request_snapshot(decider_server_t *self)
{
    zsock_destroy(&self->dealer);
    self->dealer = zsock_new(ZMQ_DEALER);
    if (!self->dealer) return;
    zsock_set_linger(self->dealer, 0);
    zsock_set_maxmsgsize(self->dealer, S_MAX_STATE_FRAME);
    zsock_set_rcvhwm(self->dealer, 0); // a snapshot is as long as the state: never drop a part
    if (zsock_connect(self->dealer, "%s", self->config.state_snapshot) != 0) {
        IPL_LOG_EVERY(10, IPL_LOG_ERROR, "snapshot_connect_failed", "endpoint=%s",
                      self->config.state_snapshot);
        return;
    }
    ipl_snapshot_req_t req = {.flags = 0};
    int rc = ipl_msg_send(zsock_resolve(self->dealer), IPL_MSG_SNAPSHOT_REQ, &req, ZMQ_DONTWAIT);
    if (rc != IPL_OK) {
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "snapshot_request_failed", "reason=%s", ipl_strerror(rc));
        return;
    }
    decider_sync_requested(self->sync, ipl_mono_ms());
    IPL_DEBUG("snapshot_requested", "endpoint=%s reason=%s", self->config.state_snapshot,
              decider_sync_reason_name(decider_sync_last_reason(self->sync)));
}

/* The SUB (re)connected to an aggregator: whatever was published while it was away is lost,
 * and the publisher may be a new aggregator whose seq happens to continue ours. Resync. */
static void s_drain_monitor(decider_server_t *self)
{
    void *raw = zsock_resolve(self->sub_monitor);
    for (int budget = 100; budget > 0; budget--) {
        zmq_msg_t event, addr;
        zmq_msg_init(&event);
        if (zmq_msg_recv(&event, raw, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&event);
            return;
        }
        uint16_t id = 0;
        if (zmq_msg_size(&event) >= 2) memcpy(&id, zmq_msg_data(&event), sizeof id);
        bool more = zmq_msg_more(&event);
        zmq_msg_close(&event);
        if (more) { // the endpoint frame
            zmq_msg_init(&addr);
            zmq_msg_recv(&addr, raw, 0);
            zmq_msg_close(&addr);
        }
        if (id == ZMQ_EVENT_CONNECTED) {
            IPL_INFO("state_sub_connected", "endpoint=%s", self->config.state_sub);
            int rc = decider_sync_reset(self->sync, DECIDER_RESYNC_RECONNECT);
            s_count_resync(self, rc);
            s_request_snapshot(self);
        } else if (id == ZMQ_EVENT_DISCONNECTED) {
            IPL_WARN("state_sub_disconnected", "endpoint=%s", self->config.state_sub);
        }
    }
}

static void s_drain_state(decider_server_t *self, zsock_t *sock, const char *name, bool snapshot)
{
    for (int budget = 10000; budget > 0; budget--) {
        ipl_msg_t msg;
        int got = s_recv_state(self, sock, name, &msg);
        if (got == 0) return;
        if (got < 0) continue;
        uint64_t now = ipl_mono_ms();
        int rc = snapshot ? decider_sync_snapshot(self->sync, &msg, now)
                          : decider_sync_delta(self->sync, &msg, now);
        s_count_resync(self, rc);
        if (rc == DECIDER_SYNC_RESYNC) {
            s_request_snapshot(self);
            if (snapshot) return; // that DEALER is gone
        }
    }
}

// ---- life cycle and loop ----------------------------------------------------------------------

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
    self->start_ms = ipl_mono_ms();
    decider_decision_init(&self->decision);
    self->listen = zsock_new(ZMQ_ROUTER);
    self->sub = zsock_new(ZMQ_SUB);
    self->sync = decider_sync_new(config->max_buffered, config->snapshot_timeout_ms);
    self->router = decider_router_new(&config->router);
    self->tok = ipl_tokenizer_new_builtin();
    if (!self->listen || !self->sub || !self->sync || !self->router || !self->tok) {
        snprintf(err, errlen, "out of memory");
        decider_server_destroy(&self);
        return NULL;
    }
    zsock_set_linger(self->listen, 0);
    zsock_set_maxmsgsize(self->listen, S_MAX_ROUTE_FRAME);
    zsock_set_sndhwm(self->listen, 100000);
    zsock_set_rcvhwm(self->listen, 100000);
    if (zsock_bind(self->listen, "%s", config->listen) < 0) {
        snprintf(err, errlen, "cannot bind --listen \"%s\": %s; use a free tcp://host:port",
                 config->listen, zmq_strerror(zmq_errno()));
        decider_server_destroy(&self);
        return NULL;
    }
    zsock_set_linger(self->sub, 0);
    zsock_set_maxmsgsize(self->sub, S_MAX_STATE_FRAME);
    zsock_set_rcvhwm(self->sub, 1000000); // a gap costs a full resync: buffer generously
    zsock_set_subscribe(self->sub, "");
    char monitor[64];
    snprintf(monitor, sizeof monitor, "inproc://decider-sub-monitor-%p", (void *)self);
    if (zmq_socket_monitor(zsock_resolve(self->sub), monitor,
                           ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED) != 0 ||
        !(self->sub_monitor = zsock_new_pair(monitor))) {
        snprintf(err, errlen, "cannot monitor the state SUB socket");
        decider_server_destroy(&self);
        return NULL;
    }
    if (zsock_connect(self->sub, "%s", config->state_sub) != 0) {
        snprintf(err, errlen, "cannot connect --state-sub \"%s\"; use tcp://host:port",
                 config->state_sub);
        decider_server_destroy(&self);
        return NULL;
    }
    self->policy = ipl_policy_view_new(config->policy_sub, config->policy_req);
    if (!self->policy) {
        snprintf(err, errlen,
                 "cannot start the policy view (--policy-sub \"%s\", --policy-req "
                 "\"%s\")",
                 config->policy_sub, config->policy_req);
        decider_server_destroy(&self);
        return NULL;
    }
    s_metrics_init(self);
    return self;
}

void decider_server_destroy(decider_server_t **self_p)
{
    if (!self_p || !*self_p) return;
    decider_server_t *self = *self_p;
    ipl_policy_view_destroy(&self->policy);
    if (self->sub && self->sub_monitor) zmq_socket_monitor(zsock_resolve(self->sub), NULL, 0);
    zsock_destroy(&self->sub_monitor);
    zsock_destroy(&self->listen);
    zsock_destroy(&self->sub);
    zsock_destroy(&self->dealer);
    decider_sync_destroy(&self->sync);
    decider_router_destroy(&self->router);
    ipl_tokenizer_destroy(&self->tok);
    decider_decision_clear(&self->decision);
    free(self->wire);
    free(self);
    *self_p = NULL;
}

void decider_server_run(decider_server_t *self)
{
    while (!ipl_signal_stopping()) {
        uint64_t now = ipl_mono_ms();
        if (now - self->start_ms >= S_FIRST_SNAPSHOT_DELAY_MS) {
            int rc = decider_sync_tick(self->sync, now);
            s_count_resync(self, rc);
            if (rc == DECIDER_SYNC_RESYNC) s_request_snapshot(self);
        }
        zmq_pollitem_t items[5] = {
            {zsock_resolve(self->listen), 0, ZMQ_POLLIN, 0},
            {zsock_resolve(self->sub), 0, ZMQ_POLLIN, 0},
            {zsock_resolve(self->sub_monitor), 0, ZMQ_POLLIN, 0},
            {NULL, ipl_signal_fd(), ZMQ_POLLIN, 0},
            {self->dealer ? zsock_resolve(self->dealer) : NULL, 0, ZMQ_POLLIN, 0},
        };
        int nitems = self->dealer ? 5 : 4;
        if (items[3].fd < 0) { // no signal fd (not installed): poll the rest
            items[3] = items[4];
            nitems--;
        }
        int n = zmq_poll(items, nitems, S_TICK_MS);
        if (n < 0 && zmq_errno() != EINTR) {
            IPL_ERROR("poll_failed", "error=%s", zmq_strerror(zmq_errno()));
            break;
        }
        if (n <= 0) continue;
        if (items[2].revents & ZMQ_POLLIN) s_drain_monitor(self);
        if (items[1].revents & ZMQ_POLLIN) s_drain_state(self, self->sub, "state_sub", false);
        if (self->dealer && (zsock_events(self->dealer) & ZMQ_POLLIN))
            s_drain_state(self, self->dealer, "state_snapshot", true);
        if (items[0].revents & ZMQ_POLLIN)
            for (int i = 0; i < 1000 && (zsock_events(self->listen) & ZMQ_POLLIN); i++)
                s_serve_route(self);
    }
}

// ---- admin ------------------------------------------------------------------------------------

bool decider_server_ready(void *arg, char *detail, size_t size)
{
    decider_server_t *self = arg;
    decider_sync_stats_t st;
    decider_sync_stats(self->sync, &st);
    uint64_t version = ipl_policy_view_version(self->policy);
    if (version && st.synced) {
        snprintf(detail, size, "state_seq=%llu lag_ms=%llu policy_version=%llu%s",
                 (unsigned long long)st.seq, (unsigned long long)s_age_ms(&st),
                 (unsigned long long)version, st.syncing ? " resyncing" : "");
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
    if (decider_http_parse(body ? body : "", len, &r, err, sizeof err) != IPL_OK) {
        s_count_decision(self, "bad_request", -1);
        ipl_http_resp_error(resp, 400, "invalid_request_error", err);
        return;
    }
    ipl_policy_snap_t *snap = ipl_policy_view_get(self->policy);
    uint64_t bs = decider_http_block_size(snap ? snap->policy : NULL, r.model);
    if (decider_http_hash(&r, self->tok, bs) != IPL_OK) {
        ipl_policy_view_release(self->policy, &snap);
        decider_http_request_clear(&r);
        ipl_http_resp_error(resp, 500, "server_error", "out of memory");
        return;
    }
    decider_decision_t d;
    decider_decision_init(&d);
    s_decide(self, snap, &r.req, &d);
    uint64_t prompt_tokens =
        r.req.prompt_tokens ? r.req.prompt_tokens : (uint64_t)r.req.nhashes * bs;
    char *json = decider_http_render(&d, prompt_tokens);
    int status = decider_http_status(d.status);
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
    cJSON_AddNumberToObject(root, "lag_ms", (double)s_age_ms(&st));
    cJSON_AddNumberToObject(root, "snapshots", (double)st.snapshots);
    cJSON_AddNumberToObject(root, "deltas", (double)st.deltas);
    cJSON_AddNumberToObject(root, "buffered", (double)st.buffered);
    cJSON_AddNumberToObject(root, "apply_errors", (double)st.apply_errors);
    cJSON *rs = cJSON_AddObjectToObject(root, "resyncs");
    for (int r = 1; r < DECIDER_RESYNC_NREASONS; r++)
        cJSON_AddNumberToObject(rs, decider_sync_reason_name(r), (double)st.resyncs[r]);
    cJSON_AddNumberToObject(root, "policy_version", (double)ipl_policy_view_version(self->policy));
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
}
