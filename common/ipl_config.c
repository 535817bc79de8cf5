/*
 * ipl_config — options from defaults, a YAML file, INFERPLANE_* environment and flags.
 *
 * Every option (including the built-ins --help, --version and --config) is one entry in a
 * growing array. ipl_config_parse() walks argv twice: the first pass checks the syntax, finds
 * --help/--version/--config and validates every value; then defaults, the file and the
 * environment are applied, and the second pass applies the flags, so the highest precedence
 * source writes last.
 */
#include "ipl_config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "ipl_error.h"
#include "ipl_suggest.h"

#ifndef IPL_VERSION
#define IPL_VERSION "0.0.0-unknown"
#endif

#define S_ENV_PREFIX "INFERPLANE_"

typedef enum { S_USER = 0, S_HELP, S_VERSION, S_CONFIG } s_kind_t;

typedef struct {
    const char *name; // borrowed literal
    ipl_opt_type_t type;
    void *target;
    const char *defval; // borrowed literal, may be NULL
    const char *help;   // borrowed literal
    s_kind_t kind;
    const char *source;      // "default" | "file" | "env" | "flag"
    char *str;               // IPL_OPT_STR: the string *target points at (owned)
    unsigned long file_line; // line (1-based) that set it in the YAML file, 0 if none
    bool ranged;             // IPL_OPT_INT / IPL_OPT_DOUBLE: value must be in [min, max]
    double min, max;
} s_opt_t;

struct ipl_config {
    char *program;
    char *summary;
    s_opt_t *opts;
    size_t nopts;
    size_t cap;
    bool help;         // target of --help
    bool version;      // target of --version
    char *config_path; // target of --config (points at that option's owned string)
    char env_prefix[32]; // S_ENV_PREFIX unless ipl_config_env_prefix
};

// A parsed value before it is stored into the target.
typedef struct {
    int64_t i;
    double d;
    bool b;
} s_value_t;

static void s_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void s_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0) return;
    va_list args;
    va_start(args, fmt);
    vsnprintf(err, errlen, fmt, args);
    va_end(args);
}

static s_opt_t *s_find(const ipl_config_t *self, const char *name)
{
    for (size_t i = 0; i < self->nopts; i++)
        if (strcmp(self->opts[i].name, name) == 0) return &self->opts[i];
    return NULL;
}

static const char *s_type_name(ipl_opt_type_t type)
{
    switch (type) {
    case IPL_OPT_INT:
        return "an integer";
    case IPL_OPT_DOUBLE:
        return "a number";
    case IPL_OPT_BOOL:
        return "true or false";
    default:
        return "a string";
    }
}

// Parses `text` for an option of `type`. Returns 0, IPL_E_TYPE (not of the type) or
// IPL_E_RANGE (an integer that does not fit).
static int s_parse_value(ipl_opt_type_t type, const char *text, s_value_t *value)
{
    char *end = NULL;
    switch (type) {
    case IPL_OPT_INT: {
        if (!*text || isspace((unsigned char)*text)) return IPL_E_TYPE;
        errno = 0;
        long long v = strtoll(text, &end, 10);
        if (*end) return IPL_E_TYPE;
        if (errno == ERANGE) return IPL_E_RANGE;
        value->i = v;
        return IPL_OK;
    }
    case IPL_OPT_DOUBLE: {
        if (!*text || isspace((unsigned char)*text)) return IPL_E_TYPE;
        errno = 0;
        double v = strtod(text, &end);
        if (*end || isnan(v)) return IPL_E_TYPE;
        if (errno == ERANGE || isinf(v)) return IPL_E_RANGE;
        value->d = v;
        return IPL_OK;
    }
    case IPL_OPT_BOOL: {
        static const char *yes[] = {"true", "1", "yes", "on"};
        static const char *no[] = {"false", "0", "no", "off"};
        for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
            if (strcasecmp(text, yes[i]) == 0) {
                value->b = true;
                return IPL_OK;
            }
            if (strcasecmp(text, no[i]) == 0) {
                value->b = false;
                return IPL_OK;
            }
        }
        return IPL_E_TYPE;
    }
    default:
        return IPL_OK;
    }
}

