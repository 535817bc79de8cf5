/*
 * decider_http — JSON request parsing (strictly typed, every error says which field and what
 * was expected), decision rendering and the router's admin endpoint.
 */
#include "decider_http.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decider_targets.h"
#include "ipl_error.h"
#include "policy_isolation.h"

#define S_DEFAULT_BLOCK_SIZE 16
#define S_MAX_NAME           256

static int s_bad(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s_bad(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return IPL_E_INVAL;
}

// An optional string field: absent/null → *out NULL; a non-string is an error.
static int s_string(const cJSON *root, const char *key, bool required, char **out, char *err,
                    size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    *out = NULL;
    if (!v || cJSON_IsNull(v)) {
        if (required) return s_bad(err, errlen, "'%s' is required (a string)", key);
        return IPL_OK;
    }
    if (!cJSON_IsString(v)) return s_bad(err, errlen, "'%s' must be a string", key);
    if (required && !*v->valuestring) return s_bad(err, errlen, "'%s' must not be empty", key);
    *out = strdup(v->valuestring);
    return *out ? IPL_OK : IPL_E_NOMEM;
}

// "labels": an array of non-empty strings (absent → none).
static int s_labels(const cJSON *root, decider_http_request_t *out, char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "labels");
    if (!v || cJSON_IsNull(v)) return IPL_OK;
    if (!cJSON_IsArray(v) || (size_t)cJSON_GetArraySize(v) > DECIDER_HTTP_MAX_LABELS)
        return s_bad(err, errlen, "'labels' must be an array of at most %u strings",
                     DECIDER_HTTP_MAX_LABELS);
    out->labels = calloc(DECIDER_HTTP_MAX_LABELS, sizeof *out->labels);
    if (!out->labels) return IPL_E_NOMEM;
    const cJSON *l;
    cJSON_ArrayForEach(l, v)
    {
        if (!cJSON_IsString(l) || !*l->valuestring)
            return s_bad(err, errlen, "'labels' must hold non-empty strings");
        if (!(out->labels[out->nlabels++] = strdup(l->valuestring))) return IPL_E_NOMEM;
    }
    return IPL_OK;
}

// "headers": an object of string values, kept as "name=value" with the name lower-cased.
static int s_headers(const cJSON *root, decider_http_request_t *out, char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "headers");
    if (!v || cJSON_IsNull(v)) return IPL_OK;
    if (!cJSON_IsObject(v) || (size_t)cJSON_GetArraySize(v) > DECIDER_HTTP_MAX_LABELS)
        return s_bad(err, errlen, "'headers' must be an object of at most %u string values",
                     DECIDER_HTTP_MAX_LABELS);
    out->headers = calloc(DECIDER_HTTP_MAX_LABELS, sizeof *out->headers);
    if (!out->headers) return IPL_E_NOMEM;
    const cJSON *h;
    cJSON_ArrayForEach(h, v)
    {
        if (!cJSON_IsString(h) || !*h->string || strchr(h->string, '='))
            return s_bad(err, errlen, "'headers' must map header names (without '=') to strings");
        size_t n = strlen(h->string), m = strlen(h->valuestring);
        char *kv = malloc(n + m + 2);
        if (!kv) return IPL_E_NOMEM;
        for (size_t i = 0; i < n; i++)
            kv[i] = (char)tolower((unsigned char)h->string[i]);
        kv[n] = '=';
        memcpy(kv + n + 1, h->valuestring, m + 1);
        out->headers[out->nheaders++] = kv;
    }
    return IPL_OK;
}

// A non-negative integer field (absent → 0).
static int s_uint(const cJSON *root, const char *key, uint64_t max, uint64_t *out, char *err,
                  size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    *out = 0;
    if (!v || cJSON_IsNull(v)) return IPL_OK;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble > (double)max)
        return s_bad(err, errlen, "'%s' must be a whole number from 0 to %llu", key,
                     (unsigned long long)max);
    *out = (uint64_t)v->valuedouble;
    return IPL_OK;
}

