/*
 * inferplane-decider — answers "where should this request go?" from a local replica of the
 * cluster state and the compiled policy (see decider_server.h for the sockets and threads,
 * decider_router.h for the choice).
 */
#include <stdio.h>

#include "decider_options.h"
#include "decider_server.h"
#include "ipl_cpu.h"
#include "ipl_log.h"
#include "ipl_service.h"

int main(int argc, char **argv)
{
    ipl_service_t *svc = ipl_service_new("decider",
                                         "decision server: picks the worker for each request "
                                         "from a replica of the cluster state and the policy",
                                         "127.0.0.1:9104");
    if (!svc) return 2;
    decider_options_t o;
    decider_options_add(&o, ipl_service_config(svc), false);
    int rc = ipl_service_start(svc, argc, argv);
    if (rc != 0) {
        ipl_service_destroy(&svc);
        return rc > 0 ? 0 : 2;
    }
    char err[512];
    if (decider_options_check(&o, err, sizeof err) != 0) {
        fprintf(stderr, "inferplane-decider: %s\n", err);
        ipl_service_destroy(&svc);
        return 2;
    }
    decider_server_config_t cfg;
    decider_options_server_config(&o, &cfg);
    int cpu = (int)o.cpu;
    if (cpu >= 0) ipl_cpu_pin_zmq_io(cpu); /* before the first socket */
    decider_server_t *server = decider_server_new(&cfg, ipl_service_metrics(svc), err, sizeof err);
    if (!server) {
        fprintf(stderr, "inferplane-decider: %s\n", err);
        ipl_service_destroy(&svc);
        return 2;
    }
    ipl_admin_t *admin = ipl_service_admin(svc);
    if (admin) {
        ipl_admin_set_ready(admin, decider_server_ready, server);
        decider_server_register(server, ipl_admin_httpd(admin));
    }
    if (ipl_service_serve(svc) != 0) {
        fprintf(stderr, "inferplane-decider: cannot start the admin server\n");
        decider_server_destroy(&server);
        ipl_service_destroy(&svc);
        return 2;
    }
    char q1[256], q2[256], q3[256], q4[256], q5[256];
    IPL_INFO("listening",
             "listen=%s state_sub=%s state_snapshot=%s strategy=%s peer_pub=%s peers=%s",
             ipl_log_quote(q1, sizeof q1, o.listen), ipl_log_quote(q2, sizeof q2, o.state_sub),
             ipl_log_quote(q3, sizeof q3, o.state_snapshot), o.strategy,
             ipl_log_quote(q4, sizeof q4, o.peer_pub ? o.peer_pub : ""),
             ipl_log_quote(q5, sizeof q5, o.peers ? o.peers : ""));
    /* Pinned last, so that the threads made above (admin server, policy view) stay free. */
    if (cpu >= 0 && ipl_cpu_pin_thread(cpu) == 0) IPL_INFO("pinned", "cpu=%d", cpu);
    decider_server_run(server);
    IPL_INFO("stopping", NULL);
    ipl_service_stop(svc); /* admin stopped before the state its handlers read goes away */
    decider_server_destroy(&server);
    ipl_service_destroy(&svc);
    return 0;
}