// Stores `text` (already validated, or NULL for "no value" of a STR) into the target.
static void s_store(s_opt_t *opt, const char *text, const char *source)
{
    s_value_t value = {0};
    if (text && s_parse_value(opt->type, text, &value) != IPL_OK) abort(); // callers validate first
    switch (opt->type) {
    case IPL_OPT_STR:
        free(opt->str);
        opt->str = text ? strdup(text) : NULL;
        if (text && !opt->str)
            abort(); // out of memory while reading configuration: nothing sensible to do
        *(char **)opt->target = opt->str;
        break;
    case IPL_OPT_INT:
        *(int64_t *)opt->target = text ? value.i : 0;
        break;
    case IPL_OPT_DOUBLE:
        *(double *)opt->target = text ? value.d : 0.0;
        break;
    case IPL_OPT_BOOL:
        *(bool *)opt->target = text ? value.b : false;
        break;
    }
    opt->source = source;
}

// Validates `text` for `opt` and stores it. On error writes "<where>: <problem>" into err;
// `where` names the source and the option ("flag --port", "env INFERPLANE_PORT",
// "svc.yaml:3:7: port").
static int s_set(s_opt_t *opt, const char *text, const char *source, const char *where, char *err,
                 size_t errlen)
{
    s_value_t value;
    int rc = s_parse_value(opt->type, text, &value);
    if (rc == IPL_E_RANGE) {
        s_err(err, errlen, "%s: \"%s\" is out of range", where, text);
        return rc;
    }
    if (rc != IPL_OK) {
        s_err(err, errlen, "%s: expected %s, got \"%s\"", where, s_type_name(opt->type), text);
        return rc;
    }
    s_store(opt, text, source);
    return IPL_OK;
}

ipl_config_t *ipl_config_new(const char *program, const char *summary)
{
    ipl_config_t *self = calloc(1, sizeof *self);
    if (!self) return NULL;
    self->program = strdup(program ? program : "inferplane");
    self->summary = strdup(summary ? summary : "");
    snprintf(self->env_prefix, sizeof self->env_prefix, "%s", S_ENV_PREFIX);
    if (!self->program || !self->summary) {
        ipl_config_destroy(&self);
        return NULL;
    }
    ipl_config_add(self, "config", IPL_OPT_STR, &self->config_path, NULL,
                   "YAML file of option: value pairs (env " S_ENV_PREFIX "CONFIG)");
    ipl_config_add(self, "help", IPL_OPT_BOOL, &self->help, "false", "print this help and exit");
    ipl_config_add(self, "version", IPL_OPT_BOOL, &self->version, "false",
                   "print the version and exit");
    s_find(self, "config")->kind = S_CONFIG;
    s_find(self, "help")->kind = S_HELP;
    s_find(self, "version")->kind = S_VERSION;
    return self;
}

void ipl_config_destroy(ipl_config_t **self_p)
{
    if (!self_p || !*self_p) return;
    ipl_config_t *self = *self_p;
    for (size_t i = 0; i < self->nopts; i++) {
        s_opt_t *opt = &self->opts[i];
        // The caller's variable would dangle: leave NULL behind instead.
        if (opt->type == IPL_OPT_STR && opt->str && *(char **)opt->target == opt->str)
            *(char **)opt->target = NULL;
        free(opt->str);
    }
    free(self->opts);
    free(self->program);
    free(self->summary);
    free(self);
    *self_p = NULL;
}

