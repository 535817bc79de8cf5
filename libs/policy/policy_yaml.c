/*
 * policy_yaml — arena, messages and the field-by-field checks of YAML nodes.
 *
 * libyaml's document API gives a node tree with marks (0-based line and column of each
 * node's start), which become the 1-based places in messages.
 */
#include "policy_yaml.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipl_suggest.h"

#define S_KNOWN_SHOWN 10 // names listed in "(known: ...)"
#define S_MAX_FIELDS  32 // keys of one mapping's schema

typedef struct s_chunk {
    struct s_chunk *next;
    size_t used, size;
    _Alignas(16) char data[];
} s_chunk_t;

struct policy_yaml {
    s_chunk_t *arena;
    char **errors, **warnings;
    size_t nerrors, nwarnings, cap_errors, cap_warnings;
    size_t max_errors, dropped;
};

policy_yaml_t *policy_yaml_new(size_t max_errors)
{
    policy_yaml_t *self = calloc(1, sizeof *self);
    if (!self) abort();
    self->max_errors = max_errors;
    return self;
}

void policy_yaml_destroy(policy_yaml_t **self_p)
{
    if (!self_p || !*self_p) return;
    policy_yaml_t *self = *self_p;
    for (size_t i = 0; i < self->nerrors; i++)
        free(self->errors[i]);
    for (size_t i = 0; i < self->nwarnings; i++)
        free(self->warnings[i]);
    free(self->errors);
    free(self->warnings);
    while (self->arena) {
        s_chunk_t *next = self->arena->next;
        free(self->arena);
        self->arena = next;
    }
    free(self);
    *self_p = NULL;
}

void *policy_yaml_alloc(policy_yaml_t *self, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    s_chunk_t *c = self->arena;
    if (!c || c->size - c->used < size) {
        size_t want = size > 16384 ? size : 16384;
        c = malloc(sizeof *c + want);
        if (!c) abort(); // a policy is small; running out here is not recoverable
        c->next = self->arena;
        c->used = 0;
        c->size = want;
        self->arena = c;
    }
    void *p = c->data + c->used;
    c->used += size;
    memset(p, 0, size);
    return p;
}

