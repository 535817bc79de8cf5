/*
 * inferplanectl explain — which InferencePolicy rule decides a request, which rules before it
 * did not match and why, and what the deciding rule does. The policy directory is compiled as
 * `inferplanectl validate` compiles it (libs/policy) and its rules are evaluated by the
 * decider's own evaluator (libs/decision/decider_rules: decider_rules_explain, which agrees
 * with the decider's decider_rules_eval on every input):
 *
 *   $ inferplanectl explain --policy examples/policy-full --model small-model --tenant team-a \
 *       --prompt-tokens 5000
 *   ...
 *     ✗ guardrails/pii-stays-local            label "pii" missing
 *     ✗ guardrails/blocked-tenant             tenant "team-a" is not one of [suspended-team]
 *     ...
 *     ✗ routing/small-unless-large-is-faster  prompt 5000 tokens above max 4000
 *     ✓ routing/team-a-small-only             route: pool chat, targets [small]
 *
 *   action (rule routing/team-a-small-only): route: pool chat, targets [small]
 *
 * Rules after the deciding one are listed as "· not evaluated".
 *
 * Pool state (queue depth, KV utilization, predicted TTFT) is what the options say, an idle
 * pool by default; the SLO is the request's pool's (decider_targets_resolve: the pool of the
 * model or, for an alias, of its first target). With --decider, the same request is sent to a
 * running decider as `inferplanectl route` sends it (ctl_route_ask: labels, headers,
 * explain=1) and its decision is printed too. --json prints one JSON object instead.
 *
 * Exit status: 0 explained; 1 the decider did not answer; 2 usage error or invalid policy
 * (the compiler's errors are printed as `inferplanectl validate` prints them).
 */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "decider_rules.h"
#include "decider_targets.h"
#include "ipl_clock.h"
#include "policy_compiler.h"
#include "policy_labeller.h"
#include "policy_digest.h"

#define S_NAME_WIDTH 48 /* the policy/rule column at most; a longer name pushes its text right */

typedef struct {
    const char *policy, *model, *tenant, *prompt, *time, *decider, *tokenizer;
    uint64_t prompt_tokens, queue_depth, kv_percent;
    double ttft_ms;
    bool has_prompt_tokens, has_queue, has_kv, has_ttft, json;
    long block_size, timeout_ms;
    ctl_attrs_t attrs;
} s_opts_t;

/* One rule's line of the explanation (decider_rules_explain's trace). */
typedef struct {
    bool evaluated, matched;
    char *why; /* owned */
} s_line_t;

typedef struct {
    s_line_t *line; /* one per rule */
    size_t n;
    bool failed; /* out of memory */
} s_trace_t;

static void s_usage(FILE *out)
{
    fprintf(out,
            "usage: inferplanectl explain --policy DIR --model MODEL [--tenant T] [--label L]...\n"
            "           [--header NAME=VALUE]... [--prompt TEXT | --prompt-tokens N]\n"
            "           [--time 'Mon 14:05'] [--queue-depth N] [--kv-utilization PCT]\n"
            "           [--predicted-ttft-ms MS] [--decider ENDPOINT] [--json]\n\n"
            "Compiles the policy directory DIR (as inferplanectl validate does) and shows which\n"
            "InferencePolicy rule decides this request: every rule before it with the condition\n"
            "that failed, the rule that matched and its action, the rules after it as not\n"
            "evaluated.\n\n"
            "  --policy DIR            a directory of policy resources (*.yaml, *.yml)\n"
            "  --model MODEL           the model or alias a client would ask for\n"
            "  --tenant T              tenant name (default none: anonymous)\n"
            "  --label L               a semantic label of the request (e.g. pii); repeatable\n"
            "  --header NAME=VALUE     a request header; repeatable\n"
            "  --prompt TEXT           the prompt, tokenized as inferplanectl route does, or\n"
            "  --prompt-tokens N       its length in tokens (default 0)\n"
            "  --tokenizer SPEC        for --prompt: as the gateway's --tokenizer (default "
            "builtin)\n"
            "  --time 'DAY HH:MM'      the time, UTC, e.g. 'Mon 14:05' (default now)\n"
            "  --queue-depth N         the pool's waiting requests (default 0)\n"
            "  --kv-utilization PCT    the pool's KV-cache utilization, 0..100 (default 0)\n"
            "  --predicted-ttft-ms MS  the pool's best predicted TTFT (default 0)\n"
            "                          (the three pool options default to an idle pool)\n"
            "  --decider ENDPOINT      also ask this decider (e.g. tcp://127.0.0.1:7021) and\n"
            "                          print its decision; it records the routing (in flight,\n"
            "                          optimistic cache) as for a real request\n"
            "  --block-size N          with --decider: tokens per hashed block (default 16)\n"
            "  --timeout-ms MS         with --decider: how long to wait (default 2000)\n"
            "  --json                  print one JSON object: request, pool_state, rules,\n"
            "                          action, decision\n\n"
            "Exit status: 0 explained, 1 the decider did not answer, 2 usage error or invalid\n"
            "policy.\n");
}