void ipl_config_add(ipl_config_t *self, const char *name, ipl_opt_type_t type, void *target,
                    const char *defval, const char *help)
{
    if (!self || !name || !*name || !target || strncmp(name, "no-", 3) == 0 || s_find(self, name) ||
        (unsigned)type > IPL_OPT_BOOL) {
        fprintf(stderr, "ipl_config_add: bad or duplicate option \"%s\"\n", name ? name : "");
        abort();
    }
    if (self->nopts == self->cap) {
        size_t cap = self->cap ? self->cap * 2 : 16;
        s_opt_t *opts = realloc(self->opts, cap * sizeof *opts);
        if (!opts) abort();
        self->opts = opts;
        self->cap = cap;
    }
    s_opt_t *opt = &self->opts[self->nopts++];
    *opt = (s_opt_t){.name = name,
                     .type = type,
                     .target = target,
                     .defval = defval,
                     .help = help ? help : "",
                     .kind = S_USER,
                     .source = "default"};
    s_value_t value;
    if (defval && s_parse_value(type, defval, &value) != IPL_OK) {
        fprintf(stderr, "ipl_config_add: default \"%s\" of --%s is not %s\n", defval, name,
                s_type_name(type));
        abort();
    }
    s_store(opt, defval, "default");
}

// --- "did you mean" -------------------------------------------------------------------------

// The known option nearest to `name` (a flag or key without "--"), or NULL when nothing is
// close enough to be a plausible typo (ipl_suggest). `with_builtins`: --help/--version are
// candidates.
static const char *s_nearest(const ipl_config_t *self, const char *name, bool with_builtins)
{
    ipl_suggest_t suggest;
    ipl_suggest_init(&suggest, name);
    for (size_t i = 0; i < self->nopts; i++) {
        const s_opt_t *opt = &self->opts[i];
        if (with_builtins || (opt->kind != S_HELP && opt->kind != S_VERSION))
            ipl_suggest_add(&suggest, opt->name);
    }
    return ipl_suggest_best(&suggest);
}

// Writes "<what> (did you mean --x?)" or "<what> (see --help for the options)" for the unknown
// option `name`.
static void s_unknown(const ipl_config_t *self, const char *what, const char *name,
                      bool with_builtins, char *err, size_t errlen)
{
    // "--no-verbos" is nearest to "--no-verbose": compare without the prefix, then put it back.
    const char *prefix = "";
    const char *hint = NULL;
    if (strncmp(name, "no-", 3) == 0 && name[3]) {
        hint = s_nearest(self, name + 3, false);
        if (hint &&
            (s_find(self, hint)->type != IPL_OPT_BOOL || s_find(self, hint)->kind != S_USER))
            hint = NULL;
        prefix = "no-";
    }
    if (!hint) {
        hint = s_nearest(self, name, with_builtins);
        prefix = "";
    }
    if (hint)
        s_err(err, errlen, "%s (did you mean --%s%s?)", what, prefix, hint);
    else
        s_err(err, errlen, "%s (see --help for the options)", what);
}

// --- flags ----------------------------------------------------------------------------------

// One argv element resolved: the option and its value text (NULL: a bool given as --x/--no-x,
// `negated` tells which).
typedef struct {
    s_opt_t *opt;
    const char *value;
    bool negated;
    int consumed; // argv elements used (1 or 2)
} s_flag_t;

