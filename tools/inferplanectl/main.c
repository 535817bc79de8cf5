/* inferplanectl — dispatches to one subcommand per file (see ctl.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "ipl_curve.h"

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} s_command_t;

static const s_command_t s_commands[] = {
    {"route", ctl_route, "ask a decider where a request would go (--explain for every candidate)"},
    {"explain", ctl_explain,
     "which InferencePolicy rule decides a request, which did not and why (--decider: and "
     "the decision)"},
    {"poke", ctl_poke, "send malformed frames to a ZeroMQ endpoint (robustness tests)"},
    {"proto-doc", ctl_proto_doc, "print the wire-message catalogue as Markdown"},
    {"tokenize", ctl_tokenize, "encode stdin with a tokenizer.json (--decode: ids to text)"},
    {"validate", ctl_validate, "compile a policy directory; print every error (file:line:col)"},
    {"curve-keygen", ctl_curve_keygen,
     "write the cluster's CURVE certificate (cluster.key, cluster.key_secret) for --curve-dir"},
};

/* With INFERPLANE_CURVE_DIR set, commands that talk to the control plane (route, explain)
 * speak CURVE with the cluster certificate, as the services do with --curve-dir. */
static int s_run(const s_command_t *cmd, int argc, char **argv)
{
    const char *dir = getenv("INFERPLANE_CURVE_DIR");
    bool curve = dir && *dir && strcmp(cmd->name, "curve-keygen") != 0;
    if (curve) {
        char err[9000];
        if (ipl_curve_setup(dir, "env INFERPLANE_CURVE_DIR", NULL, err, sizeof err) != 0) {
            fprintf(stderr, "inferplanectl %s: %s\n", cmd->name, err);
            return 2;
        }
    }
    int rc = cmd->fn(argc, argv);
    if (curve) ipl_curve_shutdown();
    return rc;
}

static void s_usage(FILE *out)
{
    fprintf(out, "usage: inferplanectl <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof s_commands / sizeof s_commands[0]; i++)
        fprintf(out, "  %-12s %s\n", s_commands[i].name, s_commands[i].help);
    fprintf(out, "\n'inferplanectl <command> --help' describes a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        s_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("inferplanectl %s\n", IPL_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof s_commands / sizeof s_commands[0]; i++)
        if (!strcmp(argv[1], s_commands[i].name)) return s_run(&s_commands[i], argc - 1, argv + 1);
    fprintf(stderr, "inferplanectl: unknown command '%s'\n", argv[1]);
    s_usage(stderr);
    return 2;
}
