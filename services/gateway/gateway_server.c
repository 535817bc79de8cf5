/*
 * gateway_server — per-request orchestration. See gateway_server.h.
 *
 * A request's state lives in an s_call_t. The handler owns it until it hands the client's
 * stream to the transfer (gateway_xfer_attach_to); from then on the transfer's callbacks
 * own it, and s_on_done sends the record and frees it. On every path that ends in the
 * handler (validation error, no route, unreachable worker) the handler records and frees.
 *
 * A provider decision (target_kind "provider") holds a gateway_provider (the backend's
 * credentials and URL, a slot of its spec.maxConnections) from s_forward until the call is
 * freed; its on_write filter passes the response on with the model rewritten.
 *
 * When the decider asks for it (ROUTE_REP.observe), each decision gets exactly one OBSERVED on
 * the decider connection that asked (s_observe): at the first content event of a stream, else
 * when the transfer ends, or with status 0 when the decision is abandoned (unreachable worker,
 * failure before streaming).
 */
#include "gateway_server.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <czmq.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "decider_targets.h"
#include "gateway_api.h"
#include "gateway_auth.h"
#include "gateway_messages.h"
#include "gateway_backend.h"
#include "gateway_drain.h"
#include "gateway_failover.h"
#include "gateway_isolation.h"
#include "gateway_labels.h"
#include "gateway_limits.h"
#include "gateway_models.h"
#include "gateway_provider.h"
#include "gateway_proxy.h"
#include "gateway_queue.h"
#include "gateway_route.h"
#include "gateway_rule_headers.h"
#include "policy_labeller.h"
#include "gateway_sse.h"
#include "gateway_tokenize.h"
#include "gateway_trailer.h"
#include "gateway_verdict.h"
#include "ipl_clock.h"
#include "ipl_curve.h"
#include "ipl_error.h"
#include "ipl_httpd.h"
#include "ipl_log.h"
#include "ipl_policy_view.h"
#include "ipl_unicode.h"
#include "ipl_proto.h"
#include "ipl_prompt.h"
#include "policy_digest.h"
#include "policy_info.h"

#define S_ID_MAX           64         /* request ids and tenants accepted from clients */
#define S_HEADER_VALUE_MAX 256        /* decider strings echoed in response headers */
#define S_SSE_BUFFER       (4u << 20) /* longest SSE line / non-streamed body parsed for usage */

struct gateway_server {
    gateway_server_config_t cfg; /* strings below are owned copies */
    char *listen, *decider, *exporter, *policy_sub, *policy_req, *label_header;
    ipl_metrics_t *metrics;
    gateway_backend_t *backends;
    gateway_auth_t *auth;
    ipl_httpd_t *httpd;
    ipl_prompt_t *prompt; /* --tokenizer: renders, encodes and hashes every prompt */
    ipl_policy_view_t *policy;
    policy_info_t *policy_info; /* inferplane_gateway_policy_info{hash}, set by s_attach */
    gateway_route_t *route;
    gateway_proxy_t *proxy;
    gateway_queue_t *queue; /* requests waiting while their pool is saturated */
    gateway_failover_t *failover; /* retries, their budget, the circuit breakers */
    gateway_tokenize_t *tokenize; /* ids of chats `prompt` cannot render, from workers */
    zsock_t *push; /* to the exporter, guarded by push_lock */
    pthread_mutex_t push_lock;
    atomic_uint_fast64_t next_id;
    uint64_t created_s;
    ipl_metric_t *records_dropped, *deferrals;
};

/* What the gateway builds once per policy version (the policy view's attachment). */
typedef struct {
    gateway_rule_headers_t *headers; /* the header names the rules match on */
    policy_labeller_t *labels;      /* the labeller of spec.labels (NULL: none could build) */
} s_attached_t;

/* One client request. */
typedef struct {
    gateway_server_t *srv;
    gateway_api_kind_t kind;
    uint64_t start_ns;
    char request_id[S_ID_MAX + 1];
    char tenant[S_ID_MAX + 1];
    char *model; /* as asked */
    bool stream;
    uint64_t prompt_tokens; /* our tokenizer's count, when usage does not say */
    /* the decision (owned copies; "" before routing) */
    char *worker, *url, *pool, *reason, *rule, *backend, *strategy;
    bool provider;            /* target_kind "provider": worker is the provider, url its
                                 backend's base URL (shown: no userinfo) */
    gateway_provider_t *trip; /* a provider decision's transfer settings and response */
    gateway_messages_t *msgs; /* /v1/messages: the translation both ways */
    const char *raw;          /* /v1/messages: the client's body (borrowed from the request) */
    size_t raw_len;
    bool passthrough;  /* /v1/messages to a worker that serves it: no translation */
    gateway_labels_t labels; /* its semantic labels (the record's) */
    int retry_after_s; /* a deferral that ran out: the Retry-After to send */
    gateway_queue_hints_t queue_hints; /* x-inferplane-priority, -deadline-ms; max_tokens */
    uint64_t queue_wait_ns;            /* time spent in the fair queue (gateway_queue) */
    uint64_t queue_cost;               /* the tokens it was charged there when let go, or 0 */
    fairq_class_t queue_cls;           /* and in which class */
    double predicted_ttft_s;
    uint64_t predicted_cached;
    /* its observation: wanted by the decider, on connection `conn` */
    bool observe; /* an OBSERVED is still owed for req_id */
    uint64_t conn, req_id;
    uint64_t upstream_ns; /* when the upstream request was started */
    int upstream_status;  /* the worker's HTTP status, once its headers came */
    gateway_sse_t *sse;
    int client_fd;          /* the client's socket (watched for a hang-up), or -1 */
    bool client_gone;       /* it hung up before the response started */
    int attempts;           /* upstream attempts made */
    gateway_avoid_t *avoid; /* the targets the next decision must avoid (ROUTE_REQ.avoid) */
    limits_handle_t limit;    /* its admission by the tenant's limits, settled in s_finish */
    const char *tokenized_by; /* a chat we cannot render: "worker", "worker-cached" or "none"
                                 (x-inferplane-tokenized-by; static), else NULL */
} s_call_t;

/* ---- small helpers ------------------------------------------------------------------------- */

static char *s_strdup0(const char *s)
{
    return strdup(s ? s : "");
}

/* Copies `in` into out keeping only [A-Za-z0-9._:-]; false when empty or too long. */
static bool s_token(char *out, size_t size, const char *in)
{
    if (!in) return false;
    size_t n = strlen(in);
    if (n == 0 || n >= size) return false;
    for (size_t i = 0; i < n; i++) {
        char c = in[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '-';
        if (!ok) return false;
    }
    memcpy(out, in, n + 1);
    return true;
}

/* A header-safe copy of a remote string: control characters become spaces, bounded. */
static void s_header_value(char *out, size_t size, const char *in)
{
    size_t i = 0;
    for (; in && in[i] && i + 1 < size; i++)
        out[i] = (unsigned char)in[i] < 0x20 || in[i] == 0x7f ? ' ' : in[i];
    out[i] = '\0';
}

static s_call_t *s_call_new(gateway_server_t *srv, gateway_api_kind_t kind,
                            const ipl_http_req_t *req)
{
    s_call_t *call = calloc(1, sizeof(*call));
    if (!call) return NULL;
    call->srv = srv;
    call->kind = kind;
    call->start_ns = ipl_mono_ns();
    if (!s_token(call->request_id, sizeof(call->request_id),
                 ipl_http_req_header(req, "x-request-id")))
        snprintf(call->request_id, sizeof(call->request_id), "ipl-%016" PRIx64,
                 (uint64_t)atomic_fetch_add(&srv->next_id, 1));
    call->model = s_strdup0(NULL);
    call->worker = s_strdup0(NULL);
    call->url = s_strdup0(NULL);
    call->pool = s_strdup0(NULL);
    call->reason = s_strdup0(NULL);
    call->rule = s_strdup0(NULL);
    call->backend = s_strdup0(NULL);
    call->strategy = s_strdup0(NULL);
    call->client_fd = ipl_http_req_socket(req);
    return call;
}

static void s_call_free(s_call_t **call_p)
{
    s_call_t *call = *call_p;
    if (!call) return;
    free(call->model);
    free(call->worker);
    free(call->url);
    free(call->pool);
    free(call->reason);
    free(call->rule);
    free(call->backend);
    free(call->strategy);
    gateway_provider_destroy(&call->trip);
    gateway_messages_destroy(&call->msgs);
    gateway_labels_clear(&call->labels);
    gateway_sse_destroy(&call->sse);
    free(call->avoid);
    free(call);
    *call_p = NULL;
}

/* 0 when body[0..len) is UTF-8 (RFC 8259 8.1: JSON text exchanged between systems is), else
 * 400 invalid_utf8 in *err naming the first bad byte: never forwarded to a worker, whose
 * tokenizer would see other text than the gateway's. */
static int s_check_utf8(const char *body, size_t len, gateway_api_error_t *err)
{
    const unsigned char *p = (const unsigned char *)body;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = ipl_utf8_next(p + i, len - i, &cp);
        if (cp == IPL_UNICODE_INVALID) {
            gateway_api_error_set(err, 400, "invalid_request_error", NULL, "invalid_utf8",
                                  "the request body is not valid UTF-8 (byte 0x%02x at offset "
                                  "%zu); send JSON in UTF-8",
                                  p[i], i);
            return IPL_E_INVAL;
        }
        i += n;
    }
    return 0;
}

