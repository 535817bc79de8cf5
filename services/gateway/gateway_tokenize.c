/*
 * gateway_tokenize — a worker's /tokenize for chats the gateway cannot render. See the header.
 *
 * The cache is an ipl_idcache keyed by the XXH3-128 of the /tokenize body.
 */
#include "gateway_tokenize.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decider_targets.h"
#include "gateway_api.h"
#include "ipl_idcache.h"
#include "ipl_policy_view.h"
#include "ipl_prompt.h"

struct gateway_tokenize {
    gateway_tokenize_config_t cfg;
    ipl_idcache_t *cache; /* the answers, by XXH3-128 of the body */
    atomic_uint_fast64_t next_pick;
    ipl_metric_t *worker, *cached, *failed, *g_entries, *g_bytes;
};

gateway_tokenize_t *gateway_tokenize_new(const gateway_tokenize_config_t *cfg,
                                         ipl_metrics_t *metrics)
{
    gateway_tokenize_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    if (cfg) self->cfg = *cfg;
    if (self->cfg.timeout_ms <= 0) self->cfg.timeout_ms = GATEWAY_TOKENIZE_TIMEOUT_MS;
    if (!self->cfg.max_entries) self->cfg.max_entries = GATEWAY_TOKENIZE_MAX_ENTRIES;
    if (!self->cfg.max_bytes) self->cfg.max_bytes = GATEWAY_TOKENIZE_MAX_BYTES;
    if (!(self->cache = ipl_idcache_new(self->cfg.max_entries, self->cfg.max_bytes))) {
        free(self);
        return NULL;
    }
    atomic_init(&self->next_pick, 0);
    if (metrics) {
        const char *name = "inferplane_gateway_worker_tokenize_total";
        const char *help = "Chats the gateway cannot render, tokenized by a worker's /tokenize "
                           "(worker), from the cache of its answers (cached), or routed without "
                           "a prefix because no worker answered (failed).";
        self->worker = ipl_metrics_counter(metrics, name, help, "result=\"worker\"");
        self->cached = ipl_metrics_counter(metrics, name, help, "result=\"cached\"");
        self->failed = ipl_metrics_counter(metrics, name, help, "result=\"failed\"");
        self->g_entries =
            ipl_metrics_gauge(metrics, "inferplane_gateway_worker_tokenize_cache_entries",
                              "Answers of workers' /tokenize the gateway holds.", NULL);
        self->g_bytes = ipl_metrics_gauge(metrics, "inferplane_gateway_worker_tokenize_cache_bytes",
                                          "Bytes of token ids the /tokenize cache holds.", NULL);
    }
    return self;
}

void gateway_tokenize_destroy(gateway_tokenize_t **self_p)
{
    assert(self_p);
    gateway_tokenize_t *self = *self_p;
    if (!self) return;
    ipl_idcache_destroy(&self->cache);
    free(self);
    *self_p = NULL;
}

void gateway_tokenize_stats(gateway_tokenize_t *self, size_t *entries, size_t *bytes)
{
    ipl_idcache_stats_t st;
    ipl_idcache_stats(self->cache, &st);
    if (entries) *entries = st.entries;
    if (bytes) *bytes = st.bytes;
}

/* A malloc'd copy of key's cached ids, or NULL. */
static uint32_t *s_lookup(gateway_tokenize_t *self, ipl_idcache_key_t key, size_t *n)
{
    size_t room = 0;
    uint32_t *out = NULL;
    for (int tries = 0; tries < 4; tries++) { /* another thread may replace it meanwhile */
        size_t got = ipl_idcache_get(self->cache, key, out, room);
        if (got == IPL_IDCACHE_MISS) break;
        if (got <= room) {
            *n = got;
            return out ? out : malloc(1);
        }
        uint32_t *p = realloc(out, got * sizeof *out);
        if (!p) break;
        out = p;
        room = got;
    }
    free(out);
    return NULL;
}