// Resolves argv[i]; on error writes err and returns a negative code.
static int s_resolve_flag(ipl_config_t *self, int argc, char **argv, int i, s_flag_t *flag,
                          char *name_buf, size_t name_size, char *err, size_t errlen)
{
    const char *arg = argv[i];
    *flag = (s_flag_t){.consumed = 1};
    if (strcmp(arg, "-h") == 0) arg = "--help";
    if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
        s_err(err, errlen, "unexpected argument \"%s\" (options start with --; see --help)", arg);
        return IPL_E_INVAL;
    }
    const char *body = arg + 2;
    const char *eq = strchr(body, '=');
    size_t name_len = eq ? (size_t)(eq - body) : strlen(body);
    if (name_len >= name_size) {
        s_err(err, errlen, "unknown flag %.40s... (see --help for the options)", arg);
        return IPL_E_INVAL;
    }
    memcpy(name_buf, body, name_len);
    name_buf[name_len] = '\0';

    s_opt_t *opt = s_find(self, name_buf);
    if (!opt && strncmp(name_buf, "no-", 3) == 0) {
        s_opt_t *base = s_find(self, name_buf + 3);
        if (base && base->type == IPL_OPT_BOOL && base->kind == S_USER) {
            if (eq) {
                s_err(err, errlen, "flag %s: --%s takes no value (use --%s=%s)", arg, name_buf,
                      base->name, "false");
                return IPL_E_INVAL;
            }
            *flag = (s_flag_t){.opt = base, .negated = true, .consumed = 1};
            return IPL_OK;
        }
    }
    if (!opt) {
        char what[160];
        snprintf(what, sizeof what, "unknown flag --%s", name_buf);
        s_unknown(self, what, name_buf, true, err, errlen);
        return IPL_E_INVAL;
    }
    flag->opt = opt;
    if (eq) {
        flag->value = eq + 1;
    } else if (opt->type != IPL_OPT_BOOL) {
        if (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0) {
            s_err(err, errlen, "flag --%s: missing value (%s)", opt->name, s_type_name(opt->type));
            return IPL_E_INVAL;
        }
        flag->value = argv[i + 1];
        flag->consumed = 2;
    }
    return IPL_OK;
}

// --- YAML -----------------------------------------------------------------------------------

static int s_yaml_error(const char *path, const yaml_parser_t *parser, char *err, size_t errlen)
{
    const char *problem = parser->problem ? parser->problem : "invalid YAML";
    if (parser->error == YAML_READER_ERROR) {
        s_err(err, errlen, "%s: YAML error at byte %lu: %s", path,
              (unsigned long)parser->problem_offset, problem);
        return IPL_E_INVAL;
    }
    const yaml_mark_t *mark = &parser->problem_mark;
    if (parser->context)
        s_err(err, errlen, "%s:%lu:%lu: YAML syntax error: %s %s (started at %lu:%lu)", path,
              (unsigned long)mark->line + 1, (unsigned long)mark->column + 1, problem,
              parser->context, (unsigned long)parser->context_mark.line + 1,
              (unsigned long)parser->context_mark.column + 1);
    else
        s_err(err, errlen, "%s:%lu:%lu: YAML syntax error: %s", path, (unsigned long)mark->line + 1,
              (unsigned long)mark->column + 1, problem);
    return IPL_E_INVAL;
}

static bool s_yaml_is_null(const yaml_event_t *event)
{
    const char *v = (const char *)event->data.scalar.value;
    return event->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
           (v[0] == '\0' || strcmp(v, "~") == 0 || strcasecmp(v, "null") == 0);
}

static const char *s_node_name(yaml_event_type_t type)
{
    switch (type) {
    case YAML_SEQUENCE_START_EVENT:
        return "a list";
    case YAML_MAPPING_START_EVENT:
        return "a mapping";
    case YAML_ALIAS_EVENT:
        return "an alias";
    default:
        return "a scalar";
    }
}

// The file's parser state: before the top-level mapping, expecting a key, expecting the value
// of `opt`, after the mapping.
typedef enum { S_BEFORE, S_KEY, S_VALUE, S_AFTER } s_yaml_state_t;

