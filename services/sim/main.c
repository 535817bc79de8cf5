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
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipl_error.h"
#include "ipl_httpd.h"
#include "ipl_log.h"
#include "ipl_service.h"
#include "ipl_signal.h"
#include "ipl_tokenizer.h"
#include "sim_api.h"
#include "sim_engine.h"
#include "sim_hasher.h"
#include "sim_kvpub.h"
#include "sim_profile.h"

typedef struct {
    /* vLLM's flags, names and defaults */
    char *host;
    int64_t port;
    char *served_model_name;
    char *tokenizer;
    int64_t block_size;
    int64_t num_gpu_blocks_override;
    int64_t max_num_seqs;
    int64_t max_num_batched_tokens;
    int64_t max_model_len;
    bool enable_prompt_tokens_details;
    int64_t seed;
    char *kv_events_config;
    char *prefix_caching_hash_algo;
    bool enable_lora;
    char *lora_modules;
    int64_t max_loras;
    /* simulator-only */
    double time_scale;
    char *profile;
    char *kv_events_format;
    char *kv_events_bind;
    int64_t replay_layout;
    int64_t drop_every_n_batches;
    double fail_rate;
    double startup_delay;
    double step_s, prefill_token_s, decode_seq_s, context_token_s, request_s;
} s_opts_t;

/* The engine's KV sink is the publisher. */
static int s_kv_publish(void *kvpub, const sim_kvbatch_t *batch)
{
    return sim_kvpub_publish(kvpub, batch);
}

static void s_kv_restart(void *kvpub)
{
    sim_kvpub_restart(kvpub);
}