// One block hash: an exact JSON integer (<= 2^53) or a decimal / 0x-hex string.
static int s_hash(const cJSON *v, size_t i, uint64_t *out, char *err, size_t errlen)
{
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (d < 0 || d != floor(d) || d > 9007199254740992.0)
            return s_bad(err, errlen,
                         "block_hashes[%zu] must be a non-negative integer up to 2^53; pass "
                         "larger hashes as strings",
                         i);
        *out = (uint64_t)d;
        return IPL_OK;
    }
    if (cJSON_IsString(v) && *v->valuestring && v->valuestring[0] != '-') {
        char *end = NULL;
        errno = 0;
        unsigned long long x = strtoull(v->valuestring, &end, 0);
        if (errno == 0 && end && *end == '\0') {
            *out = x;
            return IPL_OK;
        }
    }
    return s_bad(err, errlen,
                 "block_hashes[%zu] must be an unsigned 64-bit integer (a number, "
                 "or a decimal or 0x-hex string)",
                 i);
}

int decider_http_parse(const char *body, size_t len, const ipl_prompt_t *model_prompt,
                       decider_http_request_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root) return s_bad(err, errlen, "the request body is not valid JSON");
    int rc = IPL_OK;
    if (!cJSON_IsObject(root)) {
        rc = s_bad(err, errlen, "the request body must be a JSON object");
        goto done;
    }
    if ((rc = s_string(root, "model", true, &out->model, err, errlen)) ||
        (rc = s_string(root, "tenant", false, &out->tenant, err, errlen)) ||
        (rc = s_string(root, "strategy", false, &out->strategy, err, errlen)) ||
        (rc = s_string(root, "cache_salt", false, &out->cache_salt, err, errlen)) ||
        (rc = s_uint(root, "prompt_tokens", UINT32_MAX, &out->prompt_tokens, err, errlen)) ||
        (rc = s_uint(root, "block_size", 1024, &out->block_size, err, errlen)) ||
        (rc = s_labels(root, out, err, errlen)) || (rc = s_headers(root, out, err, errlen)))
        goto done;
    if (strlen(out->model) > S_MAX_NAME) {
        rc = s_bad(err, errlen, "'model' is longer than %d characters", S_MAX_NAME);
        goto done;
    }
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    const cJSON *messages = cJSON_GetObjectItemCaseSensitive(root, "messages");
    const cJSON *hashes = cJSON_GetObjectItemCaseSensitive(root, "block_hashes");
    int given = !!prompt + !!messages + !!hashes;
    if (given != 1) {
        rc = s_bad(err, errlen,
                   "give exactly one of 'prompt' (a string), 'messages' (a chat "
                   "array) or 'block_hashes' (an array of integers)%s",
                   given ? "; several were given" : "");
        goto done;
    }
    if (prompt) {
        if (!cJSON_IsString(prompt)) {
            rc = s_bad(err, errlen, "'prompt' must be a string");
            goto done;
        }
        out->text = strdup(prompt->valuestring);
        rc = out->text ? IPL_OK : IPL_E_NOMEM;
    } else if (messages) {
        char why[256] = "";
        if (!cJSON_IsArray(messages)) {
            rc = s_bad(err, errlen, "'messages' must be an array of chat messages");
            goto done;
        }
        const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
        const cJSON *agp = cJSON_GetObjectItemCaseSensitive(root, "add_generation_prompt");
        if ((tools && !cJSON_IsArray(tools) && !cJSON_IsNull(tools)) ||
            (agp && !cJSON_IsBool(agp) && !cJSON_IsNull(agp))) {
            rc = s_bad(err, errlen, "'tools' must be an array, 'add_generation_prompt' a boolean");
            goto done;
        }
        out->chat = true;
        rc = ipl_prompt_render(model_prompt, messages, cJSON_IsArray(tools) ? tools : NULL,
                               !cJSON_IsFalse(agp), false, NULL, &out->text, NULL, why, sizeof why);
        if (rc == IPL_E_INVAL)
            rc = s_bad(err, errlen, "%s", *why ? why : "'messages' could not be rendered");
    } else {
        if (!cJSON_IsArray(hashes)) {
            rc = s_bad(err, errlen, "'block_hashes' must be an array of integers");
            goto done;
        }
        size_t n = (size_t)cJSON_GetArraySize(hashes);
        if (n > DECIDER_HTTP_MAX_HASHES) {
            rc = s_bad(err, errlen, "'block_hashes' has %zu entries, above the limit of %u", n,
                       DECIDER_HTTP_MAX_HASHES);
            goto done;
        }
        out->hashes = malloc((n ? n : 1) * sizeof *out->hashes);
        if (!out->hashes) {
            rc = IPL_E_NOMEM;
            goto done;
        }
        size_t i = 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, hashes)
        {
            if ((rc = s_hash(v, i, &out->hashes[i], err, errlen))) goto done;
            i++;
        }
        out->nhashes = n;
    }