static void s_gauges(gateway_tokenize_t *self)
{
    size_t entries, bytes;
    gateway_tokenize_stats(self, &entries, &bytes);
    if (self->g_entries) ipl_metric_set(self->g_entries, (double)entries);
    if (self->g_bytes) ipl_metric_set(self->g_bytes, (double)bytes);
}

/* ---- the worker's /tokenize ------------------------------------------------------------- */

typedef struct {
    char *data;
    size_t len;
    bool too_big;
} s_buf_t;

static size_t s_write(char *ptr, size_t size, size_t nmemb, void *arg)
{
    s_buf_t *b = arg;
    size_t n = size * nmemb;
    if (b->len + n > GATEWAY_TOKENIZE_MAX_REPLY) {
        b->too_big = true;
        return 0;
    }
    char *p = realloc(b->data, b->len + n + 1);
    if (!p) return 0;
    memcpy(p + b->len, ptr, n);
    b->data = p;
    b->len += n;
    p[b->len] = '\0';
    return n;
}

/* The ids of a /tokenize answer ({"tokens": [int, ...], ...}), or NULL with note filled. */
static uint32_t *s_parse_tokens(const char *text, size_t *n, char *note, size_t notelen)
{
    cJSON *root = cJSON_Parse(text);
    const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    uint32_t *ids = NULL;
    if (!cJSON_IsArray(tokens)) {
        snprintf(note, notelen, "the answer has no \"tokens\" array");
        goto done;
    }
    int count = cJSON_GetArraySize(tokens);
    ids = malloc((count > 0 ? (size_t)count : 1) * sizeof *ids);
    if (!ids) {
        snprintf(note, notelen, "out of memory");
        goto done;
    }
    size_t k = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tokens)
    {
        double v = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (!(v >= 0 && v <= 4294967295.0 && v == floor(v))) {
            snprintf(note, notelen, "tokens[%zu] is not a token id", k);
            free(ids);
            ids = NULL;
            goto done;
        }
        ids[k++] = (uint32_t)v;
    }
    *n = k;
done:
    cJSON_Delete(root);
    return ids;
}

/* POSTs body to url + "/tokenize"; the ids, or NULL with note filled. */
static uint32_t *s_ask(gateway_tokenize_t *self, const char *url, const char *body, size_t len,
                       size_t *n, char *note, size_t notelen)
{
    char endpoint[2048];
    size_t ul = strlen(url);
    while (ul && url[ul - 1] == '/')
        ul--;
    if (snprintf(endpoint, sizeof endpoint, "%.*s/tokenize", (int)ul, url) >=
        (int)sizeof endpoint) {
        snprintf(note, notelen, "the worker's URL is too long");
        return NULL;
    }
    CURL *easy = curl_easy_init();
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    s_buf_t buf = {0};
    uint32_t *ids = NULL;
    if (!easy || !headers) {
        snprintf(note, notelen, "out of memory");
        goto done;
    }
    curl_easy_setopt(easy, CURLOPT_URL, endpoint);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long)self->cfg.timeout_ms);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, (long)self->cfg.timeout_ms);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, s_write);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &buf);
    CURLcode rc = curl_easy_perform(easy);
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    if (rc == CURLE_OPERATION_TIMEDOUT)
        snprintf(note, notelen, "timed out after %d ms", self->cfg.timeout_ms);
    else if (rc != CURLE_OK)
        snprintf(note, notelen, "%s",
                 buf.too_big ? "the answer is too large" : curl_easy_strerror(rc));
    else if (status != 200)
        snprintf(note, notelen, "HTTP %ld", status);
    else
        ids = s_parse_tokens(buf.data ? buf.data : "", n, note, notelen);
done:
    free(buf.data);
    curl_slist_free_all(headers);
    if (easy) curl_easy_cleanup(easy);
    return ids;
}

