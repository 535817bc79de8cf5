/*
 * bench_trace — request traces to replay: our JSONL traces (the cluster simulator's format,
 * docs/clustersim.md) and Mooncake-style ones, recognised per line as clustersim does:
 *
 *   ours      {"arrival_s": 0.25, "prompt_tokens": 2300, "output_tokens": 200,
 *              "prefix_group": 3, "prefix_tokens": 2048, "tenant": ..., "model": ...}
 *             prefix_group an integer, a string or null (none); prefix_tokens optional
 *             (default: prompt_tokens − the trace's suffix tokens); tenant, model ignored
 *   Mooncake  {"timestamp": 27482, "input_length": 6955, "output_length": 52,
 *              "hash_ids": [46, 47, ...]}     timestamp in ms; each hash id one block of
 *                                             shared text
 * Blank lines and lines starting with '#' are skipped. A trace is a local file but still
 * input: a bad line is an error that names the file, the line and the field
 * ("t.jsonl:7: \"input_length\" must be an integer 1..1048576"), never an assertion.
 *
 * Output lengths of 0 are sent as 1 (a request generates at least one token).
 */
#ifndef BENCH_TRACE_H
#define BENCH_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    double arrival_s;         /* seconds from the trace's start */
    uint32_t prompt_tokens;   /* >= 1 */
    uint32_t output_tokens;   /* >= 1 */
    int64_t group;            /* ours: the prefix group (strings hashed above 2^40); -1: none */
    int64_t prefix_tokens;    /* ours: given prefix length; -1: not given */
    uint32_t hash_off, nhash; /* Mooncake: hash ids in the trace's table */
    bool mooncake;
} bench_trace_rec_t;

typedef struct bench_trace bench_trace_t;

bench_trace_t *bench_trace_new(void);
void bench_trace_destroy(bench_trace_t **self_p);

/* Parses one line. 0: a request was added; 1: skipped (blank, comment); IPL_E_INVAL with the
 * problem in err (no request added); IPL_E_NOMEM. */
int bench_trace_add_line(bench_trace_t *self, const char *line, size_t len, char *err,
                         size_t errlen);

/* Reads a file. 0 with *out set; IPL_E_IO / IPL_E_INVAL / IPL_E_NOMEM with "path:line: ..."
 * in err and *out NULL. A file without any request is IPL_E_INVAL. */
int bench_trace_load(const char *path, bench_trace_t **out, char *err, size_t errlen);

size_t bench_trace_count(const bench_trace_t *self);
const bench_trace_rec_t *bench_trace_rec(const bench_trace_t *self, size_t i);
/* Record r's hash ids (r->nhash of them). Borrowed. */
const uint32_t *bench_trace_hash_ids(const bench_trace_t *self, const bench_trace_rec_t *r);

#endif
