/*
 * tenants_keys — see the header. The table: every digest once, open addressing on its first
 * 8 bytes, load factor at most 1/2.
 */
#include "tenants_keys.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "ipl_sha256.h"

#define S_MAX_FILE (16u << 20) /* bytes of a keys file read */

typedef struct {
    uint8_t digest[IPL_SHA256_LEN];
    uint32_t tenant; /* index in tenants; UINT32_MAX: free slot */
} s_slot_t;

typedef struct {
    char name[TENANTS_MAX_NAME + 1];
    bool disabled;
} s_tenant_t;

struct tenants_keys {
    s_tenant_t *tenants;
    size_t ntenants;
    s_slot_t *slots;
    size_t nslots; /* a power of two */
    size_t nkeys;
};

const char *tenants_result_name(tenants_result_t r)
{
    static const char *const names[] = {"ok", "missing", "unknown", "disabled"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "unknown";
}

void tenants_keys_destroy(tenants_keys_t **self_p)
{
    if (!self_p || !*self_p) return;
    tenants_keys_t *self = *self_p;
    if (self->slots) memset(self->slots, 0, self->nslots * sizeof *self->slots); // digests
    free(self->slots);
    free(self->tenants);
    free(self);
    *self_p = NULL;
}

size_t tenants_keys_tenants(const tenants_keys_t *self)
{
    return self ? self->ntenants : 0;
}

size_t tenants_keys_count(const tenants_keys_t *self)
{
    return self ? self->nkeys : 0;
}

static uint64_t s_start(const uint8_t d[IPL_SHA256_LEN])
{
    uint64_t h;
    memcpy(&h, d, sizeof h);
    return h;
}

// Constant-time equality of two digests.
static bool s_same(const uint8_t *a, const uint8_t *b)
{
    uint8_t diff = 0;
    for (size_t i = 0; i < IPL_SHA256_LEN; i++)
        diff |= (uint8_t)(a[i] ^ b[i]);
    return diff == 0;
}

// The slot holding `d`, or the free slot where it would go.
static s_slot_t *s_probe(const tenants_keys_t *self, const uint8_t d[IPL_SHA256_LEN])
{
    size_t mask = self->nslots - 1;
    for (size_t i = (size_t)s_start(d) & mask;; i = (i + 1) & mask) {
        s_slot_t *s = &self->slots[i];
        if (s->tenant == UINT32_MAX || s_same(s->digest, d)) return s;
    }
}

tenants_result_t tenants_keys_lookup(const tenants_keys_t *self, const char *key, size_t len,
                                     const char **tenant)
{
    if (tenant) *tenant = NULL;
    if (!key || !len) return TENANTS_MISSING;
    if (!self || !self->nslots || len > TENANTS_MAX_KEY) return TENANTS_UNKNOWN;
    uint8_t d[IPL_SHA256_LEN];
    ipl_sha256(key, len, d);
    const s_slot_t *s = s_probe(self, d);
    if (s->tenant == UINT32_MAX) return TENANTS_UNKNOWN;
    const s_tenant_t *t = &self->tenants[s->tenant];
    if (tenant) *tenant = t->name;
    return t->disabled ? TENANTS_DISABLED : TENANTS_OK;
}

const char *tenants_keys_from_headers(const char *authorization, const char *x_api_key,
                                      size_t *len)
{
    *len = 0;
    const char *v = NULL;
    if (authorization) {
        const char *p = authorization;
        while (*p == ' ' || *p == '\t')
            p++;
        if (!strncasecmp(p, "bearer", 6) && (p[6] == ' ' || p[6] == '\t')) v = p + 7;
    }
    if (!v && x_api_key) v = x_api_key;
    if (!v) return NULL;
    while (*v == ' ' || *v == '\t')
        v++;
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r' || v[n - 1] == '\n'))
        n--;
    if (!n) return NULL;
    *len = n;
    return v;
}

// ---- parsing ------------------------------------------------------------------------------------

typedef struct {
    const char *file;
    yaml_document_t *doc;
    char *err;
    size_t errlen;
    tenants_keys_t *out;
    // digests collected, before the table is built
    uint8_t (*digests)[IPL_SHA256_LEN];
    uint32_t *owner;
    size_t n, cap;
} s_parse_t;

static int s_fail(s_parse_t *p, const yaml_node_t *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s_fail(s_parse_t *p, const yaml_node_t *at, const char *fmt, ...)
{
    if (!p->errlen) return -1;
    int off = snprintf(p->err, p->errlen, "%s:%zu:%zu: ", p->file,
                       at ? at->start_mark.line + 1 : 1, at ? at->start_mark.column + 1 : 1);
    if (off < 0 || (size_t)off >= p->errlen) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + off, p->errlen - (size_t)off, fmt, ap);
    va_end(ap);
    return -1;
}

static const char *s_scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

// A mapping key as a message may show it: a field-like name (≤ 24 of a-z A-Z _), else "?" —
// a key pasted in the wrong place must not end up in a log.
static const char *s_shown(const char *k)
{
    size_t n = k ? strlen(k) : 0;
    if (!n || n > 24) return "?";
    for (size_t i = 0; i < n; i++)
        if (!isalpha((unsigned char)k[i]) && k[i] != '_') return "?";
    return k;
}

static int s_hex(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                          : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                                 : -1;
}

static int s_add_key(s_parse_t *p, const yaml_node_t *n, uint32_t tenant)
{
    const char *k = s_scalar(n);
    if (!k) return s_fail(p, n, "a key must be a string; quote it");
    size_t len = n->data.scalar.length;
    uint8_t d[IPL_SHA256_LEN];
    if (!strncmp(k, "sha256:", 7)) {
        if (len != 7 + 2 * IPL_SHA256_LEN)
            return s_fail(p, n, "a \"sha256:\" key needs 64 hex digits (printf %%s KEY | "
                                "sha256sum)");
        for (size_t i = 0; i < IPL_SHA256_LEN; i++) {
            int hi = s_hex(k[7 + 2 * i]), lo = s_hex(k[8 + 2 * i]);
            if (hi < 0 || lo < 0)
                return s_fail(p, n, "a \"sha256:\" key needs 64 hex digits (0-9, a-f)");
            d[i] = (uint8_t)(hi << 4 | lo);
        }
    } else {
        if (len < TENANTS_MIN_KEY || len > TENANTS_MAX_KEY)
            return s_fail(p, n, "a key must be %d to %d bytes (this one has %zu); generate one "
                                "with: openssl rand -hex 24",
                          TENANTS_MIN_KEY, TENANTS_MAX_KEY, len);
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)k[i] <= ' ' || k[i] == 0x7f)
                return s_fail(p, n, "a key must not hold blanks or control characters");
        ipl_sha256(k, len, d);
    }
    for (size_t i = 0; i < p->n; i++)
        if (s_same(p->digests[i], d))
            return s_fail(p, n, "this key is listed already (tenant \"%s\"); a key belongs to one "
                                "tenant: remove one",
                          p->out->tenants[p->owner[i]].name);
    if (p->n == TENANTS_MAX_KEYS)
        return s_fail(p, n, "more than %d keys; split the tenants over fewer keys",
                      TENANTS_MAX_KEYS);
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        void *dd = realloc(p->digests, cap * sizeof *p->digests);
        if (!dd) return s_fail(p, n, "out of memory");
        p->digests = dd;
        void *oo = realloc(p->owner, cap * sizeof *p->owner);
        if (!oo) return s_fail(p, n, "out of memory");
        p->owner = oo;
        p->cap = cap;
    }
    memcpy(p->digests[p->n], d, sizeof d);
    p->owner[p->n++] = tenant;
    return 0;
}