char *policy_yaml_strndup(policy_yaml_t *self, const char *s, size_t n)
{
    char *p = policy_yaml_alloc(self, n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *policy_yaml_strdup(policy_yaml_t *self, const char *s)
{
    return policy_yaml_strndup(self, s, strlen(s));
}

void policy_yaml_reserve(void **array, size_t *cap, size_t n, size_t size)
{
    if (n < *cap) return;
    size_t want = *cap ? *cap * 2 : 8;
    void *p = realloc(*array, want * size);
    if (!p) abort();
    *array = p;
    *cap = want;
}

// ---- messages ---------------------------------------------------------------------------------

static void s_push(char ***lines, size_t *n, size_t *cap, char *line)
{
    policy_yaml_reserve((void **)lines, cap, *n, sizeof **lines);
    (*lines)[(*n)++] = line;
}

static char *s_vformat(const char *fmt, va_list ap)
{
    char *out = NULL;
    if (vasprintf(&out, fmt, ap) < 0) abort();
    return out;
}

static void s_vreport(policy_yaml_t *self, bool warning, const policy_loc_t *loc, const char *kind,
                      const char *name, const char *fmt, va_list ap)
{
    if (!warning && self->nerrors >= self->max_errors) {
        self->dropped++;
        return;
    }
    char *msg = s_vformat(fmt, ap);
    char *line = NULL;
    int rc;
    if (kind && name)
        rc = asprintf(&line, "%s:%zu:%zu: %s \"%s\": %s", loc->file, loc->line, loc->col, kind,
                      name, msg);
    else if (kind)
        rc = asprintf(&line, "%s:%zu:%zu: %s (unnamed): %s", loc->file, loc->line, loc->col, kind,
                      msg);
    else
        rc = asprintf(&line, "%s:%zu:%zu: %s", loc->file, loc->line, loc->col, msg);
    free(msg);
    if (rc < 0) abort();
    if (warning)
        s_push(&self->warnings, &self->nwarnings, &self->cap_warnings, line);
    else
        s_push(&self->errors, &self->nerrors, &self->cap_errors, line);
}

void policy_yaml_report(policy_yaml_t *self, bool warning, const policy_loc_t *loc,
                        const char *kind, const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    s_vreport(self, warning, loc, kind, name, fmt, ap);
    va_end(ap);
}

void policy_yaml_report_line(policy_yaml_t *self, const char *line)
{
    char *copy = strdup(line);
    if (!copy) abort();
    s_push(&self->errors, &self->nerrors, &self->cap_errors, copy);
}

size_t policy_yaml_error_count(const policy_yaml_t *self)
{
    return self->nerrors + self->dropped;
}

void policy_yaml_close(policy_yaml_t *self)
{
    if (!self->dropped) return;
    char *line = NULL;
    if (asprintf(&line, "... and %zu more errors", self->dropped) < 0) abort();
    s_push(&self->errors, &self->nerrors, &self->cap_errors, line);
    self->dropped = 0;
}

size_t policy_yaml_nerrors(const policy_yaml_t *self)
{
    return self->nerrors;
}

const char *policy_yaml_error(const policy_yaml_t *self, size_t i)
{
    return i < self->nerrors ? self->errors[i] : NULL;
}

size_t policy_yaml_nwarnings(const policy_yaml_t *self)
{
    return self->nwarnings;
}

const char *policy_yaml_warning(const policy_yaml_t *self, size_t i)
{
    return i < self->nwarnings ? self->warnings[i] : NULL;
}

size_t policy_yaml_count(const char *const *list)
{
    size_t n = 0;
    while (list[n])
        n++;
    return n;
}

const char *policy_yaml_hint(char *buf, size_t size, const char *word, const char *const *cands,
                             size_t n)
{
    ipl_suggest_t suggest;
    ipl_suggest_init(&suggest, word);
    for (size_t i = 0; i < n; i++)
        ipl_suggest_add(&suggest, cands[i]);
    const char *close = ipl_suggest_best(&suggest);
    int off =
        close ? snprintf(buf, size, "; did you mean \"%s\"? ", close) : snprintf(buf, size, " ");
    if (off >= 0 && (size_t)off < size)
        ipl_suggest_known(buf + off, size - (size_t)off, cands, n, S_KNOWN_SHOWN);
    return buf;
}

// ---- arrays of named resources ---------------------------------------------------------------

static const char *s_name_at(const void *items, size_t i, size_t stride, size_t name_off)
{
    const char *const *p = (const char *const *)((const char *)items + i * stride + name_off);
    return *p;
}

void policy_yaml_unique(policy_yaml_t *self, const char *kind, const void *items, size_t n,
                        size_t stride, size_t name_off, size_t loc_off)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++) {
            const char *a = s_name_at(items, i, stride, name_off);
            const char *b = s_name_at(items, j, stride, name_off);
            if (!a || !b || strcmp(a, b)) continue;
            const policy_loc_t *la =
                (const policy_loc_t *)((const char *)items + i * stride + loc_off);
            const policy_loc_t *lb =
                (const policy_loc_t *)((const char *)items + j * stride + loc_off);
            policy_yaml_report(self, false, la, kind, a,
                               "metadata.name is already used by the %s at %s:%zu:%zu; rename "
                               "one of them",
                               kind, lb->file, lb->line, lb->col);
            break;
        }
}

const void *policy_yaml_find(const void *items, size_t n, size_t stride, size_t name_off,
                             const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < n; i++) {
        /* a resource whose name field failed to compile (already an error) has none */
        const char *at = s_name_at(items, i, stride, name_off);
        if (at && !strcmp(at, name)) return (const char *)items + i * stride;
    }
    return NULL;
}

const char **policy_yaml_names(policy_yaml_t *self, const void *items, size_t n, size_t stride,
                               size_t name_off)
{
    const char **out = policy_yaml_alloc(self, (n + 1) * sizeof *out);
    for (size_t i = 0; i < n; i++)
        out[i] = s_name_at(items, i, stride, name_off);
    return out;
}

// ---- the stream -------------------------------------------------------------------------------

void policy_yaml_load(policy_yaml_t *self, const char *file, const char *text, size_t len,
                      policy_yaml_document_fn *on_document, void *arg)
{
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) abort();
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    while (true) {
        yaml_document_t doc;
        if (!yaml_parser_load(&parser, &doc)) {
            policy_loc_t loc = {file, parser.problem_mark.line + 1, parser.problem_mark.column + 1};
            if (parser.context)
                policy_yaml_report(self, false, &loc, NULL, NULL,
                                   "YAML syntax error: %s %s (line %zu, column %zu); fix the "
                                   "indentation or quoting there",
                                   parser.problem ? parser.problem : "invalid YAML", parser.context,
                                   parser.context_mark.line + 1, parser.context_mark.column + 1);
            else
                policy_yaml_report(self, false, &loc, NULL, NULL, "YAML syntax error: %s",
                                   parser.problem ? parser.problem : "invalid YAML");
            break; // the parser cannot resynchronise after an error
        }
        yaml_node_t *root = yaml_document_get_root_node(&doc);
        if (!root) { // end of the stream
            yaml_document_delete(&doc);
            break;
        }
        if (!policy_yaml_is_null(root)) { // an empty document (a stray ---) holds nothing
            policy_doc_t d = {.yaml = self, .file = file, .doc = &doc};
            on_document(arg, &d, root);
        }
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
}

