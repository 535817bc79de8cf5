/*
 * inferplane-gateway — the client-facing OpenAI-compatible API.
 *
 *   clients ──HTTP──► gateway_server ──ROUTE_REQ──► decider
 *                          │ ◄──────── ROUTE_REP ──┘ (same connection: OBSERVED ──► decider)
 *                          ├──HTTP (libcurl, streamed)──► worker
 *                          └──RECORD (PUSH)──► exporter
 *
 * main only declares the flags and wires the service together; see gateway_server.h.
 */
#include <poll.h>
#include <stdio.h>

#include "gateway_server.h"
#include "ipl_log.h"
#include "ipl_service.h"
#include "ipl_signal.h"

int main(int argc, char **argv)
{
    char *listen = NULL, *decider = NULL, *exporter = NULL, *policy_sub = NULL, *policy_req = NULL,
         *tokenizer = NULL;
    int64_t block_size = 16, max_body = 8388608, route_timeout_ms = 1000,
            upstream_timeout_ms = 600000, connect_timeout_ms = 2000;
    ipl_service_t *svc = ipl_service_new(
        "gateway", "OpenAI-compatible API that routes each request to the best worker",
        "127.0.0.1:9106");
    if (!svc) return 2;
    ipl_config_t *cfg = ipl_service_config(svc);
    ipl_config_add(cfg, "listen", IPL_OPT_STR, &listen, "127.0.0.1:8080",
                   "address of the OpenAI-compatible API");
    ipl_config_add(cfg, "decider", IPL_OPT_STR, &decider, "tcp://127.0.0.1:7021",
                   "ZeroMQ endpoint of the decider's ROUTER (route requests)");
    ipl_config_add(cfg, "exporter", IPL_OPT_STR, &exporter, "tcp://127.0.0.1:7031",
                   "ZeroMQ endpoint of the exporter's PULL socket (request records); \"\" for "
                   "none");
    ipl_config_add(cfg, "policy-sub", IPL_OPT_STR, &policy_sub, "tcp://127.0.0.1:7011",
                   "ZeroMQ endpoint of the policy service's PUB socket");
    ipl_config_add(cfg, "policy-req", IPL_OPT_STR, &policy_req, "tcp://127.0.0.1:7012",
                   "ZeroMQ endpoint of the policy service's ROUTER (policy requests)");
    ipl_config_add(cfg, "tokenizer", IPL_OPT_STR, &tokenizer, "builtin",
                   "the workers' tokenizer: a tokenizer.json, a directory holding one, or "
                   "\"builtin\" (block hashes match only when this equals the workers')");
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
    ipl_config_range(cfg, "block-size", 1, 65536);
    ipl_config_range(cfg, "max-body-bytes", 1024, (double)(1 << 30));
    ipl_config_range(cfg, "route-timeout-ms", 1, 600000);
    ipl_config_range(cfg, "upstream-timeout-ms", 1, 86400000);
    ipl_config_range(cfg, "connect-timeout-ms", 1, 600000);
    int rc = ipl_service_start(svc, argc, argv);
    if (rc != 0) {
        ipl_service_destroy(&svc);
        return rc > 0 ? 0 : 2;
    }

    gateway_server_config_t gc = {
        .listen = listen,
        .decider = decider,
        .exporter = exporter,
        .policy_sub = policy_sub,
        .policy_req = policy_req,
        .tokenizer = tokenizer,
        .block_size = (int)block_size,
        .max_body = (size_t)max_body,
        .route_timeout_ms = (int)route_timeout_ms,
        .upstream_timeout_ms = (int)upstream_timeout_ms,
        .connect_timeout_ms = (int)connect_timeout_ms,
    };
    char err[512] = "";
    gateway_server_t *srv = gateway_server_new(&gc, ipl_service_metrics(svc), err, sizeof err);
    if (!srv) {
        fprintf(stderr, "inferplane-gateway: %s\n", err);
        ipl_service_destroy(&svc);
        return 2;
    }
    if (ipl_service_admin(svc))
        ipl_admin_set_ready(ipl_service_admin(svc), gateway_server_ready, srv);
    if (ipl_service_serve(svc) != 0 || gateway_server_start(srv) != 0) {
        fprintf(stderr, "inferplane-gateway: cannot start serving\n");
        gateway_server_destroy(&srv);
        ipl_service_destroy(&svc);
        return 2;
    }
    char quoted[256];
    IPL_INFO("listening", "api=%s port=%d decider=%s exporter=%s",
             ipl_log_quote(quoted, sizeof quoted, listen), gateway_server_port(srv), decider,
             exporter && exporter[0] ? exporter : "-");

    while (!ipl_signal_stopping()) {
        struct pollfd p = {.fd = ipl_signal_fd(), .events = POLLIN};
        (void)poll(&p, 1, 1000);
    }

    IPL_INFO("stopping", NULL);
    /* /readyz stops calling into the server once stopping; unhook it anyway. The metrics
     * registry (the service's) outlives the server, which updates it until destroyed. */
    if (ipl_service_admin(svc)) ipl_admin_set_ready(ipl_service_admin(svc), NULL, NULL);
    gateway_server_destroy(&srv);
    ipl_service_destroy(&svc);
    return 0;
}
