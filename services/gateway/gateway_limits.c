/*
 * gateway_limits — per-tenant limits in the gateway: policy → limits_table, the gossip
 * thread, admission and its headers, settling with costs. See gateway_limits.h.
 */
#include "gateway_limits.h"

#include <czmq.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "ipl_clock.h"
#include "ipl_curve.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_proto.h"
#include "ipl_split.h"
#include "ipl_zmq.h"
#include "limits_format.h"

#define S_MAX_STATS 4096

struct gateway_limits {
    limits_table_t *table;
    ipl_metrics_t *metrics;
    char id[256];
    uint64_t incarnation;
    int interval_ms;
    zsock_t *pub, *sub; /* used only by the gossip thread once it runs */
    pthread_t thread;
    bool running;
    atomic_bool stop;
    atomic_uint_fast64_t version; /* the policy version the table holds */
    pthread_mutex_t set_lock;     /* one table update at a time */
    uint64_t seq;
    ipl_metric_t *sent, *received, *malformed;
};

static int64_t s_now(void)
{
    return (int64_t)ipl_wall_ms();
}

const char *gateway_limits_id(const gateway_limits_t *self)
{
    return self->id;
}

/* ---- gossip -------------------------------------------------------------------------------- */

/* Sent at the start of interval `epoch`: the usage of every admission before it. */
static void s_publish(gateway_limits_t *self, uint64_t epoch)
{
    ipl_limits_usage_t msg = {.replica = self->id,
                              .incarnation = self->incarnation,
                              .seq = ++self->seq,
                              .interval_ms = (uint64_t)self->interval_ms,
                              .epoch = epoch};
    msg.tenants = limits_table_usage(self->table, &msg.tenants_len);
    int rc = ipl_msg_send(zsock_resolve(self->pub), IPL_MSG_LIMITS_USAGE, &msg, ZMQ_DONTWAIT);
    free(msg.tenants);
    if (rc == 0)
        ipl_metric_inc(self->sent);
    else
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "limits_gossip_send_failed", "id=%s error=%s", self->id,
                      ipl_strerror(rc));
}

static void s_receive(gateway_limits_t *self)
{
    void *raw = zsock_resolve(self->sub);
    for (int i = 0; i < 256; i++) { /* bounded: the rest waits for the next poll */
        zmq_msg_t part[1];
        int kept = 0;
        size_t frames = ipl_zmq_recv_parts(raw, part, 1, &kept);
        if (!frames) {
            ipl_zmq_close_parts(part, kept);
            return;
        }
        ipl_msg_t msg = {0};
        int rc = frames == 1 ? ipl_msg_decode(zmq_msg_data(&part[0]), zmq_msg_size(&part[0]), &msg)
                             : IPL_E_INVAL;
        ipl_zmq_close_parts(part, kept);
        if (rc == 0 && msg.type != IPL_MSG_LIMITS_USAGE) {
            ipl_msg_clear(&msg);
            rc = IPL_E_UNKNOWN;
        }
        if (rc != 0) {
            ipl_metric_inc(self->malformed);
            IPL_LOG_EVERY(10, IPL_LOG_WARN, "limits_gossip_malformed", "frames=%zu error=%s",
                          frames, ipl_strerror(rc));
            continue;
        }
        const ipl_limits_usage_t *u = &msg.u.limits_usage;
        if (u->replica && strcmp(u->replica, self->id) != 0) {
            if (limits_table_apply(self->table, u, s_now()) < 0)
                IPL_LOG_EVERY(10, IPL_LOG_WARN, "limits_too_many_peers",
                              "peer=%s max=%d (its usage is not counted)", u->replica,
                              LIMITS_MAX_PEERS);
            ipl_metric_inc(self->received);
        }
        ipl_msg_clear(&msg);
    }
}

/* Publishes at the start of every interval of the wall clock (as every replica does: the
 * leases of an interval wait a little for the reports from its start, limits_table.h), and
 * applies the peers' reports in between. */
static void *s_gossip(void *arg)
{
    gateway_limits_t *self = arg;
    uint64_t iv = (uint64_t)self->interval_ms, sent = 0;
    while (!atomic_load(&self->stop)) {
        uint64_t epoch = ipl_wall_ms() / iv;
        if (epoch != sent) {
            if (self->pub) s_publish(self, epoch);
            sent = epoch;
        }
        long wait = (long)((epoch + 1) * iv - ipl_wall_ms());
        if (wait < 0) wait = 0;
        if (wait > (long)iv) wait = (long)iv; /* a clock stepped back */
        if (self->sub) {
            zmq_pollitem_t item = {.socket = zsock_resolve(self->sub), .events = ZMQ_POLLIN};
            if (zmq_poll(&item, 1, wait) > 0) s_receive(self);
        } else {
            ipl_sleep_ms((uint64_t)wait);
        }
    }
    return NULL;
}