static void s_replace(char **field, const char *value)
{
    char *copy = s_strdup0(value);
    if (copy) {
        free(*field);
        *field = copy;
    }
}

/* ---- records and request metrics ----------------------------------------------------------- */

static void s_count_request(gateway_server_t *srv, gateway_api_kind_t kind, int status)
{
    char labels[64];
    snprintf(labels, sizeof(labels), "api=\"%s\",status_code=\"%d\"", gateway_api_kind_name(kind),
             status);
    ipl_metric_inc(ipl_metrics_counter(srv->metrics, "inferplane_gateway_requests_total",
                                       "Client API requests answered, by status code.", labels));
}

/* Counts the request, logs it and sends its RECORD (never blocks: a full queue drops it). */
static void s_finish(s_call_t *call, int status, const char *reason, uint64_t end_ns)
{
    gateway_server_t *srv = call->srv;
    s_count_request(srv, call->kind, status);
    const gateway_sse_stats_t *st = call->sse ? gateway_sse_stats(call->sse) : NULL;
    ipl_record_t rec = {0};
    rec.request_id = call->request_id;
    rec.model = call->model;
    rec.tenant = call->tenant;
    rec.pool = call->pool;
    rec.worker = call->worker;
    rec.endpoint = call->url;
    rec.api = (char *)gateway_api_kind_name(call->kind);
    rec.status_code = (uint64_t)status;
    rec.reason = (char *)(reason ? reason : call->reason);
    rec.stream = call->stream;
    rec.e2e_s = (double)(end_ns - call->start_ns) / 1e9;
    rec.predicted_ttft_s = call->predicted_ttft_s;
    rec.labels = call->labels.labels;
    rec.labels_len = call->labels.len;
    rec.prompt_tokens = call->prompt_tokens;
    rec.queue_wait_us = call->queue_wait_ns / 1000; /* in the fair queue (gateway_queue) */
    rec.attempts = (uint64_t)(call->attempts > 0 ? call->attempts : 0);
    rec.target_kind = (char *)(call->worker[0] ? (call->provider ? "provider" : "worker") : "");
    rec.backend = call->backend;
    rec.rule = call->rule;
    rec.strategy = call->strategy;
    if (st) {
        /* TTFT: the first generated text (streams) or the first byte (a JSON body). */
        uint64_t first = gateway_sse_mode(call->sse) == GATEWAY_SSE_STREAM ? st->first_content_ns
                                                                           : st->first_byte_ns;
        if (first > call->start_ns) rec.ttft_s = (double)(first - call->start_ns) / 1e9;
        rec.itl_s = gateway_sse_itl_s(call->sse);
        if (st->usage) {
            rec.prompt_tokens = st->prompt_tokens;
            rec.cached_tokens = st->cached_tokens;
            rec.completion_tokens = st->completion_tokens;
        } else {
            rec.completion_tokens = st->content_events; /* about one token per chunk */
        }
    }
    if (call->queue_cost) /* the fair queue charged an estimate: the tokens really taken */
        gateway_queue_settle(srv->queue, call->model, call->tenant, call->queue_cls,
                             call->queue_cost, rec.prompt_tokens + rec.completion_tokens);
    if (call->worker[0]) gateway_queue_freed(srv->queue, call->model); /* its slot is free */
    /* An access log line: debug for successes (they are in the metrics), info otherwise. */
    ipl_log(status >= 200 && status < 300 ? IPL_LOG_DEBUG : IPL_LOG_INFO, "request",
            "id=%s tenant=%s api=%s model=%s status=%d worker=%s reason=%s ttft_ms=%.1f "
            "e2e_ms=%.1f prompt=%" PRIu64 " cached=%" PRIu64 " completion=%" PRIu64,
            call->request_id, call->tenant[0] ? call->tenant : "-", rec.api,
            call->model[0] ? call->model : "-", status, call->worker[0] ? call->worker : "-",
            rec.reason[0] ? rec.reason : "-", rec.ttft_s * 1e3, rec.e2e_s * 1e3, rec.prompt_tokens,
            rec.cached_tokens, rec.completion_tokens);
    rec.cost_micros = gateway_limits_cost_micros(srv->policy, call->provider ? call->worker : NULL,
                                                 rec.prompt_tokens, rec.completion_tokens);
    rec.outcome = (char *)gateway_verdict_outcome(status, reason, call->attempts, call->provider,
                                                  call->reason);
    if (srv->cfg.limits) /* the tenant's limits: completion tokens, cost, its slot back */
        gateway_limits_settle(srv->cfg.limits, &call->limit, rec.completion_tokens,
                              rec.cost_micros);
    if (!srv->push) return;
    pthread_mutex_lock(&srv->push_lock);
    int rc = ipl_msg_send(zsock_resolve(srv->push), IPL_MSG_RECORD, &rec, ZMQ_DONTWAIT);
    pthread_mutex_unlock(&srv->push_lock);
    if (rc != 0) {
        ipl_metric_inc(srv->records_dropped);
        IPL_LOG_EVERY(10, IPL_LOG_WARN, "record_dropped", "exporter=%s error=%s", srv->exporter,
                      ipl_strerror(rc));
    }
}

/* ---- error responses ----------------------------------------------------------------------- */

static void s_reply_error(ipl_http_resp_t *resp, int status, const char *type, const char *param,
                          const char *code, const char *message)
{
    size_t len = 0;
    char *body = gateway_api_error_body(type, message, param, code, &len);
    if (!body) {
        ipl_http_resp_error(resp, 500, "server_error", "out of memory");
        return;
    }
    ipl_http_resp_take(resp, status, "application/json", &body, len);
}

static void s_observe(s_call_t *call, int status, uint64_t first_ns);

/* x-inferplane-rule: the InferencePolicy rule the decision named, if any. */
static void s_rule_header(const s_call_t *call, ipl_http_resp_t *resp)
{
    if (!call->rule[0]) return;
    char value[S_HEADER_VALUE_MAX];
    s_header_value(value, sizeof(value), call->rule);
    ipl_http_resp_header(resp, "x-inferplane-rule", value);
}

/* Answers with an error, records the request and frees the call. */
static void s_fail(s_call_t **call_p, ipl_http_resp_t *resp, const gateway_api_error_t *err)
{
    s_call_t *call = *call_p;
    s_observe(call, 0, 0); /* a decision that was not followed through */
    s_rule_header(call, resp);
    char value[16];
    if (call->retry_after_s > 0) {
        snprintf(value, sizeof(value), "%d", call->retry_after_s);
        ipl_http_resp_header(resp, "Retry-After", value);
    }
    int status = err->status;
    if (call->kind == GATEWAY_API_MESSAGES) { /* Anthropic's error shape */
        status = gateway_messages_status(err);
        size_t len = 0;
        char *body = gateway_messages_error_body(status, err->message, &len);
        if (body)
            ipl_http_resp_take(resp, status, "application/json", &body, len);
        else
            ipl_http_resp_error(resp, 500, "api_error", "out of memory");
    } else {
        s_reply_error(resp, err->status, err->type, err->param, err->code, err->message);
    }
    s_finish(call, status, err->code ? err->code : err->type, ipl_mono_ns());
    s_call_free(call_p);
}