// Handles one event of the top-level mapping; returns 0 or a negative code with err set.
static int s_yaml_event(ipl_config_t *self, const char *path, const yaml_event_t *event,
                        s_yaml_state_t *state, s_opt_t **opt, char *err, size_t errlen)
{
    char where[600];
    unsigned long line = (unsigned long)event->start_mark.line + 1;
    unsigned long col = (unsigned long)event->start_mark.column + 1;
    snprintf(where, sizeof where, "%s:%lu:%lu", path, line, col);
    switch (event->type) {
    case YAML_MAPPING_START_EVENT:
        if (*state == S_BEFORE) {
            *state = S_KEY;
            return IPL_OK;
        }
        __attribute__((fallthrough)); // a mapping where a key or a value belongs
    case YAML_SEQUENCE_START_EVENT:
    case YAML_ALIAS_EVENT:
        if (*state == S_VALUE)
            s_err(err, errlen, "%s: %s: expected %s, got %s", where, (*opt)->name,
                  s_type_name((*opt)->type), s_node_name(event->type));
        else if (*state == S_KEY)
            s_err(err, errlen, "%s: expected an option name, got %s", where,
                  s_node_name(event->type));
        else
            s_err(err, errlen, "%s: expected a mapping of option: value, got %s", where,
                  s_node_name(event->type));
        return *state == S_VALUE ? IPL_E_TYPE : IPL_E_INVAL;
    case YAML_MAPPING_END_EVENT:
        *state = S_AFTER;
        return IPL_OK;
    case YAML_SCALAR_EVENT:
        break;
    default:
        return IPL_OK;
    }

    const char *text = (const char *)event->data.scalar.value;
    if (*state == S_BEFORE) {
        if (s_yaml_is_null(event)) {
            *state = S_AFTER; // an empty document: nothing to set
            return IPL_OK;
        }
        s_err(err, errlen, "%s: expected a mapping of option: value, got a scalar", where);
        return IPL_E_INVAL;
    }
    if (*state == S_KEY) {
        char key[128];
        snprintf(key, sizeof key, "%s", text);
        for (char *p = key; *p; p++)
            *p = *p == '_' ? '-' : *p;
        *opt = s_find(self, key);
        if (*opt && (*opt)->kind != S_USER) {
            s_err(err, errlen, "%s: --%s cannot be set in the config file", where, key);
            return IPL_E_INVAL;
        }
        if (!*opt) {
            char what[800];
            snprintf(what, sizeof what, "%s: unknown key \"%s\"", where, text);
            s_unknown(self, what, key, false, err, errlen);
            return IPL_E_INVAL;
        }
        if ((*opt)->file_line) {
            s_err(err, errlen, "%s: duplicate key \"%s\" (first set on line %lu)", where, text,
                  (*opt)->file_line);
            return IPL_E_INVAL;
        }
        (*opt)->file_line = line;
        *state = S_VALUE;
        return IPL_OK;
    }
    // S_VALUE
    *state = S_KEY;
    snprintf(where + strlen(where), sizeof where - strlen(where), ": %s", (*opt)->name);
    if (s_yaml_is_null(event)) {
        s_err(err, errlen, "%s: missing value (expected %s)", where, s_type_name((*opt)->type));
        return IPL_E_INVAL;
    }
    return s_set(*opt, text, "file", where, err, errlen);
}

// Applies the flat mapping in `path` (one document; keys may use '_' for '-').
static int s_load_file(ipl_config_t *self, const char *path, char *err, size_t errlen)
{
    FILE *file = fopen(path, "rb");
    if (!file) {
        s_err(err, errlen, "--config %s: cannot open: %s", path, strerror(errno));
        return IPL_E_IO;
    }
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        fclose(file);
        s_err(err, errlen, "--config %s: out of memory", path);
        return IPL_E_NOMEM;
    }
    yaml_parser_set_input_file(&parser, file);

    s_yaml_state_t state = S_BEFORE;
    s_opt_t *opt = NULL;
    int documents = 0;
    int rc = IPL_OK;
    bool done = false;
    while (!done && rc == IPL_OK) {
        yaml_event_t event;
        if (!yaml_parser_parse(&parser, &event)) {
            rc = s_yaml_error(path, &parser, err, errlen);
            break;
        }
        if (event.type == YAML_STREAM_END_EVENT) {
            done = true;
        } else if (event.type == YAML_DOCUMENT_START_EVENT && ++documents > 1) {
            s_err(err, errlen,
                  "%s:%lu:%lu: a second YAML document (the config file holds one "
                  "mapping of option: value)",
                  path, (unsigned long)event.start_mark.line + 1,
                  (unsigned long)event.start_mark.column + 1);
            rc = IPL_E_INVAL;
        } else {
            rc = s_yaml_event(self, path, &event, &state, &opt, err, errlen);
        }
        yaml_event_delete(&event);
    }
    yaml_parser_delete(&parser);
    fclose(file);
    return rc;
}

