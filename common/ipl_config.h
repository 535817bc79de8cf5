/*
 * ipl_config — a service's settings from flags, environment and an optional YAML file.
 *
 * Each option is declared once with its type, default, target variable and help text.
 * Precedence, highest first: command-line flag, environment variable, YAML file, default.
 *
 *   flag:  --max-body-bytes 1048576   or   --max-body-bytes=1048576   (bool: --flag, --no-flag,
 *          --flag=true|false)
 *   env:   INFERPLANE_MAX_BODY_BYTES=1048576   (upper case, '-' becomes '_')
 *   YAML:  --config FILE (or INFERPLANE_CONFIG): a flat mapping `max-body-bytes: 1048576`
 *          (underscores are accepted in keys too; one document; a key may appear once)
 *
 * Bool values are true|false (also 1|0, yes|no, on|off). INFERPLANE_* variables that match no
 * option are ignored (one environment may serve several services); -h is --help.
 *
 * Every service also gets --help, --version and --config. An unknown flag, an unknown YAML key
 * or a bad value is an error that names the option, the source (flag, env var name or
 * file:line:column) and the nearest known option ("did you mean --admin-listen?").
 *
 * Ownership: targets are the caller's variables; for IPL_OPT_STR the target is a `char *`
 * that the config sets to a string it owns (valid until ipl_config_destroy).
 * Not thread-safe; use from main before threads start.
 */
#ifndef IPL_CONFIG_H
#define IPL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ipl_config ipl_config_t;

typedef enum {
    IPL_OPT_STR,    /* target: char ** (config-owned string, may be NULL when default is NULL) */
    IPL_OPT_INT,    /* target: int64_t * */
    IPL_OPT_DOUBLE, /* target: double * */
    IPL_OPT_BOOL,   /* target: bool * */
} ipl_opt_type_t;

/* `program` is the binary name for --help; `summary` one line saying what it does. Copied. */
ipl_config_t *ipl_config_new(const char *program, const char *summary);
void ipl_config_destroy(ipl_config_t **self_p);

/* Declares an option. `name` is the flag without "--". `defval` is parsed like a flag value
 * (NULL: no default; for STR the target stays NULL). Names/help are borrowed: pass literals.
 * Aborts on a programmer error (duplicate name, bad default). */
void ipl_config_add(ipl_config_t *self, const char *name, ipl_opt_type_t type, void *target,
                    const char *defval, const char *help);

/* Restricts an IPL_OPT_INT or IPL_OPT_DOUBLE option (declared before) to [min, max]:
 * ipl_config_parse then fails with "flag --port: 70000 is out of range (0..65535)" (or
 * "env INFERPLANE_PORT: ...", "FILE:LINE: port: ..."). Aborts on a programmer error. */
void ipl_config_range(ipl_config_t *self, const char *name, double min, double max);

/* Reads the environment under `prefix` instead of "INFERPLANE_" (copied; at most 31 bytes,
 * else aborts): a second set of options in one process (the gateway's embedded decider reads
 * INFERPLANE_DECIDER_*, INFERPLANE_DECIDER_CONFIG). Call before ipl_config_parse. */
void ipl_config_env_prefix(ipl_config_t *self, const char *prefix);

/* Parses defaults, then the YAML file, then the environment, then argv.
 * Returns 0 to proceed, 1 when --help or --version was printed to stdout (exit 0), or a
 * negative code with a one-line human error in `err` (exit 2): IPL_E_TYPE / IPL_E_RANGE for a
 * bad value, IPL_E_IO for an unreadable --config file, IPL_E_INVAL otherwise. After an error
 * the targets may hold a mix of sources. Positional arguments are errors. */
int ipl_config_parse(ipl_config_t *self, int argc, char **argv, char *err, size_t errlen);

/* Where the effective value of `name` came from: "default", "file", "env" or "flag" (NULL for
 * an unknown name). "config" is an option too. */
const char *ipl_config_source(const ipl_config_t *self, const char *name);

/* Writes --help text to `out` (a FILE *; void * keeps <stdio.h> out of this header). */
void ipl_config_print_help(const ipl_config_t *self, void *out);

#endif