static void s_decision_headers(const s_call_t *call, ipl_http_resp_t *resp)
{
    char value[S_HEADER_VALUE_MAX];
    /* where it went and what was cached: --expose-routing-headers only (gateway_isolation) */
    bool routing = gateway_isolation_routing_headers();
    if (routing) {
        s_header_value(value, sizeof(value), call->worker);
        ipl_http_resp_header(resp, "x-inferplane-worker", value);
        s_header_value(value, sizeof(value), call->url);
        ipl_http_resp_header(resp, "x-inferplane-endpoint", value);
    }
    s_header_value(value, sizeof(value), call->pool);
    ipl_http_resp_header(resp, "x-inferplane-pool", value);
    if (routing) {
        s_header_value(value, sizeof(value), call->reason);
        ipl_http_resp_header(resp, "x-inferplane-reason", value);
    }
    if (call->tokenized_by)
        ipl_http_resp_header(resp, "x-inferplane-tokenized-by", call->tokenized_by);
    ipl_http_resp_header(resp, "x-inferplane-target-kind", call->provider ? "provider" : "worker");
    if (call->provider) {
        s_header_value(value, sizeof(value), call->backend);
        ipl_http_resp_header(resp, "x-inferplane-backend", value);
    }
    if (routing) {
        snprintf(value, sizeof(value), "%.1f", call->predicted_ttft_s * 1e3);
        ipl_http_resp_header(resp, "x-inferplane-predicted-ttft-ms", value);
        snprintf(value, sizeof(value), "%" PRIu64, call->predicted_cached);
        ipl_http_resp_header(resp, "x-inferplane-cached-tokens", value);
    }
    if (call->queue_wait_ns) { /* it waited in the fair queue before this decision */
        snprintf(value, sizeof(value), "%.1f", (double)call->queue_wait_ns / 1e6);
        ipl_http_resp_header(resp, "x-inferplane-queue-wait-ms", value);
    }
}

/* ---- observations -------------------------------------------------------------------------- */

/* Sends the decision's OBSERVED, once, if the decider asked for it: `status` the worker's HTTP
 * status (0: no usable response), `first_ns` the time of the first content event (streams) or
 * body byte (0: none). The TTFT runs from starting the upstream request: the closest the
 * gateway gets to the worker's own. */
static void s_observe(s_call_t *call, int status, uint64_t first_ns)
{
    if (!call->observe) return;
    call->observe = false;
    const gateway_sse_stats_t *st = call->sse ? gateway_sse_stats(call->sse) : NULL;
    bool usage = st && st->usage;
    ipl_observed_t obs = {
        .req_id = call->req_id,
        .worker = call->worker,
        .status = status > 0 ? (uint64_t)status : 0,
        .stream = call->sse && gateway_sse_mode(call->sse) == GATEWAY_SSE_STREAM,
        .ttft_s = first_ns > call->upstream_ns && call->upstream_ns
                      ? (double)(first_ns - call->upstream_ns) / 1e9
                      : 0,
        .prompt_tokens = usage ? st->prompt_tokens : call->prompt_tokens,
        .cached_tokens = usage ? st->cached_tokens : 0,
        .completion_tokens = usage ? st->completion_tokens : 0,
    };
    (void)gateway_route_observe(call->srv->route, call->conn, &obs); /* counted there */
}

/* ---- streaming callbacks (producer thread) ------------------------------------------------- */

static void s_on_chunk(void *arg, const char *data, size_t len, uint64_t now_ns)
{
    s_call_t *call = arg;
    if (!call->sse) return;
    gateway_sse_feed(call->sse, data, len, now_ns);
    const gateway_sse_stats_t *st = gateway_sse_stats(call->sse);
    if (call->observe && st->first_content_ns && gateway_sse_mode(call->sse) == GATEWAY_SSE_STREAM)
        s_observe(call, call->upstream_status, st->first_content_ns);
}

/* A response on its way to the client: translated to Anthropic's API (/v1/messages), or a
 * provider's with its model rewritten (or its error replaced). */
static int s_on_write(void *arg, int fd, const char *data, size_t len)
{
    s_call_t *call = arg;
    if (call->msgs) return gateway_messages_write(call->msgs, fd, data, len);
    return gateway_provider_write(call->trip, fd, data, len);
}

static void s_on_done(void *arg, const gateway_xfer_result_t *res, int fd)
{
    s_call_t *call = arg;
    gateway_cut_t cut = {.status = res->status}; /* why it broke off, if it did */
    if (!res->ok && !res->client_gone)
        gateway_trailer_classify(res, call->provider ? "provider" : "worker", call->worker, &cut);
    if (call->msgs && !call->passthrough && !res->client_gone)
        gateway_messages_finish(call->msgs, fd, res->ok, res->ok ? NULL : cut.message);
    else if (call->trip && !res->client_gone)
        (void)gateway_provider_finish(call->trip, fd);
    gateway_sse_finish(call->sse, res->end_ns);
    const gateway_sse_stats_t *st = gateway_sse_stats(call->sse);
    /* No content event came (or not a stream): the whole body's first byte, if it is whole. */
    bool whole = gateway_sse_mode(call->sse) != GATEWAY_SSE_STREAM;
    s_observe(call, res->ok ? res->status : 0, res->ok && whole ? st->first_byte_ns : 0);
    int status = res->status;
    const char *reason = NULL;
    if (res->client_gone) {
        status = 499; /* nginx's "client closed request" */
        reason = "client_gone";
    } else if (!res->ok) {
        status = cut.status;
        reason = cut.reason;
        /* The client already has its status line: an event stream ends with an error event
         * (gateway_trailer; a translated /v1/messages stream got Anthropic's above). */
        if ((!call->msgs || call->passthrough) && !whole && !st->done)
            (void)gateway_trailer_write(fd, call->passthrough, &cut);
        IPL_WARN(res->aborted ? "stream_cut_at_shutdown" : "upstream_broken",
                 "id=%s worker=%s reason=%s error=\"%s\"", call->request_id, call->worker, reason,
                 res->aborted ? "the drain timeout passed" : res->error);
    }
    s_finish(call, status, reason, res->end_ns);
    s_call_free(&call);
}

/* ---- the completion endpoints -------------------------------------------------------------- */

/* The LoRA adapter `model` names in the gateway's policy (decider_targets_resolve_lora, as
 * the decider resolves it; an alias at its first target), copied into lora[size]; "" for a
 * base model (or a name too long to be a compiled adapter's). */
static void s_lora(gateway_server_t *srv, const char *model, char *lora, size_t size)
{
    lora[0] = '\0';
    ipl_policy_snap_t *snap = ipl_policy_view_get(srv->policy);
    const char *name = NULL;
    if (snap) (void)decider_targets_resolve_lora(snap->policy, model, 0, NULL, &name);
    if (name && strlen(name) < size) memcpy(lora, name, strlen(name) + 1);
    ipl_policy_view_release(srv->policy, &snap);
}

/* Tokenizes the prompt and hashes its full blocks into a ROUTE_REQ (hashes malloc'd), in the
 * hash space of the request's LoRA adapter (if its model is one) and cache_salt. */
static int s_route_req(gateway_server_t *srv, s_call_t *call, const gateway_api_req_t *api,
                       ipl_route_req_t *rr)
{
    size_t ntok = 0, n = 0, bs = (size_t)srv->cfg.block_size;
    uint64_t *hashes = NULL;
    char lora[512], why[256] = "";
    s_lora(srv, api->model, lora, sizeof lora);
    int rc = 0;
    if (api->worker_tokenize) { /* a chat we cannot render: a worker's ids, or none (load) */
        gateway_tokenize_result_t r = gateway_tokenize_blocks(
            srv->tokenize, srv->policy, srv->prompt, api, lora[0] ? lora : NULL, bs,
            IPL_PROTO_MAX_ARRAY, &hashes, &n, &ntok, why, sizeof why);
        call->tokenized_by = r == GATEWAY_TOKENIZE_WORKER   ? "worker"
                             : r == GATEWAY_TOKENIZE_CACHED ? "worker-cached"
                                                            : "none";
        if (r == GATEWAY_TOKENIZE_FAILED)
            IPL_LOG_EVERY(10, IPL_LOG_WARN, "worker_tokenize_failed",
                          "id=%s model=%s error=\"%s\" (routed without a prefix)",
                          call->request_id, api->model, why);
    } else {
        rc = ipl_prompt_blocks(srv->prompt, api->prompt, api->prompt_len, api->chat, bs,
                               lora[0] ? lora : NULL, api->cache_salt, IPL_PROTO_MAX_ARRAY,
                               &hashes, &n, &ntok);
    }
    if (rc != 0) return rc;
    call->prompt_tokens = ntok;
    memset(rr, 0, sizeof(*rr));
    rr->model = call->model;
    rr->tenant = call->tenant;
    rr->prompt_tokens = ntok;
    rr->block_size = bs;
    rr->hashes = hashes;
    rr->hashes_len = (uint32_t)n;
    rr->strategy = "";
    rr->brief = 1; // only the winner is read: no candidates' figures in the reply
    rr->request_id = call->request_id; // for the decider's log lines about it
    return 0;
}