done:
    cJSON_Delete(root);
    if (rc == IPL_E_NOMEM) snprintf(err, errlen, "out of memory");
    if (rc) {
        decider_http_request_clear(out);
        return rc;
    }
    out->req = (decider_request_t){
        .model = out->model,
        .tenant = out->tenant,
        .strategy = out->strategy,
        .prompt_tokens = out->prompt_tokens,
        .block_size = out->block_size,
        .hashes = out->hashes,
        .nhashes = out->nhashes,
        .labels = out->labels,
        .nlabels = out->nlabels,
        .headers = out->headers,
        .nheaders = out->nheaders,
    };
    return IPL_OK;
}

int decider_http_hash(decider_http_request_t *r, const ipl_prompt_t *prompt, uint64_t block_size)
{
    return decider_http_hash_for(r, prompt, NULL, block_size);
}

int decider_http_hash_for(decider_http_request_t *r, const ipl_prompt_t *prompt,
                          const ipl_policy_t *policy, uint64_t block_size)
{
    if (!r->text) return IPL_OK;
    const char *lora = NULL; // borrowed from the policy, which outlives this call
    if (policy) (void)decider_targets_resolve_lora(policy, r->model, 0, NULL, &lora);
    size_t ntok = 0;
    free(r->hashes);
    r->hashes = NULL;
    r->nhashes = 0;
    char buf[POLICY_SALT_SIZE]; // an isolated tenant's: as the gateway hashes its requests
    const char *salt = policy_isolation_effective(policy, r->tenant, r->cache_salt, buf);
    int rc = ipl_prompt_blocks(prompt, r->text, strlen(r->text), r->chat, (size_t)block_size, lora,
                               salt, SIZE_MAX, &r->hashes, &r->nhashes, &ntok);
    if (rc != 0) return rc;
    r->prompt_tokens = ntok;
    r->block_size = block_size;
    r->req.hashes = r->hashes;
    r->req.nhashes = r->nhashes;
    r->req.prompt_tokens = ntok;
    r->req.block_size = block_size;
    return IPL_OK;
}

void decider_http_request_clear(decider_http_request_t *r)
{
    free(r->model);
    free(r->tenant);
    free(r->strategy);
    free(r->text);
    free(r->cache_salt);
    free(r->hashes);
    for (size_t i = 0; r->labels && i < r->nlabels; i++)
        free(r->labels[i]);
    for (size_t i = 0; r->headers && i < r->nheaders; i++)
        free(r->headers[i]);
    free(r->labels);
    free(r->headers);
    memset(r, 0, sizeof *r);
}

uint64_t decider_http_block_size(const ipl_policy_t *policy, const char *model)
{
    // an alias: its first target's pool (the pools of one alias share a tokenizer, and in
    // practice a block size)
    const ipl_pool_t *pool = policy ? decider_targets_resolve(policy, model, 0, NULL) : NULL;
    for (uint32_t w = 0; pool && w < policy->workers_len; w++)
        if (!strcmp(policy->workers[w].pool, pool->name)) return policy->workers[w].block_size;
    return S_DEFAULT_BLOCK_SIZE;
}

int decider_http_status(int route_status)
{
    switch (route_status) {
    case IPL_ROUTE_OK:
        return 200;
    case IPL_ROUTE_NO_POOL:
        return 404;
    case IPL_ROUTE_OVERLOADED:
        return 429;
    case IPL_ROUTE_BAD_REQUEST:
        return 400;
    case IPL_ROUTE_DEFERRED:
        return 429;
    default:
        return 503;
    }
}

static const char *s_error_type(int http_status)
{
    switch (http_status) {
    case 400:
        return "invalid_request_error";
    case 404:
        return "not_found_error";
    case 429:
        return "rate_limit_error";
    default:
        return "server_error";
    }
}

// Milliseconds rounded to microseconds, so the JSON stays readable.
static double s_ms(double s)
{
    return round(s * 1e6) / 1e3;
}

