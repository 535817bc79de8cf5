/*
 * inferplanectl route — asks a decider where a request would go, exactly as the gateway asks
 * (tokenize, chat template, chained block hashes, ROUTE_REQ over a DEALER), and prints the
 * decision; --explain adds every candidate's prediction and figures, ranked, and why the winner
 * won; with --admin it also prints the decider's calibrated TTFT model (GET /debug/model).
 *
 *   inferplanectl route --decider tcp://127.0.0.1:7021 --model sim-model --prompt "Hello"
 *   inferplanectl route --model sim-model --messages '[{"role":"user","content":"hi"}]' --explain
 *   inferplanectl route --model sim-model --prompt "Hello" --explain --admin 127.0.0.1:9104
 *
 * --label and --header add what InferencePolicy rules match on (ROUTE_REQ labels, headers); the
 * reply's target kind, backend, rule and HTTP status are printed when the decider gives them.
 *
 * Note: asking routes for real — the decider counts the request as in flight on the winner
 * and assumes it caches the prompt for a while, as it would for a gateway's request.
 *
 * The prompt encoding (ctl_prompt_encode), the repeatable --label/--header values (ctl_attrs_*)
 * and the ROUTE_REQ round trip (ctl_route_ask) are shared with inferplanectl explain (ctl.h).
 */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <czmq.h>
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "decider_http.h"
#include "ipl_curve.h"
#include "ipl_strategy.h"
#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_proto.h"
#include "ipl_prompt.h"

typedef struct {
    const char *decider, *model, *prompt, *messages, *tenant, *strategy, *admin, *tokenizer;
    const char *lora, *cache_salt;
    long block_size, timeout_ms;
    bool explain;
    ctl_attrs_t attrs;
} s_opts_t;

static void s_usage(FILE *out)
{
    fprintf(out,
            "usage: inferplanectl route [--decider ENDPOINT] --model MODEL (--prompt TEXT | "
            "--messages JSON)\n"
            "                           [--tenant T] [--strategy S] [--block-size N] "
            "[--timeout-ms MS]\n"
            "                           [--label L]... [--header NAME=VALUE]...\n"
            "                           [--lora ADAPTER] [--cache-salt SALT]\n"
            "                           [--explain [--admin HOST:PORT]]\n\n"
            "Asks a decider where this request would go and prints its decision.\n\n"
            "  --decider ENDPOINT  the decider's ROUTER (default tcp://127.0.0.1:7021)\n"
            "  --model MODEL       the model a client would ask for\n"
            "  --prompt TEXT       a completion prompt, or\n"
            "  --messages JSON     a chat messages array (rendered with the chat template)\n"
            "  --tenant T          tenant name (default none)\n"
            "  --label L           a semantic label of the request (e.g. pii); repeatable\n"
            "  --header NAME=VALUE a request header InferencePolicy rules match on; repeatable\n"
            "  --strategy S        override the pool's strategy: one of\n"
            "                      %s\n"
            "  --tokenizer SPEC    as the gateway's --tokenizer (default builtin)\n"
            "  --lora ADAPTER      hash in this LoRA adapter's space (the gateway does when the\n"
            "                      model is an adapter a worker set lists; usually = --model)\n"
            "  --cache-salt SALT   the request's cache_salt (hashed in a space of its own)\n"
            "  --block-size N      tokens per hashed block, as the gateway's --block-size "
            "(default 16)\n"
            "  --timeout-ms MS     how long to wait for the answer (default 2000)\n"
            "  --explain           print every candidate's prediction and figures, ranked, and "
            "why the winner won\n"
            "  --admin HOST:PORT   with --explain: also print the decider's calibrated TTFT "
            "model\n"
            "                      (its admin address, e.g. 127.0.0.1:9104)\n\n"
            "The decider records the routing (in flight, optimistic cache) as for a real "
            "request.\n",
            ipl_strategy_list());
}

