/*
 * policy_digest — the content hash of a compiled policy and its /debug/policy rendering.
 */
#include "policy_digest.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ipl_error.h"
#include "ipl_hash.h"
#include "ipl_policy_view.h"
#include "policy_compiler.h"

uint64_t policy_digest_hash(const ipl_policy_t *p)
{
    ipl_policy_t content = *p;
    content.version = 0;
    content.source = NULL;
    content.hash = 0;
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    uint64_t hash = 0;
    if (ipl_msg_encode(IPL_MSG_POLICY, &content, &buf) == IPL_OK) {
        hash = ipl_hash_bytes(buf.data, buf.size);
        if (hash == 0) hash = 1; // 0 means "no hash" on the wire
    }
    msgpack_sbuffer_destroy(&buf);
    return hash;
}

const char *policy_digest_hex(uint64_t hash, char buf[POLICY_DIGEST_HEX_LEN])
{
    snprintf(buf, POLICY_DIGEST_HEX_LEN, "%016llx", (unsigned long long)hash);
    return buf;
}

static const char *s_str(const char *s)
{
    return s ? s : "";
}

static void s_pools(cJSON *root, const ipl_policy_t *p)
{
    cJSON *pools = cJSON_AddArrayToObject(root, "pools");
    for (uint32_t i = 0; p && pools && i < p->pools_len; i++) {
        const ipl_pool_t *pool = &p->pools[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", s_str(pool->name));
        cJSON_AddStringToObject(o, "model", s_str(pool->model));
        cJSON_AddStringToObject(o, "strategy", s_str(pool->strategy));
        cJSON_AddNumberToObject(o, "ttft_slo_ms", (double)pool->ttft_slo_ms);
        cJSON *names = cJSON_AddArrayToObject(o, "workers");
        for (uint32_t w = 0; names && w < p->workers_len; w++)
            if (p->workers[w].pool && pool->name && !strcmp(p->workers[w].pool, pool->name))
                cJSON_AddItemToArray(names, cJSON_CreateString(s_str(p->workers[w].name)));
        cJSON *targets = cJSON_AddArrayToObject(o, "targets");
        for (uint32_t t = 0; targets && t < p->pool_targets_len; t++) {
            const ipl_pool_target_t *tg = &p->pool_targets[t];
            if (!tg->pool || !pool->name || strcmp(tg->pool, pool->name)) continue;
            cJSON *to = cJSON_CreateObject();
            cJSON_AddStringToObject(to, "kind", s_str(tg->kind));
            cJSON_AddStringToObject(to, "name", s_str(tg->name));
            cJSON_AddStringToObject(to, "role", s_str(tg->role));
            cJSON_AddNumberToObject(to, "weight", (double)tg->weight);
            cJSON_AddItemToArray(targets, to);
        }
        cJSON_AddItemToArray(pools, o);
    }
}

static void s_workers(cJSON *root, const ipl_policy_t *p)
{
    cJSON *workers = cJSON_AddArrayToObject(root, "workers");
    for (uint32_t i = 0; p && workers && i < p->workers_len; i++) {
        const ipl_worker_t *w = &p->workers[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", s_str(w->name));
        cJSON_AddStringToObject(o, "pool", s_str(w->pool));
        cJSON_AddStringToObject(o, "model", s_str(w->model));
        cJSON_AddStringToObject(o, "url", s_str(w->url));
        cJSON_AddStringToObject(o, "kv_endpoint", s_str(w->kv_endpoint));
        cJSON_AddStringToObject(o, "replay_endpoint", s_str(w->replay_endpoint));
        cJSON_AddStringToObject(o, "metrics_url", s_str(w->metrics_url));
        cJSON_AddNumberToObject(o, "block_size", (double)w->block_size);
        cJSON_AddStringToObject(o, "worker_set", s_str(w->worker_set));
        if (w->lora_adapters_len) // only when set: the digests of policies without stay put
            cJSON_AddItemToObject(o, "lora_adapters",
                                  cJSON_CreateStringArray((const char *const *)w->lora_adapters,
                                                          (int)w->lora_adapters_len));
        if (w->node) cJSON_AddStringToObject(o, "node", w->node); // selector-discovered only
        cJSON_AddItemToArray(workers, o);
    }
}

#define AT(base, off, T) ((const T *)((const char *)(base) + (off)))

// One element as an object of its wire fields, walking the catalogue's descriptor.
static cJSON *s_element(const ipl_proto_struct_t *sd, const void *body)
{
    cJSON *o = cJSON_CreateObject();
    for (size_t i = 0; o && i < sd->nfields; i++) {
        const ipl_proto_field_t *f = &sd->fields[i];
        switch (f->type) {
        case IPL_FT_U64:
            cJSON_AddNumberToObject(o, f->name, (double)*AT(body, f->offset, uint64_t));
            break;
        case IPL_FT_F64:
            cJSON_AddNumberToObject(o, f->name, *AT(body, f->offset, double));
            break;
        case IPL_FT_BOOL:
            cJSON_AddBoolToObject(o, f->name, *AT(body, f->offset, bool));
            break;
        case IPL_FT_STR:
            cJSON_AddStringToObject(o, f->name, s_str(*AT(body, f->offset, char *)));
            break;
        case IPL_FT_STRS: {
            cJSON *a = cJSON_AddArrayToObject(o, f->name);
            uint32_t n = *AT(body, f->len_offset, uint32_t);
            const char *const *v = *AT(body, f->offset, char *const *);
            for (uint32_t k = 0; a && v && k < n; k++)
                cJSON_AddItemToArray(a, cJSON_CreateString(s_str(v[k])));
            break;
        }
        case IPL_FT_U64S: {
            cJSON *a = cJSON_AddArrayToObject(o, f->name);
            uint32_t n = *AT(body, f->len_offset, uint32_t);
            const uint64_t *v = *AT(body, f->offset, uint64_t *);
            for (uint32_t k = 0; a && v && k < n; k++)
                cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[k]));
            break;
        }
        case IPL_FT_STRUCTS: // POLICY's elements are flat
            break;
        }
    }
    return o;
}