/* An unsigned number of at most `max`; 2 after printing why. */
static int s_u64(const char *flag, const char *arg, uint64_t max, uint64_t *out)
{
    char *end = NULL;
    unsigned long long v = strtoull(arg, &end, 10);
    if (!*arg || *end || *arg == '-' || v > max) {
        fprintf(stderr, "inferplanectl explain: --%s '%s': want a whole number from 0 to %llu\n",
                flag, arg, (unsigned long long)max);
        return 2;
    }
    *out = v;
    return 0;
}

/* 0, -1 after --help, or an exit code after printing why. */
static int s_parse(int argc, char **argv, s_opts_t *o)
{
    static const struct option longs[] = {
        {"policy", required_argument, NULL, 'P'},
        {"model", required_argument, NULL, 'm'},
        {"tenant", required_argument, NULL, 't'},
        {"label", required_argument, NULL, 'l'},
        {"header", required_argument, NULL, 'H'},
        {"prompt", required_argument, NULL, 'p'},
        {"prompt-tokens", required_argument, NULL, 'n'},
        {"tokenizer", required_argument, NULL, 'k'},
        {"time", required_argument, NULL, 'w'},
        {"queue-depth", required_argument, NULL, 'q'},
        {"kv-utilization", required_argument, NULL, 'u'},
        {"predicted-ttft-ms", required_argument, NULL, 'f'},
        {"decider", required_argument, NULL, 'd'},
        {"block-size", required_argument, NULL, 'b'},
        {"timeout-ms", required_argument, NULL, 'T'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (s_opts_t){.block_size = 16, .timeout_ms = 2000};
    optind = 1;
    opterr = 0;
    int c, rc = 0;
    uint64_t v = 0;
    while (rc == 0 && (c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'P':
            o->policy = optarg;
            break;
        case 'm':
            o->model = optarg;
            break;
        case 't':
            o->tenant = optarg;
            break;
        case 'l':
        case 'H':
            rc = ctl_attrs_add(&o->attrs, "explain", c == 'H', optarg);
            break;
        case 'p':
            o->prompt = optarg;
            break;
        case 'n':
            rc = s_u64("prompt-tokens", optarg, UINT32_MAX, &o->prompt_tokens);
            o->has_prompt_tokens = true;
            break;
        case 'k':
            o->tokenizer = optarg;
            break;
        case 'w':
            o->time = optarg;
            break;
        case 'q':
            rc = s_u64("queue-depth", optarg, UINT32_MAX, &o->queue_depth);
            o->has_queue = true;
            break;
        case 'u':
            rc = s_u64("kv-utilization", optarg, 100, &o->kv_percent);
            o->has_kv = true;
            break;
        case 'f': {
            char *end = NULL;
            o->ttft_ms = strtod(optarg, &end);
            o->has_ttft = true;
            if (!*optarg || *end || !isfinite(o->ttft_ms) || o->ttft_ms < 0) {
                fprintf(stderr,
                        "inferplanectl explain: --predicted-ttft-ms '%s': want milliseconds, "
                        "0 or more (e.g. 950.5)\n",
                        optarg);
                rc = 2;
            }
            break;
        }
        case 'd':
            o->decider = optarg;
            break;
        case 'b':
        case 'T':
            rc =
                s_u64(c == 'b' ? "block-size" : "timeout-ms", optarg, c == 'b' ? 1024 : 600000, &v);
            if (rc == 0 && v == 0) {
                fprintf(stderr, "inferplanectl explain: --%s must be at least 1\n",
                        c == 'b' ? "block-size" : "timeout-ms");
                rc = 2;
            }
            *(c == 'b' ? &o->block_size : &o->timeout_ms) = (long)v;
            break;
        case 'j':
            o->json = true;
            break;
        case 'h':
            s_usage(stdout);
            return -1;
        default:
            fprintf(stderr,
                    "inferplanectl explain: unknown or incomplete option '%s' (see --help)\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (rc) return rc;
    if (optind < argc) {
        fprintf(stderr, "inferplanectl explain: unexpected argument '%s' (see --help)\n",
                argv[optind]);
        return 2;
    }
    if (!o->policy || !*o->policy || !o->model || !*o->model) {
        fprintf(stderr, "inferplanectl explain: --policy DIR and --model MODEL are required (see "
                        "--help)\n");
        return 2;
    }
    if (o->prompt && o->has_prompt_tokens) {
        fprintf(stderr, "inferplanectl explain: give --prompt or --prompt-tokens, not both\n");
        return 2;
    }
    return 0;
}

/* ---- the trace -------------------------------------------------------------------------- */

static void s_on_rule(void *arg, size_t rule, bool matched, const char *why)
{
    s_trace_t *t = arg;
    if (rule >= t->n) return;
    t->line[rule] = (s_line_t){.evaluated = true, .matched = matched, .why = strdup(why)};
    if (!t->line[rule].why) t->failed = true;
}

static void s_trace_clear(s_trace_t *t)
{
    for (size_t i = 0; t->line && i < t->n; i++)
        free(t->line[i].why);
    free(t->line);
}

/* "policy/rule" (rule and policy names are at most 253 characters each). */
static const char *s_rule_label(const ipl_rule_t *r, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", r->policy ? r->policy : "", r->name ? r->name : "");
    return buf;
}

/* ---- output: text ----------------------------------------------------------------------- */

typedef struct {
    const s_opts_t *o;
    const ipl_policy_t *policy;
    const ipl_pool_t *pool;
    const decider_rules_input_t *in;
    const char *prompt_source; /* "--prompt" (tokenized), "--prompt-tokens", NULL: none */
    const s_trace_t *trace;
    const decider_rules_result_t *res;
    const ipl_route_rep_t *rep; /* the decider's, or NULL */
} s_report_t;

static void s_print_list(const char *what, char *const *items, uint32_t n)
{
    printf(", %s [", what);
    for (uint32_t i = 0; i < n; i++)
        printf("%s%s", i ? ", " : "", items[i]);
    printf("]");
}

static void s_print_text(const s_report_t *r)
{
    const s_opts_t *o = r->o;
    const decider_rules_input_t *in = r->in;
    char hex[POLICY_DIGEST_HEX_LEN], when[16], label[512];
    printf("policy %s: %u rule%s (hash %s)\n", o->policy, r->policy->rules_len,
           r->policy->rules_len == 1 ? "" : "s", policy_digest_hex(r->policy->hash, hex));
    printf("request: model %s", o->model);
    if (r->pool)
        printf(" (pool %s, TTFT SLO %llu ms%s)", r->pool->name,
               (unsigned long long)r->pool->ttft_slo_ms, r->pool->ttft_slo_ms ? "" : ": none");
    else
        printf(" (no pool serves it)");
    printf(", tenant %s", o->tenant && *o->tenant ? o->tenant : "none (anonymous)");
    if (o->attrs.nlabels) s_print_list("labels", o->attrs.labels, o->attrs.nlabels);
    if (o->attrs.nheaders) s_print_list("headers", o->attrs.headers, o->attrs.nheaders);
    printf(", %llu prompt tokens%s, %s UTC%s\n", (unsigned long long)in->prompt_tokens,
           r->prompt_source ? (o->prompt ? " (--prompt, tokenized)" : "") : " (no --prompt)",
           decider_rules_format_minute(in->minute_of_week, when, sizeof when),
           o->time ? "" : " (now)");
    bool idle = !o->has_queue && !o->has_kv && !o->has_ttft;
    printf("pool state: queue depth %llu%s, KV utilization %llu%%%s, predicted TTFT %.1f ms%s%s\n",
           (unsigned long long)in->queue_depth, idle || o->has_queue ? "" : " (default)",
           (unsigned long long)in->kv_utilization_percent, idle || o->has_kv ? "" : " (default)",
           in->predicted_ttft_ms, idle || o->has_ttft ? "" : " (default)",
           idle ? ": an idle pool, the default (set --queue-depth, --kv-utilization, "
                  "--predicted-ttft-ms)"
                : "");
    printf("\n");
    if (!r->policy->rules_len) printf("  (no InferencePolicy rules)\n");
    int width = 0;
    for (uint32_t i = 0; i < r->policy->rules_len; i++) {
        int n = (int)strlen(s_rule_label(&r->policy->rules[i], label, sizeof label));
        width = n > width ? (n < S_NAME_WIDTH ? n : S_NAME_WIDTH) : width;
    }
    for (uint32_t i = 0; i < r->policy->rules_len; i++) {
        const s_line_t *l = &r->trace->line[i];
        printf("  %s %-*s  %s\n",
               !l->evaluated ? "·"
               : l->matched  ? "✓"
                             : "✗",
               width, s_rule_label(&r->policy->rules[i], label, sizeof label),
               l->evaluated ? l->why : "not evaluated (an earlier rule decided)");
    }
    char action[DECIDER_RULES_WHY_MAX];
    decider_rules_describe(r->res, action, sizeof action);
    if (r->res->rule >= 0)
        printf("\naction (rule %s/%s): %s\n", r->res->policy, r->res->name, action);
    else
        printf("\naction: %s\n", action);
    if (!r->rep) return;
    const ipl_route_rep_t *rep = r->rep;
    printf("\ndecision of the decider at %s: %s (status %llu, HTTP %u at the gateway)\n",
           o->decider, ctl_route_status_name(rep->status), (unsigned long long)rep->status,
           ctl_route_http_status(rep));
    if (rep->status == IPL_ROUTE_OK)
        printf("  %s %s %s (pool %s, model %s, predicted TTFT %.1f ms)\n",
               rep->target_kind && *rep->target_kind ? rep->target_kind : "worker", rep->worker,
               rep->url, rep->pool, rep->model, rep->predicted_ttft_s * 1000.0);
    ctl_route_print_policy(rep);
    printf("  reason %s%s%s\n", rep->reason, rep->detail && *rep->detail ? ": " : "",
           rep->detail ? rep->detail : "");
    char mine[256] = "";
    if (r->res->rule >= 0) snprintf(mine, sizeof mine, "%s/%s", r->res->policy, r->res->name);
    if (rep->rule && strcmp(rep->rule, mine) != 0)
        printf("  note: the decider's rule (%s) is not this explanation's (%s): its policy "
               "version or its pool state differ from these\n",
               *rep->rule ? rep->rule : "none", *mine ? mine : "none");
}

/* ---- output: JSON ----------------------------------------------------------------------- */

static cJSON *s_strs(char *const *items, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(items[i]));
    return a;
}

static void s_add_str(cJSON *o, const char *key, const char *v)
{
    if (v)
        cJSON_AddStringToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

static cJSON *s_json_action(const decider_rules_result_t *res)
{
    cJSON *a = cJSON_CreateObject();
    char text[DECIDER_RULES_WHY_MAX], rule[256];
    cJSON_AddStringToObject(a, "action", decider_rules_action_name(res->action));
    snprintf(rule, sizeof rule, "%s/%s", res->policy ? res->policy : "",
             res->name ? res->name : "");
    s_add_str(a, "rule", res->rule >= 0 ? rule : NULL);
    cJSON_AddStringToObject(a, "text", decider_rules_describe(res, text, sizeof text));
    switch (res->action) {
    case DECIDER_RULES_ROUTE:
        s_add_str(a, "pool", res->pool);
        cJSON_AddItemToObject(a, "targets", s_strs(res->targets, res->ntargets));
        break;
    case DECIDER_RULES_PREFER:
        s_add_str(a, "pool", res->pool);
        s_add_str(a, "target", res->target);
        s_add_str(a, "unless_holder", res->unless_holder);
        break;
    case DECIDER_RULES_SPILL:
        s_add_str(a, "provider", res->provider);
        cJSON_AddBoolToObject(a, "while_above_slo", res->spill.while_above_slo);
        cJSON_AddNumberToObject(a, "enter_percent", (double)res->spill.enter_percent);
        cJSON_AddNumberToObject(a, "exit_percent", (double)res->spill.exit_percent);
        cJSON_AddNumberToObject(a, "min_hold_ms", (double)res->spill.min_hold_ms);
        break;
    case DECIDER_RULES_REJECT:
        cJSON_AddNumberToObject(a, "status", res->status);
        s_add_str(a, "reason", res->reason);
        break;
    case DECIDER_RULES_KEEP_LOCAL:
        s_add_str(a, "reason", res->reason);
        break;
    case DECIDER_RULES_ADMIT_BATCH:
        cJSON_AddNumberToObject(a, "max_utilization_percent", (double)res->max_utilization_percent);
        cJSON_AddBoolToObject(a, "admit", res->admit);
        break;
    case DECIDER_RULES_NONE:
        break;
    }
    return a;
}

static cJSON *s_json_decision(const ipl_route_rep_t *rep)
{
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "status", ctl_route_status_name(rep->status));
    cJSON_AddNumberToObject(d, "status_code", (double)rep->status);
    cJSON_AddNumberToObject(d, "http_status", ctl_route_http_status(rep));
    s_add_str(d, "target_kind", rep->target_kind);
    s_add_str(d, "worker", rep->worker);
    s_add_str(d, "url", rep->url);
    s_add_str(d, "backend", rep->backend);
    s_add_str(d, "pool", rep->pool);
    s_add_str(d, "model", rep->model);
    s_add_str(d, "rule", rep->rule);
    s_add_str(d, "reason", rep->reason);
    s_add_str(d, "detail", rep->detail);
    cJSON_AddNumberToObject(d, "retry_after_ms", (double)rep->retry_after_ms);
    cJSON_AddNumberToObject(d, "predicted_ttft_ms", rep->predicted_ttft_s * 1000.0);
    cJSON_AddNumberToObject(d, "cached_tokens", (double)rep->cached_tokens);
    return d;
}

static int s_print_json(const s_report_t *r)
{
    const s_opts_t *o = r->o;
    const decider_rules_input_t *in = r->in;
    char hex[POLICY_DIGEST_HEX_LEN], when[16];
    cJSON *root = cJSON_CreateObject(), *rq = cJSON_CreateObject(), *ps = cJSON_CreateObject();
    cJSON *rules = cJSON_CreateArray();
    cJSON_AddStringToObject(root, "policy", o->policy);
    cJSON_AddBoolToObject(root, "valid", true);
    cJSON_AddStringToObject(root, "hash", policy_digest_hex(r->policy->hash, hex));
    cJSON_AddStringToObject(rq, "model", o->model);
    s_add_str(rq, "tenant", o->tenant && *o->tenant ? o->tenant : NULL);
    s_add_str(rq, "pool", r->pool ? r->pool->name : NULL);
    cJSON_AddNumberToObject(rq, "ttft_slo_ms", (double)in->ttft_slo_ms);
    cJSON_AddItemToObject(rq, "labels", s_strs(o->attrs.labels, o->attrs.nlabels));
    cJSON_AddItemToObject(rq, "headers", s_strs(o->attrs.headers, o->attrs.nheaders));
    cJSON_AddNumberToObject(rq, "prompt_tokens", (double)in->prompt_tokens);
    s_add_str(rq, "prompt_tokens_from", r->prompt_source);
    cJSON_AddStringToObject(rq, "time",
                            decider_rules_format_minute(in->minute_of_week, when, sizeof when));
    cJSON_AddStringToObject(rq, "time_from", o->time ? "--time" : "now");
    cJSON_AddItemToObject(root, "request", rq);
    cJSON_AddNumberToObject(ps, "queue_depth", (double)in->queue_depth);
    cJSON_AddNumberToObject(ps, "kv_utilization_percent", (double)in->kv_utilization_percent);
    cJSON_AddNumberToObject(ps, "predicted_ttft_ms", in->predicted_ttft_ms);
    cJSON_AddBoolToObject(ps, "assumed_idle", !o->has_queue && !o->has_kv && !o->has_ttft);
    cJSON_AddItemToObject(root, "pool_state", ps);
    for (uint32_t i = 0; i < r->policy->rules_len; i++) {
        const s_line_t *l = &r->trace->line[i];
        cJSON *e = cJSON_CreateObject();
        s_add_str(e, "policy", r->policy->rules[i].policy);
        s_add_str(e, "name", r->policy->rules[i].name);
        cJSON_AddBoolToObject(e, "matched", l->matched);
        cJSON_AddBoolToObject(e, "evaluated", l->evaluated);
        cJSON_AddStringToObject(e, "why", l->evaluated ? l->why : "not evaluated");
        cJSON_AddItemToArray(rules, e);
    }
    cJSON_AddItemToObject(root, "rules", rules);
    cJSON_AddItemToObject(root, "action", s_json_action(r->res));
    if (r->rep)
        cJSON_AddItemToObject(root, "decision", s_json_decision(r->rep));
    else
        cJSON_AddNullToObject(root, "decision");
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text) {
        fprintf(stderr, "inferplanectl explain: out of memory\n");
        return 1;
    }
    printf("%s\n", text);
    free(text);
    return 0;
}

/* ---- the command ------------------------------------------------------------------------ */

/* Compiles o->policy; NULL (exit 2) after printing what inferplanectl validate prints. */
static policy_compiler_t *s_compile(const s_opts_t *o)
{
    policy_compiler_t *c = policy_compiler_new();
    if (!c) {
        fprintf(stderr, "inferplanectl explain: out of memory\n");
        return NULL;
    }
    policy_compiler_add_dir(c, o->policy);
    int errors = policy_compiler_finish(c, o->policy);
    for (size_t i = 0; i < policy_compiler_nwarnings(c); i++)
        fprintf(stderr, "warning: %s\n", policy_compiler_warning(c, i));
    if (policy_compiler_policy(c)) return c;
    size_t n = policy_compiler_nerrors(c);
    if (o->json) {
        cJSON *root = cJSON_CreateObject(), *errs = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++)
            cJSON_AddItemToArray(errs, cJSON_CreateString(policy_compiler_error(c, i)));
        cJSON_AddStringToObject(root, "policy", o->policy);
        cJSON_AddBoolToObject(root, "valid", false);
        cJSON_AddItemToObject(root, "errors", errs);
        char *text = cJSON_PrintUnformatted(root);
        if (text) printf("%s\n", text);
        free(text);
        cJSON_Delete(root);
    } else {
        for (size_t i = 0; i < n; i++)
            printf("%s\n", policy_compiler_error(c, i));
    }
    fprintf(stderr, "%s: invalid (%d error%s): nothing to explain\n", o->policy, errors,
            errors == 1 ? "" : "s");
    policy_compiler_destroy(&c);
    return NULL;
}

/* The request's headers as the evaluator takes them: names split off o->attrs.headers
 * ("name=value") into `names` (one buffer, NUL-separated). */
static decider_rules_header_t *s_headers(const ctl_attrs_t *a, char **names)
{
    size_t total = 1;
    for (uint32_t i = 0; i < a->nheaders; i++)
        total += strlen(a->headers[i]) + 1;
    decider_rules_header_t *h = calloc(a->nheaders + 1, sizeof *h);
    char *buf = malloc(total), *p = buf;
    if (!h || !buf) {
        free(h);
        free(buf);
        return NULL;
    }
    for (uint32_t i = 0; i < a->nheaders; i++) {
        size_t len = strlen(a->headers[i]) + 1;
        memcpy(p, a->headers[i], len);
        char *eq = strchr(p, '='); // ctl_attrs_add checked there is one
        *eq = '\0';
        h[i] = (decider_rules_header_t){p, eq + 1};
        p += len;
    }
    *names = buf;
    return h;
}

static int s_explain(const s_opts_t *o, const ipl_policy_t *policy)
{
    uint32_t minute = 0;
    if (o->time && decider_rules_parse_minute(o->time, &minute) != 0) {
        fprintf(stderr,
                "inferplanectl explain: --time '%s': want a weekday and a UTC time, e.g. --time "
                "'Mon 14:05'\n",
                o->time);
        return 2;
    }
    if (!o->time) minute = decider_rules_minute_of_week(ipl_wall_ms());
    ctl_prompt_t prompt = {.tokens = o->prompt_tokens};
    if (o->prompt) {
        const char *lora = NULL; // the adapter the model names, as the gateway hashes it
        (void)decider_targets_resolve_lora(policy, o->model, 0.0, NULL, &lora);
        int rc = ctl_prompt_encode("explain", o->tokenizer, o->prompt, NULL, o->block_size, lora,
                                   NULL, &prompt);
        if (rc) return rc;
    }
    char err[512] = "", *names = NULL;
    decider_rules_t *rules = NULL;
    decider_rules_header_t *headers = s_headers(&o->attrs, &names);
    s_trace_t trace = {.line = calloc(policy->rules_len + 1, sizeof(s_line_t)),
                       .n = policy->rules_len};
    int rc = 1;
    if (!headers || !trace.line) {
        fprintf(stderr, "inferplanectl explain: out of memory\n");
        goto done;
    }
    if (decider_rules_new(policy, &rules, err, sizeof err) != 0) {
        fprintf(stderr, "inferplanectl explain: %s: the rules cannot be evaluated: %s\n", o->policy,
                err);
        goto done;
    }
    // an alias's first target (draw 0), where the decider draws one by weight
    const ipl_pool_t *pool = decider_targets_resolve(policy, o->model, 0.0, NULL);
    decider_rules_input_t in = {
        .tenant = o->tenant,
        .model = o->model,
        .labels = (const char *const *)o->attrs.labels,
        .nlabels = o->attrs.nlabels,
        .headers = headers,
        .nheaders = o->attrs.nheaders,
        .prompt_tokens = prompt.tokens,
        .queue_depth = o->queue_depth,
        .kv_utilization_percent = o->kv_percent,
        .predicted_ttft_ms = o->ttft_ms,
        .ttft_slo_ms = pool ? pool->ttft_slo_ms : 0,
        .minute_of_week = minute,
    };
    decider_rules_result_t res;
    decider_rules_explain(rules, &in, s_on_rule, &trace, &res);
    if (trace.failed) {
        fprintf(stderr, "inferplanectl explain: out of memory\n");
        goto done;
    }
    ipl_msg_t msg = {0};
    bool asked = false;
    if (o->decider) {
        ipl_route_req_t req = {
            .model = (char *)o->model,
            .tenant = (char *)(o->tenant ? o->tenant : ""),
            .prompt_tokens = prompt.tokens,
            .block_size = (uint64_t)o->block_size,
            .hashes = prompt.hashes,
            .hashes_len = prompt.nhashes,
            .strategy = "",
            .explain = 1,
            .labels = o->attrs.labels,
            .labels_len = o->attrs.nlabels,
            .headers = o->attrs.headers,
            .headers_len = o->attrs.nheaders,
        };
        int arc = ctl_route_ask("explain", o->decider, &req, o->timeout_ms, &msg);
        if (arc == 2) {
            rc = 2;
            goto done;
        }
        asked = arc == 0;
    }
    s_report_t report = {
        .o = o,
        .policy = policy,
        .pool = pool,
        .in = &in,
        .prompt_source = o->prompt              ? "--prompt"
                         : o->has_prompt_tokens ? "--prompt-tokens"
                                                : NULL,
        .trace = &trace,
        .res = &res,
        .rep = asked ? &msg.u.route_rep : NULL,
    };
    rc = o->json ? s_print_json(&report) : (s_print_text(&report), 0);
    if (asked) ipl_msg_clear(&msg);
    if (rc == 0 && o->decider && !asked) rc = 1; // explained, but the decider did not answer
done:
    decider_rules_destroy(&rules);
    s_trace_clear(&trace);
    free(headers);
    free(names);
    ctl_prompt_clear(&prompt);
    return rc;
}

/* The labels the gateway would find in --prompt (the policy's spec.labels: detectors, the
 * operators' rules, the classifier), added to --label's; said on stderr. 0, or 2. */
static int s_prompt_labels(s_opts_t *o, const ipl_policy_t *policy)
{
    if (!o->prompt) return 0;
    char err[512] = "";
    policy_labeller_t *l = policy_labeller_new(policy, err, sizeof err);
    if (!l) {
        fprintf(stderr, "inferplanectl explain: %s: the labels cannot be built: %s\n", o->policy,
                err);
        return 2;
    }
    const char *found[32];
    size_t n = policy_labeller_eval(l, o->prompt, strlen(o->prompt), found, 32);
    if (n > 32) n = 32;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        bool given = false;
        for (uint32_t k = 0; k < o->attrs.nlabels && !given; k++)
            given = !strcmp(o->attrs.labels[k], found[i]);
        if (!given) rc = ctl_attrs_add(&o->attrs, "explain", false, found[i]);
    }
    fprintf(stderr, "labels found in --prompt (as the gateway finds them):");
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "%s %s", i ? "," : "", found[i]);
    fprintf(stderr, "%s\n", n ? "" : " none");
    policy_labeller_destroy(&l);
    return rc ? 2 : 0;
}

int ctl_explain(int argc, char **argv)
{
    s_opts_t o;
    int rc = s_parse(argc, argv, &o); // -1: --help
    if (rc == 0) {
        policy_compiler_t *c = s_compile(&o);
        rc = c ? s_prompt_labels(&o, policy_compiler_policy(c)) : 2;
        if (rc == 0) rc = s_explain(&o, policy_compiler_policy(c));
        policy_compiler_destroy(&c);
    }
    ctl_attrs_clear(&o.attrs);
    return rc < 0 ? 0 : rc;
}