static int s_parse(int argc, char **argv, s_opts_t *o)
{
    static const struct option longs[] = {
        {"decider", required_argument, NULL, 'd'},
        {"model", required_argument, NULL, 'm'},
        {"prompt", required_argument, NULL, 'p'},
        {"messages", required_argument, NULL, 'M'},
        {"tenant", required_argument, NULL, 't'},
        {"strategy", required_argument, NULL, 's'},
        {"block-size", required_argument, NULL, 'b'},
        {"tokenizer", required_argument, NULL, 'k'},
        {"timeout-ms", required_argument, NULL, 'T'},
        {"explain", no_argument, NULL, 'e'},
        {"admin", required_argument, NULL, 'a'},
        {"label", required_argument, NULL, 'l'},
        {"header", required_argument, NULL, 'H'},
        {"lora", required_argument, NULL, 'L'},
        {"cache-salt", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (s_opts_t){.decider = "tcp://127.0.0.1:7021", .block_size = 16, .timeout_ms = 2000};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'd':
            o->decider = optarg;
            break;
        case 'm':
            o->model = optarg;
            break;
        case 'p':
            o->prompt = optarg;
            break;
        case 'M':
            o->messages = optarg;
            break;
        case 't':
            o->tenant = optarg;
            break;
        case 's':
            o->strategy = optarg;
            break;
        case 'e':
            o->explain = true;
            break;
        case 'a':
            o->admin = optarg;
            break;
        case 'k':
            o->tokenizer = optarg;
            break;
        case 'L':
            o->lora = optarg;
            break;
        case 'S':
            o->cache_salt = optarg;
            break;
        case 'l':
        case 'H':
            if (ctl_attrs_add(&o->attrs, "route", c == 'H', optarg)) return 2;
            break;
        case 'b':
        case 'T': {
            long v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < 1 || v > (c == 'b' ? 1024 : 600000)) {
                fprintf(stderr, "inferplanectl route: --%s must be a number from 1 to %d\n",
                        c == 'b' ? "block-size" : "timeout-ms", c == 'b' ? 1024 : 600000);
                return 2;
            }
            if (c == 'b')
                o->block_size = v;
            else
                o->timeout_ms = v;
            break;
        }
        case 'h':
            s_usage(stdout);
            return 1;
        default:
            fprintf(stderr, "inferplanectl route: unknown or incomplete option '%s'\n",
                    argv[optind - 1]);
            s_usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "inferplanectl route: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!o->model || !*o->model || !o->prompt == !o->messages) {
        fprintf(stderr, "inferplanectl route: --model and exactly one of --prompt or --messages "
                        "are required (see --help)\n");
        return 2;
    }
    return 0;
}

// ---- --admin: the decider's TTFT model -----------------------------------------------------

static size_t s_collect(char *data, size_t size, size_t n, void *arg)
{
    size_t len = size * n;
    char **buf = arg;
    size_t have = *buf ? strlen(*buf) : 0;
    if (have + len > (1u << 20)) return 0; // a debug document, not a stream
    char *grown = realloc(*buf, have + len + 1);
    if (!grown) return 0;
    memcpy(grown + have, data, len);
    grown[have + len] = '\0';
    *buf = grown;
    return len;
}

// GET http://<admin>/debug/model; the parsed document, or NULL after printing why.
static cJSON *s_fetch_model(const char *admin, long timeout_ms)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s/debug/model", strstr(admin, "://") ? "" : "http://", admin);
    CURL *curl = curl_easy_init();
    char *body = NULL;
    long status = 0;
    CURLcode rc = CURLE_FAILED_INIT;
    if (curl) {
        curl_easy_setopt(curl, CURLOPT_URL, url);
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, s_collect);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
        rc = curl_easy_perform(curl);
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(curl);
    }
    cJSON *doc = rc == CURLE_OK && status == 200 && body ? cJSON_Parse(body) : NULL;
    if (!doc)
        fprintf(stderr, "inferplanectl route: could not read %s (%s, HTTP %ld)\n", url,
                rc == CURLE_OK ? "not the expected JSON" : curl_easy_strerror(rc), status);
    free(body);
    return doc;
}