/* ---- metrics ------------------------------------------------------------------------------- */

static void s_collect(void *arg, ipl_metrics_t *metrics)
{
    gateway_limits_t *self = arg;
    int64_t now = s_now();
    limits_tenant_stats_t *st = malloc(S_MAX_STATS * sizeof *st);
    if (!st) return;
    size_t n = limits_table_stats(self->table, now, st, S_MAX_STATS);
    if (n > S_MAX_STATS) n = S_MAX_STATS;
    ipl_metric_set(ipl_metrics_gauge(metrics, "inferplane_gateway_limits_replicas",
                                     "Gateway replicas sharing the limits (live, this one "
                                     "included).",
                                     NULL),
                   (double)limits_table_replicas(self->table, now));
    for (size_t i = 0; i < n; i++) {
        char tenant[256], labels[384];
        ipl_metrics_escape(tenant, sizeof tenant, st[i].tenant);
        snprintf(labels, sizeof labels, "tenant=\"%s\"", tenant);
        ipl_metric_t *adm =
            ipl_metrics_counter(metrics, "inferplane_gateway_limits_admitted_total",
                                "Requests admitted by the limits, by tenant.", labels);
        double was = ipl_metric_value(adm);
        if ((double)st[i].admitted > was) ipl_metric_add(adm, (double)st[i].admitted - was);
        if (!st[i].limited) continue;
        ipl_metric_set(ipl_metrics_gauge(metrics, "inferplane_gateway_limits_inflight",
                                         "Requests in flight, cluster-wide (this replica's and "
                                         "the live peers' last reports), by tenant.",
                                         labels),
                       (double)(st[i].inflight + st[i].peers_inflight));
        ipl_metric_set(ipl_metrics_gauge(metrics, "inferplane_gateway_limits_cost_usd_today",
                                         "Cost charged since 00:00 UTC, USD, by tenant.", labels),
                       (double)st[i].spent_micros_today / 1e6);
        for (int d = 0; d < 3; d++) {
            snprintf(labels, sizeof labels, "tenant=\"%s\",limit=\"%s\"", tenant,
                     limits_dim_name((limits_dim_t)d));
            ipl_metric_set(ipl_metrics_gauge(metrics, "inferplane_gateway_limits_remaining",
                                             "What the tenant's bucket holds now (requests or "
                                             "tokens; negative: in debt), by limit.",
                                             labels),
                           st[i].level[d]);
        }
    }
    free(st);
}

/* ---- life cycle ---------------------------------------------------------------------------- */

/* The PUB (at most 100 reports queued: older ones are superseded anyway) or the SUB (every
 * message) socket; NULL with err filled. */
static zsock_t *s_socket(int type, char *err, size_t errlen)
{
    zsock_t *sock = zsock_new(type);
    if (!sock) {
        snprintf(err, errlen, "cannot create the limits %s socket",
                 type == ZMQ_PUB ? "PUB" : "SUB");
        return NULL;
    }
    zsock_set_linger(sock, 0);
    if (type == ZMQ_PUB) zsock_set_sndhwm(sock, 100);
    type == ZMQ_PUB ? ipl_curve_server(sock) : ipl_curve_client(sock); /* ipl_curve.h */
    if (type == ZMQ_SUB) {
        zsock_set_rcvhwm(sock, 1000);
        zsock_set_subscribe(sock, "");
    }
    return sock;
}