gateway_tokenize_result_t gateway_tokenize_ids(gateway_tokenize_t *self, const char *url,
                                               const char *body, size_t len, uint32_t **ids,
                                               size_t *n, char *note, size_t notelen)
{
    char scratch[8];
    if (!note || !notelen) note = scratch, notelen = sizeof scratch;
    note[0] = '\0';
    *ids = NULL;
    *n = 0;
    ipl_idcache_key_t key = ipl_idcache_key(body, len, 0);
    if ((*ids = s_lookup(self, key, n))) {
        if (self->cached) ipl_metric_inc(self->cached);
        return GATEWAY_TOKENIZE_CACHED;
    }
    if (!url) {
        snprintf(note, notelen, "no worker to ask");
    } else if ((*ids = s_ask(self, url, body, len, n, note, notelen))) {
        ipl_idcache_put(self->cache, key, *ids, *n);
        s_gauges(self);
        if (self->worker) ipl_metric_inc(self->worker);
        return GATEWAY_TOKENIZE_WORKER;
    }
    if (self->failed) ipl_metric_inc(self->failed);
    return GATEWAY_TOKENIZE_FAILED;
}

const ipl_worker_t *gateway_tokenize_pick(gateway_tokenize_t *self, const ipl_policy_t *policy,
                                          const char *model, const char *lora)
{
    const ipl_pool_t *pool = policy ? decider_targets_resolve(policy, model, 0, NULL) : NULL;
    if (!pool) return NULL;
    uint32_t count = 0;
    for (uint32_t i = 0; i < policy->workers_len; i++)
        count += !strcmp(policy->workers[i].pool, pool->name) &&
                 decider_targets_worker_serves(&policy->workers[i], lora);
    if (!count) return NULL;
    uint64_t k = atomic_fetch_add(&self->next_pick, 1) % count;
    for (uint32_t i = 0; i < policy->workers_len; i++) {
        const ipl_worker_t *w = &policy->workers[i];
        if (strcmp(w->pool, pool->name) || !decider_targets_worker_serves(w, lora)) continue;
        if (k-- == 0) return w;
    }
    return NULL;
}

gateway_tokenize_result_t
gateway_tokenize_blocks(gateway_tokenize_t *self, struct ipl_policy_view *view,
                        const struct ipl_prompt *prompt, const struct gateway_api_req *api,
                        const char *lora, size_t block_size, size_t max, uint64_t **hashes,
                        size_t *nhashes, size_t *ntokens, char *note, size_t notelen)
{
    *hashes = NULL;
    *nhashes = *ntokens = 0;
    size_t blen = 0, nids = 0;
    char *body = gateway_api_tokenize_body(api, &blen);
    if (!body) {
        snprintf(note, notelen, "out of memory");
        if (self->failed) ipl_metric_inc(self->failed);
        return GATEWAY_TOKENIZE_FAILED;
    }
    char url[2048] = "", who[256] = "";
    ipl_policy_snap_t *snap = view ? ipl_policy_view_get(view) : NULL;
    const ipl_worker_t *w =
        gateway_tokenize_pick(self, snap ? snap->policy : NULL, api->model, lora);
    if (w) {
        snprintf(url, sizeof url, "%s", w->url);
        snprintf(who, sizeof who, "%s", w->name);
    }
    if (view) ipl_policy_view_release(view, &snap);
    uint32_t *ids = NULL;
    char why[192] = "";
    gateway_tokenize_result_t r =
        gateway_tokenize_ids(self, url[0] ? url : NULL, body, blen, &ids, &nids, why, sizeof why);
    free(body);
    if (r == GATEWAY_TOKENIZE_FAILED) {
        snprintf(note, notelen, "%s%s%s", who, who[0] ? ": " : "", why);
        return r;
    }
    size_t nb = block_size ? nids / block_size : 0;
    if (nb > max) nb = max;
    *hashes = malloc((nb ? nb : 1) * sizeof **hashes);
    if (!*hashes) {
        free(ids);
        snprintf(note, notelen, "out of memory");
        return GATEWAY_TOKENIZE_FAILED;
    }
    *nhashes = ipl_prompt_hashes(prompt, ids, nids, block_size, lora, api->cache_salt, *hashes, nb);
    *ntokens = nids;
    free(ids);
    return r;
}
