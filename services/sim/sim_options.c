/*
 * sim_options — inferplane-sim's settings (see sim_options.h).
 */
#include "sim_options.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_log.h"

void sim_options_add(sim_options_t *self, ipl_config_t *c)
{
    memset(self, 0, sizeof *self);
    ipl_config_add(c, "host", IPL_OPT_STR, &self->host, "0.0.0.0", "host name to listen on (vLLM)");
    ipl_config_add(c, "port", IPL_OPT_INT, &self->port, "8000",
                   "port of the OpenAI API, /metrics and /health (vLLM)");
    ipl_config_add(c, "tokenizer", IPL_OPT_STR, &self->tokenizer, "builtin",
                   "a model folder (tokenizer.json and its chat template, as vLLM loads a HF "
                   "model), a tokenizer.json file, or \"builtin\" for the built-in tokenizer");
    ipl_config_add(c, "served-model-name", IPL_OPT_STR, &self->served_model_name, "sim-model",
                   "the model name clients ask for; several names are all accepted and "
                   "responses say the first (vLLM)");
    ipl_config_add(c, "block-size", IPL_OPT_INT, &self->block_size, "16",
                   "tokens per KV-cache block (vLLM)");
    ipl_config_add(c, "num-gpu-blocks-override", IPL_OPT_INT, &self->num_gpu_blocks_override, NULL,
                   "KV-cache capacity in blocks (vLLM; default: the profile's)");
    ipl_config_add(c, "max-num-seqs", IPL_OPT_INT, &self->max_num_seqs, "256",
                   "running requests at most (vLLM)");
    ipl_config_add(c, "max-num-batched-tokens", IPL_OPT_INT, &self->max_num_batched_tokens, "8192",
                   "tokens per engine step at most; longer prompts are prefilled in chunks "
                   "(vLLM)");
    ipl_config_add(c, "max-model-len", IPL_OPT_INT, &self->max_model_len, "32768",
                   "prompt + max_tokens at most (vLLM); capped to the KV-cache capacity");
    ipl_config_add(c, "enable-prompt-tokens-details", IPL_OPT_BOOL,
                   &self->enable_prompt_tokens_details, "false",
                   "report usage.prompt_tokens_details.cached_tokens (vLLM)");
    ipl_config_add(c, "seed", IPL_OPT_INT, &self->seed, "0",
                   "random seed: output text, and the block-hash seed unless PYTHONHASHSEED "
                   "is set (vLLM)");
    ipl_config_add(c, "kv-events-config", IPL_OPT_STR, &self->kv_events_config, NULL,
                   "vLLM's KV-event JSON: enable_kv_cache_events, publisher, endpoint, "
                   "replay_endpoint, topic, buffer_steps, hwm (vLLM)");
    ipl_config_add(c, "prefix-caching-hash-algo", IPL_OPT_STR, &self->prefix_caching_hash_algo,
                   "sha256",
                   "block hash: sha256 (pickle), sha256_cbor, xxhash, xxhash_cbor (vLLM); "
                   "NONE_HASH from PYTHONHASHSEED");
    ipl_config_add(c, "enable-lora", IPL_OPT_BOOL, &self->enable_lora, "false",
                   "serve LoRA adapters (vLLM)");
    ipl_config_add(c, "lora-modules", IPL_OPT_STR, &self->lora_modules, NULL,
                   "LoRA adapters: name=path ... or JSON {\"name\",\"path\"} (vLLM); "
                   "requests name them as their model");
    ipl_config_add(c, "max-loras", IPL_OPT_INT, &self->max_loras, "1",
                   "LoRA adapters in one batch (vLLM; accepted, not modelled)");
    ipl_config_add(c, "time-scale", IPL_OPT_DOUBLE, &self->time_scale, "1.0",
                   "simulator-only: run this many times faster than real time; every figure "
                   "reported is in simulated seconds");
    ipl_config_add(c, "profile", IPL_OPT_STR, &self->profile, "l40s-27b-fp8",
                   "simulator-only: GPU + model cost profile (l40s-27b-fp8, h100-8b)");
    ipl_config_add(c, "kv-events-format", IPL_OPT_STR, &self->kv_events_format, "map",
                   "simulator-only: event encoding: map (vLLM >= 0.26), array (0.13-0.25), "
                   "array-legacy (0.10-0.12)");
    ipl_config_add(c, "kv-events-bind", IPL_OPT_STR, &self->kv_events_bind, "auto",
                   "simulator-only: KV-event PUB socket: auto (vLLM's rule: bind when the "
                   "endpoint has '*' or '::' or is ipc/inproc, else connect), bind, connect");
    ipl_config_add(c, "replay-layout", IPL_OPT_INT, &self->replay_layout, "3",
                   "simulator-only: replay reply frames: 3 (vLLM >= 0.26, with topic) or 2");
    ipl_config_add(c, "drop-every-n-batches", IPL_OPT_INT, &self->drop_every_n_batches, "0",
                   "simulator-only fault: do not send every Nth KV-event batch (still "
                   "replayable); 0 = off");
    ipl_config_add(c, "serve-messages", IPL_OPT_BOOL, &self->serve_messages, "false",
                   "serve the Anthropic Messages API (POST /v1/messages) natively, as recent "
                   "vLLM does (vllm/entrypoints/anthropic): translated to chat completions "
                   "inside, answered in Anthropic's shape");
    ipl_config_add(c, "fail-rate", IPL_OPT_DOUBLE, &self->fail_rate, "0",
                   "simulator-only fault: this fraction (0..1) of generation requests is "
                   "answered with a vLLM-style 500");
    ipl_config_add(c, "startup-delay", IPL_OPT_DOUBLE, &self->startup_delay, "0",
                   "simulator-only fault: simulated seconds of model loading at start and "
                   "after each restart (POST /sim/restart, SIGUSR1), answering 503 meanwhile");
    ipl_config_add(c, "sim-step-s", IPL_OPT_DOUBLE, &self->step_s, NULL,
                   "simulator-only: override the profile's fixed cost per step (seconds)");
    ipl_config_add(c, "sim-prefill-token-s", IPL_OPT_DOUBLE, &self->prefill_token_s, NULL,
                   "simulator-only: override the profile's cost per prefill token (seconds)");
    ipl_config_add(c, "sim-decode-seq-s", IPL_OPT_DOUBLE, &self->decode_seq_s, NULL,
                   "simulator-only: override the profile's cost per decoding sequence");
    ipl_config_add(c, "sim-context-token-s", IPL_OPT_DOUBLE, &self->context_token_s, NULL,
                   "simulator-only: override the profile's cost per context token per step");
    ipl_config_add(c, "sim-request-s", IPL_OPT_DOUBLE, &self->request_s, NULL,
                   "simulator-only: override the profile's per-request API latency");
    ipl_config_add(c, "api-key", IPL_OPT_STR, &self->api_key, NULL,
                   "require one of these keys as 'Authorization: Bearer KEY' on /v1 routes, "
                   "else 401; also read from VLLM_API_KEY (vLLM)");
    ipl_config_add(c, "accept-x-api-key", IPL_OPT_BOOL, &self->accept_x_api_key, "false",
                   "simulator-only stand-in: also accept the key as 'x-api-key: KEY' "
                   "(Anthropic style)");
    ipl_config_add(c, "network-latency-ms", IPL_OPT_INT, &self->network_latency_ms, "0",
                   "simulator-only stand-in: milliseconds added before every /v1 response's "
                   "headers (a remote provider's network)");
    ipl_config_add(c, "network-jitter-ms", IPL_OPT_INT, &self->network_jitter_ms, "0",
                   "simulator-only stand-in: plus a seeded uniform draw of 0..N ms");
    ipl_config_add(c, "stand-in", IPL_OPT_BOOL, &self->stand_in, "false",
                   "simulator-only: act as a provider stand-in (count /v1 requests, serve "
                   "/stand-in/received and /stand-in/reset); implied by --api-key and "
                   "--network-latency-ms");
    ipl_config_add(c, "stand-in-history", IPL_OPT_INT, &self->stand_in_history, "100",
                   "simulator-only stand-in: the last N requests reported in detail");
    ipl_config_add(c, "stand-in-headers", IPL_OPT_STR, &self->stand_in_headers, NULL,
                   "simulator-only stand-in: more request header names to report as present "
                   "or not (comma-separated; names only, never values)");
    ipl_config_range(c, "port", 0, 65535);
    ipl_config_range(c, "network-latency-ms", 0, 60000);
    ipl_config_range(c, "network-jitter-ms", 0, 60000);
    ipl_config_range(c, "stand-in-history", 1, 100000);
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
static int s_override(const ipl_config_t *c, FILE *errors, const char *name, double value,
                      double *field)
{
    if (strcmp(ipl_config_source(c, name), "default") == 0) return 0;
    if (value < 0) {
        fprintf(errors, "inferplane-sim: --%s %g: must be >= 0 (seconds)\n", name, value);
        return -1;
    }
    *field = value;
    return 0;
}

/* Checks the engine's and the publisher's flags; fills the profile and the KV configs.
 * Prints the error and returns -1 if invalid. */
static int s_check_engine(sim_options_t *self, const ipl_config_t *config, FILE *errors)
{
    char names[128], err[512] = "";
    const sim_profile_t *p = sim_profile_find(self->profile);
    if (!p) {
        fprintf(errors, "inferplane-sim: --profile \"%s\" is unknown (known: %s)\n", self->profile,
                sim_profile_names(names, sizeof names));
        return -1;
    }
    self->prof = *p;
    if (s_override(config, errors, "sim-step-s", self->step_s, &self->prof.step_s) ||
        s_override(config, errors, "sim-prefill-token-s", self->prefill_token_s,
                   &self->prof.prefill_token_s) ||
        s_override(config, errors, "sim-decode-seq-s", self->decode_seq_s,
                   &self->prof.decode_seq_s) ||
        s_override(config, errors, "sim-context-token-s", self->context_token_s,
                   &self->prof.context_token_s) ||
        s_override(config, errors, "sim-request-s", self->request_s, &self->prof.request_s))
        return -1;
    if (!(self->time_scale > 0 && self->time_scale <= 1e6)) {
        fprintf(errors,
                "inferplane-sim: --time-scale %g must be > 0 (e.g. 10 runs ten times "
                "faster than real time)\n",
                self->time_scale);
        return -1;
    }
    if (self->num_gpu_blocks_override > 0)
        self->prof.num_gpu_blocks = (uint32_t)self->num_gpu_blocks_override;
    if (sim_kv_format_parse(self->kv_events_format, &self->kv_opts.format) != 0) {
        fprintf(errors,
                "inferplane-sim: --kv-events-format \"%s\": use map, array or "
                "array-legacy\n",
                self->kv_events_format);
        return -1;
    }
    if (sim_kv_bind_parse(self->kv_events_bind, &self->kv_opts.bind) != 0) {
        fprintf(errors, "inferplane-sim: --kv-events-bind \"%s\": use auto, bind or connect\n",
                self->kv_events_bind);
        return -1;
    }
    /* vLLM: bool(int(os.getenv("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", "1"))) */
    const char *ih = getenv("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES");
    if (ih) {
        char *end = NULL;
        long v = strtol(ih, &end, 10);
        if (!*ih || *end) {
            fprintf(errors,
                    "inferplane-sim: VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=\"%s\" is not an "
                    "integer (1: int hashes, the default; 0: raw digest bytes)\n",
                    ih);
            return -1;
        }
        self->kv_opts.bytes_hashes = v == 0;
    }
    self->kv_opts.replay_layout = (int)self->replay_layout;
    self->kv_opts.drop_every_n = self->drop_every_n_batches;
    if (sim_kvconfig_parse(self->kv_events_config, &self->kv_config, err, sizeof err) != 0) {
        fprintf(errors, "inferplane-sim: %s\n", err);
        return -1;
    }
    /* vLLM refuses to start when one max-length request cannot fit in the KV cache; the
     * simulator caps max-model-len instead, so a small --num-gpu-blocks-override just works. */
    uint64_t cap = (uint64_t)self->prof.num_gpu_blocks * (uint64_t)self->block_size;
    if ((uint64_t)self->max_model_len > cap) {
        IPL_WARN("max_model_len_capped",
                 "max_model_len=%" PRId64 " kv_capacity_tokens=%" PRIu64
                 " hint=\"raise --num-gpu-blocks-override or lower --max-model-len\"",
                 self->max_model_len, cap);
        self->max_model_len = (int64_t)cap;
    }
    return 0;
}

/* --- LoRA adapters ------------------------------------------------------------------------ */

/* Frees a list of owned strings and zeroes it. */
static void s_free_list(char ***list, uint32_t *n)
{
    for (uint32_t i = 0; *list && i < *n; i++)
        free((*list)[i]);
    free(*list);
    *list = NULL;
    *n = 0;
}

/* Splits `text` at any of `seps` into owned strings (empty pieces skipped). 0 or -1. */
static int s_split_list(const char *text, const char *seps, char ***list, uint32_t *n)
{
    s_free_list(list, n);
    for (const char *p = text; p && *p;) {
        size_t len = strcspn(p, seps);
        if (len) {
            char **grown = realloc(*list, (*n + 1) * sizeof *grown);
            if (!grown) return -1;
            *list = grown;
            if (!(grown[*n] = strndup(p, len))) return -1;
            (*n)++;
        }
        p += len;
        if (*p) p++;
    }
    return 0;
}

void sim_options_clear(sim_options_t *self)
{
    s_free_list(&self->model_names, &self->nmodel_names);
    s_free_list(&self->api_keys, &self->napi_keys);
    self->standin.api_keys = NULL;
    self->standin.napi_keys = 0;
    for (uint32_t i = 0; i < self->nloras; i++) {
        free((char *)self->loras[i].name);
        free((char *)self->loras[i].path);
    }
    free(self->loras);
    self->loras = NULL;
    self->nloras = 0;
}

static int s_lora_add(sim_options_t *self, FILE *errors, const char *name, size_t nlen,
                      const char *path, size_t plen)
{
    if (!nlen || nlen > SIM_HASHER_MAX_KEY) {
        fprintf(errors,
                "inferplane-sim: --lora-modules: an adapter needs a name (1..%d bytes), "
                "as name=path\n",
                SIM_HASHER_MAX_KEY);
        return -1;
    }
    sim_lora_t *p = realloc(self->loras, (self->nloras + 1) * sizeof *p);
    if (!p) return -1;
    self->loras = p;
    p[self->nloras].name = strndup(name, nlen);
    p[self->nloras].path = strndup(path, plen);
    if (!p[self->nloras].name || !p[self->nloras].path) return -1;
    self->nloras++;
    return 0;
}

/* vLLM's --lora-modules: items `name=path`, or JSON objects {"name": .., "path": ..}, one
 * per argument (sim_options_argv joins them with newlines); several name=path items may also share
 * one value separated by spaces or commas (env var, YAML). */
static int s_parse_loras(sim_options_t *self, FILE *errors, const char *text)
{
    sim_options_clear(self);
    for (const char *line = text; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        if (len && line[0] == '{') {
            cJSON *j = cJSON_ParseWithLength(line, len);
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(j, "name");
            const cJSON *pa = cJSON_GetObjectItemCaseSensitive(j, "path");
            int rc = cJSON_IsString(n) && cJSON_IsString(pa)
                         ? s_lora_add(self, errors, n->valuestring, strlen(n->valuestring),
                                      pa->valuestring, strlen(pa->valuestring))
                         : -1;
            cJSON_Delete(j);
            if (rc) {
                fprintf(errors,
                        "inferplane-sim: --lora-modules: \"%.*s\" is not "
                        "{\"name\": \"...\", \"path\": \"...\"}\n",
                        (int)len, line);
                sim_options_clear(self);
                return -1;
            }
        } else {
            for (size_t i = 0; i < len;) {
                size_t j = i;
                while (j < len && line[j] != ' ' && line[j] != ',')
                    j++;
                if (j > i) {
                    const char *eq = memchr(line + i, '=', j - i);
                    if (!eq || s_lora_add(self, errors, line + i, (size_t)(eq - line - i), eq + 1,
                                          (size_t)(line + j - eq - 1))) {
                        fprintf(errors,
                                "inferplane-sim: --lora-modules: \"%.*s\": use "
                                "name=path\n",
                                (int)(j - i), line + i);
                        sim_options_clear(self);
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

/* The flags that take several values (vLLM's nargs='+'). */
static bool s_multi(const char *arg)
{
    return strcmp(arg, "--lora-modules") == 0 || strcmp(arg, "--served-model-name") == 0 ||
           strcmp(arg, "--api-key") == 0;
}

/* The end (exclusive) of the values after a multi-value flag at argv[i]: the first value is
 * taken whatever it is, further ones until the next "--" argument. */
static int s_values_end(int argc, char **argv, int i)
{
    int j = i + 1;
    while (j < argc && (j == i + 1 || strncmp(argv[j], "--", 2) != 0))
        j++;
    return j;
}

char **sim_options_argv(int argc, char **argv, int *nargc, char **joined)
{
    *joined = NULL;
    size_t total = 0;
    for (int i = 0; i < argc; i++)
        if (s_multi(argv[i]) && i + 1 < argc) {
            int j = s_values_end(argc, argv, i);
            for (int k = i + 1; k < j; k++)
                total += strlen(argv[k]) + 1;
            i = j - 1;
        }
    char **out = calloc((size_t)argc + 1, sizeof *out);
    if (!out || (total && !(*joined = malloc(total)))) {
        free(out);
        return NULL;
    }
    char *w = *joined;
    int n = 0;
    for (int i = 0; i < argc; i++) {
        out[n++] = argv[i];
        if (!s_multi(argv[i]) || i + 1 >= argc) continue;
        int j = s_values_end(argc, argv, i);
        out[n++] = w;
        for (int k = i + 1; k < j; k++) {
            size_t len = strlen(argv[k]);
            memcpy(w, argv[k], len);
            w += len;
            *w++ = k + 1 < j ? '\n' : '\0';
        }
        i = j - 1;
    }
    *nargc = n;
    return out;
}

/* What GET /version reports: the vLLM release whose KV-event encoding is simulated. */
static const char *s_vllm_version(sim_kv_format_t f, int layout)
{
    if (f == SIM_KV_FORMAT_MAP) return "0.26.0";
    if (f == SIM_KV_FORMAT_ARRAY) return layout == 3 ? "0.26.0" : "0.25.0";
    return "0.10.2";
}

/* --served-model-name's names, --api-key's keys (or VLLM_API_KEY's, as vLLM), and the
 * stand-in's config. */
static int s_check_standin(sim_options_t *self, const ipl_config_t *config, FILE *errors)
{
    if (s_split_list(self->served_model_name, "\n, ", &self->model_names, &self->nmodel_names) ||
        s_split_list(self->api_key ? self->api_key : getenv("VLLM_API_KEY"), "\n", &self->api_keys,
                     &self->napi_keys)) {
        fprintf(errors, "inferplane-sim: out of memory\n");
        return -1;
    }
    if (!self->nmodel_names) {
        fprintf(errors, "inferplane-sim: --served-model-name needs a name (e.g. sim-model)\n");
        return -1;
    }
    if (self->api_key && !self->napi_keys) {
        fprintf(errors, "inferplane-sim: --api-key needs a key (e.g. --api-key sk-test)\n");
        return -1;
    }
    if (self->accept_x_api_key && !self->napi_keys) {
        fprintf(errors, "inferplane-sim: --accept-x-api-key needs --api-key KEY\n");
        return -1;
    }
    bool given = strcmp(ipl_config_source(config, "stand-in-history"), "default") != 0 ||
                 self->stand_in_headers;
    self->standin_on = self->stand_in || self->napi_keys || self->network_latency_ms > 0 ||
                       self->network_jitter_ms > 0;
    if (given && !self->standin_on) { /* settings of a mode that is off */
        fprintf(errors, "inferplane-sim: --stand-in-history and --stand-in-headers apply to the "
                        "provider stand-in: add --stand-in (or --api-key, --network-latency-ms)\n");
        return -1;
    }
    self->standin = (sim_standin_config_t){
        .api_keys = (const char *const *)self->api_keys,
        .napi_keys = self->napi_keys,
        .accept_x_api_key = self->accept_x_api_key,
        .latency_ms = (uint32_t)self->network_latency_ms,
        .jitter_ms = (uint32_t)self->network_jitter_ms,
        .seed = (uint64_t)self->seed,
        .history = (uint32_t)self->stand_in_history,
        .extra_headers = self->stand_in_headers,
    };
    return 0;
}

int sim_options_check(sim_options_t *self, const ipl_config_t *config, FILE *errors)
{
    if (s_check_engine(self, config, errors) != 0) return -1;
    if (sim_hash_algo_parse(self->prefix_caching_hash_algo, &self->hash_algo) != 0) {
        fprintf(errors,
                "inferplane-sim: --prefix-caching-hash-algo \"%s\": use sha256, sha256_cbor, "
                "xxhash or xxhash_cbor\n",
                self->prefix_caching_hash_algo);
        return -1;
    }
    if (self->lora_modules &&
        (s_parse_loras(self, errors, self->lora_modules) != 0 || !self->enable_lora)) {
        if (!self->enable_lora)
            fprintf(errors, "inferplane-sim: --lora-modules needs --enable-lora (as vLLM)\n");
        sim_options_clear(self);
        return -1;
    }
    if (s_check_standin(self, config, errors) != 0) {
        sim_options_clear(self);
        return -1;
    }
    /* vLLM: NONE_HASH = hash_fn(PYTHONHASHSEED) when set (even empty), os.urandom otherwise */
    self->pythonhashseed = getenv("PYTHONHASHSEED");
    if (!self->pythonhashseed &&
        (self->hash_algo == SIM_HASH_SHA256_CBOR || self->hash_algo == SIM_HASH_XXHASH_CBOR))
        IPL_WARN("pythonhashseed_unset",
                 "hash_algo=%s hint=\"block hashes are not reproducible outside this process; "
                 "set PYTHONHASHSEED as for vLLM\"",
                 sim_hash_algo_name(self->hash_algo));
    return 0;
}

void sim_options_engine_config(const sim_options_t *self, sim_engine_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->block_size = (uint32_t)self->block_size;
    cfg->num_gpu_blocks = self->prof.num_gpu_blocks;
    cfg->max_num_seqs = (uint32_t)self->max_num_seqs;
    cfg->max_num_batched_tokens = (uint32_t)self->max_num_batched_tokens;
    cfg->time_scale = self->time_scale;
    cfg->profile = self->prof;
    cfg->hash_algo = self->hash_algo;
    cfg->pythonhashseed = self->pythonhashseed;
    cfg->seed = (uint64_t)self->seed;
    cfg->model_name = self->model_names ? self->model_names[0] : self->served_model_name;
}

void sim_options_api_config(const sim_options_t *self, sim_api_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->model_name = self->model_names ? self->model_names[0] : self->served_model_name;
    cfg->model_aliases = self->nmodel_names > 1 ? (const char *const *)self->model_names + 1 : NULL;
    cfg->nmodel_aliases = self->nmodel_names > 1 ? self->nmodel_names - 1 : 0;
    cfg->standin = self->standin_on ? &self->standin : NULL;
    cfg->serve_messages = self->serve_messages;
    cfg->max_model_len = (uint32_t)self->max_model_len;
    cfg->prompt_tokens_details = self->enable_prompt_tokens_details;
    cfg->seed = (uint64_t)self->seed;
    cfg->vllm_version = s_vllm_version(self->kv_opts.format, self->kv_opts.replay_layout);
    cfg->loras = self->loras;
    cfg->nloras = self->nloras;
    cfg->fail_rate = self->fail_rate;
    cfg->startup_delay_s = self->startup_delay;
    cfg->time_scale = self->time_scale;
}
