/*
 * inferplane-aggregator — the cluster state: prefix index + per-worker load, replicated to
 * deciders with the ZeroMQ Guide's Clone pattern (sequenced deltas on PUB, snapshots on
 * ROUTER). See aggregator_server.h for the sockets and aggregator_state.h for the semantics.
 */
#include <stdio.h>

#include "aggregator_server.h"
#include "ipl_log.h"
#include "ipl_service.h"

int main(int argc, char **argv)
{
    char *pull = NULL, *pub = NULL, *snapshot = NULL;
    int64_t heartbeat_ms = 1000, stale_ms = 5000;
    ipl_service_t *svc = ipl_service_new(
        "aggregator",
        "cluster state: prefix index and worker load from collectors, published to deciders",
        "127.0.0.1:9102");
    if (!svc) return 2;
    ipl_config_t *cfg = ipl_service_config(svc);
    ipl_config_add(cfg, "pull", IPL_OPT_STR, &pull, "tcp://127.0.0.1:7001",
                   "ZeroMQ endpoint to bind the PULL socket collectors push KV_EVENT/LOAD to");
    ipl_config_add(cfg, "pub", IPL_OPT_STR, &pub, "tcp://127.0.0.1:7002",
                   "ZeroMQ endpoint to bind the PUB socket of sequenced state deltas");
    ipl_config_add(cfg, "snapshot", IPL_OPT_STR, &snapshot, "tcp://127.0.0.1:7003",
                   "ZeroMQ endpoint to bind the ROUTER socket answering SNAPSHOT_REQ");
    ipl_config_add(cfg, "heartbeat-ms", IPL_OPT_INT, &heartbeat_ms, "1000",
                   "period of the heartbeat (a LOAD per worker with a new seq) on the PUB");
    ipl_config_add(cfg, "stale-ms", IPL_OPT_INT, &stale_ms, "5000",
                   "a worker not heard of for this long is published as health unknown, "
                   "kv_state degraded");
    int rc = ipl_service_start(svc, argc, argv);
    if (rc != 0) {
        ipl_service_destroy(&svc);
        return rc > 0 ? 0 : 2;
    }
    if (heartbeat_ms < 10 || stale_ms < 1) {
        fprintf(stderr,
                "inferplane-aggregator: --heartbeat-ms must be >= 10 and --stale-ms "
                ">= 1 (got %lld, %lld)\n",
                (long long)heartbeat_ms, (long long)stale_ms);
        ipl_service_destroy(&svc);
        return 2;
    }

    aggregator_config_t ac = {.pull = pull,
                              .pub = pub,
                              .snapshot = snapshot,
                              .heartbeat_ms = (uint64_t)heartbeat_ms,
                              .stale_ms = (uint64_t)stale_ms};
    char err[512];
    aggregator_server_t *server =
        aggregator_server_new(&ac, ipl_service_metrics(svc), err, sizeof err);
    if (!server) {
        fprintf(stderr, "inferplane-aggregator: %s\n", err);
        ipl_service_destroy(&svc);
        return 2;
    }
    ipl_admin_t *admin = ipl_service_admin(svc);
    if (admin) aggregator_server_routes(server, ipl_admin_httpd(admin));
    if (ipl_service_serve(svc) != 0) {
        fprintf(stderr, "inferplane-aggregator: cannot start the admin server\n");
        ipl_service_destroy(&svc);
        aggregator_server_destroy(&server);
        return 2;
    }
    char q[3][256];
    IPL_INFO("listening", "pull=%s pub=%s snapshot=%s",
             ipl_log_quote(q[0], sizeof q[0], aggregator_server_endpoint(server, 0)),
             ipl_log_quote(q[1], sizeof q[1], aggregator_server_endpoint(server, 1)),
             ipl_log_quote(q[2], sizeof q[2], aggregator_server_endpoint(server, 2)));

    rc = aggregator_server_run(server);
    ipl_service_stop(svc); /* admin stopped before the state it reads goes away */
    aggregator_server_destroy(&server);
    ipl_service_destroy(&svc);
    return rc == 0 ? 0 : 1;
}