static const char *s_request_header(void *arg, const char *name)
{
    return ipl_http_req_header(arg, name);
}

/* The ROUTE_REQ's labels (from the trusted header only) and the headers the policy's rules
 * name (the set of the policy version the view holds). 0, or fills *err. */
static int s_route_inputs(gateway_server_t *srv, const ipl_http_req_t *req,
                          const gateway_api_req_t *api, ipl_route_req_t *rr,
                          gateway_labels_t *labels, gateway_api_error_t *err)
{
    if (srv->label_header) {
        int rc = gateway_labels_parse(srv->label_header,
                                      ipl_http_req_header(req, srv->label_header), labels, err);
        if (rc == IPL_E_NOMEM) goto nomem;
        if (rc != 0) return rc;
    }
    ipl_policy_snap_t *snap = ipl_policy_view_get(srv->policy);
    const s_attached_t *a = snap ? snap->attached : NULL;
    /* the prompt's own labels (detectors, the operators' rules and classifier), copied while
     * the snapshot that owns the labeller is held */
    const char *found[GATEWAY_LABELS_MAX];
    size_t n = policy_labeller_eval(a ? a->labels : NULL, api->prompt, api->prompt_len, found,
                                     GATEWAY_LABELS_MAX);
    int rc = gateway_labels_add(labels, found, n < GATEWAY_LABELS_MAX ? n : GATEWAY_LABELS_MAX);
    if (rc == 0)
        rc = gateway_rule_headers_collect(a ? a->headers : NULL, s_request_header, (void *)req,
                                          &rr->headers, &rr->headers_len);
    if (snap) ipl_policy_view_release(srv->policy, &snap);
    rr->labels = labels->labels;
    rr->labels_len = labels->len;
    if (rc == 0) return 0;
nomem:
    gateway_api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    return IPL_E_NOMEM;
}

/* Asks the decider (one question). 0 with the reply in *msg, else fills *err. */
static int s_ask(gateway_server_t *srv, ipl_route_req_t *rr, ipl_msg_t *msg, uint64_t *conn,
                 gateway_api_error_t *err)
{
    int rc = gateway_route_ask_conn(srv->route, rr, msg, conn);
    if (rc == IPL_E_TIMEOUT)
        gateway_api_error_set(err, 503, "server_error", NULL, "route_timeout",
                              "the decider did not answer within %d ms (--decider %s); is "
                              "inferplane-decider running?",
                              gateway_route_timeout_ms(srv->route), srv->decider);
    else if (rc == IPL_E_AGAIN)
        gateway_api_error_set(err, 503, "server_error", NULL, "shutting_down",
                              "the gateway is shutting down");
    else if (rc != 0)
        gateway_api_error_set(err, 503, "server_error", NULL, "route_failed",
                              "cannot reach the decider at %s", srv->decider);
    return rc;
}

/* Asks the decider, holding a DEFERRED request and asking again (retry_after_ms, clamped)
 * until it is decided or --batch-max-wait-ms has passed. 0 with the last reply in *msg
 * (status OK or a refusal: the caller reads it), else fills *err (and the Retry-After). */
static int s_ask_held(gateway_server_t *srv, s_call_t *call, ipl_route_req_t *rr, ipl_msg_t *msg,
                      uint64_t *conn, gateway_api_error_t *err)
{
    uint64_t start = ipl_mono_ms();
    int max_wait = srv->cfg.batch_max_wait_ms > 0 ? srv->cfg.batch_max_wait_ms : 0;
    for (;;) {
        int rc = s_ask(srv, rr, msg, conn, err);
        if (rc != 0) return rc;
        const ipl_route_rep_t *rep = &msg->u.route_rep;
        s_replace(&call->rule, rep->rule);
        s_replace(&call->strategy, rep->strategy);
        if (rep->status != IPL_ROUTE_DEFERRED) return 0;
        ipl_metric_inc(srv->deferrals);
        int pause = gateway_verdict_defer_ms(rep->retry_after_ms);
        uint64_t waited = ipl_mono_ms() - start;
        if (waited + (uint64_t)pause > (uint64_t)max_wait) {
            gateway_verdict_deferred(rep, call->model, waited, err, &call->retry_after_s);
            s_replace(&call->reason, rep->reason);
            ipl_msg_clear(msg);
            return IPL_E_TIMEOUT;
        }
        ipl_msg_clear(msg);
        if (gateway_route_pause(srv->route, pause) != 0) {
            gateway_api_error_set(err, 503, "server_error", NULL, "shutting_down",
                                  "the gateway is shutting down");
            return IPL_E_AGAIN;
        }
    }
}

/* The queue ticket of `call`: its tenant's weight and class by the policy (gateway_queue). */
static void s_queue_ticket(gateway_server_t *srv, s_call_t *call, gateway_queue_ticket_t *t)
{
    uint32_t weight = 1;
    fairq_class_t cls = FAIRQ_STANDARD;
    ipl_policy_snap_t *snap = ipl_policy_view_get(srv->policy);
    gateway_queue_tenant(snap ? snap->policy : NULL, call->tenant, &weight, &cls);
    if (snap) ipl_policy_view_release(srv->policy, &snap);
    gateway_queue_ticket(srv->queue, t, call->model, call->tenant, weight, cls, &call->queue_hints,
                         call->prompt_tokens, call->start_ns);
    t->client_fd = call->client_fd; /* a hang-up while waiting leaves the queue */
}

/* Asks the decider (s_ask_held); while the pool is saturated (OVERLOADED) and queuing is on,
 * waits in the fair queue (gateway_queue, docs/queueing.md) and asks again when let go, so the
 * decision is made with the state at dispatch time. A request for a model that others already
 * wait for joins them before asking. Returns as s_ask_held; a wait that fails fills *err (429
 * queue_timeout or queue_full with Retry-After, 503 shutting_down). */
static int s_ask_queued(gateway_server_t *srv, s_call_t *call, ipl_route_req_t *rr,
                        ipl_msg_t *msg, uint64_t *conn, gateway_api_error_t *err)
{
    gateway_queue_t *q = srv->queue;
    gateway_queue_ticket_t t;
    bool ticket = false;
    int rc = 0;
    if (gateway_queue_busy(q, call->model)) {
        s_queue_ticket(srv, call, &t);
        ticket = true;
        rc = gateway_queue_wait(q, &t, err);
    }
    while (rc == 0) {
        rc = s_ask_held(srv, call, rr, msg, conn, err);
        if (rc != 0 || msg->u.route_rep.status != IPL_ROUTE_OVERLOADED || !gateway_queue_enabled(q))
            break;
        ipl_msg_clear(msg);
        if (!ticket) s_queue_ticket(srv, call, &t);
        ticket = true;
        rc = gateway_queue_wait(q, &t, err);
    }
    if (ticket) {
        if (t.retry_after_s > 0) call->retry_after_s = t.retry_after_s;
        uint64_t waited =
            gateway_queue_leave(q, &t, rc == 0 && msg->u.route_rep.status == IPL_ROUTE_OK);
        call->queue_wait_ns += waited;
        if (rc == 0 && waited) { /* it was let go: what it was charged, to settle when it ends */
            call->queue_cost = t.entry.cost;
            call->queue_cls = t.cls;
        }
    }
    return rc;
}

/* Asks the decider; on OK stores the decision in `call` and returns 0, else fills *err. */
static int s_decide(gateway_server_t *srv, s_call_t *call, ipl_route_req_t *rr, char **model_out,
                    gateway_api_error_t *err)
{
    ipl_msg_t msg = {0};
    s_observe(call, 0, 0); /* the previous decision of this call, abandoned */
    gateway_provider_destroy(&call->trip);
    uint64_t conn = 0;
    int rc = s_ask_queued(srv, call, rr, &msg, &conn, err);
    if (rc != 0) return rc;
    const ipl_route_rep_t *rep = &msg.u.route_rep;
    if (rep->status != IPL_ROUTE_OK) {
        gateway_verdict_error(rep, call->model, err);
        s_replace(&call->reason, rep->reason);
        ipl_msg_clear(&msg);
        return IPL_E_NOTFOUND;
    }
    const char *kind = rep->target_kind && rep->target_kind[0] ? rep->target_kind : "worker";
    bool provider = !strcmp(kind, "provider");
    if (!provider && strcmp(kind, "worker") != 0) {
        gateway_api_error_set(err, 502, "server_error", NULL, "bad_decision",
                              "the decider chose a target of unknown kind `%.64s`", kind);
        ipl_msg_clear(&msg);
        return IPL_E_INVAL;
    }
    if (provider ? !rep->backend || !rep->backend[0] : !rep->url || !rep->url[0]) {
        gateway_api_error_set(err, 502, "server_error", NULL, "bad_decision",
                              "the decider chose %s `%s` without %s", kind,
                              rep->worker ? rep->worker : "", provider ? "a backend" : "a URL");
        ipl_msg_clear(&msg);
        return IPL_E_INVAL;
    }
    char shown[2048];
    s_replace(&call->worker, rep->worker);
    s_replace(&call->url,
              provider ? gateway_backend_shown_url(rep->url ? rep->url : "", shown, sizeof(shown))
                       : rep->url);
    s_replace(&call->pool, rep->pool);
    s_replace(&call->reason, rep->reason);
    s_replace(&call->backend, provider ? rep->backend : "");
    call->provider = provider;
    call->predicted_ttft_s = rep->predicted_ttft_s;
    call->predicted_cached = rep->cached_tokens;
    call->observe = rep->observe != 0 && !provider; /* the decider does not learn from these */
    call->conn = conn;
    call->req_id = rr->req_id;
    call->upstream_ns = 0;
    call->upstream_status = 0;
    free(*model_out);
    *model_out = rep->model && rep->model[0] ? strdup(rep->model) : NULL;
    ipl_msg_clear(&msg);
    return 0;
}