static bool s_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > TENANTS_MAX_NAME) return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
            return false;
    return true;
}

static int s_tenant(s_parse_t *p, const yaml_node_t *n, size_t index)
{
    if (n->type != YAML_MAPPING_NODE)
        return s_fail(p, n, "tenants[%zu] must be a mapping {name, keys, disabled?}", index);
    const yaml_node_t *name = NULL, *keys = NULL, *disabled = NULL;
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top;
         pr++) {
        const yaml_node_t *k = yaml_document_get_node(p->doc, pr->key);
        const yaml_node_t *v = yaml_document_get_node(p->doc, pr->value);
        const char *ks = s_scalar(k);
        if (ks && !strcmp(ks, "name")) name = v;
        else if (ks && !strcmp(ks, "keys")) keys = v;
        else if (ks && !strcmp(ks, "disabled")) disabled = v;
        else
            return s_fail(p, k, "tenants[%zu]: unknown field \"%s\"; the fields are name, keys "
                                "and disabled",
                          index, s_shown(ks));
    }
    const char *nm = s_scalar(name);
    if (!nm || !s_name_ok(nm))
        return s_fail(p, name ? name : n, "tenants[%zu].name must be 1..%d of A-Z a-z 0-9 . _ -",
                      index, TENANTS_MAX_NAME);
    for (size_t i = 0; i < p->out->ntenants; i++)
        if (!strcmp(p->out->tenants[i].name, nm))
            return s_fail(p, name, "tenant \"%s\" is listed twice; merge its keys into one entry",
                          nm);
    s_tenant_t *t = &p->out->tenants[p->out->ntenants];
    snprintf(t->name, sizeof t->name, "%s", nm);
    if (disabled) {
        const char *b = s_scalar(disabled);
        if (b && (!strcmp(b, "true") || !strcmp(b, "yes"))) t->disabled = true;
        else if (!b || (strcmp(b, "false") && strcmp(b, "no")))
            return s_fail(p, disabled, "tenants[%zu].disabled must be true or false", index);
    }
    if (!keys || keys->type != YAML_SEQUENCE_NODE)
        return s_fail(p, keys ? keys : n, "tenants[%zu].keys must be a list of keys", index);
    uint32_t at = (uint32_t)p->out->ntenants++;
    for (yaml_node_item_t *it = keys->data.sequence.items.start; it < keys->data.sequence.items.top;
         it++)
        if (s_add_key(p, yaml_document_get_node(p->doc, *it), at)) return -1;
    return 0;
}