char *decider_http_render(const decider_decision_t *d, uint64_t prompt_tokens)
{
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    bool ok = d->status == IPL_ROUTE_OK;
    const ipl_worker_t *w = ok && d->target != DECIDER_TARGET_PROVIDER ? d->worker : NULL;
    bool provider = ok && d->target == DECIDER_TARGET_PROVIDER && d->provider && d->backend;
    cJSON_AddStringToObject(root, "target_kind", w ? "worker" : provider ? "provider" : "");
    if (w) {
        cJSON_AddStringToObject(root, "endpoint", w->url);
        cJSON_AddStringToObject(root, "worker", w->name);
        cJSON_AddStringToObject(root, "model", // a LoRA adapter is sent under its own name
                                d->upstream_model ? d->upstream_model : w->model);
    } else if (provider) { // the backend's URL, never its credentials
        cJSON_AddStringToObject(root, "endpoint", d->backend->url);
        cJSON_AddStringToObject(root, "worker", d->provider->name);
        cJSON_AddStringToObject(root, "model", d->upstream_model);
        cJSON_AddStringToObject(root, "backend", d->backend->name);
    } else {
        cJSON_AddNullToObject(root, "endpoint");
        cJSON_AddNullToObject(root, "worker");
        cJSON_AddNullToObject(root, "model");
    }
    if (d->pool)
        cJSON_AddStringToObject(root, "pool", d->pool->name);
    else
        cJSON_AddNullToObject(root, "pool");
    cJSON_AddNumberToObject(root, "predicted_ttft_ms",
                            w || provider ? s_ms(d->predicted_ttft_s) : 0);
    cJSON_AddNumberToObject(root, "cached_tokens", (double)(w ? d->cached_tokens : 0));
    cJSON_AddNumberToObject(root, "prompt_tokens", (double)prompt_tokens);
    if (d->strategy) cJSON_AddStringToObject(root, "strategy", d->strategy);
    cJSON_AddStringToObject(root, "reason", d->reason ? d->reason : "");
    if (d->rule) {
        char rule[512];
        snprintf(rule, sizeof rule, "%s/%s", d->rule->policy, d->rule->name);
        cJSON_AddStringToObject(root, "rule", rule);
    }
    cJSON_AddStringToObject(root, "detail", d->detail);
    cJSON *cands = cJSON_AddArrayToObject(root, "candidates");
    for (uint32_t i = 0; i < d->ncands; i++) {
        const ipl_candidate_t *c = &d->cands[i].c;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "worker", c->worker);
        cJSON_AddStringToObject(o, "url", c->url);
        cJSON_AddNumberToObject(o, "predicted_ttft_ms", s_ms(c->predicted_ttft_s));
        cJSON_AddNumberToObject(o, "cached_tokens", (double)c->cached_tokens);
        cJSON_AddNumberToObject(o, "running", (double)c->running);
        cJSON_AddNumberToObject(o, "waiting", (double)c->waiting);
        cJSON_AddNumberToObject(o, "inflight", (double)c->inflight);
        cJSON_AddNumberToObject(o, "kv_usage", c->kv_usage);
        cJSON_AddBoolToObject(o, "eligible", c->eligible);
        cJSON_AddBoolToObject(o, "chosen", (int)i == d->winner);
        cJSON_AddStringToObject(o, "note", c->note ? c->note : "");
        cJSON_AddItemToArray(cands, o);
    }
    cJSON_AddNumberToObject(root, "state_seq", (double)d->state_seq);
    if (d->status != IPL_ROUTE_OK) {
        int http = d->status == IPL_ROUTE_REJECTED && d->http_status ? (int)d->http_status
                                                                     : decider_http_status(d->status);
        cJSON *e = cJSON_AddObjectToObject(root, "error");
        cJSON_AddStringToObject(e, "message", d->detail);
        cJSON_AddStringToObject(e, "type", s_error_type(http));
        cJSON_AddNullToObject(e, "param");
        cJSON_AddNumberToObject(e, "code", http);
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return json;
}

// ---- admin ------------------------------------------------------------------------------------

static void s_debug_model(void *arg, const ipl_http_req_t *hreq, ipl_http_resp_t *resp)
{
    (void)hreq;
    cJSON *root = decider_router_model_json(arg);
    if (!root) {
        ipl_http_resp_error(resp, 500, "server_error", "out of memory");
        return;
    }
    ipl_http_resp_json(resp, 200, &root);
}

void decider_http_register_model(ipl_httpd_t *httpd, decider_router_t *router)
{
    ipl_httpd_route(httpd, "GET", "/debug/model", s_debug_model, router);
}