/* A provider decision's trip: the backend as the gateway's own policy has it. */
static int s_provider_trip(gateway_server_t *srv, s_call_t *call, const char *path,
                           const char *remote_model, gateway_api_error_t *err)
{
    ipl_policy_snap_t *snap = ipl_policy_view_get(srv->policy);
    gateway_provider_route_t route = {.provider = call->worker,
                                      .backend = call->backend,
                                      .client_model = call->model,
                                      .remote_model = remote_model,
                                      .client_path = path};
    call->trip = gateway_provider_new(srv->backends, snap ? snap->policy : NULL, &route, err);
    if (snap) ipl_policy_view_release(srv->policy, &snap);
    if (!call->trip) return IPL_E_INVAL;
    s_replace(&call->url, gateway_provider_shown_url(call->trip));
    return 0;
}

/* Whether worker `name` serves /v1/messages itself (its worker set's spec.apis lists
 * anthropic: POLICY's messages_api), by the gateway's own policy. */
static bool s_serves_messages(gateway_server_t *srv, const char *name)
{
    ipl_policy_snap_t *snap = ipl_policy_view_get(srv->policy);
    bool yes = false;
    for (uint32_t i = 0; snap && i < snap->policy->workers_len; i++)
        if (!strcmp(snap->policy->workers[i].name, name))
            yes = snap->policy->workers[i].messages_api != 0;
    ipl_policy_view_release(srv->policy, &snap);
    return yes;
}

/* The client's Messages body with "model" set to `model` (the worker's name for it), malloc'd;
 * NULL when it is not a JSON object (it parsed before: only memory can fail). */
static char *s_messages_upstream_body(const char *raw, size_t len, const char *model,
                                      size_t *out_len)
{
    cJSON *root = cJSON_ParseWithLength(raw, len);
    char *out = NULL;
    if (cJSON_IsObject(root) && model && *model) {
        cJSON_DeleteItemFromObjectCaseSensitive(root, "model");
        cJSON_AddStringToObject(root, "model", model);
    }
    if (cJSON_IsObject(root)) out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    *out_len = out ? strlen(out) : 0;
    return out;
}

/* The URL of a worker's endpoint `path`. */
static int s_worker_url(const s_call_t *call, const char *path, char *url, size_t size)
{
    size_t ulen = strlen(call->url);
    while (ulen && call->url[ulen - 1] == '/')
        ulen--;
    int n = snprintf(url, size, "%.*s%s", (int)ulen, call->url, path);
    return n < 0 || (size_t)n >= size ? IPL_E_INVAL : 0;
}

/* Starts the transfer to the decided worker (or provider) and waits for its headers, and for
 * a 2xx also for its first body byte (held by the proxy until attached). While another attempt
 * could follow (`retry_ok`) --first-byte-timeout-ms bounds both waits; otherwise only the
 * upstream's response timeout does. 0 with *xfer_p and *status, else *err is filled (499
 * client_gone when the client hung up meanwhile: call->client_gone). */
static int s_forward(gateway_server_t *srv, s_call_t *call, const gateway_api_req_t *api,
                     const char *path, const char *upstream_model, bool retry_ok,
                     gateway_xfer_t **xfer_p, int *status, char *ctype, size_t ctype_size,
                     gateway_api_error_t *err)
{
    char idh[S_ID_MAX + 32];
    snprintf(idh, sizeof(idh), "X-Request-Id: %s", call->request_id);
    const char *headers[] = {idh, "Accept: application/json, text/event-stream", NULL};
    gateway_xfer_opts_t opts = {.headers = headers};
    gateway_xfer_cb_t cb = {.on_chunk = s_on_chunk, .on_done = s_on_done, .arg = call};
    int timeout_ms = srv->cfg.upstream_timeout_ms;
    const char *what = call->provider ? "provider" : "worker";
    char url[2048];
    if (call->provider) {
        if (s_provider_trip(srv, call, path, upstream_model, err) != 0) return IPL_E_INVAL;
        upstream_model = gateway_provider_remote_model(call->trip);
        snprintf(url, sizeof(url), "%s", gateway_provider_url(call->trip));
        gateway_provider_xfer_opts(call->trip, headers, &opts);
        cb.on_write = s_on_write;
        timeout_ms = gateway_provider_response_timeout_ms(call->trip, timeout_ms);
    } else if (s_worker_url(call, path, url, sizeof(url)) != 0) {
        url[0] = '\0';
    }
    if (call->msgs && !call->passthrough) cb.on_write = s_on_write; /* back to Anthropic's */
    opts.watch_client = call->client_fd >= 0; /* a hang-up aborts the attempt at once */
    opts.client_fd = call->client_fd;
    size_t blen = 0;
    char *body = call->passthrough
                     ? s_messages_upstream_body(call->raw, call->raw_len, upstream_model, &blen)
                     : gateway_api_upstream_body(api, upstream_model, &blen);
    if (!body || !url[0]) {
        free(body);
        gateway_api_error_set(err, 502, "server_error", NULL, "bad_decision",
                              "cannot build the upstream request for %s `%s`", what, call->worker);
        return IPL_E_INVAL;
    }
    call->upstream_ns = ipl_mono_ns(); /* the OBSERVED's TTFT starts here */
    int rc = gateway_proxy_start_with(srv->proxy, url, &body, blen, &opts, &cb, xfer_p);
    if (rc != 0) {
        gateway_api_error_set(err, 503, "server_error", NULL, "proxy_failed",
                              "cannot start the upstream request: %s", ipl_strerror(rc));
        return rc;
    }
    char why[256] = "";
    int fbt = srv->cfg.first_byte_timeout_ms;
    int wait_ms = retry_ok && fbt > 0 && fbt < timeout_ms ? fbt : timeout_ms;
    uint64_t t0 = ipl_mono_ms();
    rc = gateway_xfer_wait_headers(*xfer_p, wait_ms, status, ctype, ctype_size, why, sizeof(why));
    if (rc == 0) call->upstream_status = *status;
    if (rc == 0 && *status >= 200 && *status < 300) { /* judged by its first byte */
        uint64_t spent = ipl_mono_ms() - t0;
        int left = spent < (uint64_t)wait_ms ? wait_ms - (int)spent : 1;
        rc = gateway_xfer_wait_body(*xfer_p, left, why, sizeof(why));
    }
    if (rc == 0) return 0;
    call->client_gone = gateway_xfer_client_gone(*xfer_p);
    gateway_xfer_abandon(xfer_p);
    if (call->client_gone)
        gateway_api_error_set(err, 499, "invalid_request_error", NULL, "client_gone",
                              "the client closed the connection before the response started");
    else if (rc == IPL_E_TIMEOUT)
        gateway_api_error_set(err, 504, "server_error", NULL, "upstream_timeout",
                              "%s `%s` (%s) sent no response within %d ms", what, call->worker,
                              call->url, wait_ms);
    else if (rc == IPL_E_AGAIN)
        gateway_api_error_set(err, 503, "server_error", NULL, "shutting_down",
                              "the gateway is shutting down");
    else
        gateway_api_error_set(err, 502, "server_error", NULL, "upstream_unreachable",
                              "cannot reach %s `%s` at %s: %s", what, call->worker, call->url, why);
    return rc;
}

/* The error a failed attempt leaves when no other attempt follows it: s_forward's, or for an
 * upstream status, that status (a 5xx or 429 the client would have seen had it not been
 * retried). */
