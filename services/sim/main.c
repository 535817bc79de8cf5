/*
 * inferplane-sim — a simulated vLLM worker: vLLM's command line, OpenAI API, /metrics and
 * KV-event stream, in front of a continuous-batching engine model in simulated time.
 *
 * Wiring:  flags ─► profile ─► kvpub (ZMQ PUB + replay ROUTER) ─► engine (thread) ─► api
 *          (routes on one HTTP server at --host:--port, like vLLM: no separate admin port
 *          unless --admin-listen is given).
 * Shutdown (SIGTERM/SIGINT): the engine aborts every request (streams end), writers drain,
 * then the HTTP server, engine and publisher are torn down — well under 2 s.
 */
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_error.h"
#include "ipl_httpd.h"
#include "ipl_log.h"
#include "ipl_service.h"
#include "ipl_signal.h"
#include "ipl_tokenizer.h"
#include "sim_api.h"
#include "sim_engine.h"
#include "sim_kvpub.h"
#include "sim_profile.h"

typedef struct {
    /* vLLM's flags, names and defaults */
    char *host;
    int64_t port;
    char *served_model_name;
    int64_t block_size;
    int64_t num_gpu_blocks_override;
    int64_t max_num_seqs;
    int64_t max_num_batched_tokens;
    int64_t max_model_len;
    bool enable_prompt_tokens_details;
    int64_t seed;
    char *kv_events_config;
    /* simulator-only */
    double time_scale;
    char *profile;
    char *kv_events_format;
    char *kv_events_bind;
    int64_t replay_layout;
    int64_t drop_every_n_batches;
    double step_s, prefill_token_s, decode_seq_s, context_token_s, request_s;
} s_opts_t;

static void s_declare(ipl_config_t *c, s_opts_t *o)
{
    ipl_config_add(c, "host", IPL_OPT_STR, &o->host, "0.0.0.0", "host name to listen on (vLLM)");
    ipl_config_add(c, "port", IPL_OPT_INT, &o->port, "8000",
                   "port of the OpenAI API, /metrics and /health (vLLM)");
    ipl_config_add(c, "served-model-name", IPL_OPT_STR, &o->served_model_name, "sim-model",
                   "the model name clients ask for (vLLM)");
    ipl_config_add(c, "block-size", IPL_OPT_INT, &o->block_size, "16",
                   "tokens per KV-cache block (vLLM)");
    ipl_config_add(c, "num-gpu-blocks-override", IPL_OPT_INT, &o->num_gpu_blocks_override, NULL,
                   "KV-cache capacity in blocks (vLLM; default: the profile's)");
    ipl_config_add(c, "max-num-seqs", IPL_OPT_INT, &o->max_num_seqs, "256",
                   "running requests at most (vLLM)");
    ipl_config_add(c, "max-num-batched-tokens", IPL_OPT_INT, &o->max_num_batched_tokens, "8192",
                   "tokens per engine step at most; longer prompts are prefilled in chunks "
                   "(vLLM)");
    ipl_config_add(c, "max-model-len", IPL_OPT_INT, &o->max_model_len, "32768",
                   "prompt + max_tokens at most (vLLM); capped to the KV-cache capacity");
    ipl_config_add(c, "enable-prompt-tokens-details", IPL_OPT_BOOL,
                   &o->enable_prompt_tokens_details, "false",
                   "report usage.prompt_tokens_details.cached_tokens (vLLM)");
    ipl_config_add(c, "seed", IPL_OPT_INT, &o->seed, "0",
                   "random seed: output text, and the block-hash seed unless PYTHONHASHSEED "
                   "is set (vLLM)");
    ipl_config_add(c, "kv-events-config", IPL_OPT_STR, &o->kv_events_config, NULL,
                   "vLLM's KV-event JSON: enable_kv_cache_events, publisher, endpoint, "
                   "replay_endpoint, topic, buffer_steps, hwm (vLLM)");
    ipl_config_add(c, "time-scale", IPL_OPT_DOUBLE, &o->time_scale, "1.0",
                   "simulator-only: run this many times faster than real time; every figure "
                   "reported is in simulated seconds");
    ipl_config_add(c, "profile", IPL_OPT_STR, &o->profile, "l40s-27b-fp8",
                   "simulator-only: GPU + model cost profile (l40s-27b-fp8, h100-8b)");
    ipl_config_add(c, "kv-events-format", IPL_OPT_STR, &o->kv_events_format, "map",
                   "simulator-only: event encoding: map (vLLM >= 0.26), array (0.13-0.25), "
                   "array-legacy (0.10-0.12)");
    ipl_config_add(c, "kv-events-bind", IPL_OPT_STR, &o->kv_events_bind, "auto",
                   "simulator-only: KV-event PUB socket: auto (vLLM's rule: bind when the "
                   "endpoint has '*' or '::' or is ipc/inproc, else connect), bind, connect");
    ipl_config_add(c, "replay-layout", IPL_OPT_INT, &o->replay_layout, "3",
                   "simulator-only: replay reply frames: 3 (vLLM >= 0.26, with topic) or 2");
    ipl_config_add(c, "drop-every-n-batches", IPL_OPT_INT, &o->drop_every_n_batches, "0",
                   "simulator-only fault: do not send every Nth KV-event batch (still "
                   "replayable); 0 = off");
    ipl_config_add(c, "sim-step-s", IPL_OPT_DOUBLE, &o->step_s, NULL,
                   "simulator-only: override the profile's fixed cost per step (seconds)");
    ipl_config_add(c, "sim-prefill-token-s", IPL_OPT_DOUBLE, &o->prefill_token_s, NULL,
                   "simulator-only: override the profile's cost per prefill token (seconds)");
    ipl_config_add(c, "sim-decode-seq-s", IPL_OPT_DOUBLE, &o->decode_seq_s, NULL,
                   "simulator-only: override the profile's cost per decoding sequence");
    ipl_config_add(c, "sim-context-token-s", IPL_OPT_DOUBLE, &o->context_token_s, NULL,
                   "simulator-only: override the profile's cost per context token per step");
    ipl_config_add(c, "sim-request-s", IPL_OPT_DOUBLE, &o->request_s, NULL,
                   "simulator-only: override the profile's per-request API latency");
}