static double s_num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static void s_print_model(const cJSON *doc)
{
    const cJSON *router = cJSON_GetObjectItemCaseSensitive(doc, "router");
    const cJSON *pred = cJSON_GetObjectItemCaseSensitive(doc, "predictor");
    const cJSON *sets = cJSON_GetObjectItemCaseSensitive(pred, "worker_sets");
    const cJSON *def = cJSON_GetObjectItemCaseSensitive(router, "default_strategy");
    printf("\n  The decider's TTFT model (default strategy %s, load gate %.0f, max queue %.0f, "
           "temperature %.3f s):\n",
           cJSON_IsString(def) ? def->valuestring : "?", s_num(router, "load_gate"),
           s_num(router, "max_queue"), s_num(router, "temperature_s"));
    const cJSON *set;
    cJSON_ArrayForEach(set, sets)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(set, "name");
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(set, "params");
        double tok = s_num(p, "per_uncached_token_s");
        printf("    worker set %s: base %.1f ms, %.1f ms per queued request, %.0f queued tokens/s, "
               "%.1f ms per running request, prefill %.0f tokens/s, network %.1f ms;\n"
               "      calibrated on %.0f observed TTFTs (%.0f outliers ignored): MAE %.1f ms, "
               "RMSE %.1f ms\n",
               cJSON_IsString(name) ? name->valuestring : "?", s_num(p, "base_s") * 1e3,
               s_num(p, "per_queued_request_s") * 1e3,
               s_num(p, "per_queued_token_s") > 0 ? 1.0 / s_num(p, "per_queued_token_s") : 0,
               s_num(p, "per_running_s") * 1e3, tok > 0 ? 1.0 / tok : 0,
               s_num(set, "network_s") * 1e3, s_num(set, "samples"), s_num(set, "outliers"),
               s_num(set, "mae_s") * 1e3, s_num(set, "rmse_s") * 1e3);
    }
    if (!cJSON_GetArraySize(sets)) printf("    no worker set predicted yet\n");
}

// ---- printing ---------------------------------------------------------------------------------

// Candidates with a prediction first (ascending), then the others in the decider's order.
static const ipl_route_rep_t *s_sort_rep;
static bool s_predicted(const ipl_candidate_t *c)
{
    return c->eligible || c->predicted_ttft_s > 0;
}
static int s_rank_cmp(const void *a, const void *b)
{
    const ipl_candidate_t *x = &s_sort_rep->candidates[*(const uint32_t *)a];
    const ipl_candidate_t *y = &s_sort_rep->candidates[*(const uint32_t *)b];
    if (s_predicted(x) != s_predicted(y)) return s_predicted(x) ? -1 : 1;
    if (s_predicted(x) && x->predicted_ttft_s != y->predicted_ttft_s)
        return x->predicted_ttft_s < y->predicted_ttft_s ? -1 : 1;
    return (*(const uint32_t *)a > *(const uint32_t *)b) -
           (*(const uint32_t *)a < *(const uint32_t *)b);
}

