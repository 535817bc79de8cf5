/*
 * inferplane-policy — compiles a directory of policy resources (InferenceWorkerSet,
 * InferencePool YAML) and serves the result to deciders and collectors.
 *
 *   --dir (*.yaml) ──► policy_server ──PUB (--pub)──────► SUB of every ipl_policy_view
 *                                  ◄─ROUTER (--rep)──► POLICY_REQ / POLICY
 *
 * Admin: GET /debug/policy (the policy in service, its version and hash, the last reload's
 * errors, how the directory is watched), POST /validate (policy_validate: compile YAML sent
 * in the request, install nothing), /readyz (ready once a valid policy is loaded), /metrics.
 */
#include <stdio.h>
#include <string.h>

#include "ipl_log.h"
#include "ipl_service.h"
#include "policy_server.h"
#include "policy_validate.h"

int main(int argc, char **argv)
{
    char *dir = NULL, *pub = NULL, *rep = NULL, *watch = NULL;
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
    ipl_config_add(cfg, "watch", IPL_OPT_STR, &watch, "auto",
                   "how changes in --dir are noticed: auto (inotify, reloading 100 ms after the "
                   "last change; polling every second where inotify cannot be used) or poll");
    ipl_config_range(cfg, "republish-ms", 10, 3600000);
    int rc = ipl_service_start(svc, argc, argv);
    if (rc != 0) {
        ipl_service_destroy(&svc);
        return rc > 0 ? 0 : 2;
    }
    if (strcmp(watch, "auto") && strcmp(watch, "poll")) {
        fprintf(stderr, "inferplane-policy: --watch \"%s\" is not known; use auto or poll\n",
                watch);
        ipl_service_destroy(&svc);
        return 2;
    }
    char err[512];
    policy_server_config_t pc = {.dir = dir,
                                 .pub = pub,
                                 .rep = rep,
                                 .republish_ms = (uint64_t)republish_ms,
                                 .poll = !strcmp(watch, "poll")};
    policy_server_t *server = policy_server_new(&pc, ipl_service_metrics(svc), err, sizeof err);
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
        ipl_httpd_route(ipl_admin_httpd(admin), "POST", "/validate", policy_validate_http, NULL);
    }
    if (ipl_service_serve(svc) != 0) {
        fprintf(stderr, "inferplane-policy: cannot start the admin server\n");
        policy_server_destroy(&server);
        ipl_service_destroy(&svc);
        return 2;
    }
    char q1[256], q2[256], q3[256];
    IPL_INFO("listening", "dir=%s pub=%s rep=%s watch=%s", ipl_log_quote(q1, sizeof q1, dir),
             ipl_log_quote(q2, sizeof q2, pub), ipl_log_quote(q3, sizeof q3, rep),
             policy_server_watch_mode(server));
    policy_server_run(server);
    IPL_INFO("stopping", "version=%llu", (unsigned long long)policy_server_version(server));
    ipl_service_stop(svc); /* admin stopped before the state its handlers read goes away */
    policy_server_destroy(&server);
    ipl_service_destroy(&svc);
    return 0;
}