/* Applies a profile override when its flag was given. */
static int s_override(ipl_config_t *c, const char *name, double value, double *field)
{
    if (strcmp(ipl_config_source(c, name), "default") == 0) return 0;
    if (value < 0) {
        fprintf(stderr, "inferplane-sim: --%s %g: must be >= 0 (seconds)\n", name, value);
        return -1;
    }
    *field = value;
    return 0;
}

/* Checks the flags; fills the engine's profile. Prints the error and returns -1 if invalid. */
static int s_validate(ipl_config_t *c, s_opts_t *o, sim_profile_t *prof, sim_kvconfig_t *kvc,
                      sim_kvpub_opts_t *kvo)
{
    char names[128], err[512] = "";
    const sim_profile_t *p = sim_profile_find(o->profile);
    if (!p) {
        fprintf(stderr, "inferplane-sim: --profile \"%s\" is unknown (known: %s)\n", o->profile,
                sim_profile_names(names, sizeof names));
        return -1;
    }
    *prof = *p;
    if (s_override(c, "sim-step-s", o->step_s, &prof->step_s) ||
        s_override(c, "sim-prefill-token-s", o->prefill_token_s, &prof->prefill_token_s) ||
        s_override(c, "sim-decode-seq-s", o->decode_seq_s, &prof->decode_seq_s) ||
        s_override(c, "sim-context-token-s", o->context_token_s, &prof->context_token_s) ||
        s_override(c, "sim-request-s", o->request_s, &prof->request_s))
        return -1;
    struct {
        const char *name;
        int64_t value, min, max;
    } ints[] = {
        {"port", o->port, 0, 65535},
        {"block-size", o->block_size, 1, 4096},
        {"num-gpu-blocks-override", o->num_gpu_blocks_override, 0, 100000000},
        {"max-num-seqs", o->max_num_seqs, 1, 1000000},
        {"max-num-batched-tokens", o->max_num_batched_tokens, 1, 100000000},
        {"max-model-len", o->max_model_len, 1, 100000000},
        {"replay-layout", o->replay_layout, 2, 3},
        {"drop-every-n-batches", o->drop_every_n_batches, 0, 1000000000},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].value < ints[i].min || ints[i].value > ints[i].max) {
            fprintf(stderr,
                    "inferplane-sim: --%s %" PRId64 " is out of range (%" PRId64 "..%" PRId64 ")\n",
                    ints[i].name, ints[i].value, ints[i].min, ints[i].max);
            return -1;
        }
    if (!(o->time_scale > 0 && o->time_scale <= 1e6)) {
        fprintf(stderr,
                "inferplane-sim: --time-scale %g must be > 0 (e.g. 10 runs ten times "
                "faster than real time)\n",
                o->time_scale);
        return -1;
    }
    if (o->num_gpu_blocks_override > 0) prof->num_gpu_blocks = (uint32_t)o->num_gpu_blocks_override;
    if (sim_kv_format_parse(o->kv_events_format, &kvo->format) != 0) {
        fprintf(stderr,
                "inferplane-sim: --kv-events-format \"%s\": use map, array or "
                "array-legacy\n",
                o->kv_events_format);
        return -1;
    }
    if (sim_kv_bind_parse(o->kv_events_bind, &kvo->bind) != 0) {
        fprintf(stderr, "inferplane-sim: --kv-events-bind \"%s\": use auto, bind or connect\n",
                o->kv_events_bind);
        return -1;
    }
    kvo->replay_layout = (int)o->replay_layout;
    kvo->drop_every_n = o->drop_every_n_batches;
    if (sim_kvconfig_parse(o->kv_events_config, kvc, err, sizeof err) != 0) {
        fprintf(stderr, "inferplane-sim: %s\n", err);
        return -1;
    }
    /* vLLM refuses to start when one max-length request cannot fit in the KV cache; the
     * simulator caps max-model-len instead, so a small --num-gpu-blocks-override just works. */
    uint64_t cap = (uint64_t)prof->num_gpu_blocks * (uint64_t)o->block_size;
    if ((uint64_t)o->max_model_len > cap) {
        IPL_WARN("max_model_len_capped",
                 "max_model_len=%" PRId64 " kv_capacity_tokens=%" PRIu64
                 " hint=\"raise --num-gpu-blocks-override or lower --max-model-len\"",
                 o->max_model_len, cap);
        o->max_model_len = (int64_t)cap;
    }
    return 0;
}