static void s_print(const ipl_route_rep_t *rep, uint64_t prompt_tokens, bool explain,
                    const cJSON *model)
{
    bool ok = rep->status == IPL_ROUTE_OK;
    const ipl_candidate_t *win = NULL;
    for (uint32_t i = 0; ok && i < rep->candidates_len; i++)
        if (rep->candidates[i].worker && !strcmp(rep->candidates[i].worker, rep->worker))
            win = &rep->candidates[i];
    if (ok) {
        printf("%s  %s  (pool %s, reason %s)\n", rep->worker, rep->url, rep->pool, rep->reason);
        printf("  predicted TTFT %.1f ms, %llu of %llu prompt tokens cached, state seq %llu\n",
               rep->predicted_ttft_s * 1000.0, (unsigned long long)rep->cached_tokens,
               (unsigned long long)prompt_tokens, (unsigned long long)rep->state_seq);
    } else {
        printf("not routed: reason %s (status %llu, HTTP %u at the gateway)\n", rep->reason,
               (unsigned long long)rep->status, ctl_route_http_status(rep));
    }
    ctl_route_print_policy(rep);
    if (!explain) {
        if (rep->detail && *rep->detail) printf("  %s\n", rep->detail);
        return;
    }
    if (rep->detail && *rep->detail)
        printf("\n  Why%s%s: %s\n", ok ? " " : "", ok ? rep->worker : "", rep->detail);
    uint32_t n = rep->candidates_len;
    uint32_t *order = malloc((n ? n : 1) * sizeof *order);
    if (!order) return;
    for (uint32_t i = 0; i < n; i++)
        order[i] = i;
    s_sort_rep = rep;
    qsort(order, n, sizeof *order, s_rank_cmp);
    printf("\n  %-5s %-16s %-8s %12s %10s %8s %7s %7s %8s %8s\n", "RANK", "WORKER", "ELIGIBLE",
           "PRED_TTFT_MS", "VS_WINNER", "CACHED", "RUNNING", "WAITING", "INFLIGHT", "KV_USAGE");
    for (uint32_t k = 0; k < n; k++) {
        const ipl_candidate_t *c = &rep->candidates[order[k]];
        char rank[16], pred[16] = "-", delta[16] = "-";
        snprintf(rank, sizeof rank, "%s%u", c == win ? "*" : " ", k + 1);
        if (s_predicted(c)) {
            snprintf(pred, sizeof pred, "%.1f", c->predicted_ttft_s * 1000.0);
            if (win && c != win)
                snprintf(delta, sizeof delta, "%+.1f",
                         (c->predicted_ttft_s - win->predicted_ttft_s) * 1000.0);
        }
        printf("  %-5s %-16s %-8s %12s %10s %8llu %7llu %7llu %8llu %8.2f\n", rank,
               c->worker ? c->worker : "", c->eligible ? "yes" : "no", pred, delta,
               (unsigned long long)c->cached_tokens, (unsigned long long)c->running,
               (unsigned long long)c->waiting, (unsigned long long)c->inflight, c->kv_usage);
        if (c->note && *c->note) printf("        %s\n", c->note);
    }
    free(order);
    printf("\n  How to read it: PRED_TTFT_MS is the decider's prediction for each worker, whatever "
           "the strategy:\n"
           "    base + wait (requests queued ahead: waiting + routed in flight, their uncached "
           "tokens, running)\n"
           "    + prefill of the prompt tokens not cached there (+ network for remote workers), "
           "calibrated per\n"
           "    worker set from observed TTFTs. CACHED = prefix blocks held (KV-event index + "
           "optimistic) x block\n"
           "    size; 0 with \"load only\" when the worker's cache state cannot be trusted. Not "
           "eligible: down, no\n"
           "    load sample, above the max queue or the load gate, or not chosen by the strategy's "
           "rule (see NOTE).\n");
    if (model) s_print_model(model);
}

int ctl_route(int argc, char **argv)
{
    s_opts_t o;
    int rc = s_parse(argc, argv, &o);
    if (rc) {
        ctl_attrs_clear(&o.attrs);
        return rc == 1 ? 0 : 2;
    }
    ctl_prompt_t prompt;
    rc = ctl_prompt_encode("route", o.tokenizer, o.prompt, o.messages, o.block_size, o.lora,
                           o.cache_salt, &prompt);
    if (rc) {
        ctl_attrs_clear(&o.attrs);
        return rc;
    }
    ipl_route_req_t req = {
        .model = (char *)o.model,
        .tenant = (char *)(o.tenant ? o.tenant : ""),
        .prompt_tokens = prompt.tokens,
        .block_size = (uint64_t)o.block_size,
        .hashes = prompt.hashes,
        .hashes_len = prompt.nhashes,
        .strategy = (char *)(o.strategy ? o.strategy : ""),
        .explain = 1, // the notes and the detail are what this tool prints
        .labels = o.attrs.labels,
        .labels_len = o.attrs.nlabels,
        .headers = o.attrs.headers,
        .headers_len = o.attrs.nheaders,
    };
    ipl_msg_t msg;
    rc = ctl_route_ask("route", o.decider, &req, o.timeout_ms, &msg);
    if (rc == 0) {
        cJSON *model = o.explain && o.admin ? s_fetch_model(o.admin, o.timeout_ms) : NULL;
        s_print(&msg.u.route_rep, prompt.tokens, o.explain, model);
        cJSON_Delete(model);
        rc = msg.u.route_rep.status == IPL_ROUTE_OK ? 0 : 1;
        ipl_msg_clear(&msg);
    }
    ctl_prompt_clear(&prompt);
    ctl_attrs_clear(&o.attrs);
    return rc;
}

