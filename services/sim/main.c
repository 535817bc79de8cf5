/*
 * inferplane-sim — a simulated vLLM worker: vLLM's command line, OpenAI API, /metrics and
 * KV-event stream, in front of a continuous-batching engine model in simulated time.
 *
 * Wiring:  flags ─► profile ─► kvpub (ZMQ PUB + replay ROUTER) ─► engine (thread) ─► api
 *          (routes on one HTTP server at --host:--port, like vLLM: no separate admin port
 *          unless --admin-listen is given). The flags and their checks are sim_options'.
 * Shutdown (SIGTERM/SIGINT): the engine aborts every request (streams end), writers drain,
 * then the HTTP server, engine and publisher are torn down — well under 2 s.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipl_httpd.h"
#include "ipl_log.h"
#include "ipl_loop.h"
#include "ipl_service.h"
#include "ipl_signal.h"
#include "ipl_prompt.h"
#include "sim_api.h"
#include "sim_engine.h"
#include "sim_kvpub.h"
#include "sim_options.h"

/* The engine's KV sink is the publisher. */
static int s_kv_publish(void *kvpub, const sim_kvbatch_t *batch)
{
    return sim_kvpub_publish(kvpub, batch);
}

static void s_kv_restart(void *kvpub)
{
    sim_kvpub_restart(kvpub);
}

/* --- the restart fault's signal --------------------------------------------------------- */

static int s_restart_pipe[2] = {-1, -1};

static void s_on_sigusr1(int sig)
{
    (void)sig;
    int saved = errno;
    ssize_t w = write(s_restart_pipe[1], "r", 1);
    (void)w;
    errno = saved;
}

static int s_install_restart_signal(void)
{
    if (pipe(s_restart_pipe) != 0) return -1;
    struct sigaction sa = {.sa_handler = s_on_sigusr1};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    return sigaction(SIGUSR1, &sa, NULL);
}

/* SIGUSR1 arrived (the restart fault): the engine and the publisher start again. */
static void s_on_restart(void *api)
{
    char buf[16];
    if (read(s_restart_pipe[0], buf, sizeof buf) > 0) sim_api_restart(api);
}

int main(int argc, char **argv)
{
    sim_options_t o;
    ipl_service_t *svc = ipl_service_new("sim",
                                         "simulated vLLM worker (OpenAI API, /metrics, "
                                         "KV events) in simulated time",
                                         "off");
    if (!svc) return 2;
    ipl_config_t *cfg = ipl_service_config(svc);
    sim_options_add(&o, cfg);
    int nargc = 0;
    char *joined = NULL;
    char **nargv = sim_options_argv(argc, argv, &nargc, &joined);
    int rc = nargv ? ipl_service_start(svc, nargc, nargv) : -1;
    free(nargv);
    free(joined);
    if (rc != 0) {
        ipl_service_destroy(&svc);
        return rc > 0 ? 0 : 2;
    }
    if (sim_options_check(&o, cfg, stderr) != 0) {
        sim_options_clear(&o);
        ipl_service_destroy(&svc);
        return 2;
    }
    if (s_install_restart_signal() != 0) {
        fprintf(stderr, "inferplane-sim: cannot install the SIGUSR1 handler: %s\n",
                strerror(errno));
        sim_options_clear(&o);
        ipl_service_destroy(&svc);
        return 2;
    }

    int exit_code = 2;
    sim_kvpub_t *kvpub = NULL;
    sim_engine_t *engine = NULL;
    sim_api_t *api = NULL;
    ipl_httpd_t *httpd = NULL;
    char err[512] = "", listen[300];
    ipl_prompt_t *prompt = ipl_prompt_open(o.tokenizer, err, sizeof err);
    if (!prompt) {
        fprintf(stderr, "inferplane-sim: --tokenizer: %s\n", err);
        goto done;
    }
    if (o.kv_config.enabled &&
        !(kvpub = sim_kvpub_new(&o.kv_config, &o.kv_opts, err, sizeof err))) {
        fprintf(stderr, "inferplane-sim: %s\n", err);
        goto done;
    }
    sim_engine_config_t ecfg;
    sim_options_engine_config(&o, &ecfg);
    ecfg.kv_publish = kvpub ? s_kv_publish : NULL;
    ecfg.kv_restart = kvpub ? s_kv_restart : NULL;
    ecfg.kv_sink = kvpub;
    ecfg.metrics = ipl_service_metrics(svc);
    engine = sim_engine_new(&ecfg);
    sim_api_config_t acfg;
    sim_options_api_config(&o, &acfg);
    api = engine ? sim_api_new(&acfg, engine, prompt, ipl_service_metrics(svc)) : NULL;
    if (!api) goto done;
    ipl_metrics_t *m = ipl_service_metrics(svc);
    char model[256], labels[768];
    ipl_metrics_escape(model, sizeof model, o.model_names[0]);
    snprintf(labels, sizeof labels,
             "block_size=\"%" PRId64 "\",cache_dtype=\"auto\",enable_prefix_caching=\"True\","
             "engine=\"0\",gpu_memory_utilization=\"0.9\",num_gpu_blocks=\"%u\","
             "prefix_caching_hash_algo=\"%s\",sim_profile=\"%s\"",
             o.block_size, o.prof.num_gpu_blocks, sim_hash_algo_name(o.hash_algo), o.prof.name);
    ipl_metric_set(ipl_metrics_gauge(m, "vllm:cache_config_info",
                                     "Information of the LLMEngine CacheConfig", labels),
                   1.0);
    snprintf(listen, sizeof listen, "%s:%" PRId64, o.host, o.port);
    httpd = ipl_httpd_new(listen, 64u << 20);
    if (!httpd) {
        fprintf(stderr,
                "inferplane-sim: cannot listen on --host %s --port %" PRId64
                " (in use or not a local address?)\n",
                o.host, o.port);
        goto done;
    }
    sim_api_routes(api, httpd);
    if (sim_engine_start(engine) != 0 || ipl_httpd_start(httpd) != 0 || ipl_service_serve(svc) != 0)
        goto done;
    char q[300];
    IPL_INFO("listening",
             "addr=%s port=%d model=%s profile=%s num_gpu_blocks=%u block_size=%" PRId64
             " max_model_len=%" PRId64 " time_scale=%g kv_events=%s stand_in=%s"
             " api_key_required=%s network_latency_ms=%" PRId64,
             ipl_log_quote(q, sizeof q, listen), ipl_httpd_port(httpd), o.model_names[0],
             o.prof.name, o.prof.num_gpu_blocks, o.block_size, o.max_model_len, o.time_scale,
             kvpub ? "on" : "off", o.standin_on ? "on" : "off", o.napi_keys ? "yes" : "no",
             o.network_latency_ms);
    const ipl_loop_item_t items[] = {{NULL, s_restart_pipe[0], s_on_restart, api}};
    if (ipl_loop_run(items, 1, 1000, NULL, NULL) != 0) goto done;
    exit_code = 0;
done:
    if (engine) sim_engine_stop(engine); /* every request ends: streams finish, handlers return */
    if (api) sim_api_drain(api, 1000);
    ipl_httpd_destroy(&httpd);
    sim_api_destroy(&api);
    sim_engine_destroy(&engine);
    sim_kvpub_destroy(&kvpub);
    ipl_prompt_destroy(&prompt);
    sim_options_clear(&o);
    ipl_service_destroy(&svc);
    return exit_code;
}