static void s_declare(ipl_config_t *c, s_opts_t *o)
{
    ipl_config_add(c, "host", IPL_OPT_STR, &o->host, "0.0.0.0", "host name to listen on (vLLM)");
    ipl_config_add(c, "port", IPL_OPT_INT, &o->port, "8000",
                   "port of the OpenAI API, /metrics and /health (vLLM)");
    ipl_config_add(c, "tokenizer", IPL_OPT_STR, &o->tokenizer, "builtin",
                   "tokenizer.json file, or a directory holding one (vLLM: name or path of "
                   "the HF tokenizer); \"builtin\" for the built-in tokenizer");
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
    ipl_config_add(c, "prefix-caching-hash-algo", IPL_OPT_STR, &o->prefix_caching_hash_algo,
                   "sha256",
                   "block hash: sha256 (pickle), sha256_cbor, xxhash, xxhash_cbor (vLLM); "
                   "NONE_HASH from PYTHONHASHSEED");
    ipl_config_add(c, "enable-lora", IPL_OPT_BOOL, &o->enable_lora, "false",
                   "serve LoRA adapters (vLLM)");
    ipl_config_add(c, "lora-modules", IPL_OPT_STR, &o->lora_modules, NULL,
                   "LoRA adapters: name=path ... or JSON {\"name\",\"path\"} (vLLM); "
                   "requests name them as their model");
    ipl_config_add(c, "max-loras", IPL_OPT_INT, &o->max_loras, "1",
                   "LoRA adapters in one batch (vLLM; accepted, not modelled)");
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
    ipl_config_add(c, "fail-rate", IPL_OPT_DOUBLE, &o->fail_rate, "0",
                   "simulator-only fault: this fraction (0..1) of generation requests is "
                   "answered with a vLLM-style 500");
    ipl_config_add(c, "startup-delay", IPL_OPT_DOUBLE, &o->startup_delay, "0",
                   "simulator-only fault: simulated seconds of model loading at start and "
                   "after each restart (POST /sim/restart, SIGUSR1), answering 503 meanwhile");
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
    ipl_config_range(c, "port", 0, 65535);
    ipl_config_range(c, "block-size", 1, SIM_HASHER_MAX_BLOCK);
    ipl_config_range(c, "num-gpu-blocks-override", 0, 1e8);
    ipl_config_range(c, "max-num-seqs", 1, 1e6);
    ipl_config_range(c, "max-num-batched-tokens", 1, 1e8);
    ipl_config_range(c, "max-model-len", 1, 1e8);
    ipl_config_range(c, "replay-layout", 2, 3);
    ipl_config_range(c, "drop-every-n-batches", 0, 1e9);
    ipl_config_range(c, "fail-rate", 0, 1);
    ipl_config_range(c, "startup-delay", 0, 86400);
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
    /* vLLM: bool(int(os.getenv("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", "1"))) */
    const char *ih = getenv("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES");
    if (ih) {
        char *end = NULL;
        long v = strtol(ih, &end, 10);
        if (!*ih || *end) {
            fprintf(stderr,
                    "inferplane-sim: VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=\"%s\" is not an "
                    "integer (1: int hashes, the default; 0: raw digest bytes)\n",
                    ih);
            return -1;
        }
        kvo->bytes_hashes = v == 0;
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

/* --- LoRA adapters ------------------------------------------------------------------------ */

typedef struct {
    sim_lora_t *items;
    uint32_t n;
} s_loras_t;

static void s_loras_free(s_loras_t *l)
{
    for (uint32_t i = 0; i < l->n; i++) {
        free((char *)l->items[i].name);
        free((char *)l->items[i].path);
    }
    free(l->items);
    *l = (s_loras_t){0};
}

static int s_lora_add(s_loras_t *l, const char *name, size_t nlen, const char *path, size_t plen)
{
    if (!nlen || nlen > SIM_HASHER_MAX_KEY) {
        fprintf(stderr,
                "inferplane-sim: --lora-modules: an adapter needs a name (1..%d bytes), "
                "as name=path\n",
                SIM_HASHER_MAX_KEY);
        return -1;
    }
    sim_lora_t *p = realloc(l->items, (l->n + 1) * sizeof *p);
    if (!p) return -1;
    l->items = p;
    p[l->n].name = strndup(name, nlen);
    p[l->n].path = strndup(path, plen);
    if (!p[l->n].name || !p[l->n].path) return -1;
    l->n++;
    return 0;
}

/* vLLM's --lora-modules: items `name=path`, or JSON objects {"name": .., "path": ..}, one
 * per argument (main joins them with newlines); several name=path items may also share one
 * value separated by spaces or commas (env var, YAML). */
static int s_parse_loras(const char *text, s_loras_t *out)
{
    *out = (s_loras_t){0};
    for (const char *line = text; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        if (len && line[0] == '{') {
            cJSON *j = cJSON_ParseWithLength(line, len);
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(j, "name");
            const cJSON *pa = cJSON_GetObjectItemCaseSensitive(j, "path");
            int rc = cJSON_IsString(n) && cJSON_IsString(pa)
                         ? s_lora_add(out, n->valuestring, strlen(n->valuestring), pa->valuestring,
                                      strlen(pa->valuestring))
                         : -1;
            cJSON_Delete(j);
            if (rc) {
                fprintf(stderr,
                        "inferplane-sim: --lora-modules: \"%.*s\" is not "
                        "{\"name\": \"...\", \"path\": \"...\"}\n",
                        (int)len, line);
                s_loras_free(out);
                return -1;
            }
        } else {
            for (size_t i = 0; i < len;) {
                size_t j = i;
                while (j < len && line[j] != ' ' && line[j] != ',')
                    j++;
                if (j > i) {
                    const char *eq = memchr(line + i, '=', j - i);
                    if (!eq || s_lora_add(out, line + i, (size_t)(eq - line - i), eq + 1,
                                          (size_t)(line + j - eq - 1))) {
                        fprintf(stderr,
                                "inferplane-sim: --lora-modules: \"%.*s\": use "
                                "name=path\n",
                                (int)(j - i), line + i);
                        s_loras_free(out);
                        return -1;
                    }
                }
                i = j + 1;
            }
        }
        line = eol ? eol + 1 : NULL;
    }
    return 0;
}

/* vLLM takes --lora-modules with several values (argparse nargs='+'); ipl_config takes one.
 * Returns a copy of argv where the values after --lora-modules are one newline-joined
 * argument (the caller frees the array and *joined). */
static char **s_join_lora_args(int argc, char **argv, int *nargc, char **joined)
{
    char **out = calloc((size_t)argc + 1, sizeof *out);
    *joined = NULL;
    int n = 0;
    for (int i = 0; out && i < argc; i++) {
        out[n++] = argv[i];
        if (strcmp(argv[i], "--lora-modules") != 0 || *joined || i + 1 >= argc) continue;
        size_t len = 0;
        int j = i + 1;
        for (; j < argc && (j == i + 1 || strncmp(argv[j], "--", 2) != 0); j++)
            len += strlen(argv[j]) + 1;
        if (!(*joined = calloc(len + 1, 1))) {
            free(out);
            return NULL;
        }
        for (int k = i + 1; k < j; k++) {
            if (k > i + 1) strcat(*joined, "\n");
            strcat(*joined, argv[k]);
        }
        out[n++] = *joined;
        i = j - 1;
    }
    *nargc = n;
    return out;
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
    int nargc = 0;
    char *joined = NULL;
    char **nargv = s_join_lora_args(argc, argv, &nargc, &joined);
    int rc = nargv ? ipl_service_start(svc, nargc, nargv) : -1;
    free(nargv);
    free(joined);
    if (rc != 0) {
        ipl_service_destroy(&svc);
        return rc > 0 ? 0 : 2;
    }
    sim_profile_t prof;
    sim_kvconfig_t kvc;
    sim_kvpub_opts_t kvo = {0};
    sim_hash_algo_t algo = SIM_HASH_SHA256;
    s_loras_t loras = {0};
    if (s_validate(cfg, &o, &prof, &kvc, &kvo) != 0) {
        ipl_service_destroy(&svc);
        return 2;
    }
    if (sim_hash_algo_parse(o.prefix_caching_hash_algo, &algo) != 0) {
        fprintf(stderr,
                "inferplane-sim: --prefix-caching-hash-algo \"%s\": use sha256, sha256_cbor, "
                "xxhash or xxhash_cbor\n",
                o.prefix_caching_hash_algo);
        ipl_service_destroy(&svc);
        return 2;
    }
    if (o.lora_modules && (s_parse_loras(o.lora_modules, &loras) != 0 || !o.enable_lora)) {
        if (!o.enable_lora)
            fprintf(stderr, "inferplane-sim: --lora-modules needs --enable-lora (as vLLM)\n");
        s_loras_free(&loras);
        ipl_service_destroy(&svc);
        return 2;
    }
    if (s_install_restart_signal() != 0) {
        fprintf(stderr, "inferplane-sim: cannot install the SIGUSR1 handler: %s\n",
                strerror(errno));
        s_loras_free(&loras);
        ipl_service_destroy(&svc);
        return 2;
    }
    /* vLLM: NONE_HASH = hash_fn(PYTHONHASHSEED) when set (even empty), os.urandom otherwise */
    const char *pythonhashseed = getenv("PYTHONHASHSEED");
    if (!pythonhashseed && (algo == SIM_HASH_SHA256_CBOR || algo == SIM_HASH_XXHASH_CBOR))
        IPL_WARN("pythonhashseed_unset",
                 "hash_algo=%s hint=\"block hashes are not reproducible outside this process; "
                 "set PYTHONHASHSEED as for vLLM\"",
                 sim_hash_algo_name(algo));

    int exit_code = 2;
    sim_kvpub_t *kvpub = NULL;
    sim_engine_t *engine = NULL;
    sim_api_t *api = NULL;
    ipl_httpd_t *httpd = NULL;
    char err[512] = "", listen[300];
    ipl_tokenizer_t *tok = ipl_tokenizer_open(o.tokenizer, err, sizeof err);
    if (!tok) {
        fprintf(stderr, "inferplane-sim: --tokenizer: %s\n", err);
        goto done;
    }
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
        .hash_algo = algo,
        .pythonhashseed = pythonhashseed,
        .seed = (uint64_t)o.seed,
        .model_name = o.served_model_name,
        .kv_publish = kvpub ? s_kv_publish : NULL,
        .kv_restart = kvpub ? s_kv_restart : NULL,
        .kv_sink = kvpub,
        .metrics = ipl_service_metrics(svc),
    };
    engine = sim_engine_new(&ecfg);
    sim_api_config_t acfg = {
        .model_name = o.served_model_name,
        .max_model_len = (uint32_t)o.max_model_len,
        .prompt_tokens_details = o.enable_prompt_tokens_details,
        .seed = (uint64_t)o.seed,
        .vllm_version = s_vllm_version(kvo.format, kvo.replay_layout),
        .loras = loras.items,
        .nloras = loras.n,
        .fail_rate = o.fail_rate,
        .startup_delay_s = o.startup_delay,
        .time_scale = o.time_scale,
    };
    api = engine ? sim_api_new(&acfg, engine, tok, ipl_service_metrics(svc)) : NULL;
    if (!api) goto done;
    ipl_metrics_t *m = ipl_service_metrics(svc);
    char model[256], labels[768];
    ipl_metrics_escape(model, sizeof model, o.served_model_name);
    snprintf(labels, sizeof labels,
             "block_size=\"%" PRId64 "\",cache_dtype=\"auto\",enable_prefix_caching=\"True\","
             "engine=\"0\",gpu_memory_utilization=\"0.9\",num_gpu_blocks=\"%u\","
             "prefix_caching_hash_algo=\"%s\",sim_profile=\"%s\"",
             o.block_size, prof.num_gpu_blocks, sim_hash_algo_name(algo), prof.name);
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
    struct pollfd pfd[2] = {{.fd = ipl_signal_fd(), .events = POLLIN},
                            {.fd = s_restart_pipe[0], .events = POLLIN}};
    while (!ipl_signal_stopping()) {
        if (poll(pfd, 2, 1000) > 0 && (pfd[1].revents & POLLIN)) {
            char buf[16];
            if (read(s_restart_pipe[0], buf, sizeof buf) > 0) sim_api_restart(api);
        }
    }
    exit_code = 0;
done:
    if (engine) sim_engine_stop(engine); /* every request ends: streams finish, handlers return */
    if (api) sim_api_drain(api, 1000);
    ipl_httpd_destroy(&httpd);
    sim_api_destroy(&api);
    sim_engine_destroy(&engine);
    sim_kvpub_destroy(&kvpub);
    ipl_tokenizer_destroy(&tok);
    s_loras_free(&loras);
    ipl_service_destroy(&svc);
    return exit_code;
}