// ---- one document -----------------------------------------------------------------------------

policy_loc_t policy_yaml_loc(const policy_doc_t *d, const yaml_node_t *node)
{
    policy_loc_t loc = {d->file, 1, 1};
    if (node) {
        loc.line = node->start_mark.line + 1;
        loc.col = node->start_mark.column + 1;
    }
    return loc;
}

static void s_vdoc(policy_doc_t *d, bool warning, const yaml_node_t *node, const char *fmt,
                   va_list ap)
{
    policy_loc_t loc = policy_yaml_loc(d, node);
    s_vreport(d->yaml, warning, &loc, d->kind, d->name, fmt, ap);
}

void policy_yaml_err(policy_doc_t *d, const yaml_node_t *node, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    s_vdoc(d, false, node, fmt, ap);
    va_end(ap);
}

void policy_yaml_warn(policy_doc_t *d, const yaml_node_t *node, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    s_vdoc(d, true, node, fmt, ap);
    va_end(ap);
}

yaml_node_t *policy_yaml_node(policy_doc_t *d, int id)
{
    return yaml_document_get_node(d->doc, id);
}

const char *policy_yaml_what(const yaml_node_t *node)
{
    switch (node->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a list";
    default:
        return "a scalar";
    }
}

bool policy_yaml_is_null(const yaml_node_t *node)
{
    if (node->type != YAML_SCALAR_NODE || node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *v = (const char *)node->data.scalar.value;
    return !*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL");
}

yaml_node_t *policy_yaml_lookup(policy_doc_t *d, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE) return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = policy_yaml_node(d, p->key);
        if (k && k->type == YAML_SCALAR_NODE && !strcmp((const char *)k->data.scalar.value, key))
            return policy_yaml_node(d, p->value);
    }
    return NULL;
}

bool policy_yaml_fields(policy_doc_t *d, yaml_node_t *map, const char *path,
                        const char *const *known, yaml_node_t **out)
{
    size_t n = policy_yaml_count(known);
    for (size_t i = 0; i < n; i++)
        out[i] = NULL;
    if (map->type != YAML_MAPPING_NODE) {
        policy_yaml_err(d, map, "%s must be a mapping (key: value lines), got %s",
                        *path ? path : "the resource", policy_yaml_what(map));
        return false;
    }
    yaml_node_t *keys[S_MAX_FIELDS] = {0};
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = policy_yaml_node(d, p->key), *v = policy_yaml_node(d, p->value);
        if (!k || !v) continue;
        if (k->type != YAML_SCALAR_NODE) {
            policy_yaml_err(d, k, "%s: keys must be plain names, got %s", *path ? path : "resource",
                            policy_yaml_what(k));
            continue;
        }
        const char *key = (const char *)k->data.scalar.value;
        char hint[512];
        size_t i = 0;
        while (i < n && strcmp(known[i], key))
            i++;
        if (i == n) {
            policy_yaml_err(d, k, "%s%s%s is not a known field%s", path, *path ? "." : "", key,
                            policy_yaml_hint(hint, sizeof hint, key, known, n));
            continue;
        }
        if (out[i]) {
            policy_yaml_err(d, k, "%s%s%s is given twice (first at line %zu); remove one", path,
                            *path ? "." : "", key, keys[i]->start_mark.line + 1);
            continue;
        }
        out[i] = v;
        keys[i] = k;
    }
    return true;
}

const char *policy_yaml_str(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                            const char *path, bool required)
{
    if (!node || policy_yaml_is_null(node)) {
        if (required) policy_yaml_err(d, node ? node : parent, "%s is required", path);
        return NULL;
    }
    if (node->type != YAML_SCALAR_NODE) {
        policy_yaml_err(d, node, "%s must be a string, got %s", path, policy_yaml_what(node));
        return NULL;
    }
    const char *v = (const char *)node->data.scalar.value;
    size_t len = node->data.scalar.length;
    for (size_t i = 0; i < len; i++) {
        if (v[i] == '\0' || (unsigned char)v[i] < 0x20 || v[i] == 0x7f) {
            policy_yaml_err(d, node, "%s contains a control character; use plain text", path);
            return NULL;
        }
    }
    if (len == 0) {
        if (required) policy_yaml_err(d, node, "%s is required (it is empty)", path);
        return NULL;
    }
    return policy_yaml_strndup(d->yaml, v, len);
}

