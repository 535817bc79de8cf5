/*
 * bench_trace — JSONL trace reading. See bench_trace.h.
 */
#include "bench_trace.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_rng.h"
#include "ipl_error.h"

#define S_MAX_TOKENS    1048576.0
#define S_STRING_GROUPS (1ll << 40) /* string prefix groups hash above every numeric one */

struct bench_trace {
    bench_trace_rec_t *recs;
    size_t n, cap;
    uint32_t *ids;
    size_t nids, ids_cap;
};

bench_trace_t *bench_trace_new(void)
{
    return calloc(1, sizeof(bench_trace_t));
}

void bench_trace_destroy(bench_trace_t **self_p)
{
    assert(self_p);
    bench_trace_t *self = *self_p;
    if (!self) return;
    free(self->recs);
    free(self->ids);
    free(self);
    *self_p = NULL;
}

size_t bench_trace_count(const bench_trace_t *self)
{
    return self->n;
}

const bench_trace_rec_t *bench_trace_rec(const bench_trace_t *self, size_t i)
{
    return i < self->n ? &self->recs[i] : NULL;
}

const uint32_t *bench_trace_hash_ids(const bench_trace_t *self, const bench_trace_rec_t *r)
{
    return self->ids + r->hash_off;
}

/* An integral number in [0, max]. */
static bool s_uint(const cJSON *v, double max, double *out)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > max ||
        v->valuedouble != (double)(int64_t)v->valuedouble)
        return false;
    *out = v->valuedouble;
    return true;
}

static int s_mooncake(bench_trace_t *self, const cJSON *o, bench_trace_rec_t *r, char *err,
                      size_t errlen)
{
    double ts, in, out;
    if (!s_uint(cJSON_GetObjectItemCaseSensitive(o, "timestamp"), 1e15, &ts)) {
        ipl_errf(err, errlen, "\"timestamp\" must be a non-negative integer (ms)");
        return IPL_E_INVAL;
    }
    if (!s_uint(cJSON_GetObjectItemCaseSensitive(o, "input_length"), S_MAX_TOKENS, &in) || in < 1) {
        ipl_errf(err, errlen, "\"input_length\" must be an integer 1..1048576");
        return IPL_E_INVAL;
    }
    if (!s_uint(cJSON_GetObjectItemCaseSensitive(o, "output_length"), S_MAX_TOKENS, &out)) {
        ipl_errf(err, errlen, "\"output_length\" must be an integer 0..1048576");
        return IPL_E_INVAL;
    }
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(o, "hash_ids");
    if (ids && !cJSON_IsArray(ids)) {
        ipl_errf(err, errlen, "\"hash_ids\" must be an array of integers");
        return IPL_E_INVAL;
    }
    r->mooncake = true;
    r->arrival_s = ts / 1000.0;
    r->prompt_tokens = (uint32_t)in;
    r->output_tokens = out < 1 ? 1 : (uint32_t)out;
    r->hash_off = (uint32_t)self->nids;
    size_t want = self->nids + (size_t)cJSON_GetArraySize(ids);
    if (want > self->ids_cap) {
        size_t cap = self->ids_cap ? self->ids_cap : 1024;
        while (cap < want)
            cap *= 2;
        uint32_t *g = realloc(self->ids, cap * sizeof *g);
        if (!g) return IPL_E_NOMEM;
        self->ids = g;
        self->ids_cap = cap;
    }
    const cJSON *id;
    size_t k = self->nids;
    cJSON_ArrayForEach(id, ids)
    {
        double v;
        if (!s_uint(id, 4294967295.0, &v)) {
            ipl_errf(err, errlen, "\"hash_ids\" must hold integers 0..2^32-1");
            return IPL_E_INVAL; /* nothing committed: nids unchanged */
        }
        self->ids[k++] = (uint32_t)v;
    }
    r->nhash = (uint32_t)(k - self->nids);
    self->nids = k;
    return 0;
}