static void s_attempt_error(const s_call_t *call, int status, gateway_api_error_t *err)
{
    const char *what = call->provider ? "provider" : "worker";
    if (status == 429)
        gateway_api_error_set(err, 429, "rate_limit_error", NULL, "upstream_rate_limited",
                              "%s `%s` is rate limiting requests (429), and no other target "
                              "could take this one",
                              what, call->worker);
    else if (status >= 500)
        gateway_api_error_set(err, 502, "server_error", NULL, "upstream_error",
                              "%s `%s` answered %d, and no other target could take the request",
                              what, call->worker, status);
}

/* The call's avoid list, made (with the open breakers' names) when first needed; NULL when out
 * of memory (the request then goes on without one). */
static gateway_avoid_t *s_avoid(gateway_server_t *srv, s_call_t *call)
{
    if (!call->avoid && (call->avoid = calloc(1, sizeof *call->avoid)))
        gateway_failover_avoid_init(srv->failover, call->avoid, ipl_mono_ms());
    return call->avoid;
}

/* Decides and forwards until an attempt is the answer: one that is not a failure
 * gateway_failover retries (connection, 5xx, 429, no first byte in time), or the last one it
 * allows. Every retry is a new decision avoiding the targets that failed this request and
 * the open breakers; the translation (upstream body, /v1/messages passthrough) and a
 * provider's credentials are made again for wherever it lands. 0 with the transfer (its
 * headers in, its first byte held), else *err. */
static int s_attempts(gateway_server_t *srv, s_call_t *call, const gateway_api_req_t *api,
                      const char *path, ipl_route_req_t *rr, gateway_xfer_t **xfer, int *status,
                      char *ctype, size_t ctype_size, gateway_api_error_t *err)
{
    gateway_failover_t *fo = srv->failover;
    gateway_failover_request(fo, ipl_mono_ms());
    if (gateway_failover_avoiding(fo)) s_avoid(srv, call); /* most requests need none */
    char *upstream_model = NULL;
    gateway_api_error_t last = {0}; /* the previous attempt's failure */
    int rc = IPL_E_INVAL;
    for (int attempt = 1;; attempt++) {
        rr->avoid = call->avoid ? call->avoid->list : NULL;
        rr->avoid_len = call->avoid ? (uint32_t)call->avoid->n : 0;
        rc = s_decide(srv, call, rr, &upstream_model, err);
        while (rc == IPL_E_NOTFOUND && call->avoid && gateway_avoid_relax(call->avoid)) {
            /* nothing the list allows: the breakers' names go, then the rest */
            rr->avoid_len = (uint32_t)call->avoid->n;
            rc = s_decide(srv, call, rr, &upstream_model, err);
        }
        if (rc != 0) {
            if (attempt > 1 && rc == IPL_E_NOTFOUND) *err = last; /* nowhere else to go */
            break;
        }
        call->attempts = attempt;
        call->passthrough = call->msgs && !call->provider && !api->cache_salt && /* salted: chat */
                            s_serves_messages(srv, call->worker);
        const char *target = call->provider ? call->backend : call->worker;
        uint64_t now = ipl_mono_ms();
        gateway_failover_landed(fo, target, now);
        rc = s_forward(srv, call, api, call->passthrough ? "/v1/messages" : path, upstream_model,
                       gateway_failover_could_retry(fo, attempt, now), xfer, status, ctype,
                       ctype_size, err);
        if (call->client_gone) break; /* not the target's failure */
        gateway_retry_reason_t why = gateway_failover_classify(rc, *status);
        if (rc == 0 || why != GATEWAY_RETRY_NONE) /* not the gateway's own failures */
            gateway_failover_report(fo, target, why, ipl_mono_ms());
        if (why == GATEWAY_RETRY_NONE || !gateway_failover_retry(fo, attempt, why, ipl_mono_ms()))
            break;
        if (rc == 0) s_attempt_error(call, *status, err);
        last = *err;
        IPL_WARN("upstream_retry", "id=%s attempt=%d %s=%s reason=%s status=%d error=\"%s\"",
                 call->request_id, attempt, call->provider ? "provider" : "worker", call->worker,
                 gateway_failover_reason_name(why), rc == 0 ? *status : 0, err->message);
        gateway_xfer_abandon(xfer); /* a 5xx or 429 that the client never sees */
        gateway_avoid_t *avoid = s_avoid(srv, call);
        if (avoid) gateway_avoid_add(avoid, target);
        if (avoid && call->provider) gateway_avoid_add(avoid, call->worker);
    }
    free(upstream_model);
    return rc;
}

static void s_completion(gateway_server_t *srv, gateway_api_kind_t kind, const ipl_http_req_t *req,
                         ipl_http_resp_t *resp)
{
    s_call_t *call = s_call_new(srv, kind, req);
    if (!call) {
        ipl_http_resp_error(resp, 500, "server_error", "out of memory");
        return;
    }
    ipl_http_resp_header(resp, "x-request-id", call->request_id);
    gateway_api_error_t err = {0};
    if (gateway_auth_check(srv->auth, req, call->tenant, sizeof call->tenant, &err) != 0) {
        s_fail(&call, resp, &err);
        return;
    }
    size_t blen = 0;
    const char *body = ipl_http_req_body(req, &blen);
    if (s_check_utf8(body, blen, &err) != 0) {
        s_fail(&call, resp, &err);
        return;
    }
    char *chat_json = NULL; /* /v1/messages: the request as a chat completion */
    if (kind == GATEWAY_API_MESSAGES) {
        call->raw = body;
        call->raw_len = blen;
        if (gateway_messages_parse(body, blen, false, &call->msgs, &chat_json, &err) != 0) {
            s_fail(&call, resp, &err);
            return;
        }
        body = chat_json;
        blen = strlen(chat_json);
    }
    gateway_api_req_t *api = NULL;
    int parsed = gateway_api_parse(kind == GATEWAY_API_MESSAGES ? GATEWAY_API_CHAT : kind, body,
                                   blen, srv->prompt, &api, &err);
    if (parsed != 0 || gateway_isolation_apply(srv->policy, call->tenant, api, &err) != 0) {
        gateway_api_req_destroy(&api); /* the tenant's cache_salt (gateway_isolation) */
        free(chat_json);
        s_fail(&call, resp, &err);
        return;
    }
    /* the worker's endpoint: a /v1/messages request goes to its chat completions */
    const char *path =
        kind == GATEWAY_API_MESSAGES ? "/v1/chat/completions" : ipl_http_req_path(req);
    s_replace(&call->model, api->model);
    call->stream = api->stream;
    gateway_queue_hints(ipl_http_req_header(req, "x-inferplane-priority"),
                        ipl_http_req_header(req, "x-inferplane-deadline-ms"), api->max_tokens,
                        &call->queue_hints);

    ipl_route_req_t rr;
    if (s_route_req(srv, call, api, &rr) != 0) {
        gateway_api_error_set(&err, 500, "server_error", NULL, NULL, "out of memory");
        gateway_api_req_destroy(&api);
        free(chat_json); /* the upstream body was copied from it */
        s_fail(&call, resp, &err);
        return;
    }
    if (s_route_inputs(srv, req, api, &rr, &call->labels, &err) != 0) {
        free(rr.hashes);
        gateway_api_req_destroy(&api);
        free(chat_json); /* the upstream body was copied from it */
        s_fail(&call, resp, &err);
        return;
    }
    /* the tenant's limits (cluster-wide): 429 + Retry-After, x-ratelimit-* headers either way */
    if (srv->cfg.limits &&
        gateway_limits_admit(srv->cfg.limits, srv->policy, call->tenant, call->prompt_tokens,
                             api->max_tokens, &call->limit, resp, &err,
                             &call->retry_after_s) != 0) {
        free(rr.hashes);
        free(rr.headers);
        gateway_api_req_destroy(&api);
        free(chat_json);
        s_fail(&call, resp, &err);
        return;
    }
    gateway_xfer_t *xfer = NULL;
    int status = 0;
    char ctype[128] = "";
    int rc = s_attempts(srv, call, api, path, &rr, &xfer, &status, ctype, sizeof(ctype), &err);
    free(rr.hashes);
    free(rr.headers);
    if (call->attempts) {
        char n[16];
        snprintf(n, sizeof n, "%d", call->attempts);
        ipl_http_resp_header(resp, "x-inferplane-attempts", n);
    }
    if (rc != 0) {
        if (call->worker[0]) s_decision_headers(call, resp);
        gateway_api_req_destroy(&api);
        free(chat_json); /* the upstream body was copied from it */
        s_fail(&call, resp, &err);
        return;
    }
    gateway_api_req_destroy(&api);
    free(chat_json); /* the upstream body was copied from it */

    s_decision_headers(call, resp);
    s_rule_header(call, resp);
    call->sse = gateway_sse_new(gateway_sse_mode_for(ctype), S_SSE_BUFFER);
    const char *answer_type = ctype[0] ? ctype : "application/json";
    if (call->msgs)
        answer_type =
            gateway_messages_begin(call->msgs, status, ctype, call->prompt_tokens, call->provider);
    else if (call->trip)
        answer_type = gateway_provider_begin(call->trip, status, ctype);
    int fd = call->sse ? ipl_http_resp_stream(resp, status, answer_type) : -1;
    if (fd < 0) {
        gateway_xfer_abandon(&xfer);
        if (!call->sse) ipl_http_resp_error(resp, 500, "server_error", "out of memory");
        s_observe(call, 0, 0);
        s_finish(call, 500, "stream_failed", ipl_mono_ns());
        s_call_free(&call);
        return;
    }
    gateway_xfer_attach_to(&xfer, resp, fd); /* the call belongs to the transfer from here on */
}