static bool s_has_space(const char *s)
{
    for (; *s; s++)
        if (isspace((unsigned char)*s)) return true;
    return false;
}

const char *policy_yaml_word(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                             const char *path, bool required, size_t max, const char *what)
{
    const char *word = policy_yaml_str(d, node, parent, path, required);
    if (word && (s_has_space(word) || strlen(word) > max)) {
        policy_yaml_err(d, node, "%s \"%s\" is not %s (no spaces, at most %zu characters)", path,
                        word, what, max);
        return NULL;
    }
    return word;
}

bool policy_yaml_valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > POLICY_YAML_MAX_NAME || !isalnum((unsigned char)s[0]) ||
        !isalnum((unsigned char)s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(islower(c) || isdigit(c) || c == '-' || c == '.')) return false;
    }
    return true;
}

static const char *s_name(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent, const char *path,
                          bool required)
{
    const char *name = policy_yaml_str(d, node, parent, path, required);
    if (name && !policy_yaml_valid_name(name)) {
        policy_yaml_err(d, node,
                        "%s \"%s\" is not a valid name: use lower-case letters, digits, '-' and "
                        "'.', starting and ending with a letter or digit, at most %d characters",
                        path, name, POLICY_YAML_MAX_NAME);
        return NULL;
    }
    return name;
}

const char *policy_yaml_name(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                             const char *path)
{
    return s_name(d, node, parent, path, true);
}

const char *policy_yaml_opt_name(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                                 const char *path)
{
    return s_name(d, node, parent, path, false);
}

const char *policy_yaml_model(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                              const char *path)
{
    return policy_yaml_word(d, node, parent, path, true, POLICY_YAML_MAX_MODEL, "a model name");
}

const char *policy_yaml_url(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                            const char *path, bool required)
{
    char *url = (char *)policy_yaml_str(d, node, parent, path, required);
    if (!url) return NULL;
    const char *host = !strncmp(url, "http://", 7)    ? url + 7
                       : !strncmp(url, "https://", 8) ? url + 8
                                                      : NULL;
    if (!host || !*host || *host == '/' || s_has_space(url) || strlen(url) > POLICY_YAML_MAX_URL) {
        policy_yaml_err(d, node, "%s \"%s\" is not an HTTP URL; write it like http://10.0.0.5:8000",
                        path, url);
        return NULL;
    }
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/' && url + n - 1 > host)
        url[--n] = '\0';
    return url;
}

const char *policy_yaml_endpoint(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                                 const char *path)
{
    const char *ep = policy_yaml_str(d, node, parent, path, false);
    if (!ep) return NULL;
    bool ok = !s_has_space(ep) && strlen(ep) <= POLICY_YAML_MAX_URL;
    if (ok && !strncmp(ep, "tcp://", 6)) {
        const char *colon = strrchr(ep + 6, ':');
        ok = colon && colon > ep + 6 && colon[1] &&
             strspn(colon + 1, "0123456789") == strlen(colon + 1);
    } else if (ok) {
        ok = !strncmp(ep, "ipc://", 6) && ep[6];
    }
    if (!ok) {
        policy_yaml_err(d, node,
                        "%s \"%s\" is not a ZeroMQ endpoint; write it like tcp://10.0.0.5:5557",
                        path, ep);
        return NULL;
    }
    return ep;
}

// The text of a scalar for messages, or its shape.
static const char *s_shown(const yaml_node_t *node)
{
    return node->type == YAML_SCALAR_NODE ? (const char *)node->data.scalar.value : "";
}

