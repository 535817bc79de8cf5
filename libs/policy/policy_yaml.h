/*
 * policy_yaml — the YAML side of one policy compilation: an arena for every string and
 * array the compiled policy points to, the error and warning lines a person reads, and the
 * helpers that walk a resource's node tree field by field.
 *
 *   policy_yaml_t *y = policy_yaml_new(50);
 *   policy_yaml_load(y, "pool.yaml", text, len, on_document, arg); // each document's root
 *   ...
 *   policy_yaml_destroy(&y);                                      // frees every string
 *
 * Every message is one line: "file:line:col: Kind "name": what is wrong; how to fix"
 * (lines and columns 1-based). Field helpers take a policy_doc_t (one document: its file,
 * node tree and, once known, the resource's kind and name for the messages), report what is
 * wrong with a value and return NULL / false; they never abort on bad input. Compilation
 * goes on after an error so one run reports as much as it can; past max_errors, errors are
 * counted, not kept (policy_yaml_close adds "... and N more errors").
 *
 * Not thread-safe; one object per compilation.
 */
#ifndef POLICY_YAML_H
#define POLICY_YAML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yaml.h>

#include "policy_types.h"

#define POLICY_YAML_MAX_NAME  63
#define POLICY_YAML_MAX_MODEL 256
#define POLICY_YAML_MAX_URL   1024

typedef struct policy_yaml policy_yaml_t;

/* One YAML document being checked; a value type on the caller's stack. */
typedef struct {
    policy_yaml_t *yaml;
    const char *file;     /* arena */
    yaml_document_t *doc; /* borrowed, for the call only */
    const char *kind;     /* for messages, once known (static string) */
    const char *name;     /* for messages, once known (arena) */
} policy_doc_t;

policy_yaml_t *policy_yaml_new(size_t max_errors);
void policy_yaml_destroy(policy_yaml_t **self_p);

/* Zeroed memory that lives until destroy (aborts when out of memory: a policy is small). */
void *policy_yaml_alloc(policy_yaml_t *self, size_t size);
char *policy_yaml_strndup(policy_yaml_t *self, const char *s, size_t n);
char *policy_yaml_strdup(policy_yaml_t *self, const char *s);
/* Grows a malloc'd array (*array, *cap elements of `size`) to hold at least n + 1. */
void policy_yaml_reserve(void **array, size_t *cap, size_t n, size_t size);

/* Adds "file:line:col: Kind "name": message" (kind and name may be NULL) to the errors, or
 * to the warnings. */
