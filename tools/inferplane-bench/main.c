/*
 * inferplane-bench — a GuideLLM-compatible load generator: OpenAI chat / completions and
 * Anthropic messages, streamed or not; profiles synchronous, concurrent, throughput,
 * constant, poisson, sweep and replay; synthetic data (length distributions, shared-prefix
 * buckets, multi-turn with think time) or traces (ours, Mooncake); GuideLLM's metrics plus
 * goodput and cache hits; reports as GuideLLM-shaped JSON, CSV, a table and figure lines.
 * docs/benchmarks.md, "inferplane-bench", has the usage and every definition.
 *
 * One thread, one libcurl multi handle (bench_client): the bench never runs a thread per
 * request, so it costs little CPU per request and does not become the bottleneck.
 *
 * stdout: the table (unless --quiet); stderr: the progress line and diagnostics.
 * Exit status: 0 when every benchmark ran (whatever the requests' outcome), 1 when one could
 * not run (unreachable setup, out of memory, an output file not writable), 2 on usage errors.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "bench_client.h"
#include "bench_data.h"
#include "bench_metrics.h"
#include "bench_report.h"
#include "bench_runner.h"
#include "bench_trace.h"
#include "ipl_clock.h"
#include "ipl_config.h"
#include "ipl_error.h"
#include "ipl_log.h"
#include "ipl_tokenizer.h"

#define S_MAX_BENCHMARKS 64

typedef struct {
    char *target, *api, *model, *api_key, *profile, *rates, *streams, *sweep_strategy, *data,
        *trace, *prompt_tokens, *output_tokens, *prefix_buckets, *think_ms, *tokenizer, *output,
        *csv, *figures, *label, *log_level;
    int64_t max_concurrency, max_requests, max_conversations, sweep_size, seed, turns,
        prefix_count, prefix_tokens, trace_suffix_tokens, block_tokens, sample_requests;
    double max_seconds, request_timeout, trace_speed, slo_ttft_ms;
    bool stream, ignore_eos, progress, quiet;
} s_flags_t;

static void s_declare(ipl_config_t *c, s_flags_t *f)
{
    ipl_config_add(c, "target", IPL_OPT_STR, &f->target, "http://127.0.0.1:8000",
                   "the server: a vLLM worker, inferplane-sim or the gateway (no path)");
    ipl_config_add(c, "api", IPL_OPT_STR, &f->api, "chat",
                   "chat (/v1/chat/completions), completions (/v1/completions) or messages "
                   "(Anthropic /v1/messages)");
    ipl_config_add(c, "model", IPL_OPT_STR, &f->model, "sim-model", "the model to ask for");
    ipl_config_add(c, "api-key", IPL_OPT_STR, &f->api_key, NULL,
                   "sent as Authorization: Bearer (OpenAI) or x-api-key (messages)");
    ipl_config_add(c, "stream", IPL_OPT_BOOL, &f->stream, "true",
                   "stream the answers (SSE); --no-stream: one body each, TTFT = latency");
    ipl_config_add(c, "ignore-eos", IPL_OPT_BOOL, &f->ignore_eos, "true",
                   "ask for exactly the output tokens (vLLM's ignore_eos; not sent to messages)");
    ipl_config_add(c, "profile", IPL_OPT_STR, &f->profile, "sweep",
                   "synchronous, concurrent, throughput, constant, poisson, sweep or replay");
    ipl_config_add(c, "rate", IPL_OPT_STR, &f->rates, NULL,
                   "constant / poisson: requests (conversations) per second, comma-separated "
                   "for one benchmark each");
    ipl_config_add(c, "streams", IPL_OPT_STR, &f->streams, NULL,
                   "concurrent: streams, comma-separated for one benchmark each");
    ipl_config_add(c, "max-concurrency", IPL_OPT_INT, &f->max_concurrency, "512",
                   "requests in flight at most (throughput's streams; the open-loop cap)");
    ipl_config_add(c, "sweep-size", IPL_OPT_INT, &f->sweep_size, "10",
                   "sweep: benchmarks in all (synchronous, throughput, then size - 2 rates)");
    ipl_config_add(c, "sweep-strategy", IPL_OPT_STR, &f->sweep_strategy, "constant",
                   "sweep: constant or poisson for the rates between");
    ipl_config_add(c, "max-seconds", IPL_OPT_DOUBLE, &f->max_seconds, "0",
                   "each benchmark ends after this long, requests still running counted "
                   "incomplete (0: none)");
    ipl_config_add(c, "max-requests", IPL_OPT_INT, &f->max_requests, "0",
                   "each benchmark sends at most this many requests (0: none)");
    ipl_config_add(c, "max-conversations", IPL_OPT_INT, &f->max_conversations, "0",
                   "each benchmark starts at most this many conversations, every turn of "
                   "each sent (0: none)");
    ipl_config_add(c, "request-timeout", IPL_OPT_DOUBLE, &f->request_timeout, "300",
                   "seconds before a request is abandoned (an error: timeout)");
    ipl_config_add(c, "seed", IPL_OPT_INT, &f->seed, "42", "data and Poisson arrivals");
    ipl_config_add(c, "data", IPL_OPT_STR, &f->data, "synthetic", "synthetic or trace");
    ipl_config_add(c, "trace", IPL_OPT_STR, &f->trace, NULL,
                   "a JSONL trace to replay (ours or Mooncake-style); implies --data trace");
    ipl_config_add(c, "trace-speed", IPL_OPT_DOUBLE, &f->trace_speed, "1",
                   "replay the trace this many times faster");
    ipl_config_add(c, "trace-suffix-tokens", IPL_OPT_INT, &f->trace_suffix_tokens, "256",
                   "our traces without prefix_tokens: the request's own tokens");
    ipl_config_add(c, "block-tokens", IPL_OPT_INT, &f->block_tokens, "512",
                   "Mooncake traces: tokens per hash id");
    ipl_config_add(c, "prompt-tokens", IPL_OPT_STR, &f->prompt_tokens, "128",
                   "each turn's new text: N, uniform:MIN,MAX, normal:MEAN,SD[,MIN,MAX], "
                   "lognormal:MEAN,SD[,MIN,MAX]");
    ipl_config_add(c, "output-tokens", IPL_OPT_STR, &f->output_tokens, "64",
                   "each answer's length (same forms)");
    ipl_config_add(c, "prefix-count", IPL_OPT_INT, &f->prefix_count, "0",
                   "distinct shared prefixes (one bucket; with --prefix-tokens)");
    ipl_config_add(c, "prefix-tokens", IPL_OPT_INT, &f->prefix_tokens, "0",
                   "tokens of each shared prefix, before the first turn's text");
    ipl_config_add(c, "prefix-buckets", IPL_OPT_STR, &f->prefix_buckets, NULL,
                   "several buckets: WEIGHT:COUNT:TOKENS,... (instead of the two above)");
    ipl_config_add(c, "turns", IPL_OPT_INT, &f->turns, "1",
                   "turns per conversation; each resends the history and the answers");
    ipl_config_add(c, "think-ms", IPL_OPT_STR, &f->think_ms, "0",
                   "think time before each follow-up turn, ms (same forms as the lengths)");
    ipl_config_add(c, "tokenizer", IPL_OPT_STR, &f->tokenizer, NULL,
                   "a model folder or tokenizer.json (or builtin): token counts exact for it");
    ipl_config_add(c, "slo-ttft-ms", IPL_OPT_DOUBLE, &f->slo_ttft_ms, "0",
                   "goodput counts successes with TTFT within this (0: every success)");
    ipl_config_add(c, "output", IPL_OPT_STR, &f->output, NULL,
                   "write the JSON report (GuideLLM's shape) here");
    ipl_config_add(c, "csv", IPL_OPT_STR, &f->csv, NULL, "write one CSV row per benchmark here");
    ipl_config_add(c, "figures", IPL_OPT_STR, &f->figures, NULL,
                   "append one JSON line per figure here ('-': stdout)");
    ipl_config_add(c, "label", IPL_OPT_STR, &f->label, NULL,
                   "KEY=VALUE,... carried into the figures and the report "
                   "(e.g. strategy=ttft,workload=shared-prefix)");
    ipl_config_add(c, "sample-requests", IPL_OPT_INT, &f->sample_requests, "20",
                   "requests of each status listed per benchmark in the JSON report");
    ipl_config_add(c, "progress", IPL_OPT_BOOL, &f->progress, "false",
                   "a progress line on stderr (default: when stderr is a terminal)");
    ipl_config_add(c, "quiet", IPL_OPT_BOOL, &f->quiet, "false", "no table on stdout");
    ipl_config_add(c, "log-level", IPL_OPT_STR, &f->log_level, "warn",
                   "log level: debug|info|warn|error|off");
    ipl_config_range(c, "max-concurrency", 1, 100000);
    ipl_config_range(c, "sweep-size", 2, S_MAX_BENCHMARKS);
    ipl_config_range(c, "turns", 1, 10000);
    ipl_config_range(c, "prefix-count", 0, 1e9);
    ipl_config_range(c, "prefix-tokens", 0, 1048576);
    ipl_config_range(c, "block-tokens", 1, 1048576);
    ipl_config_range(c, "trace-suffix-tokens", 0, 1048576);
    ipl_config_range(c, "max-requests", 0, 1e12);
    ipl_config_range(c, "max-conversations", 0, 1e12);
    ipl_config_range(c, "max-seconds", 0, 1e7);
    ipl_config_range(c, "request-timeout", 0, 1e6);
    ipl_config_range(c, "sample-requests", 0, 1e9);
    ipl_config_range(c, "slo-ttft-ms", 0, 1e9);
}

/* A comma-separated list of positive numbers. Returns how many (0 on a bad item). */
static size_t s_numbers(const char *list, double *out, size_t max)
{
    size_t n = 0;
    const char *p = list;
    while (p && *p && n < max) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || !(v > 0) || !isfinite(v) || (*end && *end != ',')) return 0;
        out[n++] = v;
        p = *end ? end + 1 : end;
    }
    return n;
}