static int s_build_table(s_parse_t *p)
{
    tenants_keys_t *self = p->out;
    size_t nslots = 16;
    while (nslots < 2 * p->n)
        nslots *= 2;
    self->slots = malloc(nslots * sizeof *self->slots);
    if (!self->slots) return s_fail(p, NULL, "out of memory");
    self->nslots = nslots;
    for (size_t i = 0; i < nslots; i++)
        self->slots[i].tenant = UINT32_MAX;
    for (size_t i = 0; i < p->n; i++) {
        s_slot_t *s = s_probe(self, p->digests[i]);
        memcpy(s->digest, p->digests[i], IPL_SHA256_LEN);
        s->tenant = p->owner[i];
    }
    self->nkeys = p->n;
    return 0;
}

static int s_document(s_parse_t *p)
{
    const yaml_node_t *root = yaml_document_get_root_node(p->doc);
    if (!root) return s_fail(p, NULL, "the file is empty; list the tenants under \"tenants:\"");
    if (root->type != YAML_MAPPING_NODE)
        return s_fail(p, root, "the file must be a mapping with a \"tenants\" list");
    const yaml_node_t *list = NULL;
    for (yaml_node_pair_t *pr = root->data.mapping.pairs.start;
         pr < root->data.mapping.pairs.top; pr++) {
        const yaml_node_t *k = yaml_document_get_node(p->doc, pr->key);
        const char *ks = s_scalar(k);
        if (!ks || strcmp(ks, "tenants"))
            return s_fail(p, k, "unknown key \"%s\"; the file has one key, \"tenants\"",
                          s_shown(ks));
        list = yaml_document_get_node(p->doc, pr->value);
    }
    if (!list || list->type != YAML_SEQUENCE_NODE)
        return s_fail(p, list ? list : root, "\"tenants\" must be a list of {name, keys}");
    size_t n = (size_t)(list->data.sequence.items.top - list->data.sequence.items.start);
    if (n > TENANTS_MAX_TENANTS)
        return s_fail(p, list, "more than %d tenants", TENANTS_MAX_TENANTS);
    p->out->tenants = calloc(n ? n : 1, sizeof *p->out->tenants);
    if (!p->out->tenants) return s_fail(p, list, "out of memory");
    size_t i = 0;
    for (yaml_node_item_t *it = list->data.sequence.items.start;
         it < list->data.sequence.items.top; it++, i++)
        if (s_tenant(p, yaml_document_get_node(p->doc, *it), i)) return -1;
    return s_build_table(p);
}

tenants_keys_t *tenants_keys_parse(const char *file, const char *text, size_t len, char *err,
                                   size_t errlen)
{
    if (errlen) err[0] = '\0';
    s_parse_t p = {.file = file ? file : "keys", .err = err, .errlen = errlen};
    p.out = calloc(1, sizeof *p.out);
    if (!p.out) {
        s_fail(&p, NULL, "out of memory");
        return NULL;
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    int rc = -1;
    if (!yaml_parser_initialize(&parser)) {
        s_fail(&p, NULL, "out of memory");
        tenants_keys_destroy(&p.out);
        return NULL;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        if (errlen)
            snprintf(err, errlen, "%s:%zu:%zu: not valid YAML: %s", p.file,
                     parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                     parser.problem ? parser.problem : "?");
    } else {
        p.doc = &doc;
        rc = s_document(&p);
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    if (p.digests) memset(p.digests, 0, p.cap * sizeof *p.digests);
    free(p.digests);
    free(p.owner);
    if (rc != 0) tenants_keys_destroy(&p.out);
    return p.out;
}

tenants_keys_t *tenants_keys_load(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errlen)
            snprintf(err, errlen, "%s: cannot open the keys file: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(S_MAX_FILE);
    size_t n = buf ? fread(buf, 1, S_MAX_FILE, f) : 0;
    bool too_big = buf && n == S_MAX_FILE;
    fclose(f);
    if (!buf || too_big) {
        if (errlen)
            snprintf(err, errlen, "%s: %s", path,
                     buf ? "the keys file is larger than 16 MiB" : "out of memory");
        free(buf);
        return NULL;
    }
    tenants_keys_t *k = tenants_keys_parse(path, buf, n, err, errlen);
    memset(buf, 0, n); // keys in clear
    free(buf);
    return k;
}