gateway_limits_t *gateway_limits_new(const gateway_limits_config_t *cfg, ipl_metrics_t *metrics,
                                     char *err, size_t errlen)
{
    gateway_limits_t *self = calloc(1, sizeof *self);
    if (!self) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    self->metrics = metrics;
    self->interval_ms = cfg->interval_ms > 0 ? cfg->interval_ms : 50;
    pthread_mutex_init(&self->set_lock, NULL);
    if (getrandom(&self->incarnation, sizeof self->incarnation, 0) != sizeof self->incarnation)
        self->incarnation = ipl_mono_ns() ^ ((uint64_t)getpid() << 32);
    if (cfg->id && cfg->id[0]) {
        snprintf(self->id, sizeof self->id, "%s", cfg->id);
    } else {
        char host[128] = "";
        gethostname(host, sizeof host - 1);
        snprintf(self->id, sizeof self->id, "%s/%d/%s", host, (int)getpid(),
                 cfg->listen && cfg->listen[0] ? cfg->listen : "-");
    }
    limits_options_t opt = {.interval_ms = self->interval_ms,
                            .peer_timeout_ms = cfg->peer_timeout_ms};
    self->table = limits_table_new(&opt);
    self->sent =
        ipl_metrics_counter(metrics, "inferplane_gateway_limits_gossip_sent_total",
                            "LIMITS_USAGE messages published to the other gateways.", NULL);
    self->received =
        ipl_metrics_counter(metrics, "inferplane_gateway_limits_gossip_received_total",
                            "LIMITS_USAGE messages applied from other gateways.", NULL);
    self->malformed = ipl_metrics_counter(
        metrics, "inferplane_gateway_limits_gossip_malformed_total",
        "Frames on the limits SUB socket that were not a LIMITS_USAGE (dropped).", NULL);
    if (cfg->listen && cfg->listen[0]) {
        if (!(self->pub = s_socket(ZMQ_PUB, err, errlen))) goto fail;
        if (ipl_zmq_bind(zsock_resolve(self->pub), cfg->listen, "--limits-listen", NULL,
                         "use a free tcp://host:port that the other gateways can reach", err,
                         errlen) != 0)
            goto fail;
    }
    size_t npeers = 0;
    const char *cursor = cfg->peers, *item;
    size_t len;
    while (ipl_split_next(&cursor, &item, &len)) {
        if (!self->sub && !(self->sub = s_socket(ZMQ_SUB, err, errlen))) goto fail;
        char ep[512];
        snprintf(ep, sizeof ep, "%.*s", (int)(len < sizeof ep ? len : sizeof ep - 1), item);
        if (zsock_connect(self->sub, "%s", ep) < 0) {
            snprintf(err, errlen,
                     "cannot connect --limits-peers \"%s\": use the other gateways' "
                     "--limits-listen endpoints, tcp://host:port, comma-separated",
                     ep);
            goto fail;
        }
        if (!cfg->listen || strcmp(ep, cfg->listen) != 0) npeers++; // a shared list may name us
    }
    // Until the peers have had time to report, lease as if they were all there.
    int64_t timeout = cfg->peer_timeout_ms > 0 ? cfg->peer_timeout_ms : 20 * self->interval_ms;
    limits_table_expect(self->table, 1 + npeers, s_now() + timeout);
    if (self->pub || self->sub) {
        if (pthread_create(&self->thread, NULL, s_gossip, self) != 0) {
            snprintf(err, errlen, "cannot start the limits gossip thread");
            goto fail;
        }
        self->running = true;
    }
    ipl_metrics_on_collect(metrics, s_collect, self);
    IPL_INFO("limits", "id=%s listen=%s peers=%zu interval_ms=%d", self->id,
             cfg->listen && cfg->listen[0] ? cfg->listen : "-", npeers, self->interval_ms);
    return self;
fail:
    gateway_limits_destroy(&self);
    return NULL;
}

void gateway_limits_destroy(gateway_limits_t **self_p)
{
    if (!self_p || !*self_p) return;
    gateway_limits_t *self = *self_p;
    atomic_store(&self->stop, true);
    if (self->running) pthread_join(self->thread, NULL);
    zsock_destroy(&self->pub);
    zsock_destroy(&self->sub);
    limits_table_destroy(&self->table);
    pthread_mutex_destroy(&self->set_lock);
    free(self);
    *self_p = NULL;
}

/* ---- admission ----------------------------------------------------------------------------- */

void gateway_limits_policy(gateway_limits_t *self, const ipl_policy_t *policy)
{
    pthread_mutex_lock(&self->set_lock);
    if (policy->version > atomic_load(&self->version)) {
        limits_table_set(self->table, policy->limits, policy->limits_len, s_now());
        atomic_store(&self->version, policy->version);
    }
    pthread_mutex_unlock(&self->set_lock);
}

/* Brings the table to the policy version the view holds (when no attach hook did). */
static void s_follow(gateway_limits_t *self, ipl_policy_view_t *view)
{
    uint64_t v = view ? ipl_policy_view_version(view) : 0;
    if (v <= atomic_load(&self->version)) return;
    ipl_policy_snap_t *snap = ipl_policy_view_get(view);
    if (snap) gateway_limits_policy(self, snap->policy);
    if (snap) ipl_policy_view_release(view, &snap);
}