// --- environment ----------------------------------------------------------------------------

void ipl_config_env_prefix(ipl_config_t *self, const char *prefix)
{
    if (!self || !prefix || strlen(prefix) >= sizeof self->env_prefix) abort();
    snprintf(self->env_prefix, sizeof self->env_prefix, "%s", prefix);
}

static void s_env_name(const ipl_config_t *self, const char *name, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s%s", self->env_prefix, name);
    (void)n;
    for (char *p = buf + strlen(self->env_prefix); *p; p++)
        *p = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
}

static int s_load_env(ipl_config_t *self, char *err, size_t errlen)
{
    for (size_t i = 0; i < self->nopts; i++) {
        s_opt_t *opt = &self->opts[i];
        if (opt->kind != S_USER) continue;
        char env[160];
        s_env_name(self, opt->name, env, sizeof env);
        const char *text = getenv(env);
        if (!text) continue;
        char where[200];
        snprintf(where, sizeof where, "env %s", env);
        int rc = s_set(opt, text, "env", where, err, errlen);
        if (rc != IPL_OK) return rc;
    }
    return IPL_OK;
}

// --- parse ----------------------------------------------------------------------------------

void ipl_config_range(ipl_config_t *self, const char *name, double min, double max)
{
    s_opt_t *opt = self && name ? s_find(self, name) : NULL;
    if (!opt || (opt->type != IPL_OPT_INT && opt->type != IPL_OPT_DOUBLE) || !(min <= max))
        abort(); // programmer error: no such numeric option, or an empty range
    opt->ranged = true;
    opt->min = min;
    opt->max = max;
}

// Checks every ranged option's effective value; the error names where the value came from.
static int s_check_ranges(const ipl_config_t *self, char *err, size_t errlen)
{
    for (size_t i = 0; i < self->nopts; i++) {
        const s_opt_t *opt = &self->opts[i];
        if (!opt->ranged) continue;
        double v = opt->type == IPL_OPT_INT ? (double)*(const int64_t *)opt->target
                                            : *(const double *)opt->target;
        if (v >= opt->min && v <= opt->max) continue;
        char where[192], env[128];
        if (!strcmp(opt->source, "env")) {
            s_env_name(self, opt->name, env, sizeof env);
            snprintf(where, sizeof where, "env %s", env);
        } else if (!strcmp(opt->source, "file")) {
            snprintf(where, sizeof where, "%s:%lu: %s", self->config_path, opt->file_line,
                     opt->name);
        } else {
            snprintf(where, sizeof where, "%s --%s", opt->source, opt->name);
        }
        s_err(err, errlen, "%s: %.15g is out of range (%.15g..%.15g)", where, v, opt->min, opt->max);
        return IPL_E_RANGE;
    }
    return IPL_OK;
}