typedef struct {
    s_flags_t *f;
    bench_client_t *client;
    bench_data_t *data;
    bench_labels_t labels;
    bench_entry_t entries[S_MAX_BENCHMARKS];
    bench_metrics_t metrics[S_MAX_BENCHMARKS];
    bench_run_result_t runs[S_MAX_BENCHMARKS];
    size_t n;
    uint64_t next_conv;
    bench_api_t api;
    bool progress;
} s_app_t;

/* Runs one benchmark and keeps it. 0, or -1 with a message printed. */
static int s_bench(s_app_t *app, bench_strategy_t st)
{
    if (app->n == S_MAX_BENCHMARKS) {
        fprintf(stderr, "inferplane-bench: at most %d benchmarks per run\n", S_MAX_BENCHMARKS);
        return -1;
    }
    s_flags_t *f = app->f;
    bench_run_config_t rc = {.strategy = st,
                             .max_duration_s = f->max_seconds,
                             .max_requests = (uint64_t)f->max_requests,
                             .max_conversations = (uint64_t)f->max_conversations,
                             .seed = (uint64_t)f->seed + app->n,
                             .first_conversation = app->next_conv,
                             .model = f->model,
                             .api = app->api,
                             .stream = f->stream,
                             .ignore_eos = f->ignore_eos,
                             .progress = app->progress ? stderr : NULL,
                             .progress_label = bench_strategy_label(&st)};
    char label[64];
    snprintf(label, sizeof label, "%s", bench_strategy_label(&st));
    rc.progress_label = label;
    /* a trace is replayed from its start by every benchmark */
    if (bench_data_count(app->data)) rc.first_conversation = 0;
    char err[256];
    size_t i = app->n;
    if (bench_run(app->client, app->data, &rc, &app->runs[i], err, sizeof err) != 0) {
        fprintf(stderr, "inferplane-bench: %s: %s\n", label, err);
        bench_run_result_free(&app->runs[i]);
        return -1;
    }
    app->next_conv = app->runs[i].next_conversation;
    bench_run_result_t *r = &app->runs[i];
    double mend = r->end;
    for (size_t k = 0; k < r->n; k++)
        if (r->reqs[k].end > mend) mend = r->reqs[k].end;
    if (bench_metrics_compute(r->reqs, r->n, r->start, mend, f->slo_ttft_ms, &app->metrics[i]) !=
        0) {
        fprintf(stderr, "inferplane-bench: %s: out of memory computing the metrics\n", label);
        return -1;
    }
    app->entries[i] = (bench_entry_t){
        f->profile, st, f->max_seconds, (uint64_t)f->max_requests, &app->metrics[i], &app->runs[i]};
    app->n++;
    return 0;
}