static bool s_plain(const yaml_node_t *node)
{
    return node->type == YAML_SCALAR_NODE && node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

bool policy_yaml_int(policy_doc_t *d, yaml_node_t *node, const char *path, int64_t min, int64_t max,
                     int64_t *out)
{
    if (!node || policy_yaml_is_null(node)) return true; // keep the default
    const char *v = s_shown(node), *digits = *v == '-' ? v + 1 : v;
    bool ok = s_plain(node) && *digits && strspn(digits, "0123456789") == strlen(digits) &&
              strlen(digits) < 19;
    int64_t value = ok ? strtoll(v, NULL, 10) : 0;
    if (!ok || value < min || value > max) {
        if (node->type == YAML_SCALAR_NODE)
            policy_yaml_err(d, node, "%s must be a whole number from %lld to %lld, got \"%s\"",
                            path, (long long)min, (long long)max, v);
        else
            policy_yaml_err(d, node, "%s must be a whole number from %lld to %lld, got %s", path,
                            (long long)min, (long long)max, policy_yaml_what(node));
        return false;
    }
    *out = value;
    return true;
}

bool policy_yaml_uint(policy_doc_t *d, yaml_node_t *node, const char *path, uint64_t min,
                      uint64_t max, uint64_t *out)
{
    // Every limit we check fits in int64 (the largest is 10^12).
    int64_t value = (int64_t)*out;
    if (!policy_yaml_int(d, node, path, (int64_t)min, (int64_t)max, &value)) return false;
    *out = (uint64_t)value;
    return true;
}

bool policy_yaml_bool(policy_doc_t *d, yaml_node_t *node, const char *path, bool *out)
{
    if (!node || policy_yaml_is_null(node)) return true;
    const char *v = s_shown(node);
    if (s_plain(node) && (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "TRUE"))) {
        *out = true;
        return true;
    }
    if (s_plain(node) && (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "FALSE"))) {
        *out = false;
        return true;
    }
    if (node->type == YAML_SCALAR_NODE)
        policy_yaml_err(d, node, "%s must be true or false, got \"%s\"", path, v);
    else
        policy_yaml_err(d, node, "%s must be true or false, got %s", path, policy_yaml_what(node));
    return false;
}

int policy_yaml_enum(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent, const char *path,
                     const char *const *values, bool required)
{
    const char *v = policy_yaml_str(d, node, parent, path, required);
    if (!v) return -1;
    size_t n = policy_yaml_count(values);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(values[i], v)) return (int)i;
    char hint[512];
    policy_yaml_err(d, node, "%s \"%s\" is not one of the allowed values%s", path, v,
                    policy_yaml_hint(hint, sizeof hint, v, values, n));
    return -1;
}

size_t policy_yaml_len(const yaml_node_t *list)
{
    return (size_t)(list->data.sequence.items.top - list->data.sequence.items.start);
}

yaml_node_t *policy_yaml_item(policy_doc_t *d, const yaml_node_t *list, size_t i)
{
    return policy_yaml_node(d, list->data.sequence.items.start[i]);
}

yaml_node_t *policy_yaml_entry(policy_doc_t *d, const yaml_node_t *list, size_t i, const char *path,
                               const char *const *known, yaml_node_t **out, char *base,
                               size_t base_size)
{
    yaml_node_t *item = policy_yaml_item(d, list, i);
    snprintf(base, base_size, "%s[%zu]", path, i);
    return item && policy_yaml_fields(d, item, base, known, out) ? item : NULL;
}

yaml_node_t *policy_yaml_list(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                              const char *path, const char *what, bool required, size_t max)
{
    if (!node || policy_yaml_is_null(node)) {
        if (required)
            policy_yaml_err(d, node ? node : parent, "%s is required: a list of %s", path, what);
        return NULL;
    }
    if (node->type != YAML_SEQUENCE_NODE) {
        policy_yaml_err(d, node, "%s must be a list of %s (lines starting with '- '), got %s", path,
                        what, policy_yaml_what(node));
        return NULL;
    }
    size_t n = policy_yaml_len(node);
    if (n == 0 && required) {
        policy_yaml_err(d, node, "%s is empty; list at least one of %s", path, what);
        return NULL;
    }
    if (n > max) {
        policy_yaml_err(d, node, "%s lists %zu %s, above the limit of %zu", path, n, what, max);
        return NULL;
    }
    return n ? node : NULL;
}

const char **policy_yaml_words(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                               const char *path, size_t max, size_t max_len, bool names, size_t *n)
{
    *n = 0;
    yaml_node_t *list = policy_yaml_list(d, node, parent, path, "names", false, max);
    if (!list) return NULL;
    size_t len = policy_yaml_len(list);
    const char **out = policy_yaml_alloc(d->yaml, len * sizeof *out);
    for (size_t i = 0; i < len; i++) {
        yaml_node_t *item = policy_yaml_item(d, list, i);
        char at[160];
        snprintf(at, sizeof at, "%s[%zu]", path, i);
        const char *w = names ? policy_yaml_name(d, item, list, at)
                              : policy_yaml_word(d, item, list, at, true, max_len, "a name");
        if (!w) continue;
        bool seen = false;
        for (size_t j = 0; j < *n && !seen; j++)
            seen = !strcmp(out[j], w);
        if (seen) {
            policy_yaml_err(d, item, "%s \"%s\" is listed twice; remove one", at, w);
            continue;
        }
        out[(*n)++] = w;
    }
    return out;
}