static void s_chat(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    s_completion(arg, GATEWAY_API_CHAT, req, resp);
}

static void s_completions(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    s_completion(arg, GATEWAY_API_COMPLETIONS, req, resp);
}

static void s_messages(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    s_completion(arg, GATEWAY_API_MESSAGES, req, resp);
}

/* Anthropic's error for (status, message) as the whole response. */
static void s_messages_error(ipl_http_resp_t *resp, const gateway_api_error_t *err)
{
    int status = gateway_messages_status(err);
    size_t len = 0;
    char *body = gateway_messages_error_body(status, err->message, &len);
    if (body)
        ipl_http_resp_take(resp, status, "application/json", &body, len);
    else
        ipl_http_resp_error(resp, 500, "api_error", "out of memory");
}

/* Whether something serves `model` in the gateway's policy: a pool's model, or an alias that
 * resolves to a pool (decider_targets_resolve, as the decider resolves it). */
static bool s_model_known(gateway_server_t *srv, const char *model)
{
    ipl_policy_snap_t *snap = ipl_policy_view_get(srv->policy);
    bool known = snap && decider_targets_resolve(snap->policy, model, 0, NULL) != NULL;
    ipl_policy_view_release(srv->policy, &snap);
    return known;
}

/* POST /v1/messages/count_tokens: the prompt the request would be routed with, counted by the
 * gateway's tokenizer (the same rendering as the chat completion it becomes). */
static void s_count_tokens(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    gateway_server_t *srv = arg;
    char tenant[S_ID_MAX + 1];
    gateway_api_error_t err = {0};
    size_t blen = 0;
    const char *body = ipl_http_req_body(req, &blen);
    gateway_messages_t *msgs = NULL;
    char *chat_json = NULL;
    gateway_api_req_t *api = NULL;
    if (gateway_auth_check(srv->auth, req, tenant, sizeof tenant, &err) != 0 ||
        s_check_utf8(body, blen, &err) != 0 ||
        gateway_messages_parse(body, blen, true, &msgs, &chat_json, &err) != 0 ||
        gateway_api_parse(GATEWAY_API_CHAT, chat_json, strlen(chat_json), srv->prompt, &api,
                          &err) != 0) {
        s_messages_error(resp, &err);
    } else if (!s_model_known(srv, api->model)) {
        gateway_api_error_set(&err, 404, "not_found_error", NULL, NULL, "model: %s", api->model);
        s_messages_error(resp, &err);
    } else {
        size_t ntok = 0, len = 0, nh = 0;
        uint32_t *tokens = NULL;
        uint64_t *hashes = NULL;
        char lora[512], why[256] = "";
        bool ok;
        if (api->worker_tokenize) { /* a chat we cannot render: a worker's count (cached) */
            s_lora(srv, api->model, lora, sizeof lora);
            ok = gateway_tokenize_blocks(srv->tokenize, srv->policy, srv->prompt, api,
                                         lora[0] ? lora : NULL, 0, 0, &hashes, &nh, &ntok, why,
                                         sizeof why) != GATEWAY_TOKENIZE_FAILED;
            free(hashes);
        } else {
            ok = (tokens = ipl_prompt_encode(srv->prompt, api->prompt, api->prompt_len, api->chat,
                                             &ntok)) != NULL;
        }
        char *out = ok ? gateway_messages_count_body(ntok, &len) : NULL;
        free(tokens);
        if (out)
            ipl_http_resp_take(resp, 200, "application/json", &out, len);
        else if (why[0])
            ipl_http_resp_error(resp, 503, "api_error", why);
        else
            ipl_http_resp_error(resp, 500, "api_error", "out of memory");
    }
    gateway_api_req_destroy(&api);
    free(chat_json);
    gateway_messages_destroy(&msgs);
}

/* ---- GET /v1/models ------------------------------------------------------------------------ */

static void s_models(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    gateway_server_t *srv = arg;
    char tenant[S_ID_MAX + 1];
    gateway_api_error_t err = {0};
    if (gateway_auth_check(srv->auth, req, tenant, sizeof tenant, &err) != 0) {
        s_reply_error(resp, err.status, err.type, err.param, err.code, err.message);
        return;
    }
    ipl_policy_snap_t *snap = ipl_policy_view_get(srv->policy);
    if (!snap) {
        s_reply_error(resp, 503, "server_error", NULL, "no_policy",
                      "no routing policy has been received yet; is inferplane-policy running?");
        return;
    }
    cJSON *root = gateway_models_list(snap->policy, srv->created_s);
    ipl_policy_view_release(srv->policy, &snap);
    ipl_http_resp_json(resp, 200, &root); /* 500 when NULL: out of memory */
}

/* ---- admin: GET /debug/policy -------------------------------------------------------------- */

void gateway_server_register_admin(gateway_server_t *self, ipl_httpd_t *admin)
{
    ipl_httpd_route(admin, "GET", "/debug/policy", policy_digest_http, self->policy);
    gateway_auth_register_admin(self->auth, admin);
}

/* ---- life cycle ---------------------------------------------------------------------------- */

/* Per policy version, on the view's thread: the header names its rules match on. */
static void s_detach(void *arg, void *attached)
{
    (void)arg;
    s_attached_t *a = attached;
    if (!a) return;
    gateway_rule_headers_destroy(&a->headers);
    policy_labeller_destroy(&a->labels);
    free(a);
}

static void *s_attach(void *arg, const ipl_policy_t *policy)
{
    s_attached_t *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->headers = gateway_rule_headers_new(policy);
    char err[512] = "";
    a->labels = policy_labeller_new(policy, err, sizeof err);
    if (!a->labels)
        IPL_ERROR("policy_labels_invalid", "version=%llu error=\"%s\" (no computed labels)",
                  (unsigned long long)policy->version, err);
    const gateway_server_t *srv = arg;
    if (srv && srv->cfg.limits) gateway_limits_policy(srv->cfg.limits, policy); /* its limits */
    if (srv && srv->policy_info) policy_info_set(srv->policy_info, policy->hash);
    return a;
}

bool gateway_server_ready(void *arg, char *detail, size_t size)
{
    gateway_server_t *srv = arg;
    uint64_t version = ipl_policy_view_version(srv->policy);
    if (version == 0) {
        snprintf(detail, size, "waiting for a policy from %s / %s", srv->policy_sub,
                 srv->policy_req);
        return false;
    }
    snprintf(detail, size, "policy version %" PRIu64, version);
    return gateway_route_describe(srv->route, detail, size); /* deciders down, degraded */
}