static int s_profile(s_app_t *app)
{
    s_flags_t *f = app->f;
    bench_strategy_t st = {.max_concurrency = (uint32_t)f->max_concurrency};
    double list[S_MAX_BENCHMARKS];
    const char *p = f->profile;
    if (!strcmp(p, "synchronous") || !strcmp(p, "throughput") || !strcmp(p, "replay")) {
        st.kind = !strcmp(p, "synchronous")  ? BENCH_STRAT_SYNCHRONOUS
                  : !strcmp(p, "throughput") ? BENCH_STRAT_THROUGHPUT
                                             : BENCH_STRAT_REPLAY;
        return s_bench(app, st) == 0 ? 0 : 1;
    }
    if (!strcmp(p, "concurrent") || !strcmp(p, "constant") || !strcmp(p, "poisson")) {
        bool conc = !strcmp(p, "concurrent");
        const char *what = conc ? f->streams : f->rates;
        size_t n = what ? s_numbers(what, list, S_MAX_BENCHMARKS) : 0;
        if (!n) {
            fprintf(stderr,
                    "inferplane-bench: --profile %s needs %s (positive numbers, "
                    "comma-separated)\n",
                    p, conc ? "--streams N[,N...]" : "--rate R[,R...]");
            return 2;
        }
        for (size_t i = 0; i < n; i++) {
            st.kind = conc                     ? BENCH_STRAT_CONCURRENT
                      : !strcmp(p, "constant") ? BENCH_STRAT_CONSTANT
                                               : BENCH_STRAT_POISSON;
            st.streams = (uint32_t)list[i];
            st.rate = list[i];
            if (s_bench(app, st) != 0) return 1;
        }
        return 0;
    }
    if (!strcmp(p, "sweep")) {
        bool poisson = !strcmp(f->sweep_strategy, "poisson");
        if (!poisson && strcmp(f->sweep_strategy, "constant")) {
            fprintf(stderr, "inferplane-bench: --sweep-strategy %s: constant or poisson\n",
                    f->sweep_strategy);
            return 2;
        }
        st.kind = BENCH_STRAT_SYNCHRONOUS;
        if (s_bench(app, st) != 0) return 1;
        st.kind = BENCH_STRAT_THROUGHPUT;
        if (s_bench(app, st) != 0) return 1;
        /* GuideLLM: linspace(sync rate, throughput rate, size - 1)[1:], measured rates */
        double lo = app->metrics[0].m[BENCH_M_REQUESTS_PER_SECOND][BENCH_SUCCESSFUL].mean;
        double hi = app->metrics[1].m[BENCH_M_REQUESTS_PER_SECOND][BENCH_SUCCESSFUL].mean;
        if (!(lo > 0) || !(hi > 0)) {
            fprintf(stderr, "inferplane-bench: sweep: no successful request in the synchronous or "
                            "throughput benchmark: no rates to sweep\n");
            return 1;
        }
        int64_t k = f->sweep_size - 1;
        for (int64_t i = 1; i < k; i++) {
            st.kind = poisson ? BENCH_STRAT_POISSON : BENCH_STRAT_CONSTANT;
            st.rate = lo + (hi - lo) * (double)i / (double)(k - 1);
            if (s_bench(app, st) != 0) return 1;
        }
        return 0;
    }
    fprintf(stderr,
            "inferplane-bench: --profile %s: one of synchronous, concurrent, throughput, "
            "constant, poisson, sweep, replay\n",
            p);
    return 2;
}