static int s_ours(const cJSON *o, bench_trace_rec_t *r, char *err, size_t errlen)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "arrival_s");
    double prompt, out, prefix = -1;
    if (!cJSON_IsNumber(a) || !(a->valuedouble >= 0) || a->valuedouble > 1e9) {
        ipl_errf(err, errlen, "\"arrival_s\" must be a number of seconds >= 0");
        return IPL_E_INVAL;
    }
    if (!s_uint(cJSON_GetObjectItemCaseSensitive(o, "prompt_tokens"), S_MAX_TOKENS, &prompt) ||
        prompt < 1) {
        ipl_errf(err, errlen, "\"prompt_tokens\" must be an integer 1..1048576");
        return IPL_E_INVAL;
    }
    if (!s_uint(cJSON_GetObjectItemCaseSensitive(o, "output_tokens"), S_MAX_TOKENS, &out)) {
        ipl_errf(err, errlen, "\"output_tokens\" must be an integer 0..1048576");
        return IPL_E_INVAL;
    }
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(o, "prefix_tokens");
    if (pt && !s_uint(pt, S_MAX_TOKENS, &prefix)) {
        ipl_errf(err, errlen, "\"prefix_tokens\" must be an integer 0..1048576");
        return IPL_E_INVAL;
    }
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(o, "prefix_group");
    r->group = -1;
    if (cJSON_IsString(g)) {
        uint64_t h = 1469598103934665603ull; /* FNV-1a of the name */
        for (const char *c = g->valuestring; *c; c++)
            h = (h ^ (unsigned char)*c) * 1099511628211ull;
        r->group = S_STRING_GROUPS + (int64_t)(bench_mix64(h) >> 24);
    } else if (cJSON_IsNumber(g)) {
        double v;
        if (!s_uint(g, (double)(S_STRING_GROUPS - 1), &v)) {
            ipl_errf(err, errlen,
                     "\"prefix_group\" must be an integer 0..2^40-1, a string or null");
            return IPL_E_INVAL;
        }
        r->group = (int64_t)v;
    } else if (g && !cJSON_IsNull(g)) {
        ipl_errf(err, errlen, "\"prefix_group\" must be an integer, a string or null");
        return IPL_E_INVAL;
    }
    r->arrival_s = a->valuedouble;
    r->prompt_tokens = (uint32_t)prompt;
    r->output_tokens = out < 1 ? 1 : (uint32_t)out;
    r->prefix_tokens = prefix >= 0 ? (int64_t)(prefix < prompt ? prefix : prompt) : -1;
    return 0;
}

int bench_trace_add_line(bench_trace_t *self, const char *line, size_t len, char *err,
                         size_t errlen)
{
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r' || line[i] == '\n'))
        i++;
    if (i == len || line[i] == '#') return 1;
    if (self->n == self->cap) {
        size_t cap = self->cap ? self->cap * 2 : 256;
        bench_trace_rec_t *g = realloc(self->recs, cap * sizeof *g);
        if (!g) return IPL_E_NOMEM;
        self->recs = g;
        self->cap = cap;
    }
    cJSON *o = cJSON_ParseWithLength(line + i, len - i);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        ipl_errf(err, errlen, "not a JSON object");
        return IPL_E_INVAL;
    }
    bench_trace_rec_t r = {.group = -1, .prefix_tokens = -1};
    int rc = cJSON_GetObjectItemCaseSensitive(o, "input_length") ||
                     cJSON_GetObjectItemCaseSensitive(o, "hash_ids")
                 ? s_mooncake(self, o, &r, err, errlen)
                 : s_ours(o, &r, err, errlen);
    cJSON_Delete(o);
    if (rc == 0) self->recs[self->n++] = r;
    return rc;
}

int bench_trace_load(const char *path, bench_trace_t **out, char *err, size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f) {
        ipl_errf(err, errlen, "%s: cannot open the trace: %s", path, strerror(errno));
        return IPL_E_IO;
    }
    bench_trace_t *self = bench_trace_new();
    int rc = self ? 0 : IPL_E_NOMEM;
    char *buf = NULL, msg[256];
    size_t cap = 0, lineno = 0;
    ssize_t len;
    while (rc == 0 && (len = getline(&buf, &cap, f)) >= 0) {
        lineno++;
        rc = bench_trace_add_line(self, buf, (size_t)len, msg, sizeof msg);
        if (rc == 1)
            rc = 0;
        else if (rc == IPL_E_NOMEM)
            ipl_errf(err, errlen, "%s:%zu: out of memory", path, lineno);
        else if (rc < 0)
            ipl_errf(err, errlen, "%s:%zu: %s", path, lineno, msg);
    }
    free(buf);
    fclose(f);
    if (rc == 0 && self->n == 0) {
        ipl_errf(err, errlen, "%s: the trace holds no request", path);
        rc = IPL_E_INVAL;
    }
    if (rc != 0) {
        bench_trace_destroy(&self);
        return rc;
    }
    *out = self;
    return 0;
}