gateway_server_t *gateway_server_new(const gateway_server_config_t *cfg, ipl_metrics_t *metrics,
                                     char *err, size_t errlen)
{
    assert(cfg && metrics);
    gateway_server_t *srv = calloc(1, sizeof(*srv));
    if (!srv) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    srv->cfg = *cfg;
    srv->metrics = metrics;
    srv->listen = s_strdup0(cfg->listen);
    srv->decider = s_strdup0(cfg->decider);
    srv->exporter = s_strdup0(cfg->exporter);
    srv->policy_sub = s_strdup0(cfg->policy_sub);
    srv->policy_req = s_strdup0(cfg->policy_req);
    if (cfg->trusted_label_header && cfg->trusted_label_header[0])
        srv->label_header = strdup(cfg->trusted_label_header);
    srv->backends = gateway_backend_new(cfg->secrets_dir, metrics);
    pthread_mutex_init(&srv->push_lock, NULL);
    srv->created_s = (uint64_t)ipl_wall_s();
    atomic_store(&srv->next_id, (ipl_wall_ms() << 16) ^ (uint64_t)getpid());
    srv->records_dropped =
        ipl_metrics_counter(metrics, "inferplane_gateway_records_dropped_total",
                            "Request records not sent because the exporter queue was full.", NULL);
    srv->deferrals = ipl_metrics_counter(
        metrics, "inferplane_gateway_deferrals_total",
        "DEFERRED answers (batch work while the pool is busy) the gateway waited out.", NULL);
    if (!srv->listen || !srv->decider || !srv->exporter || !srv->policy_sub || !srv->policy_req ||
        !srv->backends ||
        (cfg->trusted_label_header && cfg->trusted_label_header[0] && !srv->label_header)) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (srv->label_header &&
        (!srv->label_header[0] ||
         strspn(srv->label_header, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
                                   "OPQRSTUVWXYZ0123456789-_.") != strlen(srv->label_header))) {
        snprintf(err, errlen,
                 "--trusted-label-header \"%s\" is not a header name; use letters, digits and "
                 "'-', like x-inferplane-labels",
                 srv->label_header);
        goto fail;
    }
    if (cfg->block_size < 1) {
        snprintf(err, errlen, "--block-size must be at least 1 (got %d)", cfg->block_size);
        goto fail;
    }
    char tok_err[512];
    ipl_prompt_opts_t po = {.template_fallback = true}; /* workers tokenize what we cannot */
    srv->prompt = ipl_prompt_open_opts(cfg->tokenizer, &po, tok_err, sizeof tok_err);
    if (!srv->prompt) {
        snprintf(err, errlen, "--tokenizer: %s", tok_err);
        goto fail;
    }
    if (ipl_prompt_unrenderable(srv->prompt))
        IPL_WARN("chat_template_unsupported",
                 "tokenizer=%s error=\"%s\" (chats are tokenized by a worker's /tokenize, cached)",
                 cfg->tokenizer, ipl_prompt_unrenderable(srv->prompt));
    srv->tokenize = gateway_tokenize_new(NULL, metrics);
    if (!srv->tokenize) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    gateway_auth_config_t ac = {.keys_file = cfg->keys_file,
                                .tenant_header = cfg->trusted_tenant_header};
    srv->auth = gateway_auth_new(&ac, metrics, err, errlen);
    if (!srv->auth) goto fail;
    srv->route = gateway_route_new(srv->decider, cfg->route_timeout_ms, metrics);
    gateway_proxy_config_t pc = {.connect_timeout_ms = cfg->connect_timeout_ms,
                                 .stream_idle_timeout_ms = cfg->stream_idle_timeout_ms};
    srv->proxy = gateway_proxy_new(&pc, metrics);
    gateway_queue_config_t qc = {.max_wait_ms = cfg->queue_max_wait_ms,
                                 .max_requests = cfg->queue_max_requests,
                                 .max_tokens = cfg->queue_max_tokens,
                                 .tenant_max_requests = cfg->queue_max_tenant_requests};
    srv->queue = gateway_queue_new(&qc, metrics);
    if (!srv->queue) {
        snprintf(err, errlen, "cannot start the request queue's timer thread");
        goto fail;
    }
    gateway_failover_config_t fc = {
        .max_attempts = cfg->max_attempts,
        .budget = {.percent = cfg->retry_budget_percent,
                   .min_retries = cfg->retry_budget_min > 0 ? (uint32_t)cfg->retry_budget_min : 0},
        .breaker = {.failures = cfg->breaker_failures > 0 ? (uint32_t)cfg->breaker_failures : 0,
                    .base_cooldown_ms = cfg->breaker_base_cooldown_ms > 0
                                            ? (uint64_t)cfg->breaker_base_cooldown_ms
                                            : 0,
                    .cooldown_ms =
                        cfg->breaker_cooldown_ms > 0 ? (uint64_t)cfg->breaker_cooldown_ms : 0},
    };
    srv->failover = gateway_failover_new(&fc, metrics);
    if (!srv->prompt || !srv->route || !srv->proxy || !srv->failover) {
        snprintf(err, errlen, "cannot initialise the tokenizer, decider client or libcurl");
        goto fail;
    }
    /* set by s_attach on the view's thread: before the view, which may call it at once */
    srv->policy_info = policy_info_new(metrics, "inferplane_gateway_policy_info",
                                       "1 for the content hash of the policy in use (hash \"\": "
                                       "none yet; the hashes used before read 0).");
    srv->policy =
        ipl_policy_view_new_attached(srv->policy_sub, srv->policy_req, s_attach, s_detach, srv);
    if (!srv->policy) {
        snprintf(err, errlen,
                 "cannot connect to the policy service (--policy-sub %s, "
                 "--policy-req %s); use tcp://host:port endpoints",
                 srv->policy_sub, srv->policy_req);
        goto fail;
    }
    if (gateway_route_backup(srv->route, srv->policy) != 0) { /* decides when no decider can */
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (srv->exporter[0]) {
        srv->push = zsock_new(ZMQ_PUSH);
        if (srv->push) {
            zsock_set_linger(srv->push, 0);
            zsock_set_sndhwm(srv->push, 10000);
            ipl_curve_client(srv->push); /* CURVE with --curve-dir (ipl_curve.h) */
        }
        if (!srv->push || zsock_connect(srv->push, "%s", srv->exporter) < 0) {
            snprintf(err, errlen, "cannot connect to --exporter \"%s\": use tcp://host:port",
                     srv->exporter);
            goto fail;
        }
    }
    srv->httpd = ipl_httpd_new(srv->listen, cfg->max_body);
    if (!srv->httpd) {
        snprintf(err, errlen, "cannot listen on --listen \"%s\": use a free host:port",
                 srv->listen);
        goto fail;
    }
    ipl_httpd_limits(srv->httpd, cfg->max_header_bytes, cfg->max_url_bytes);
    ipl_httpd_connections(srv->httpd, cfg->conns ? cfg->conns : &IPL_CONNS_DEFAULTS);
    ipl_httpd_metrics(srv->httpd, metrics, "inferplane_gateway");
    ipl_httpd_drain_handler(srv->httpd, gateway_drain_answer, NULL);
    ipl_httpd_route(srv->httpd, "POST", "/v1/chat/completions", s_chat, srv);
    ipl_httpd_route(srv->httpd, "POST", "/v1/completions", s_completions, srv);
    ipl_httpd_route(srv->httpd, "GET", "/v1/models", s_models, srv);
    ipl_httpd_route(srv->httpd, "POST", "/v1/messages", s_messages, srv);
    ipl_httpd_route(srv->httpd, "POST", "/v1/messages/count_tokens", s_count_tokens, srv);
    return srv;
fail:
    gateway_server_destroy(&srv);
    return NULL;
}

int gateway_server_start(gateway_server_t *self)
{
    return ipl_httpd_start(self->httpd);
}

int gateway_server_port(const gateway_server_t *self)
{
    return ipl_httpd_port(self->httpd);
}

size_t gateway_server_drain(gateway_server_t *self, int timeout_ms)
{
    return gateway_drain(self->httpd, timeout_ms);
}

void gateway_server_destroy(gateway_server_t **self_p)
{
    assert(self_p);
    gateway_server_t *srv = *self_p;
    if (!srv) return;
    /* Unblock handlers and producers first, then join the HTTP threads, then free. */
    if (srv->route) gateway_route_stop(srv->route);
    gateway_queue_stop(srv->queue); /* waiting requests are answered 503 now */
    if (srv->proxy) {
        gateway_proxy_stop(srv->proxy);
        gateway_proxy_wait_idle(srv->proxy, 1000);
    }
    ipl_httpd_destroy(&srv->httpd);
    gateway_proxy_destroy(&srv->proxy); /* waits for the last producers */
    gateway_queue_destroy(&srv->queue); /* no handler waits, no producer frees a slot */
    gateway_route_destroy(&srv->route);
    ipl_policy_view_destroy(&srv->policy);
    policy_info_destroy(&srv->policy_info); /* after the view: s_attach sets it */
    zsock_destroy(&srv->push);
    ipl_prompt_destroy(&srv->prompt);
    gateway_tokenize_destroy(&srv->tokenize);
    pthread_mutex_destroy(&srv->push_lock);
    free(srv->listen);
    free(srv->decider);
    free(srv->exporter);
    free(srv->policy_sub);
    free(srv->policy_req);
    free(srv->label_header);
    gateway_backend_destroy(&srv->backends);
    gateway_auth_destroy(&srv->auth);
    gateway_failover_destroy(&srv->failover);
    free(srv);
    *self_p = NULL;
}
