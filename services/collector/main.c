/*
 * inferplane-collector — follows the vLLM workers of a node: their KV-cache events (re-hashed
 * into our chained block hashes) and their /metrics load, forwarded to the aggregator(s).
 * See collector_node.h for the flow and collector_stream.h for the event semantics.
 */
#include <stdio.h>

#include "collector_node.h"
#include "ipl_log.h"
#include "ipl_service.h"

int main(int argc, char **argv)
{
    char *aggregators = NULL, *workers = NULL, *policy_sub = NULL, *policy_req = NULL;
    char *prefix = NULL, *node_name = NULL, *checkpoint_dir = NULL;
    int64_t interval_ms = 100, checkpoint_ms = 2000;
    ipl_service_t *svc = ipl_service_new(
        "collector",
        "follows vLLM workers' KV events and /metrics and forwards them to the aggregator",
        "127.0.0.1:9101");
    if (!svc) return 2;
    ipl_config_t *cfg = ipl_service_config(svc);
    ipl_config_add(cfg, "aggregator", IPL_OPT_STR, &aggregators, "tcp://127.0.0.1:7001",
                   "aggregator PULL endpoints to PUSH to, comma-separated (each gets every "
                   "message: active-active)");
    ipl_config_add(cfg, "policy-sub", IPL_OPT_STR, &policy_sub, "tcp://127.0.0.1:7011",
                   "policy service PUB endpoint (worker list, unless --workers is given)");
    ipl_config_add(cfg, "policy-req", IPL_OPT_STR, &policy_req, "tcp://127.0.0.1:7012",
                   "policy service ROUTER endpoint (asked for the policy at start)");
    ipl_config_add(cfg, "workers", IPL_OPT_STR, &workers, NULL,
                   "static worker list instead of the policy's: "
                   "name=url|kv_endpoint[|replay_endpoint], comma-separated");
    ipl_config_add(cfg, "worker-prefix", IPL_OPT_STR, &prefix, NULL,
                   "collect only the policy's workers whose name starts with this (with "
                   "--node-name: of those without a node)");
    ipl_config_add(cfg, "node-name", IPL_OPT_STR, &node_name, NULL,
                   "collect only the policy's workers on this Kubernetes node (the pods an "
                   "InferenceWorkerSet selector found, by their spec.nodeName); workers without "
                   "a node only when --worker-prefix matches them");
    ipl_config_add(cfg, "scrape-interval-ms", IPL_OPT_INT, &interval_ms, "100",
                   "period of the workers' /metrics scrapes");
    ipl_config_range(cfg, "scrape-interval-ms", 10, 600000);
    ipl_config_add(cfg, "checkpoint-dir", IPL_OPT_STR, &checkpoint_dir, NULL,
                   "directory for a checkpoint per worker (its blocks and last batch), so that a "
                   "restart resumes from it instead of replaying the worker's whole history");
    ipl_config_add(cfg, "checkpoint-interval-ms", IPL_OPT_INT, &checkpoint_ms, "2000",
                   "period of the checkpoints (also written at shutdown)");
    ipl_config_range(cfg, "checkpoint-interval-ms", 10, 3600000);
    int rc = ipl_service_start(svc, argc, argv);
    if (rc != 0) {
        ipl_service_destroy(&svc);
        return rc > 0 ? 0 : 2;
    }
    collector_config_t cc = {.aggregators = aggregators,
                             .workers = workers,
                             .policy_sub = policy_sub,
                             .policy_req = policy_req,
                             .worker_prefix = prefix,
                             .node_name = node_name,
                             .scrape_interval_ms = interval_ms,
                             .checkpoint_dir = checkpoint_dir,
                             .checkpoint_interval_ms = checkpoint_ms};
    char err[512];
    collector_node_t *node = collector_node_new(&cc, ipl_service_metrics(svc), err, sizeof err);
    if (!node) {
        fprintf(stderr, "inferplane-collector: %s\n", err);
        ipl_service_destroy(&svc);
        return 2;
    }
    ipl_admin_t *admin = ipl_service_admin(svc);
    if (admin) {
        collector_node_routes(node, ipl_admin_httpd(admin));
        ipl_admin_set_ready(admin, collector_node_ready, node);
    }
    if (ipl_service_serve(svc) != 0) {
        fprintf(stderr, "inferplane-collector: cannot start the admin server\n");
        ipl_service_destroy(&svc);
        collector_node_destroy(&node);
        return 2;
    }
    char q[256];
    IPL_INFO("collecting", "aggregators=%s workers=%zu source=%s",
             ipl_log_quote(q, sizeof q, aggregators), collector_node_nworkers(node),
             (workers && *workers) ? "static" : "policy");
    rc = collector_node_run(node);
    ipl_service_stop(svc); /* admin stopped before the state it reads goes away */
    collector_node_destroy(&node);
    ipl_service_destroy(&svc);
    return rc == 0 ? 0 : 1;
}