// ---- shared with inferplanectl explain (ctl.h) ----------------------------------------------

// The prompt text: `text` as it is, or `messages` rendered; malloc'd, or NULL after printing.
static char *s_text(const char *cmd, const ipl_prompt_t *model, const char *text,
                    const char *messages)
{
    if (text) return strdup(text);
    cJSON *msgs = cJSON_Parse(messages);
    if (!cJSON_IsArray(msgs)) {
        fprintf(stderr, "inferplanectl %s: --messages must be a JSON array of chat messages\n",
                cmd);
        cJSON_Delete(msgs);
        return NULL;
    }
    char err[512] = "", *out = NULL;
    if (ipl_prompt_render(model, msgs, NULL, true, false, NULL, &out, NULL, err, sizeof err))
        fprintf(stderr, "inferplanectl %s: --messages: %s\n", cmd, err);
    cJSON_Delete(msgs);
    return out;
}

int ctl_prompt_encode(const char *cmd, const char *tokenizer, const char *text,
                      const char *messages, long block_size, const char *lora,
                      const char *cache_salt, ctl_prompt_t *out)
{
    *out = (ctl_prompt_t){0};
    char err[512] = "";
    ipl_prompt_t *model = ipl_prompt_open(tokenizer, err, sizeof err);
    if (!model) {
        fprintf(stderr, "inferplanectl %s: --tokenizer: %s\n", cmd, err);
        return 2;
    }
    char *prompt = s_text(cmd, model, text, messages);
    uint64_t *hashes = NULL;
    size_t nhashes = 0, ntok = 0;
    int rc = prompt ? ipl_prompt_blocks(model, prompt, strlen(prompt), !text, (size_t)block_size,
                                        lora, cache_salt, UINT32_MAX, &hashes, &nhashes, &ntok)
                    : 2;
    free(prompt);
    ipl_prompt_destroy(&model);
    if (rc == IPL_E_NOMEM) fprintf(stderr, "inferplanectl %s: out of memory\n", cmd);
    if (rc) return rc == 2 ? 2 : 1;
    *out = (ctl_prompt_t){.tokens = ntok, .hashes = hashes, .nhashes = (uint32_t)nhashes};
    return 0;
}

void ctl_prompt_clear(ctl_prompt_t *p)
{
    free(p->hashes);
    *p = (ctl_prompt_t){0};
}

// An HTTP field name: RFC 9110 token characters.
static bool s_header_name_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("!#$%&'*+-.^_`|~", s[i])) return false;
    return n > 0;
}

int ctl_attrs_add(ctl_attrs_t *a, const char *cmd, bool header, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (!header && !*arg) {
        fprintf(stderr, "inferplanectl %s: --label needs a name (e.g. --label pii)\n", cmd);
        return 2;
    }
    if (header && (!eq || !s_header_name_ok(arg, (size_t)(eq - arg)))) {
        fprintf(stderr,
                "inferplanectl %s: --header '%s': want NAME=VALUE with a header name before "
                "the '=' (e.g. --header x-inferplane-class=batch)\n",
                cmd, arg);
        return 2;
    }
    char ***list = header ? &a->headers : &a->labels;
    uint32_t *n = header ? &a->nheaders : &a->nlabels;
    char **grown = realloc(*list, (*n + 1) * sizeof **list);
    char *copy = strdup(arg);
    if (grown) *list = grown;
    if (!grown || !copy) {
        free(copy);
        fprintf(stderr, "inferplanectl %s: out of memory\n", cmd);
        return 1;
    }
    for (char *c = copy; header && *c != '='; c++)
        *c = (char)tolower((unsigned char)*c); // names are case-insensitive; the wire's are lower
    (*list)[(*n)++] = copy;
    return 0;
}