static cJSON *s_args(const s_flags_t *f)
{
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "target", f->target);
    cJSON_AddStringToObject(a, "api", f->api);
    cJSON_AddStringToObject(a, "model", f->model);
    cJSON_AddBoolToObject(a, "stream", f->stream);
    cJSON_AddStringToObject(a, "profile", f->profile);
    if (f->rates) cJSON_AddStringToObject(a, "rate", f->rates);
    if (f->streams) cJSON_AddStringToObject(a, "streams", f->streams);
    cJSON_AddNumberToObject(a, "max_concurrency", (double)f->max_concurrency);
    cJSON_AddNumberToObject(a, "max_seconds", f->max_seconds);
    cJSON_AddNumberToObject(a, "max_requests", (double)f->max_requests);
    cJSON_AddNumberToObject(a, "max_conversations", (double)f->max_conversations);
    cJSON_AddNumberToObject(a, "seed", (double)f->seed);
    cJSON *d = cJSON_AddObjectToObject(a, "data");
    cJSON_AddStringToObject(d, "kind", f->trace ? "trace" : "synthetic");
    if (f->trace) {
        cJSON_AddStringToObject(d, "trace", f->trace);
        cJSON_AddNumberToObject(d, "trace_speed", f->trace_speed);
    } else {
        cJSON_AddStringToObject(d, "prompt_tokens", f->prompt_tokens);
        cJSON_AddStringToObject(d, "output_tokens", f->output_tokens);
        cJSON_AddNumberToObject(d, "turns", (double)f->turns);
        cJSON_AddStringToObject(d, "think_ms", f->think_ms);
        if (f->prefix_buckets) cJSON_AddStringToObject(d, "prefix_buckets", f->prefix_buckets);
        cJSON_AddNumberToObject(d, "prefix_count", (double)f->prefix_count);
        cJSON_AddNumberToObject(d, "prefix_tokens", (double)f->prefix_tokens);
    }
    cJSON_AddNumberToObject(a, "slo_ttft_ms", f->slo_ttft_ms);
    return a;
}

