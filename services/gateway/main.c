/*
 * inferplane-gateway — the client-facing OpenAI-compatible API.
 *
 *   clients ──HTTP──► gateway_server ──ROUTE_REQ──► decider
 *                          │ ◄──────── ROUTE_REP ──┘ (same connection: OBSERVED ──► decider)
 *                          ├──HTTP (libcurl, streamed)──► worker, or a provider's backend
 *                          │                              (credentials from its GatewayBackend)
 *                          └──RECORD (PUSH)──► exporter
 *
 * With `--decider embedded` a decider runs inside this process instead (decider_server, the
 * same code as inferplane-decider, its settings from --decider-config and INFERPLANE_DECIDER_*):
 * the gateway asks it over inproc:// — no TCP, no ZeroMQ I/O thread on either side — and the
 * main thread runs its loop. Its admin routes (/v1/route, /debug/state, /debug/model) and
 * metrics join the gateway's; the gateway is ready when both are. GET /debug/policy is the
 * gateway's own (the policy its view holds; the embedded decider's view follows the same
 * policy service, its version in /debug/state).
 *
 * main only declares the flags and wires the service together; see gateway_server.h.
 */
#include <stdio.h>
#include <string.h>

#include "decider_options.h"
#include "decider_server.h"
#include "gateway_drain.h"
#include "gateway_isolation.h"
#include "gateway_limits.h"
#include "gateway_server.h"
#include "ipl_config.h"
#include "ipl_conns.h"
#include "ipl_log.h"
#include "ipl_loop.h"
#include "ipl_service.h"
#include "ipl_signal.h"

#define S_EMBEDDED_ENDPOINT "inproc://inferplane-embedded-decider"

/* Readiness of the gateway and, when embedded, of its decider. */
typedef struct {
    gateway_server_t *gateway;
    decider_server_t *decider; /* NULL unless --decider embedded */
} s_parts_t;

static bool s_ready(void *arg, char *detail, size_t size)
{
    s_parts_t *p = arg;
    if (!gateway_server_ready(p->gateway, detail, size)) return false;
    if (!p->decider) return true;
    char d[256];
    bool ok = decider_server_ready(p->decider, d, sizeof d);
    if (!ok) snprintf(detail, size, "embedded decider: %s", d);
    return ok;
}

/* The embedded decider's settings: --decider-config FILE (or INFERPLANE_DECIDER_CONFIG), then
 * INFERPLANE_DECIDER_* variables; its tokenizer, unless set there, is the gateway's. NULL with a
 * message in err. `*config_p` is set to the config that owns the options' strings (destroy it
 * after the server, also on failure). */
static decider_server_t *s_embedded_decider(const char *file, const char *gateway_tokenizer,
                                            decider_options_t *o, ipl_config_t **config_p,
                                            ipl_metrics_t *metrics, char *err, size_t errlen)
{
    ipl_config_t *c = *config_p =
        ipl_config_new("inferplane-gateway --decider-config", "the embedded decider");
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ipl_config_env_prefix(c, "INFERPLANE_DECIDER_");
    decider_options_add(o, c, true);
    char *args[] = {"inferplane-gateway", "--config", (char *)file, NULL};
    char why[400];
    int rc = ipl_config_parse(c, file ? 3 : 1, args, why, sizeof why);
    if (rc == 0) rc = decider_options_check(o, why, sizeof why);
    if (rc != 0) {
        snprintf(err, errlen, "--decider-config: %s", why);
        return NULL;
    }
    decider_server_config_t dc;
    decider_options_server_config(o, &dc);
    char listen[1024];
    snprintf(listen, sizeof listen, "%s%s%s", S_EMBEDDED_ENDPOINT, o->listen[0] ? "," : "",
             o->listen);
    dc.listen = listen; /* read while the server is made */
    if (!strcmp(ipl_config_source(c, "tokenizer"), "default"))
        dc.tokenizer = gateway_tokenizer; /* /v1/route hashes prompts as the gateway does */
    decider_server_t *d = decider_server_new(&dc, metrics, why, sizeof why);
    if (!d) snprintf(err, errlen, "embedded decider: %s", why);
    return d;
}

