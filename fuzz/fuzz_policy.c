/* libFuzzer target: the policy compiler (libs/policy) on any YAML — what an operator's
 * ConfigMap, a `kubectl apply` through the Kubernetes watch, POST /validate and
 * `inferplanectl validate` hand it.
 *
 * The input is one YAML stream (multi-document). Beyond "no crash" (ASan/UBSan), on every
 * input:
 *   - compiling is deterministic: the same bytes give the same error count and, when they
 *     compile, the same policy hash (policy_digest_hash, which every process must agree on);
 *   - the error count never exceeds POLICY_COMPILER_MAX_ERRORS plus one summary line;
 *   - a stream split in two files at a document boundary ("\n---\n") compiles to the same
 *     hash as the whole when both compile (the policy does not depend on file boundaries).
 * Seeds: the repository's examples. Built with libs/policy and libs/labels
 * (FUZZ_EXTRA_fuzz_policy). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy_compiler.h"
#include "policy_digest.h"

typedef struct {
    int errors;
    bool ok;
    uint64_t hash;
} s_result_t;

static s_result_t s_compile(const char *a, size_t alen, const char *b, size_t blen)
{
    s_result_t out = {0};
    policy_compiler_t *c = policy_compiler_new();
    if (!c) return out;
    out.errors = policy_compiler_add_string(c, "a.yaml", a, alen);
    if (b) out.errors += policy_compiler_add_string(c, "b.yaml", b, blen);
    int total = policy_compiler_finish(c, "fuzz");
    out.ok = total == 0;
    if (total < 0 || total > POLICY_COMPILER_MAX_ERRORS + 1) abort();
    if (out.ok) {
        const ipl_policy_t *p = policy_compiler_policy(c);
        if (!p) abort();
        out.hash = policy_digest_hash(p);
    }
    out.errors = total;
    policy_compiler_destroy(&c);
    if (c) abort();
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536) return 0;
    const char *y = (const char *)data;
    s_result_t whole = s_compile(y, size, NULL, 0);
    s_result_t again = s_compile(y, size, NULL, 0);
    if (whole.errors != again.errors || whole.ok != again.ok || whole.hash != again.hash) abort();
    if (!whole.ok) return 0;
    const char *cut = memmem(y, size, "\n---\n", 5);
    if (!cut) return 0;
    size_t alen = (size_t)(cut - y) + 1;
    s_result_t split = s_compile(y, alen, cut + 5, size - alen - 4);
    if (split.ok && split.hash != whole.hash) abort();
    return 0;
}