static int s_write_report(s_app_t *app)
{
    s_flags_t *f = app->f;
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON_AddNumberToObject(meta, "version", 2);
    cJSON_AddStringToObject(meta, "generator", "inferplane-bench");
    cJSON_AddStringToObject(meta, "inferplane_version", IPL_VERSION);
    struct utsname u;
    if (uname(&u) == 0) {
        char plat[512];
        snprintf(plat, sizeof plat, "%s %s %s", u.sysname, u.release, u.machine);
        cJSON_AddStringToObject(meta, "platform", plat);
    }
    char when[64];
    cJSON_AddStringToObject(meta, "created", ipl_wall_iso8601(when, sizeof when));
    cJSON_AddItemToObject(root, "args", s_args(f));
    cJSON *arr = cJSON_AddArrayToObject(root, "benchmarks");
    for (size_t i = 0; i < app->n; i++)
        cJSON_AddItemToArray(arr, bench_report_benchmark(&app->entries[i], &app->labels,
                                                         (size_t)f->sample_requests));
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    FILE *out = text ? fopen(f->output, "w") : NULL;
    int rc = out && fputs(text, out) >= 0 && fputc('\n', out) != EOF ? 0 : -1;
    if (out && fclose(out) != 0) rc = -1;
    if (rc != 0) fprintf(stderr, "inferplane-bench: --output %s: %s\n", f->output, strerror(errno));
    cJSON_free(text);
    return rc;
}