int ipl_config_parse(ipl_config_t *self, int argc, char **argv, char *err, size_t errlen)
{
    s_err(err, errlen, "%s", "");
    char name[128];
    char config_env[64];
    snprintf(config_env, sizeof config_env, "%sCONFIG", self->env_prefix);
    const char *config_path = getenv(config_env);
    const char *config_source = "env";

    // Pass 1: syntax, values, --help/--version/--config. Nothing is stored yet.
    for (int i = 1; i < argc;) {
        s_flag_t flag;
        int rc = s_resolve_flag(self, argc, argv, i, &flag, name, sizeof name, err, errlen);
        if (rc != IPL_OK) return rc;
        if (flag.value) {
            s_value_t value;
            rc = s_parse_value(flag.opt->type, flag.value, &value);
            if (rc != IPL_OK) {
                char where[160];
                snprintf(where, sizeof where, "flag --%s", flag.opt->name);
                return s_set(flag.opt, flag.value, "flag", where, err, errlen); // formats err
            }
        }
        s_value_t on = {.b = !flag.negated};
        if (flag.value && flag.opt->type == IPL_OPT_BOOL)
            s_parse_value(IPL_OPT_BOOL, flag.value, &on);
        if (flag.opt->kind == S_HELP && on.b) {
            ipl_config_print_help(self, stdout);
            return 1;
        }
        if (flag.opt->kind == S_VERSION && on.b) {
            printf("%s %s\n", self->program, IPL_VERSION);
            return 1;
        }
        if (flag.opt->kind == S_CONFIG) {
            config_path = flag.value;
            config_source = "flag";
        }
        i += flag.consumed;
    }

    // Defaults, file, environment, then pass 2: the flags.
    for (size_t i = 0; i < self->nopts; i++) {
        self->opts[i].file_line = 0;
        s_store(&self->opts[i], self->opts[i].defval, "default");
    }
    if (config_path) {
        s_store(s_find(self, "config"), config_path, config_source);
        int rc = s_load_file(self, self->config_path, err, errlen);
        if (rc != IPL_OK) return rc;
    }
    int rc = s_load_env(self, err, errlen);
    if (rc != IPL_OK) return rc;
    for (int i = 1; i < argc;) {
        s_flag_t flag;
        rc = s_resolve_flag(self, argc, argv, i, &flag, name, sizeof name, err, errlen);
        if (rc != IPL_OK) return rc; // not reached: pass 1 checked the same argv
        if (flag.opt->kind == S_USER) {
            if (flag.value)
                s_store(flag.opt, flag.value, "flag");
            else
                s_store(flag.opt, flag.negated ? "false" : "true", "flag");
        }
        i += flag.consumed;
    }
    return s_check_ranges(self, err, errlen);
}

const char *ipl_config_source(const ipl_config_t *self, const char *name)
{
    const s_opt_t *opt = self && name ? s_find(self, name) : NULL;
    return opt ? opt->source : NULL;
}

void ipl_config_print_help(const ipl_config_t *self, void *out)
{
    FILE *f = out ? (FILE *)out : stdout;
    fprintf(f, "Usage: %s [OPTIONS]\n", self->program);
    if (self->summary[0]) fprintf(f, "%s\n", self->summary);
    fprintf(f, "\nOptions (flag > environment > --config file > default):\n");
    // User options first, in declaration order, then the built-ins.
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < self->nopts; i++) {
            const s_opt_t *opt = &self->opts[i];
            if ((pass == 0) != (opt->kind == S_USER)) continue;
            char left[128];
            static const char *metavar[] = {"TEXT", "INT", "NUM", ""};
            if (opt->type == IPL_OPT_BOOL)
                snprintf(left, sizeof left, opt->kind == S_USER ? "--[no-]%s" : "--%s", opt->name);
            else
                snprintf(left, sizeof left, "--%s %s", opt->name,
                         opt->kind == S_CONFIG ? "FILE" : metavar[opt->type]);
            fprintf(f, "  %-30s %s", left, opt->help);
            if (opt->kind == S_USER) {
                char env[160];
                s_env_name(self, opt->name, env, sizeof env);
                if (opt->defval)
                    fprintf(f, " (default %s; env %s)", opt->defval[0] ? opt->defval : "\"\"", env);
                else
                    fprintf(f, " (env %s)", env);
            }
            fputc('\n', f);
        }
    }
}
