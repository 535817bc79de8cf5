/*
 * inferplane-policy — compiles a directory of policy resources (InferenceWorkerSet,
 * InferencePool YAML) and serves the result to deciders and collectors.
 *
 *   --dir (*.yaml) ──► policy_server ──PUB (--pub)──────► SUB of every ipl_policy_view
 *                                  ◄─ROUTER (--rep)──► POLICY_REQ / POLICY
 *
 * Admin: /debug/policy (the compiled view and the last reload's errors), /readyz (ready once
 * a valid policy is loaded), /metrics.
 */
#include <stdio.h>

#include "ipl_log.h"
#include "ipl_service.h"
#include "policy_server.h"

int main(int argc, char **argv)
{
    char *dir = NULL, *pub = NULL, *rep = NULL;
    int64_t republish_ms = 2000;
    ipl_service_t *svc = ipl_service_new("policy",
                                         "policy engine: compiles InferenceWorkerSet and "
                                         "InferencePool YAML into the routing policy",
                                         "127.0.0.1:9103");
    if (!svc) return 2;
    ipl_config_t *cfg = ipl_service_config(svc);
    ipl_config_add(cfg, "dir", IPL_OPT_STR, &dir, "examples/policy",
                   "directory of policy resources (*.yaml, *.yml), re-read when files change");
    ipl_config_add(cfg, "pub", IPL_OPT_STR, &pub, "tcp://127.0.0.1:7011",
                   "ZeroMQ endpoint to bind the PUB socket that publishes the compiled policy");
    ipl_config_add(cfg, "rep", IPL_OPT_STR, &rep, "tcp://127.0.0.1:7012",
                   "ZeroMQ endpoint to bind the ROUTER socket that answers POLICY_REQ");
    ipl_config_add(cfg, "republish-ms", IPL_OPT_INT, &republish_ms, "2000",
                   "publish the policy again this often even when it does not change (ms)");
    ipl_config_range(cfg, "republish-ms", 10, 3600000);
    int rc = ipl_service_start(svc, argc, argv);
    if (rc != 0) {
        ipl_service_destroy(&svc);
        return rc > 0 ? 0 : 2;
    }
    char err[512];
    policy_server_t *server = policy_server_new(dir, pub, rep, (uint64_t)republish_ms,
                                                ipl_service_metrics(svc), err, sizeof err);
    if (!server) {
        fprintf(stderr, "inferplane-policy: %s\n", err);
        ipl_service_destroy(&svc);
        return 2;
    }
    // A broken directory at start is not fatal: the service reports it and waits for a fix.
    policy_server_reload(server, true);
    ipl_admin_t *admin = ipl_service_admin(svc);
    if (admin) {
        ipl_admin_set_ready(admin, policy_server_ready, server);
        ipl_httpd_route(ipl_admin_httpd(admin), "GET", "/debug/policy", policy_server_debug,
                        server);
    }
    if (ipl_service_serve(svc) != 0) {
        fprintf(stderr, "inferplane-policy: cannot start the admin server\n");
        policy_server_destroy(&server);
        ipl_service_destroy(&svc);
        return 2;
    }
    char q1[256], q2[256], q3[256];
    IPL_INFO("listening", "dir=%s pub=%s rep=%s", ipl_log_quote(q1, sizeof q1, dir),
             ipl_log_quote(q2, sizeof q2, pub), ipl_log_quote(q3, sizeof q3, rep));
    policy_server_run(server);
    IPL_INFO("stopping", "version=%llu", (unsigned long long)policy_server_version(server));
    ipl_service_stop(svc); /* admin stopped before the state its handlers read goes away */
    policy_server_destroy(&server);
    ipl_service_destroy(&svc);
    return 0;
}