static int s_write_csv(s_app_t *app, const char *path, bool figures)
{
    bool out_is_stdout = !strcmp(path, "-");
    FILE *f = out_is_stdout ? stdout : fopen(path, figures ? "a" : "w");
    if (!f) {
        fprintf(stderr, "inferplane-bench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (figures)
        bench_report_figures(f, app->entries, app->n, &app->labels);
    else
        bench_report_csv(f, app->entries, app->n, &app->labels);
    return out_is_stdout ? 0 : fclose(f);
}

/* Data from the flags; NULL with a message printed. */
static bench_data_t *s_data(const s_flags_t *f)
{
    bench_data_config_t dc;
    bench_data_config_defaults(&dc);
    char err[512];
    dc.seed = (uint64_t)f->seed;
    dc.turns = (uint32_t)f->turns;
    dc.trace_speed = f->trace_speed;
    dc.trace_suffix_tokens = (uint32_t)f->trace_suffix_tokens;
    dc.block_tokens = (uint32_t)f->block_tokens;
    if (bench_len_parse(f->prompt_tokens, &dc.prompt, err, sizeof err) != 0 ||
        bench_len_parse(f->output_tokens, &dc.output, err, sizeof err) != 0 ||
        bench_len_parse(f->think_ms, &dc.think_ms, err, sizeof err) != 0) {
        fprintf(stderr, "inferplane-bench: %s\n", err);
        return NULL;
    }
    if (f->prefix_buckets && (f->prefix_count || f->prefix_tokens)) {
        fprintf(stderr, "inferplane-bench: --prefix-buckets or --prefix-count/--prefix-tokens, "
                        "not both\n");
        return NULL;
    }
    if (f->prefix_buckets && bench_buckets_parse(f->prefix_buckets, &dc, err, sizeof err) != 0) {
        fprintf(stderr, "inferplane-bench: %s\n", err);
        return NULL;
    }
    if (!f->prefix_buckets && f->prefix_tokens > 0)
        dc.buckets[dc.nbuckets++] = (bench_bucket_t){
            100, f->prefix_count > 0 ? (uint32_t)f->prefix_count : 1, (uint32_t)f->prefix_tokens};
    bench_data_t *d = NULL;
    if (f->trace || !strcmp(f->data, "trace")) {
        if (!f->trace) {
            fprintf(stderr, "inferplane-bench: --data trace needs --trace FILE\n");
            return NULL;
        }
        bench_trace_t *t = NULL;
        if (bench_trace_load(f->trace, &t, err, sizeof err) != 0) {
            fprintf(stderr, "inferplane-bench: %s\n", err);
            return NULL;
        }
        d = bench_data_new_trace(&dc, &t);
        bench_trace_destroy(&t);
    } else if (!strcmp(f->data, "synthetic")) {
        d = bench_data_new_synthetic(&dc);
    } else {
        fprintf(stderr, "inferplane-bench: --data %s: synthetic or trace\n", f->data);
        return NULL;
    }
    if (!d) {
        fprintf(stderr, "inferplane-bench: the data cannot be generated (bucket weights all 0?)\n");
        return NULL;
    }
    if (f->tokenizer) {
        ipl_tokenizer_t *tok = ipl_tokenizer_open(f->tokenizer, err, sizeof err);
        int rc = tok ? bench_data_use_tokenizer(d, tok) : IPL_E_INVAL;
        if (rc != 0)
            fprintf(stderr, "inferplane-bench: --tokenizer %s: %s\n", f->tokenizer,
                    tok ? "fewer than 8 of the bench's words are one token in it" : err);
        ipl_tokenizer_destroy(&tok);
        if (rc != 0) bench_data_destroy(&d);
    }
    return d;
}

int main(int argc, char **argv)
{
    s_flags_t f = {0};
    ipl_config_t *config =
        ipl_config_new("inferplane-bench", "a GuideLLM-compatible load generator for OpenAI and "
                                           "Anthropic APIs (one thread, libcurl multi)");
    s_declare(config, &f);
    char err[512];
    int rc = ipl_config_parse(config, argc, argv, err, sizeof err);
    if (rc != 0) {
        if (rc < 0) fprintf(stderr, "inferplane-bench: %s\n", err);
        ipl_config_destroy(&config);
        return rc > 0 ? 0 : 2;
    }
    ipl_log_level_t level;
    if (ipl_log_level_parse(f.log_level, &level) != 0) level = IPL_LOG_WARN;
    ipl_log_init("inferplane-bench", level);
    static s_app_t app; /* large: metrics for every benchmark */
    app.f = &f;
    app.progress =
        !strcmp(ipl_config_source(config, "progress"), "default") ? isatty(2) : f.progress;
    int status = 2;
    char *label_copy = f.label ? strdup(f.label) : NULL;
    if (bench_api_parse(f.api, &app.api) != 0) {
        fprintf(stderr, "inferplane-bench: --api %s: chat, completions or messages\n", f.api);
        goto done;
    }
    if (label_copy && bench_labels_parse(label_copy, &app.labels, err, sizeof err) != 0) {
        fprintf(stderr, "inferplane-bench: %s\n", err);
        goto done;
    }
    if (!(f.trace_speed > 0)) {
        fprintf(stderr, "inferplane-bench: --trace-speed must be > 0\n");
        goto done;
    }
    app.data = s_data(&f);
    if (!app.data) goto done;
    bench_client_config_t cc = {f.target, app.api, f.api_key, f.request_timeout,
                                (uint32_t)f.max_concurrency};
    app.client = bench_client_new(&cc, NULL, NULL, err, sizeof err);
    if (!app.client) {
        fprintf(stderr, "inferplane-bench: %s\n", err);
        status = 1;
        goto done;
    }
    status = s_profile(&app);
    IPL_INFO("done", "benchmarks=%zu connections_opened=%llu", app.n,
             (unsigned long long)bench_client_connects(app.client));
    if (app.n) {
        if (!f.quiet) bench_report_table(stdout, app.entries, app.n);
        if (f.output && s_write_report(&app) != 0) status = 1;
        if (f.csv && s_write_csv(&app, f.csv, false) != 0) status = 1;
        if (f.figures && s_write_csv(&app, f.figures, true) != 0) status = 1;
    }
done:
    for (size_t i = 0; i < app.n; i++)
        bench_run_result_free(&app.runs[i]);
    bench_client_destroy(&app.client);
    bench_data_destroy(&app.data);
    free(label_copy);
    ipl_config_destroy(&config);
    return status;
}