int main(int argc, char **argv)
{
    char *listen = NULL, *decider = NULL, *exporter = NULL, *policy_sub = NULL, *policy_req = NULL,
         *tokenizer = NULL, *decider_config = NULL, *trusted_label_header = NULL,
         *secrets_dir = NULL, *keys_file = NULL, *trusted_tenant_header = NULL;
    int64_t block_size = 16, max_body = 8388608, route_timeout_ms = 1000,
            upstream_timeout_ms = 600000, connect_timeout_ms = 2000, batch_max_wait_ms = 30000,
            max_attempts = 3, first_byte_timeout_ms = 60000, retry_budget_min = 10,
            breaker_failures = 5, breaker_base_cooldown_ms = 1000, breaker_cooldown_ms = 10000,
            max_header_bytes = 32768, max_url_bytes = 8192;
    double retry_budget_percent = 20;
    int64_t queue_max_wait_ms = 30000, queue_max_requests = 10000, queue_max_tokens = 0,
            queue_max_tenant_requests = 0;
    int64_t drain_timeout_ms = GATEWAY_DRAIN_DEFAULT_MS, stream_idle_timeout_ms = 60000,
            max_connections = IPL_CONNS_DEFAULT_MAX, max_per_ip = IPL_CONNS_DEFAULT_MAX_PER_IP,
            idle_timeout_ms = IPL_CONNS_DEFAULT_IDLE_TIMEOUT_MS,
            read_timeout_ms = IPL_CONNS_DEFAULT_READ_TIMEOUT_MS;
    ipl_service_t *svc = ipl_service_new(
        "gateway", "OpenAI-compatible API that routes each request to the best worker",
        "127.0.0.1:9106");
    if (!svc) return 2;
    ipl_config_t *cfg = ipl_service_config(svc);
    ipl_config_add(cfg, "listen", IPL_OPT_STR, &listen, "127.0.0.1:8080",
                   "address of the OpenAI-compatible API");
    ipl_config_add(cfg, "decider", IPL_OPT_STR, &decider, "tcp://127.0.0.1:7021",
                   "ZeroMQ endpoint of the decider's ROUTER (route requests), or \"embedded\": "
                   "run a decider inside this process, asked over inproc:// (its settings: "
                   "--decider-config)");
    ipl_config_add(cfg, "decider-config", IPL_OPT_STR, &decider_config, NULL,
                   "with --decider embedded: YAML file of the embedded decider's options, those "
                   "of inferplane-decider but --cpu (env INFERPLANE_DECIDER_<OPTION> too; its "
                   "listen adds endpoints to the inproc:// one)");
    ipl_config_add(cfg, "exporter", IPL_OPT_STR, &exporter, "tcp://127.0.0.1:7031",
                   "ZeroMQ endpoint of the exporter's PULL socket (request records); \"\" for "
                   "none");
    ipl_config_add(cfg, "policy-sub", IPL_OPT_STR, &policy_sub, "tcp://127.0.0.1:7011",
                   "ZeroMQ endpoint of the policy service's PUB socket");
    ipl_config_add(cfg, "policy-req", IPL_OPT_STR, &policy_req, "tcp://127.0.0.1:7012",
                   "ZeroMQ endpoint of the policy service's ROUTER (policy requests)");
    ipl_config_add(cfg, "tokenizer", IPL_OPT_STR, &tokenizer, "builtin",
                   "the workers' tokenizer: a model folder (tokenizer.json and its chat "
                   "template: chats render as the model's), a tokenizer.json, or \"builtin\" "
                   "(block hashes match only when this equals the workers'; docs/prompts.md)");
    ipl_config_add(cfg, "block-size", IPL_OPT_INT, &block_size, "16",
                   "tokens per hashed prompt block (the workers' KV block size)");
    ipl_config_add(cfg, "max-body-bytes", IPL_OPT_INT, &max_body, "8388608",
                   "largest request body accepted; larger ones get 413");
    ipl_config_add(cfg, "route-timeout-ms", IPL_OPT_INT, &route_timeout_ms, "1000",
                   "how long to wait for the decider's answer before answering 503");
    ipl_config_add(cfg, "upstream-timeout-ms", IPL_OPT_INT, &upstream_timeout_ms, "600000",
                   "how long to wait for a worker's response headers before answering 504");
    ipl_config_add(cfg, "connect-timeout-ms", IPL_OPT_INT, &connect_timeout_ms, "2000",
                   "TCP connect timeout to a worker");
    ipl_config_add(cfg, "trusted-label-header", IPL_OPT_STR, &trusted_label_header, NULL,
                   "request header whose comma-separated values are the request's labels for "
                   "InferencePolicy rules (e.g. x-inferplane-labels); set it only when a proxy "
                   "in front sets it and strips it from clients. Unset: no labels from headers");
    ipl_config_add(cfg, "secrets-dir", IPL_OPT_STR, &secrets_dir, "/var/run/secrets/inferplane",
                   "directory where Kubernetes Secrets are mounted, one subdirectory per Secret "
                   "(a GatewayBackend's auth.secretRef {name, key} is the file NAME/KEY here)");
    ipl_config_add(cfg, "batch-max-wait-ms", IPL_OPT_INT, &batch_max_wait_ms, "30000",
                   "how long a request the policy defers (batch work while its pool is busy) "
                   "is held and asked again before answering 429 with Retry-After");
    ipl_config_add(cfg, "keys-file", IPL_OPT_STR, &keys_file, NULL,
                   "YAML file of tenants and their API keys (docs/tenants.md), reloaded when it "
                   "changes; every API request then needs a key (401 without, 403 for a "
                   "disabled tenant). Unset: requests are anonymous");
    ipl_config_add(cfg, "trusted-tenant-header", IPL_OPT_STR, &trusted_tenant_header, NULL,
                   "request header that names the tenant, set by an authenticating proxy in "
                   "front (which must strip it from clients); when present no key is asked "
                   "for. Unset: clients cannot choose their tenant");
    ipl_config_add(cfg, "max-attempts", IPL_OPT_INT, &max_attempts, "3",
                   "attempts per request, the first included: a connection failure, a 5xx, a "
                   "429 or no first byte in --first-byte-timeout-ms is retried on the next-best "
                   "target before anything was sent to the client (1: never; docs/failover.md)");
    ipl_config_add(cfg, "first-byte-timeout-ms", IPL_OPT_INT, &first_byte_timeout_ms, "60000",
                   "while another attempt is allowed, give up on a worker or provider that sent "
                   "no first body byte (a stream's first event) this long after the request, "
                   "and retry elsewhere; the last attempt waits up to --upstream-timeout-ms. "
                   "Long prefills: keep it above the slowest first token you accept (0: off)");
    ipl_config_add(cfg, "retry-budget-percent", IPL_OPT_DOUBLE, &retry_budget_percent, "20",
                   "retries at most this percentage of the requests of the last 10 s (plus "
                   "--retry-budget-min), so that a failing cluster is not hammered");
    ipl_config_add(cfg, "retry-budget-min", IPL_OPT_INT, &retry_budget_min, "10",
                   "retries allowed in any 10 s whatever the traffic (the budget's floor)");
    ipl_config_add(cfg, "breaker-failures", IPL_OPT_INT, &breaker_failures, "5",
                   "consecutive failed attempts (connection, 5xx, 429, first-byte timeout) that "
                   "open a worker's or provider backend's circuit breaker: it is avoided");
    ipl_config_add(cfg, "breaker-base-cooldown-ms", IPL_OPT_INT, &breaker_base_cooldown_ms, "1000",
                   "how long a circuit breaker, when it opens, avoids its target before one "
                   "probe request may go there: its success closes it, its failure opens it "
                   "again for twice as long as the last time, up to --breaker-cooldown-ms");
    ipl_config_add(cfg, "breaker-cooldown-ms", IPL_OPT_INT, &breaker_cooldown_ms, "10000",
                   "the longest an open circuit breaker avoids its target (the cap of the "
                   "doubling --breaker-base-cooldown-ms), and how long a probe request that "
                   "never answers (its client gone) keeps it avoided");
    ipl_config_add(cfg, "max-header-bytes", IPL_OPT_INT, &max_header_bytes, "32768",
                   "largest request header section (names and values) accepted; larger ones "
                   "get 431");
    ipl_config_add(cfg, "max-url-bytes", IPL_OPT_INT, &max_url_bytes, "8192",
                   "longest request target (path and query) accepted; longer ones get 414");
    ipl_config_add(cfg, "drain-timeout-ms", IPL_OPT_INT, &drain_timeout_ms, "25000",
                   "on SIGTERM (or SIGINT) the gateway drains: /readyz answers 503, new "
                   "connections are refused, and the requests in flight (streams too) get this "
                   "long to finish before the rest are cut with an error event; a second "
                   "signal cuts them at once. Keep it below the pod's "
                   "terminationGracePeriodSeconds (30 s by default). 0: no drain");
    ipl_config_add(cfg, "stream-idle-timeout-ms", IPL_OPT_INT, &stream_idle_timeout_ms, "60000",
                   "after a response's first byte, a worker or provider that sends nothing for "
                   "this long (hung, stopped) has its stream cut: the client gets an error "
                   "event (OpenAI's, or Anthropic's on /v1/messages), reason "
                   "stream_idle_timeout. 0: never");
    ipl_config_add(cfg, "max-connections", IPL_OPT_INT, &max_connections, "4096",
                   "client connections open at once; more are closed as they arrive (each "
                   "costs a thread and about 4 file descriptors: the soft RLIMIT_NOFILE is "
                   "raised as needed, and this lowered, with a warning, when the hard one is too "
                   "small)");
    ipl_config_add(cfg, "max-connections-per-ip", IPL_OPT_INT, &max_per_ip, "1024",
                   "client connections open at once from one address; more are closed as they "
                   "arrive, so that one client cannot take them all. Behind a proxy that "
                   "connects from one address, raise it to --max-connections (0: no limit)");
    ipl_config_add(cfg, "idle-timeout-ms", IPL_OPT_INT, &idle_timeout_ms, "75000",
                   "a client connection waiting for a request (just opened, or kept alive "
                   "after a response) is closed after this long; above the 60 s idle timeout of "
                   "common load balancers, so that they close first. 0: never");
    ipl_config_add(cfg, "request-read-timeout-ms", IPL_OPT_INT, &read_timeout_ms, "60000",
                   "a request's headers and body must have arrived within this long of its "
                   "request line, however slowly they trickle in (slowloris), else its "
                   "connection is closed. 0: never");
    ipl_config_range(cfg, "drain-timeout-ms", 0, 3600000);
    ipl_config_range(cfg, "stream-idle-timeout-ms", 0, 86400000);
    ipl_config_range(cfg, "max-connections", 1, 1000000);
    ipl_config_range(cfg, "max-connections-per-ip", 0, 1000000);
    ipl_config_range(cfg, "idle-timeout-ms", 0, 86400000);
    ipl_config_range(cfg, "request-read-timeout-ms", 0, 86400000);
    ipl_config_range(cfg, "max-attempts", 1, 10);
    ipl_config_range(cfg, "first-byte-timeout-ms", 0, 86400000);
    ipl_config_range(cfg, "retry-budget-percent", 0, 100);
    ipl_config_range(cfg, "retry-budget-min", 0, 1000000);
    ipl_config_range(cfg, "breaker-failures", 1, 1000000);
    ipl_config_range(cfg, "breaker-base-cooldown-ms", 1, 3600000);
    ipl_config_range(cfg, "breaker-cooldown-ms", 1, 3600000);
    ipl_config_range(cfg, "max-header-bytes", 1024, 1048576);
    ipl_config_range(cfg, "max-url-bytes", 256, 1048576);
    ipl_config_add(cfg, "queue-max-wait-ms", IPL_OPT_INT, &queue_max_wait_ms, "30000",
                   "when the decider finds the pool saturated (OVERLOADED), the request waits "
                   "in the gateway's fair queue (per tenant, by tokens, by priority: "
                   "docs/queueing.md) at most this long, or its x-inferplane-deadline-ms if "
                   "shorter, then 429 with Retry-After (0: no queue, 429 at once)");
    ipl_config_add(cfg, "queue-max-requests", IPL_OPT_INT, &queue_max_requests, "10000",
                   "requests waiting in the queue at most, all models together; more are "
                   "refused at once (429 queue_full)");
    ipl_config_add(cfg, "queue-max-tokens", IPL_OPT_INT, &queue_max_tokens, "0",
                   "tokens (prompt + expected output) waiting in the queue at most, all models "
                   "together (0: no bound)");
    ipl_config_add(cfg, "queue-max-tenant-requests", IPL_OPT_INT, &queue_max_tenant_requests,
                   "0",
                   "requests one tenant may have waiting in a model's queue (0: "
                   "--queue-max-requests), so that one tenant cannot fill the queue alone");
    ipl_config_range(cfg, "queue-max-wait-ms", 0, 3600000);
    ipl_config_range(cfg, "queue-max-requests", 1, 10000000);
    ipl_config_range(cfg, "queue-max-tokens", 0, 1e15);
    ipl_config_range(cfg, "queue-max-tenant-requests", 0, 10000000);
    char *limits_listen = NULL, *limits_peers = NULL, *limits_id = NULL;
    int64_t limits_interval_ms = 50, limits_peer_timeout_ms = 0;
    ipl_config_add(cfg, "limits-listen", IPL_OPT_STR, &limits_listen, NULL,
                   "ZeroMQ endpoint to bind a PUB socket on, publishing this replica's usage of "
                   "the tenants' limits (InferencePolicy spec.limits) to the other gateways "
                   "every --limits-interval-ms, e.g. tcp://0.0.0.0:7041 (docs/limits.md). "
                   "Unset: the limits hold per replica unless --limits-peers is set");
    ipl_config_add(cfg, "limits-peers", IPL_OPT_STR, &limits_peers, NULL,
                   "the other gateway replicas' --limits-listen endpoints, comma-separated "
                   "(this replica's own may be listed: it is skipped); their usage is charged "
                   "to the same buckets, so a tenant's limit holds across the cluster");
    ipl_config_add(cfg, "limits-id", IPL_OPT_STR, &limits_id, NULL,
                   "this replica's id in the limits gossip, unique in the cluster (e.g. the "
                   "pod name). Unset: hostname/pid/--limits-listen");
    ipl_config_add(cfg, "limits-interval-ms", IPL_OPT_INT, &limits_interval_ms, "50",
                   "how often usage is published, and the lease interval: a replica admits per "
                   "interval at most its share of a bucket (docs/limits.md, the overshoot bound)");
    ipl_config_add(cfg, "limits-peer-timeout-ms", IPL_OPT_INT, &limits_peer_timeout_ms, "0",
                   "a peer unheard of this long is gone: its in-flight requests no longer count "
                   "and the others share the limits without it (0: 20 intervals)");
    ipl_config_range(cfg, "limits-interval-ms", 5, 10000);
    ipl_config_range(cfg, "limits-peer-timeout-ms", 0, 600000);
    ipl_config_range(cfg, "block-size", 1, 65536);
    ipl_config_range(cfg, "batch-max-wait-ms", 0, 3600000);
    ipl_config_range(cfg, "max-body-bytes", 1024, (double)(1 << 30));
    ipl_config_range(cfg, "route-timeout-ms", 1, 600000);
    ipl_config_range(cfg, "upstream-timeout-ms", 1, 86400000);
    ipl_config_range(cfg, "connect-timeout-ms", 1, 600000);
    gateway_isolation_options(cfg); /* --expose-routing-headers */
    int rc = ipl_service_start(svc, argc, argv);
    if (rc != 0) {
        ipl_service_destroy(&svc);
        return rc > 0 ? 0 : 2;
    }

    char err[512] = "";
    bool embedded = !strcmp(decider, "embedded");
    decider_options_t dopt;
    ipl_config_t *dconf = NULL;
    s_parts_t parts = {0};
    if (decider_config && !embedded) {
        fprintf(stderr, "inferplane-gateway: --decider-config needs --decider embedded\n");
        ipl_service_destroy(&svc);
        return 2;
    }
    if (embedded) {
        parts.decider = s_embedded_decider(decider_config, tokenizer, &dopt, &dconf,
                                           ipl_service_metrics(svc), err, sizeof err);
        if (!parts.decider) {
            fprintf(stderr, "inferplane-gateway: %s\n", err);
            ipl_config_destroy(&dconf);
            ipl_service_destroy(&svc);
            return 2;
        }
    }

    gateway_limits_config_t lc = {.listen = limits_listen,
                                  .peers = limits_peers,
                                  .id = limits_id,
                                  .interval_ms = (int)limits_interval_ms,
                                  .peer_timeout_ms = (int)limits_peer_timeout_ms};
    /* destroyed after the admin server stops: its /metrics reads the limits */
    gateway_limits_t *limits = gateway_limits_new(&lc, ipl_service_metrics(svc), err, sizeof err);
    if (!limits) {
        fprintf(stderr, "inferplane-gateway: %s\n", err);
        decider_server_destroy(&parts.decider);
        ipl_config_destroy(&dconf);
        ipl_service_destroy(&svc);
        return 2;
    }
    ipl_conns_config_t conns = {.max_connections = (int)max_connections,
                                .max_per_ip = (int)max_per_ip,
                                .idle_timeout_ms = (int)idle_timeout_ms,
                                .read_timeout_ms = (int)read_timeout_ms};
    gateway_server_config_t gc = {
        .listen = listen,
        .decider = embedded ? S_EMBEDDED_ENDPOINT : decider,
        .exporter = exporter,
        .policy_sub = policy_sub,
        .policy_req = policy_req,
        .tokenizer = tokenizer,
        .block_size = (int)block_size,
        .max_body = (size_t)max_body,
        .route_timeout_ms = (int)route_timeout_ms,
        .upstream_timeout_ms = (int)upstream_timeout_ms,
        .connect_timeout_ms = (int)connect_timeout_ms,
        .trusted_label_header = trusted_label_header,
        .secrets_dir = secrets_dir,
        .batch_max_wait_ms = (int)batch_max_wait_ms,
        .keys_file = keys_file,
        .trusted_tenant_header = trusted_tenant_header,
        .limits = limits,
        .queue_max_wait_ms = (int)queue_max_wait_ms,
        .queue_max_requests = (size_t)queue_max_requests,
        .queue_max_tokens = (uint64_t)queue_max_tokens,
        .queue_max_tenant_requests = (size_t)queue_max_tenant_requests,
        .max_attempts = (int)max_attempts,
        .first_byte_timeout_ms = (int)first_byte_timeout_ms,
        .retry_budget_percent = retry_budget_percent,
        .retry_budget_min = (int)retry_budget_min,
        .breaker_failures = (int)breaker_failures,
        .breaker_base_cooldown_ms = (int)breaker_base_cooldown_ms,
        .breaker_cooldown_ms = (int)breaker_cooldown_ms,
        .max_header_bytes = (size_t)max_header_bytes,
        .max_url_bytes = (size_t)max_url_bytes,
        .conns = &conns,
        .stream_idle_timeout_ms = (int)stream_idle_timeout_ms,
    };
    gateway_server_t *srv = parts.gateway =
        gateway_server_new(&gc, ipl_service_metrics(svc), err, sizeof err);
    if (!srv) {
        fprintf(stderr, "inferplane-gateway: %s\n", err);
        decider_server_destroy(&parts.decider);
        gateway_limits_destroy(&limits);
        ipl_config_destroy(&dconf);
        ipl_service_destroy(&svc);
        return 2;
    }
    ipl_admin_t *admin = ipl_service_admin(svc);
    if (admin) {
        ipl_admin_set_ready(admin, s_ready, &parts);
        gateway_server_register_admin(srv, ipl_admin_httpd(admin)); /* first: its /debug/policy */
        if (parts.decider) decider_server_register(parts.decider, ipl_admin_httpd(admin));
    }
    if (ipl_service_serve(svc) != 0 || gateway_server_start(srv) != 0) {
        fprintf(stderr, "inferplane-gateway: cannot start serving\n");
        ipl_service_stop(svc);
        gateway_server_destroy(&srv);
        gateway_limits_destroy(&limits);
        decider_server_destroy(&parts.decider);
        ipl_config_destroy(&dconf);
        ipl_service_destroy(&svc);
        return 2;
    }
    char quoted[256];
    IPL_INFO("listening", "api=%s port=%d decider=%s exporter=%s",
             ipl_log_quote(quoted, sizeof quoted, listen), gateway_server_port(srv), decider,
             exporter && exporter[0] ? exporter : "-");

    int status = 0;
    if (parts.decider) {
        decider_server_run(parts.decider); /* until stopping, or its poll fails (logged) */
        status = ipl_signal_stopping() ? 0 : 1;
    }
    if (!status) status = ipl_loop_run(NULL, 0, 1000, NULL, NULL) ? 1 : 0; /* until stopping */

    IPL_INFO("stopping", NULL);
    /* /readyz stops calling into the server once stopping; unhook it anyway. The metrics
     * registry (the service's) outlives the server, which updates it until destroyed. */
    if (admin) ipl_admin_set_ready(admin, NULL, NULL);
    /* A signal drains (gateway_drain: what is in flight finishes, within the timeout); a
     * failed loop does not wait. With --decider embedded the decider's loop has ended: a
     * request still to be decided gets 503 route_timeout meanwhile. */
    if (ipl_signal_stopping()) gateway_server_drain(srv, (int)drain_timeout_ms);
    gateway_server_destroy(&srv);
    ipl_service_stop(svc); /* the decider's admin handlers are done before it goes */
    gateway_limits_destroy(&limits);
    decider_server_destroy(&parts.decider);
    ipl_config_destroy(&dconf);
    ipl_service_destroy(&svc);
    return status;
}