void ctl_attrs_clear(ctl_attrs_t *a)
{
    for (uint32_t i = 0; i < a->nlabels; i++)
        free(a->labels[i]);
    for (uint32_t i = 0; i < a->nheaders; i++)
        free(a->headers[i]);
    free(a->labels);
    free(a->headers);
    *a = (ctl_attrs_t){0};
}

int ctl_route_ask(const char *cmd, const char *decider, ipl_route_req_t *req, long timeout_ms,
                  ipl_msg_t *reply)
{
    zsys_handler_set(NULL);
    zsock_t *dealer = zsock_new(ZMQ_DEALER);
    ipl_curve_client(dealer); /* CURVE with INFERPLANE_CURVE_DIR (main.c) */
    if (!dealer || zsock_connect(dealer, "%s", decider) != 0) {
        fprintf(stderr,
                "inferplanectl %s: cannot connect to --decider '%s' (use tcp://host:port)\n", cmd,
                decider);
        zsock_destroy(&dealer);
        return 2;
    }
    zsock_set_linger(dealer, 0);
    if (!req->req_id) req->req_id = ipl_wall_ms();
    int rc = 1;
    if (ipl_msg_send(zsock_resolve(dealer), IPL_MSG_ROUTE_REQ, req, 0) != IPL_OK) {
        fprintf(stderr, "inferplanectl %s: cannot send the request\n", cmd);
        zsock_destroy(&dealer);
        return 1;
    }
    uint64_t deadline = ipl_mono_ms() + (uint64_t)timeout_ms;
    zpoller_t *poller = zpoller_new(dealer, NULL);
    while (rc && ipl_mono_ms() < deadline) {
        if (!zpoller_wait(poller, (int)(deadline - ipl_mono_ms()))) continue;
        zframe_t *frame = zframe_recv(dealer);
        if (!frame) break;
        ipl_msg_t msg = {0};
        int drc = ipl_msg_decode(zframe_data(frame), zframe_size(frame), &msg);
        zframe_destroy(&frame);
        if (drc != IPL_OK) {
            fprintf(stderr, "inferplanectl %s: undecodable reply (%s)\n", cmd, ipl_strerror(drc));
            break;
        }
        if (msg.type == IPL_MSG_ROUTE_REP && msg.u.route_rep.req_id == req->req_id) {
            *reply = msg; // the caller's now
            rc = 0;
        } else {
            ipl_msg_clear(&msg); // a reply to someone else's request id: keep waiting
        }
    }
    zpoller_destroy(&poller);
    if (rc && ipl_mono_ms() >= deadline)
        fprintf(stderr,
                "inferplanectl %s: no answer from %s within %ld ms (is the decider running?)\n",
                cmd, decider, timeout_ms);
    zsock_destroy(&dealer);
    return rc;
}

const char *ctl_route_status_name(uint64_t status)
{
    static const char *names[] = {"ok",          "no_pool",   "no_worker", "overloaded",
                                  "bad_request", "not_ready", "rejected",  "deferred"};
    return status < sizeof names / sizeof *names ? names[status] : "unknown";
}

unsigned ctl_route_http_status(const ipl_route_rep_t *rep)
{
    if (rep->status == IPL_ROUTE_REJECTED && rep->http_status) return (unsigned)rep->http_status;
    return (unsigned)decider_http_status((int)rep->status); // as the decider's POST /v1/route
}

void ctl_route_print_policy(const ipl_route_rep_t *rep)
{
    const char *sep = "  ";
    if (rep->target_kind && *rep->target_kind) {
        printf("%starget %s", sep, rep->target_kind);
        if (rep->backend && *rep->backend) printf(" via backend %s", rep->backend);
        sep = "; ";
    }
    if (rep->rule && *rep->rule) {
        printf("%srule %s", sep, rep->rule);
        sep = "; ";
    }
    if (rep->http_status) {
        printf("%sHTTP %llu", sep, (unsigned long long)rep->http_status);
        sep = "; ";
    }
    if (rep->retry_after_ms) {
        printf("%sretry after %llu ms", sep, (unsigned long long)rep->retry_after_ms);
        sep = "; ";
    }
    if (sep[0] == ';') printf("\n");
}
