/*
 * policy_cases — helpers shared by the policy compiler's table-driven tests: a base set of
 * resources (a backend, a provider, two worker sets, two pools) and one table row per
 * expected error, each asserting the exact message.
 */
#ifndef POLICY_CASES_H
#define POLICY_CASES_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy_compiler.h"

#define PT_HEAD(kind, name)                                                                        \
    "apiVersion: inferplane.io/v1alpha1\nkind: " kind "\nmetadata: {name: " name "}\n"

/* base.yaml: what the rows refer to. */
#define PT_BASE                                                                                    \
    PT_HEAD("GatewayBackend", "be")                                                                \
    "spec: {url: 'https://api.example.com/v1', auth: {type: bearer, env: API_KEY}}\n"              \
    "---\n" PT_HEAD(                                                                               \
        "InferenceProvider",                                                                       \
        "cloud") "spec:\n"                                                                         \
                 "  backend: be\n"                                                                 \
                 "  models: [{name: small-model, remoteName: vendor/small}, {name: "               \
                 "large-model}]\n"                                                                 \
                 "---\n" PT_HEAD(                                                                  \
                     "InferenceWorkerSet",                                                         \
                     "small") "spec: {model: small-model, workers: [{name: s0, url: "              \
                              "'http://h:1'}]}\n"                                                  \
                              "---\n" PT_HEAD(                                                     \
                                  "InferenceWorkerSet",                                            \
                                  "large") "spec: {model: large-model, workers: [{name: l0, url: " \
                                           "'http://h:2'}]}\n"                                     \
                                           "---\n" PT_HEAD(                                        \
                                               "InferencePool",                                    \
                                               "chat") "spec:\n"                                   \
                                                       "  model: small-model\n"                    \
                                                       "  slo: {ttftMs: 800}\n"                    \
                                                       "  targets: [{workerSet: small}, "          \
                                                       "{workerSet: large}, {provider: cloud, "    \
                                                       "role: overflow}]\n"                        \
                                                       "---\n" PT_HEAD(                            \
                                                           "InferencePool",                        \
                                                           "big") "spec: {model: large-model, "    \
                                                                  "targets: [{provider: "          \
                                                                  "cloud}]}\n"

typedef struct {
    const char *what;  /* the case, for failure output */
    const char *doc;   /* p.yaml */
    const char *error; /* one of the errors, exactly */
} pt_case_t;

/* Compiles base (as base.yaml, may be NULL) and doc (as p.yaml). The caller destroys. */
static inline policy_compiler_t *pt_compile(const char *base, const char *doc, int *errors)
{
    policy_compiler_t *c = policy_compiler_new();
    assert_non_null(c);
    if (base) policy_compiler_add_string(c, "base.yaml", base, strlen(base));
    policy_compiler_add_string(c, "p.yaml", doc, strlen(doc));
    *errors = policy_compiler_finish(c, "test");
    return c;
}

static inline void pt_dump(const char *what, const policy_compiler_t *c)
{
    fprintf(stderr, "%s: %zu errors:\n", what, policy_compiler_nerrors(c));
    for (size_t i = 0; i < policy_compiler_nerrors(c); i++)
        fprintf(stderr, "  %s\n", policy_compiler_error(c, i));
}

/* A policy that compiles cleanly; the caller destroys. */
static inline policy_compiler_t *pt_ok(const char *base, const char *doc)
{
    int n;
    policy_compiler_t *c = pt_compile(base, doc, &n);
    if (n) pt_dump("expected no errors", c);
    assert_int_equal(n, 0);
    assert_non_null(policy_compiler_policy(c));
    return c;
}

/* Every row: the compilation fails and one error line is exactly row.error. */
static inline void pt_run_cases(const char *base, const pt_case_t *cases, size_t n)
{
    size_t failed = 0;
    for (size_t i = 0; i < n; i++) {
        int nerr;
        policy_compiler_t *c = pt_compile(base, cases[i].doc, &nerr);
        bool found = false;
        for (size_t e = 0; e < policy_compiler_nerrors(c) && !found; e++)
            found = !strcmp(policy_compiler_error(c, e), cases[i].error);
        if (!found || policy_compiler_policy(c)) {
            fprintf(stderr, "row \"%s\": expected\n  %s\n", cases[i].what, cases[i].error);
            pt_dump("got", c);
            failed++;
        }
        policy_compiler_destroy(&c);
    }
    assert_int_equal(failed, 0);
}

#endif
