/*
 * inferplanectl validate — compiles a policy directory with the policy service's own compiler
 * (libs/policy) without serving it, so a change can be checked before it is deployed:
 *
 *   $ inferplanectl validate examples/policy
 *   examples/policy: valid (1 pool, 1 worker set; hash 3f2a9c0d1e5b7a64)
 *   $ inferplanectl validate /tmp/broken
 *   pool.yaml:8:18: InferencePool "chat": spec.targets[0].workerSet "qwen-big" does not exist
 * (known: qwen-small)
 *
 * Every error is printed on stdout, one per line, as the service reports it (file:line:col:
 * what; how to fix); warnings go to stderr. The hash is the one the policy service would
 * publish for these files (POLICY.hash, /debug/policy). Exit 0 valid, 1 invalid (or
 * unreadable), 2 usage error.
 */
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "policy_compiler.h"
#include "policy_digest.h"

static int s_usage(FILE *out, int rc)
{
    fprintf(out,
            "usage: inferplanectl validate DIR\n\n"
            "Compiles the policy resources of DIR (*.yaml, *.yml) as inferplane-policy would,\n"
            "without serving them. Prints \"DIR: valid (N pools, M worker sets; hash H)\", or\n"
            "every error, one per line (file:line:col: what; how to fix). Warnings go to\n"
            "stderr. Exit status: 0 valid, 1 invalid, 2 usage error.\n");
    return rc;
}

static const char *s_plural(size_t n)
{
    return n == 1 ? "" : "s";
}

int ctl_validate(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
        return s_usage(stdout, 0);
    if (argc != 2 || argv[1][0] == '-' || !argv[1][0]) return s_usage(stderr, 2);
    const char *dir = argv[1];
    policy_compiler_t *c = policy_compiler_new();
    if (!c) {
        fprintf(stderr, "inferplanectl validate: out of memory\n");
        return 1;
    }
    policy_compiler_add_dir(c, dir);
    int errors = policy_compiler_finish(c, dir);
    for (size_t i = 0; i < policy_compiler_nwarnings(c); i++)
        fprintf(stderr, "warning: %s\n", policy_compiler_warning(c, i));
    const ipl_policy_t *p = policy_compiler_policy(c);
    int rc = p ? 0 : 1;
    if (p) {
        char hex[POLICY_DIGEST_HEX_LEN];
        size_t sets = policy_compiler_nworker_sets(c);
        printf("%s: valid (%u pool%s, %zu worker set%s; hash %s)\n", dir, p->pools_len,
               s_plural(p->pools_len), sets, s_plural(sets), policy_digest_hex(p->hash, hex));
    } else {
        for (size_t i = 0; i < policy_compiler_nerrors(c); i++)
            printf("%s\n", policy_compiler_error(c, i));
        fprintf(stderr, "%s: invalid (%d error%s)\n", dir, errors, s_plural((size_t)errors));
    }
    policy_compiler_destroy(&c);
    return rc;
}