// POLICY's element arrays after the hash (backends ... limits), each under its field name.
static void s_published(cJSON *root, const ipl_policy_t *p)
{
    const ipl_proto_struct_t *sd = ipl_proto_msg_desc(IPL_MSG_POLICY)->body;
    for (size_t i = 0; i < sd->nfields; i++) {
        const ipl_proto_field_t *f = &sd->fields[i];
        if (f->type != IPL_FT_STRUCTS || !f->optional) continue; // pools, workers: above
        cJSON *a = cJSON_AddArrayToObject(root, f->name);
        uint32_t n = p ? *AT(p, f->len_offset, uint32_t) : 0;
        const char *v = p ? *AT(p, f->offset, char *) : NULL;
        for (uint32_t k = 0; a && v && k < n; k++)
            cJSON_AddItemToArray(a, s_element(f->elem, v + (size_t)k * f->elem->size));
    }
}

cJSON *policy_digest_json(const ipl_policy_t *p)
{
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON_AddNumberToObject(root, "version", p ? (double)p->version : 0);
    char hex[POLICY_DIGEST_HEX_LEN];
    if (p && p->hash)
        cJSON_AddStringToObject(root, "hash", policy_digest_hex(p->hash, hex));
    else
        cJSON_AddNullToObject(root, "hash");
    if (p && p->source)
        cJSON_AddStringToObject(root, "source", p->source);
    else
        cJSON_AddNullToObject(root, "source");
    s_pools(root, p);
    s_workers(root, p);
    s_published(root, p);
    cJSON *iso = cJSON_AddArrayToObject(root, "cache_isolated_tenants"); // policy_isolation
    for (uint32_t i = 0; iso && p && i < p->cache_isolated_tenants_len; i++)
        cJSON_AddItemToArray(iso, cJSON_CreateString(p->cache_isolated_tenants[i]));
    return root;
}

static void s_strings(cJSON *root, const char *name, const policy_compiler_t *c,
                      size_t (*count)(const policy_compiler_t *),
                      const char *(*get)(const policy_compiler_t *, size_t))
{
    cJSON *a = cJSON_AddArrayToObject(root, name);
    size_t n = c ? count(c) : 0;
    for (size_t i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(get(c, i)));
}

void policy_digest_add_report(cJSON *root, const policy_compiler_t *c)
{
    s_strings(root, "errors", c, policy_compiler_nerrors, policy_compiler_error);
    s_strings(root, "warnings", c, policy_compiler_nwarnings, policy_compiler_warning);
    s_strings(root, "files", c, policy_compiler_nfiles, policy_compiler_file);
}

void policy_digest_http(void *arg, const ipl_http_req_t *req, ipl_http_resp_t *resp)
{
    (void)req;
    ipl_policy_view_t *view = arg;
    ipl_policy_snap_t *snap = ipl_policy_view_get(view);
    cJSON *root = policy_digest_json(snap ? snap->policy : NULL);
    if (snap) ipl_policy_view_release(view, &snap);
    if (!root) {
        ipl_http_resp_error(resp, 500, "server_error", "out of memory");
        return;
    }
    ipl_http_resp_json(resp, 200, &root); // 500 when rendering runs out of memory
}