static const char *s_vllm_version(sim_kv_format_t f, int layout)
{
    if (f == SIM_KV_FORMAT_MAP) return "0.26.0";
    if (f == SIM_KV_FORMAT_ARRAY) return layout == 3 ? "0.26.0" : "0.25.0";
    return "0.10.2";
}

int main(int argc, char **argv)
{
    s_opts_t o = {0};
    ipl_service_t *svc = ipl_service_new("sim",
                                         "simulated vLLM worker (OpenAI API, /metrics, "
                                         "KV events) in simulated time",
                                         "off");
    if (!svc) return 2;
    ipl_config_t *cfg = ipl_service_config(svc);
    s_declare(cfg, &o);
    int rc = ipl_service_start(svc, argc, argv);
    if (rc != 0) {
        ipl_service_destroy(&svc);
        return rc > 0 ? 0 : 2;
    }
    sim_profile_t prof;
    sim_kvconfig_t kvc;
    sim_kvpub_opts_t kvo = {0};
    if (s_validate(cfg, &o, &prof, &kvc, &kvo) != 0) {
        ipl_service_destroy(&svc);
        return 2;
    }
    const char *env_seed = getenv("PYTHONHASHSEED");
    char seed_text[32];
    snprintf(seed_text, sizeof seed_text, "%" PRId64, o.seed);

    int exit_code = 2;
    sim_kvpub_t *kvpub = NULL;
    sim_engine_t *engine = NULL;
    sim_api_t *api = NULL;
    ipl_httpd_t *httpd = NULL;
    ipl_tokenizer_t *tok = ipl_tokenizer_new_builtin();
    char err[512] = "", listen[300];
    if (!tok) goto done;
    if (kvc.enabled && !(kvpub = sim_kvpub_new(&kvc, &kvo, err, sizeof err))) {
        fprintf(stderr, "inferplane-sim: %s\n", err);
        goto done;
    }
    sim_engine_config_t ecfg = {
        .block_size = (uint32_t)o.block_size,
        .num_gpu_blocks = prof.num_gpu_blocks,
        .max_num_seqs = (uint32_t)o.max_num_seqs,
        .max_num_batched_tokens = (uint32_t)o.max_num_batched_tokens,
        .time_scale = o.time_scale,
        .profile = prof,
        .hash_seed = env_seed && *env_seed ? env_seed : seed_text,
        .model_name = o.served_model_name,
        .kvpub = kvpub,
        .metrics = ipl_service_metrics(svc),
    };
    engine = sim_engine_new(&ecfg);
    sim_api_config_t acfg = {
        .model_name = o.served_model_name,
        .max_model_len = (uint32_t)o.max_model_len,
        .prompt_tokens_details = o.enable_prompt_tokens_details,
        .seed = (uint64_t)o.seed,
        .vllm_version = s_vllm_version(kvo.format, kvo.replay_layout),
    };
    api = engine ? sim_api_new(&acfg, engine, tok, ipl_service_metrics(svc)) : NULL;
    if (!api) goto done;
    ipl_metrics_t *m = ipl_service_metrics(svc);
    char model[256], labels[768];
    ipl_metrics_escape(model, sizeof model, o.served_model_name);
    snprintf(labels, sizeof labels,
             "block_size=\"%" PRId64 "\",cache_dtype=\"auto\",enable_prefix_caching=\"True\","
             "engine=\"0\",gpu_memory_utilization=\"0.9\",num_gpu_blocks=\"%u\","
             "prefix_caching_hash_algo=\"sim-xxh3-128\",sim_profile=\"%s\"",
             o.block_size, prof.num_gpu_blocks, prof.name);
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
             " max_model_len=%" PRId64 " time_scale=%g kv_events=%s",
             ipl_log_quote(q, sizeof q, listen), ipl_httpd_port(httpd), o.served_model_name,
             prof.name, prof.num_gpu_blocks, o.block_size, o.max_model_len, o.time_scale,
             kvpub ? "on" : "off");
    struct pollfd pfd = {.fd = ipl_signal_fd(), .events = POLLIN};
    while (!ipl_signal_stopping())
        (void)poll(&pfd, 1, 1000);
    exit_code = 0;
done:
    if (engine) sim_engine_stop(engine); /* every request ends: streams finish, handlers return */
    if (api) sim_api_drain(api, 1000);
    ipl_httpd_destroy(&httpd);
    sim_api_destroy(&api);
    sim_engine_destroy(&engine);
    sim_kvpub_destroy(&kvpub);
    ipl_tokenizer_destroy(&tok);
    ipl_service_destroy(&svc);
    return exit_code;
}