static void s_headers(const limits_verdict_t *v, gateway_limits_header_fn *set, void *resp)
{
    char value[32];
    if (v->has_requests) {
        snprintf(value, sizeof value, "%" PRIu64, v->limit_requests);
        set(resp, "x-ratelimit-limit-requests", value);
        snprintf(value, sizeof value, "%" PRIu64, v->remaining_requests);
        set(resp, "x-ratelimit-remaining-requests", value);
        set(resp, "x-ratelimit-reset-requests",
            limits_format_reset(value, sizeof value, v->reset_requests_ms));
    }
    if (v->has_tokens) {
        snprintf(value, sizeof value, "%" PRIu64, v->limit_tokens);
        set(resp, "x-ratelimit-limit-tokens", value);
        snprintf(value, sizeof value, "%" PRIu64, v->remaining_tokens);
        set(resp, "x-ratelimit-remaining-tokens", value);
        set(resp, "x-ratelimit-reset-tokens",
            limits_format_reset(value, sizeof value, v->reset_tokens_ms));
    }
}

static void s_resp_header(void *resp, const char *name, const char *value)
{
    ipl_http_resp_header(resp, name, value);
}

int gateway_limits_admit(gateway_limits_t *self, ipl_policy_view_t *policy, const char *tenant,
                         uint64_t prompt_tokens, int64_t max_tokens, limits_handle_t *h,
                         ipl_http_resp_t *resp, gateway_api_error_t *err, int *retry_after_s)
{
    return gateway_limits_decide(self, policy, tenant, prompt_tokens, max_tokens, h, s_resp_header,
                                 resp, err, retry_after_s);
}

int gateway_limits_decide(gateway_limits_t *self, ipl_policy_view_t *policy, const char *tenant,
                          uint64_t prompt_tokens, int64_t max_tokens, limits_handle_t *h,
                          gateway_limits_header_fn *set, void *arg, gateway_api_error_t *err,
                          int *retry_after_s)
{
    s_follow(self, policy);
    limits_verdict_t v;
    bool ok = limits_table_admit(self->table, tenant, prompt_tokens,
                                 max_tokens > 0 ? (uint64_t)max_tokens : 0, s_now(), h, &v);
    s_headers(&v, set, arg);
    if (ok) return 0;
    char t[256], labels[384];
    ipl_metrics_escape(t, sizeof t, tenant && tenant[0] ? tenant : "");
    snprintf(labels, sizeof labels, "tenant=\"%s\",limit=\"%s\"", t, limits_dim_name(v.refused));
    ipl_metric_inc(ipl_metrics_counter(self->metrics, "inferplane_gateway_ratelimited_total",
                                       "Requests refused with 429 by a tenant's limit.", labels));
    int64_t secs = limits_format_retry_after_s(v.retry_after_ms);
    *retry_after_s = secs > 0 ? (int)secs : 1;
    const char *who = tenant && tenant[0] ? tenant : "(anonymous)";
    if (v.refused == LIMITS_COST)
        gateway_api_error_set(err, 429, "rate_limit_error", NULL, "rate_limit_exceeded",
                              "tenant `%s` has spent its daily cost budget (costPerDayUsd %g, "
                              "InferencePolicy spec.limits); it resets at 00:00 UTC, in %d s",
                              who, (double)v.refused_limit / 1e6, *retry_after_s);
    else
        gateway_api_error_set(err, 429, "rate_limit_error", NULL, "rate_limit_exceeded",
                              "rate limit exceeded for tenant `%s`: %s %" PRIu64
                              " (InferencePolicy spec.limits, cluster-wide); retry after %d s",
                              who, limits_dim_field(v.refused), v.refused_limit, *retry_after_s);
    return IPL_E_AGAIN;
}

/* micro-USD for tokens at a price in micros per million tokens, rounded up. */
static uint64_t s_cost(uint64_t tokens, uint64_t micros_per_mtok)
{
    return (tokens * micros_per_mtok + 999999) / 1000000;
}

uint64_t gateway_limits_cost_micros(ipl_policy_view_t *policy, const char *provider,
                                    uint64_t prompt_tokens, uint64_t completion_tokens)
{
    if (!provider || !provider[0] || !policy) return 0;
    uint64_t cost = 0;
    ipl_policy_snap_t *snap = ipl_policy_view_get(policy);
    for (uint32_t i = 0; snap && i < snap->policy->providers_len; i++) {
        const ipl_provider_t *p = &snap->policy->providers[i];
        if (p->name && !strcmp(p->name, provider)) {
            cost = s_cost(prompt_tokens, p->input_micros_per_mtok) +
                   s_cost(completion_tokens, p->output_micros_per_mtok);
            break;
        }
    }
    if (snap) ipl_policy_view_release(policy, &snap);
    return cost;
}

void gateway_limits_settle(gateway_limits_t *self, limits_handle_t *h, uint64_t completion_tokens,
                           uint64_t cost_micros)
{
    if (!h || !h->tenant) return;
    limits_table_settle(self->table, h, completion_tokens, cost_micros, s_now());
}
