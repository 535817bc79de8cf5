/*
 * inferplane-exporter — turns request RECORDs into Prometheus series.
 *
 *   gateways, deciders ──PUSH──► PULL bind (--pull) ──► exporter_series ──► admin /metrics
 *
 * One thread receives and applies records (exporter_server); the admin server renders the
 * registry.
 */
#include <stdio.h>

#include "exporter_server.h"
#include "ipl_log.h"
#include "ipl_service.h"

int main(int argc, char **argv)
{
    char *pull_endpoint = NULL;
    int64_t max_label_sets = EXPORTER_SERIES_DEFAULT_MAX_LABEL_SETS;
    int64_t max_tenants = 0, max_models = 0, max_pools = 0, max_endpoints = 0;
    ipl_service_t *svc = ipl_service_new("exporter",
                                         "Prometheus exporter of request records (PULL of "
                                         "RECORD messages from gateways and deciders)",
                                         "127.0.0.1:9105");
    if (!svc) return 2;
    ipl_config_t *cfg = ipl_service_config(svc);
    ipl_config_add(cfg, "pull", IPL_OPT_STR, &pull_endpoint, "tcp://127.0.0.1:7031",
                   "ZeroMQ endpoint to bind the PULL socket that receives RECORDs on");
    ipl_config_add(cfg, "max-label-sets", IPL_OPT_INT, &max_label_sets, "10000",
                   "distinct (model, tenant, pool, endpoint) label sets kept; records beyond "
                   "are counted under \"__overflow__\"");
    ipl_config_range(cfg, "max-label-sets", 1, 1e9);
    ipl_config_add(cfg, "max-tenants", IPL_OPT_INT, &max_tenants, "1000",
                   "distinct tenant label values kept; later tenants are counted as "
                   "tenant=\"__overflow__\"");
    ipl_config_range(cfg, "max-tenants", 1, 1e7);
    ipl_config_add(cfg, "max-models", IPL_OPT_INT, &max_models, "200",
                   "distinct model label values kept (the rest: \"__overflow__\")");
    ipl_config_range(cfg, "max-models", 1, 1e7);
    ipl_config_add(cfg, "max-pools", IPL_OPT_INT, &max_pools, "200",
                   "distinct pool label values kept (the rest: \"__overflow__\")");
    ipl_config_range(cfg, "max-pools", 1, 1e7);
    ipl_config_add(cfg, "max-endpoints", IPL_OPT_INT, &max_endpoints, "1000",
                   "distinct endpoint (worker or backend URL) label values kept (the rest: "
                   "\"__overflow__\")");
    ipl_config_range(cfg, "max-endpoints", 1, 1e7);
    int rc = ipl_service_start(svc, argc, argv);
    if (rc != 0) {
        ipl_service_destroy(&svc);
        return rc > 0 ? 0 : 2;
    }

    exporter_server_config_t ec = {.pull = pull_endpoint,
                                   .pull_source = ipl_config_source(cfg, "pull"),
                                   .series = {.max_label_sets = (size_t)max_label_sets,
                                              .max_tenants = (size_t)max_tenants,
                                              .max_models = (size_t)max_models,
                                              .max_pools = (size_t)max_pools,
                                              .max_endpoints = (size_t)max_endpoints}};
    char err[512];
    exporter_server_t *server = exporter_server_new(&ec, ipl_service_metrics(svc), err, sizeof err);
    if (!server) {
        fprintf(stderr, "inferplane-exporter: %s\n", err);
        ipl_service_destroy(&svc);
        return 2;
    }
    if (ipl_service_serve(svc) != 0) {
        fprintf(stderr, "inferplane-exporter: cannot start\n");
        exporter_server_destroy(&server);
        ipl_service_destroy(&svc);
        return 2;
    }
    char quoted[256];
    IPL_INFO("listening", "pull=%s", ipl_log_quote(quoted, sizeof quoted, pull_endpoint));

    exporter_server_run(server); /* a poll failure is logged; the exit status stays 0 */

    exporter_series_t *series = exporter_server_series(server);
    IPL_INFO("stopping", "records=%llu dropped=%llu",
             (unsigned long long)exporter_series_records(series),
             (unsigned long long)exporter_series_dropped(series));
    ipl_service_stop(svc); /* admin stopped before the state it reads goes away */
    exporter_server_destroy(&server);
    ipl_service_destroy(&svc);
    return 0;
}
