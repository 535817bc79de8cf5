/*
 * inferplane-policy — compiles a directory of policy resources (InferenceWorkerSet,
 * InferencePool YAML) and serves the result to deciders and collectors.
 *
 *   --dir (*.yaml) ──► policy_server ──PUB (--pub)──────► SUB of every ipl_policy_view
 *                                  ◄─ROUTER (--rep)──► POLICY_REQ / POLICY
 *
 * Kubernetes mode (--kube-api): instead of --dir, the resources are listed and watched on a
 * Kubernetes API server (policy_kube, its own thread) and their status conditions written back.
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
    char *kube_api = NULL, *kube_ns = NULL, *kube_token = NULL, *kube_ca = NULL;
    int64_t republish_ms = 2000;
    ipl_service_t *svc = ipl_service_new("policy",
                                         "policy engine: compiles the inferplane.io resources "
                                         "(YAML files or Kubernetes) into the routing policy",
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
    ipl_config_add(cfg, "kube-api", IPL_OPT_STR, &kube_api, "",
                   "Kubernetes mode: list and watch the policy resources on this API server "
                   "(http(s)://host:port, or in-cluster for the pod's service account) instead "
                   "of reading --dir, and write their status conditions; empty: files mode");
    ipl_config_add(cfg, "kube-namespace", IPL_OPT_STR, &kube_ns, "",
                   "Kubernetes mode: the namespace to watch; empty: every namespace");
    ipl_config_add(cfg, "kube-token-file", IPL_OPT_STR, &kube_token, "",
                   "Kubernetes mode: a file holding the bearer token, read before each request "
                   "(in-cluster: the service account's token by default)");
    ipl_config_add(cfg, "kube-ca-file", IPL_OPT_STR, &kube_ca, "",
                   "Kubernetes mode: the CA bundle for an https API server (in-cluster: the "
                   "service account's ca.crt by default; empty otherwise: the system's)");
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
    policy_kube_t *kube = NULL;
    if (*kube_api) {
        const char *src = ipl_config_source(cfg, "dir");
        if (src && strcmp(src, "default")) {
            fprintf(stderr,
                    "inferplane-policy: --dir (from the %s) and --kube-api are exclusive: the "
                    "policy comes either from a directory or from the Kubernetes API; drop one\n",
                    src);
            ipl_service_destroy(&svc);
            return 2;
        }
        policy_kube_config_t kc = {
            .api = kube_api, .namespace = kube_ns, .token_file = kube_token, .ca_file = kube_ca};
        kube = policy_kube_new(&kc, ipl_service_metrics(svc), err, sizeof err);
        if (!kube) {
            fprintf(stderr, "inferplane-policy: %s\n", err);
            ipl_service_destroy(&svc);
            return 2;
        }
    }
    policy_server_config_t pc = {.dir = dir,
                                 .kube = kube,
                                 .pub = pub,
                                 .rep = rep,
                                 .republish_ms = (uint64_t)republish_ms,
                                 .poll = !strcmp(watch, "poll")};
    policy_server_t *server = policy_server_new(&pc, ipl_service_metrics(svc), err, sizeof err);
    if (!server) {
        fprintf(stderr, "inferplane-policy: %s\n", err);
        policy_kube_destroy(&kube);
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
        // A pure check of the YAML it is sent, for admission webhooks that send no token;
        // /debug/policy stays protected (ipl_admin).
        ipl_admin_open(admin, "/validate");
    }
    if (ipl_service_serve(svc) != 0) {
        fprintf(stderr, "inferplane-policy: cannot start the admin server\n");
        policy_server_destroy(&server);
        policy_kube_destroy(&kube);
        ipl_service_destroy(&svc);
        return 2;
    }
    char q1[256], q2[256], q3[256];
    IPL_INFO("listening", "source=%s pub=%s rep=%s watch=%s",
             ipl_log_quote(q1, sizeof q1, kube ? kube_api : dir), ipl_log_quote(q2, sizeof q2, pub),
             ipl_log_quote(q3, sizeof q3, rep), policy_server_watch_mode(server));
    policy_server_run(server);
    IPL_INFO("stopping", "version=%llu", (unsigned long long)policy_server_version(server));
    ipl_service_stop(svc); /* admin stopped before the state its handlers read goes away */
    policy_server_destroy(&server);
    policy_kube_destroy(&kube); /* after the server, which borrows it */
    ipl_service_destroy(&svc);
    return 0;
}