void policy_yaml_report(policy_yaml_t *self, bool warning, const policy_loc_t *loc,
                        const char *kind, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* Adds a line as is (no place). */
void policy_yaml_report_line(policy_yaml_t *self, const char *line);
/* Errors reported so far, kept or not. */
size_t policy_yaml_error_count(const policy_yaml_t *self);
/* Appends "... and N more errors" when some were dropped. Call once, at the end. */
void policy_yaml_close(policy_yaml_t *self);
size_t policy_yaml_nerrors(const policy_yaml_t *self);              /* kept lines */
const char *policy_yaml_error(const policy_yaml_t *self, size_t i); /* borrowed; NULL past */
size_t policy_yaml_nwarnings(const policy_yaml_t *self);
const char *policy_yaml_warning(const policy_yaml_t *self, size_t i);

/* Parses a multi-document YAML stream and calls on_document for each non-empty document's
 * root (the document is freed after the call). A syntax error is reported with its place and
 * ends the stream. `file` must be an arena string. */
typedef void(policy_yaml_document_fn)(void *arg, policy_doc_t *d, yaml_node_t *root);
void policy_yaml_load(policy_yaml_t *self, const char *file, const char *text, size_t len,
                      policy_yaml_document_fn *on_document, void *arg);

/* Writes "; did you mean "x"? (known: a, b, c)" (or " (known: ...)") into buf; returns buf. */
const char *policy_yaml_hint(char *buf, size_t size, const char *word, const char *const *cands,
                             size_t n);
size_t policy_yaml_count(const char *const *list); /* entries of a NULL-terminated list */

/* ---- arrays of named resources -------------------------------------------------------------
 * `items` is an array of n structs of `stride` bytes, each with a `const char *` name at
 * byte offset name_off (and a policy_loc_t at loc_off). */

/* Reports each item whose name an earlier one already uses:
 *   "<loc>: Kind "x": metadata.name is already used by the Kind at <loc>; rename one of them" */
void policy_yaml_unique(policy_yaml_t *self, const char *kind, const void *items, size_t n,
                        size_t stride, size_t name_off, size_t loc_off);
/* The first item named `name`, or NULL. */
const void *policy_yaml_find(const void *items, size_t n, size_t stride, size_t name_off,
                             const char *name);
/* The items' names, for hints: an arena array of n. */
const char **policy_yaml_names(policy_yaml_t *self, const void *items, size_t n, size_t stride,
                               size_t name_off);

/* ---- one document ------------------------------------------------------------------------ */

policy_loc_t policy_yaml_loc(const policy_doc_t *d, const yaml_node_t *node);
/* An error at `node` (NULL: the document's start) naming d's kind and name. */
void policy_yaml_err(policy_doc_t *d, const yaml_node_t *node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void policy_yaml_warn(policy_doc_t *d, const yaml_node_t *node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
yaml_node_t *policy_yaml_node(policy_doc_t *d, int id);
const char *policy_yaml_what(const yaml_node_t *node); /* "a mapping", "a list", "a scalar" */
bool policy_yaml_is_null(const yaml_node_t *node);     /* ~, null, or an empty plain scalar */
/* `key`'s value in a mapping, NULL when absent or not a mapping; reports nothing. */
yaml_node_t *policy_yaml_lookup(policy_doc_t *d, yaml_node_t *map, const char *key);

/* Checks that `map` is a mapping whose keys are all in `known` (NULL-terminated, at most 32),
 * each at most once, and stores each key's value in out[i] (NULL when absent). `path` names
 * the mapping ("spec"; "" for the top level). Unknown keys get a did-you-mean. Returns false
 * (with an error) when `map` is not a mapping. */
bool policy_yaml_fields(policy_doc_t *d, yaml_node_t *map, const char *path,
                        const char *const *known, yaml_node_t **out);

/* A string; absent, null or empty → NULL (an error when `required`, placed at `parent`
 * when the field is absent). Control characters are errors. The result is in the arena. */
const char *policy_yaml_str(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                            const char *path, bool required);
/* A string of at most `max` characters without whitespace (model names, tenants). */
const char *policy_yaml_word(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                             const char *path, bool required, size_t max, const char *what);
/* A lower-case DNS-style name (Kubernetes metadata.name rules); always required. */
const char *policy_yaml_name(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                             const char *path);
const char *policy_yaml_opt_name(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                                 const char *path); /* the same, optional */
bool policy_yaml_valid_name(const char *s);
/* A model name: no whitespace, at most POLICY_YAML_MAX_MODEL characters; required. */
const char *policy_yaml_model(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                              const char *path);
/* http(s)://host[:port][/path], trailing '/' dropped. */
const char *policy_yaml_url(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                            const char *path, bool required);
/* A ZeroMQ endpoint: tcp://host:port or ipc://path. Optional. */
const char *policy_yaml_endpoint(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                                 const char *path);
/* A whole number in [min, max]; absent or null keeps *out and returns true. */
bool policy_yaml_uint(policy_doc_t *d, yaml_node_t *node, const char *path, uint64_t min,
                      uint64_t max, uint64_t *out);
/* A whole number in [min, max], possibly negative; as above. */
bool policy_yaml_int(policy_doc_t *d, yaml_node_t *node, const char *path, int64_t min, int64_t max,
                     int64_t *out);
/* true / false; absent keeps *out. */
bool policy_yaml_bool(policy_doc_t *d, yaml_node_t *node, const char *path, bool *out);
/* One of `values` (NULL-terminated); returns its index, or -1 (absent: -1 without error
 * unless required). */
int policy_yaml_enum(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent, const char *path,
                     const char *const *values, bool required);
/* A list: NULL when absent (an error when `required`) or not a list (an error); an empty
 * list is an error when `required`, and so is one longer than `max`. */
yaml_node_t *policy_yaml_list(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                              const char *path, const char *what, bool required, size_t max);
size_t policy_yaml_len(const yaml_node_t *list);
/* The i-th item of `list` when it is a mapping of `known` fields (policy_yaml_fields at
 * "<path>[i]", which is written into base), else NULL (reported). */
yaml_node_t *policy_yaml_entry(policy_doc_t *d, const yaml_node_t *list, size_t i, const char *path,
                               const char *const *known, yaml_node_t **out, char *base,
                               size_t base_size);
yaml_node_t *policy_yaml_item(policy_doc_t *d, const yaml_node_t *list, size_t i);
/* A list of unique words (policy_yaml_word rules, or names when `names`); returns an arena
 * array of *n entries (NULL when absent or empty). */
const char **policy_yaml_words(policy_doc_t *d, yaml_node_t *node, yaml_node_t *parent,
                               const char *path, size_t max, size_t max_len, bool names, size_t *n);

#endif
