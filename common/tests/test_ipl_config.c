/*
 * Unit tests of ipl_config: flag syntaxes, precedence flag > env > file > default (with
 * ipl_config_source), the "did you mean" hints, YAML errors with file:line:column, wrong-typed
 * and out-of-range values from every source, --help/--version, and programmer errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ipl_config.h"
#include "ipl_error.h"

// One configuration with an option of each type, rebuilt for every test.
typedef struct {
    ipl_config_t *config;
    char *listen;
    char *admin_listen;
    char *model; // no default
    int64_t max_body_bytes;
    double ratio;
    bool verbose;
    char err[512];
    char path[64]; // a YAML file written by the test, removed in teardown
} s_fixture_t;

static const char *s_env_vars[] = {"INFERPLANE_LISTEN", "INFERPLANE_ADMIN_LISTEN",
                                   "INFERPLANE_MODEL",  "INFERPLANE_MAX_BODY_BYTES",
                                   "INFERPLANE_RATIO",  "INFERPLANE_VERBOSE",
                                   "INFERPLANE_CONFIG", "INFERPLANE_UNRELATED",
                                   "INFERPLANE_DECIDER_LISTEN", "INFERPLANE_DECIDER_CONFIG",
                                   "INFERPLANE_DECIDER_MAX_BODY_BYTES"};

static int s_setup(void **state)
{
    for (size_t i = 0; i < sizeof s_env_vars / sizeof s_env_vars[0]; i++)
        unsetenv(s_env_vars[i]);
    s_fixture_t *f = calloc(1, sizeof *f);
    f->config = ipl_config_new("inferplane-test", "Tests the configuration class.");
    ipl_config_add(f->config, "listen", IPL_OPT_STR, &f->listen, "127.0.0.1:8080", "API address");
    ipl_config_add(f->config, "admin-listen", IPL_OPT_STR, &f->admin_listen, "127.0.0.1:9106",
                   "admin HTTP address");
    ipl_config_add(f->config, "model", IPL_OPT_STR, &f->model, NULL, "model name");
    ipl_config_add(f->config, "max-body-bytes", IPL_OPT_INT, &f->max_body_bytes, "8388608",
                   "largest request body");
    ipl_config_add(f->config, "ratio", IPL_OPT_DOUBLE, &f->ratio, "0.5", "a ratio");
    ipl_config_add(f->config, "verbose", IPL_OPT_BOOL, &f->verbose, "false", "more output");
    *state = f;
    return 0;
}

static int s_teardown(void **state)
{
    s_fixture_t *f = *state;
    ipl_config_destroy(&f->config);
    assert_null(f->config);
    assert_null(f->listen); // destroy leaves no dangling pointer behind
    if (f->path[0]) unlink(f->path);
    for (size_t i = 0; i < sizeof s_env_vars / sizeof s_env_vars[0]; i++)
        unsetenv(s_env_vars[i]);
    free(f);
    return 0;
}

// Parses a NULL-terminated argument list (argv[0] added).
#define S_PARSE(f, ...) s_parse((f), (const char *[]){"inferplane-test", __VA_ARGS__, NULL})
#define S_PARSE0(f)     s_parse((f), (const char *[]){"inferplane-test", NULL})
static int s_parse(s_fixture_t *f, const char **args)
{
    int argc = 0;
    while (args[argc])
        argc++;
    return ipl_config_parse(f->config, argc, (char **)args, f->err, sizeof f->err);
}

static const char *s_write_yaml(s_fixture_t *f, const char *text)
{
    snprintf(f->path, sizeof f->path, "/tmp/ipl_config_test_XXXXXX");
    int fd = mkstemp(f->path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return f->path;
}

// f->err with the temporary file's path replaced by "FILE", for exact comparisons.
static const char *s_err_for_file(s_fixture_t *f)
{
    static char out[600];
    const char *at = strstr(f->err, f->path);
    assert_non_null(at);
    snprintf(out, sizeof out, "%.*sFILE%s", (int)(at - f->err), f->err, at + strlen(f->path));
    return out;
}

static void test_defaults(void **state)
{
    s_fixture_t *f = *state;
    assert_int_equal(S_PARSE0(f), 0);
    assert_string_equal(f->err, "");
    assert_string_equal(f->listen, "127.0.0.1:8080");
    assert_null(f->model);
    assert_int_equal(f->max_body_bytes, 8388608);
    assert_true(f->ratio == 0.5);
    assert_false(f->verbose);
    assert_string_equal(ipl_config_source(f->config, "listen"), "default");
    assert_string_equal(ipl_config_source(f->config, "config"), "default");
    assert_null(ipl_config_source(f->config, "nope"));
}

static void test_flag_forms(void **state)
{
    s_fixture_t *f = *state;
    assert_int_equal(S_PARSE(f, "--listen", "0.0.0.0:1", "--max-body-bytes=-5", "--ratio", "1e-3",
                             "--model=", "--verbose"),
                     0);
    assert_string_equal(f->listen, "0.0.0.0:1");
    assert_int_equal(f->max_body_bytes, -5);
    assert_true(f->ratio == 1e-3);
    assert_string_equal(f->model, "");
    assert_true(f->verbose);
    assert_string_equal(ipl_config_source(f->config, "verbose"), "flag");
    assert_string_equal(ipl_config_source(f->config, "admin-listen"), "default");

    // Bool forms; the last occurrence wins.
    assert_int_equal(S_PARSE(f, "--verbose", "--no-verbose"), 0);
    assert_false(f->verbose);
    assert_int_equal(S_PARSE(f, "--verbose=false", "--verbose=true"), 0);
    assert_true(f->verbose);
    assert_int_equal(S_PARSE(f, "--verbose=off"), 0);
    assert_false(f->verbose);
    // A repeated parse starts again from the defaults.
    assert_int_equal(S_PARSE0(f), 0);
    assert_string_equal(f->listen, "127.0.0.1:8080");
    assert_null(f->model);
}

static void test_precedence(void **state)
{
    s_fixture_t *f = *state;
    const char *path = s_write_yaml(f, "listen: file:1\n"
                                       "admin_listen: file:2\n"
                                       "model: file-model\n"
                                       "max-body-bytes: 100\n");
    setenv("INFERPLANE_LISTEN", "env:1", 1);
    setenv("INFERPLANE_ADMIN_LISTEN", "env:2", 1);
    setenv("INFERPLANE_UNRELATED", "ignored", 1);
    assert_int_equal(S_PARSE(f, "--config", path, "--listen", "flag:1"), 0);
    assert_string_equal(f->listen, "flag:1");
    assert_string_equal(ipl_config_source(f->config, "listen"), "flag");
    assert_string_equal(f->admin_listen, "env:2");
    assert_string_equal(ipl_config_source(f->config, "admin-listen"), "env");
    assert_string_equal(f->model, "file-model");
    assert_string_equal(ipl_config_source(f->config, "model"), "file");
    assert_int_equal(f->max_body_bytes, 100);
    assert_true(f->ratio == 0.5);
    assert_string_equal(ipl_config_source(f->config, "ratio"), "default");
    assert_string_equal(ipl_config_source(f->config, "config"), "flag");

    // INFERPLANE_CONFIG names the file when --config is absent.
    unsetenv("INFERPLANE_LISTEN");
    setenv("INFERPLANE_CONFIG", path, 1);
    assert_int_equal(S_PARSE0(f), 0);
    assert_string_equal(f->listen, "file:1");
    assert_string_equal(ipl_config_source(f->config, "config"), "env");
    // ... and --config beats it.
    assert_int_equal(S_PARSE(f, "--config=/nonexistent/x.yaml"), IPL_E_IO);
    assert_string_equal(f->err, "--config /nonexistent/x.yaml: cannot open: No such file or "
                                "directory");
}

// A second set of options in one process reads its own environment, file variable included.
static void test_env_prefix(void **state)
{
    s_fixture_t *f = *state;
    const char *path = s_write_yaml(f, "model: prefixed-file\n");
    setenv("INFERPLANE_LISTEN", "gateway:1", 1);
    setenv("INFERPLANE_CONFIG", "/nonexistent/gateway.yaml", 1);
    setenv("INFERPLANE_DECIDER_LISTEN", "decider:1", 1);
    setenv("INFERPLANE_DECIDER_CONFIG", path, 1);
    ipl_config_env_prefix(f->config, "INFERPLANE_DECIDER_");
    assert_int_equal(S_PARSE0(f), 0);
    assert_string_equal(f->listen, "decider:1");
    assert_string_equal(f->model, "prefixed-file");
    assert_string_equal(f->admin_listen, "127.0.0.1:9106"); // INFERPLANE_ADMIN_LISTEN unset
    setenv("INFERPLANE_DECIDER_MAX_BODY_BYTES", "lots", 1);
    assert_int_equal(S_PARSE0(f), IPL_E_TYPE);
    assert_non_null(strstr(f->err, "env INFERPLANE_DECIDER_MAX_BODY_BYTES"));
    FILE *out = tmpfile();
    ipl_config_print_help(f->config, out);
    char help[4096] = "";
    rewind(out);
    size_t n = fread(help, 1, sizeof help - 1, out);
    fclose(out);
    help[n] = '\0';
    assert_non_null(strstr(help, "env INFERPLANE_DECIDER_LISTEN"));
}

static void test_ranges(void **state)
{
    s_fixture_t *f = *state;
    ipl_config_range(f->config, "max-body-bytes", 1, 10000000);
    ipl_config_range(f->config, "ratio", 0, 1);
    assert_int_equal(S_PARSE(f, "--max-body-bytes", "10000000", "--ratio", "1"), 0); // inclusive
    assert_int_equal(S_PARSE(f, "--max-body-bytes", "10000001"), IPL_E_RANGE);
    assert_string_equal(f->err, "flag --max-body-bytes: 10000001 is out of range (1..10000000)");
    assert_int_equal(S_PARSE(f, "--ratio=1.5"), IPL_E_RANGE);
    assert_string_equal(f->err, "flag --ratio: 1.5 is out of range (0..1)");
    setenv("INFERPLANE_MAX_BODY_BYTES", "0", 1);
    assert_int_equal(S_PARSE0(f), IPL_E_RANGE);
    assert_string_equal(f->err, "env INFERPLANE_MAX_BODY_BYTES: 0 is out of range (1..10000000)");
    unsetenv("INFERPLANE_MAX_BODY_BYTES");
    const char *path = s_write_yaml(f, "listen: x\nmax-body-bytes: 50000000\n");
    assert_int_equal(S_PARSE(f, "--config", path), IPL_E_RANGE);
    char want[512];
    snprintf(want, sizeof want, "%s:2: max-body-bytes: 50000000 is out of range (1..10000000)",
             path);
    assert_string_equal(f->err, want);
}

static void test_env_values(void **state)
{
    s_fixture_t *f = *state;
    setenv("INFERPLANE_MAX_BODY_BYTES", "1048576", 1);
    setenv("INFERPLANE_VERBOSE", "true", 1);
    setenv("INFERPLANE_RATIO", "2.5", 1);
    assert_int_equal(S_PARSE0(f), 0);
    assert_int_equal(f->max_body_bytes, 1048576);
    assert_true(f->verbose);
    assert_true(f->ratio == 2.5);
    assert_int_equal(S_PARSE(f, "--no-verbose"), 0);
    assert_false(f->verbose);

    setenv("INFERPLANE_MAX_BODY_BYTES", "1MB", 1);
    assert_int_equal(S_PARSE0(f), IPL_E_TYPE);
    assert_string_equal(f->err, "env INFERPLANE_MAX_BODY_BYTES: expected an integer, got \"1MB\"");
    setenv("INFERPLANE_MAX_BODY_BYTES", "1", 1);
    setenv("INFERPLANE_VERBOSE", "maybe", 1);
    assert_int_equal(S_PARSE0(f), IPL_E_TYPE);
    assert_string_equal(f->err, "env INFERPLANE_VERBOSE: expected true or false, got \"maybe\"");
}

static void test_unknown_flag_hints(void **state)
{
    s_fixture_t *f = *state;
    assert_int_equal(S_PARSE(f, "--admin-listne", "x"), IPL_E_INVAL);
    assert_string_equal(f->err, "unknown flag --admin-listne (did you mean --admin-listen?)");
    assert_int_equal(S_PARSE(f, "--max_body_bytes=1"), IPL_E_INVAL);
    assert_string_equal(f->err, "unknown flag --max_body_bytes (did you mean --max-body-bytes?)");
    assert_int_equal(S_PARSE(f, "--max-body", "1"), IPL_E_INVAL);
    assert_string_equal(f->err, "unknown flag --max-body (did you mean --max-body-bytes?)");
    assert_int_equal(S_PARSE(f, "--no-verbos"), IPL_E_INVAL);
    assert_string_equal(f->err, "unknown flag --no-verbos (did you mean --no-verbose?)");
    assert_int_equal(S_PARSE(f, "--hepl"), IPL_E_INVAL);
    assert_string_equal(f->err, "unknown flag --hepl (did you mean --help?)");
    // --no- only exists for bools.
    assert_int_equal(S_PARSE(f, "--no-listen"), IPL_E_INVAL);
    assert_string_equal(f->err, "unknown flag --no-listen (did you mean --listen?)");
    assert_int_equal(S_PARSE(f, "--completely-different"), IPL_E_INVAL);
    assert_string_equal(f->err, "unknown flag --completely-different (see --help for the options)");
    // The error wins over a later --help, and nothing runs past it.
    assert_int_equal(S_PARSE(f, "--bogus", "--help"), IPL_E_INVAL);
}

static void test_bad_flag_values(void **state)
{
    s_fixture_t *f = *state;
    assert_int_equal(S_PARSE(f, "--max-body-bytes", "12abc"), IPL_E_TYPE);
    assert_string_equal(f->err, "flag --max-body-bytes: expected an integer, got \"12abc\"");
    assert_int_equal(S_PARSE(f, "--max-body-bytes="), IPL_E_TYPE);
    assert_int_equal(S_PARSE(f, "--max-body-bytes", "99999999999999999999"), IPL_E_RANGE);
    assert_string_equal(f->err, "flag --max-body-bytes: \"99999999999999999999\" is out of range");
    assert_int_equal(S_PARSE(f, "--ratio", "fast"), IPL_E_TYPE);
    assert_string_equal(f->err, "flag --ratio: expected a number, got \"fast\"");
    assert_int_equal(S_PARSE(f, "--ratio=nan"), IPL_E_TYPE);
    assert_int_equal(S_PARSE(f, "--verbose=2"), IPL_E_TYPE);
    assert_string_equal(f->err, "flag --verbose: expected true or false, got \"2\"");
    assert_int_equal(S_PARSE(f, "--no-verbose=true"), IPL_E_INVAL);
    assert_int_equal(S_PARSE(f, "--listen"), IPL_E_INVAL);
    assert_string_equal(f->err, "flag --listen: missing value (a string)");
    assert_int_equal(S_PARSE(f, "--listen", "--verbose"), IPL_E_INVAL);
    assert_int_equal(S_PARSE(f, "extra"), IPL_E_INVAL);
    assert_string_equal(f->err,
                        "unexpected argument \"extra\" (options start with --; see --help)");
    assert_int_equal(S_PARSE(f, "-x"), IPL_E_INVAL);
    assert_int_equal(S_PARSE(f, "--"), IPL_E_INVAL);
    // A failed parse stored nothing from the flags.
    assert_string_equal(f->listen, "127.0.0.1:8080");
}

static void test_yaml_unknown_key(void **state)
{
    s_fixture_t *f = *state;
    const char *path = s_write_yaml(f, "listen: a:1\n"
                                       "admin_listne: b:2\n");
    assert_int_equal(S_PARSE(f, "--config", path), IPL_E_INVAL);
    assert_string_equal(s_err_for_file(f),
                        "FILE:2:1: unknown key \"admin_listne\" (did you mean --admin-listen?)");
}

static void test_yaml_syntax_error(void **state)
{
    s_fixture_t *f = *state;
    const char *path = s_write_yaml(f, "listen: a:1\n"
                                       "model: x\n"
                                       "  verbose: true\n");
    assert_int_equal(S_PARSE(f, "--config", path), IPL_E_INVAL);
    assert_string_equal(s_err_for_file(f), "FILE:3:10: YAML syntax error: mapping values are "
                                           "not allowed in this context");
}

static void test_yaml_unterminated_quote(void **state)
{
    s_fixture_t *f = *state;
    const char *path = s_write_yaml(f, "model: x\n"
                                       "listen: \"abc\n");
    assert_int_equal(S_PARSE(f, "--config", path), IPL_E_INVAL);
    assert_string_equal(s_err_for_file(f),
                        "FILE:3:1: YAML syntax error: found unexpected end of stream while "
                        "scanning a quoted scalar (started at 2:9)");
}

static void test_yaml_wrong_types(void **state)
{
    s_fixture_t *f = *state;
    s_write_yaml(f, "listen: a:1\n"
                    "max-body-bytes: lots\n");
    assert_int_equal(S_PARSE(f, "--config", f->path), IPL_E_TYPE);
    assert_string_equal(s_err_for_file(f),
                        "FILE:2:17: max-body-bytes: expected an integer, got \"lots\"");
    unlink(f->path);

    s_write_yaml(f, "ratio: [1, 2]\n");
    assert_int_equal(S_PARSE(f, "--config", f->path), IPL_E_TYPE);
    assert_string_equal(s_err_for_file(f), "FILE:1:8: ratio: expected a number, got a list");
    unlink(f->path);

    s_write_yaml(f, "model:\n  name: x\n");
    assert_int_equal(S_PARSE(f, "--config", f->path), IPL_E_TYPE);
    assert_string_equal(s_err_for_file(f), "FILE:2:3: model: expected a string, got a mapping");
    unlink(f->path);

    s_write_yaml(f, "verbose:\n");
    assert_int_equal(S_PARSE(f, "--config", f->path), IPL_E_INVAL);
    assert_string_equal(s_err_for_file(f), "FILE:1:9: verbose: missing value (expected true or "
                                           "false)");
    unlink(f->path);

    // Quoted numbers and YAML-style booleans are fine; a number is fine as a string.
    s_write_yaml(f, "max_body_bytes: \"42\"\nverbose: yes\nmodel: 7\n");
    assert_int_equal(S_PARSE(f, "--config", f->path), 0);
    assert_int_equal(f->max_body_bytes, 42);
    assert_true(f->verbose);
    assert_string_equal(f->model, "7");
}

static void test_yaml_structure_errors(void **state)
{
    s_fixture_t *f = *state;
    static const struct {
        const char *yaml;
        const char *err;
    } cases[] = {
        {"- a\n- b\n", "FILE:1:1: expected a mapping of option: value, got a list"},
        {"just text\n", "FILE:1:1: expected a mapping of option: value, got a scalar"},
        {"listen: a\n---\nlisten: b\n",
         "FILE:2:1: a second YAML document (the config file holds one mapping of option: value)"},
        {"listen: a\nlisten: b\n", "FILE:2:1: duplicate key \"listen\" (first set on line 1)"},
        {"config: other.yaml\n", "FILE:1:1: --config cannot be set in the config file"},
        {"help: true\n", "FILE:1:1: --help cannot be set in the config file"},
        {"? [a, b]\n: 1\n", "FILE:1:3: expected an option name, got a list"},
        {"zzzzzz: 1\n", "FILE:1:1: unknown key \"zzzzzz\" (see --help for the options)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s_write_yaml(f, cases[i].yaml);
        assert_true(S_PARSE(f, "--config", f->path) < 0);
        assert_string_equal(s_err_for_file(f), cases[i].err);
        unlink(f->path);
    }
    // Empty files and comment-only files configure nothing.
    s_write_yaml(f, "# nothing here\n");
    assert_int_equal(S_PARSE(f, "--config", f->path), 0);
    unlink(f->path);
    s_write_yaml(f, "");
    assert_int_equal(S_PARSE(f, "--config", f->path), 0);
    assert_string_equal(f->listen, "127.0.0.1:8080");
}

// Runs a parse with stdout sent to a temporary file; returns what was printed (caller frees).
static char *s_capture_stdout(s_fixture_t *f, const char *flag, int *rc)
{
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    FILE *tmp = tmpfile();
    dup2(fileno(tmp), STDOUT_FILENO);
    *rc = S_PARSE(f, flag);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    fseek(tmp, 0, SEEK_END);
    long size = ftell(tmp);
    char *text = calloc(1, (size_t)size + 1);
    rewind(tmp);
    assert_int_equal(fread(text, 1, (size_t)size, tmp), (size_t)size);
    fclose(tmp);
    return text;
}

static void test_help_and_version(void **state)
{
    s_fixture_t *f = *state;
    int rc;
    char *text = s_capture_stdout(f, "--help", &rc);
    assert_int_equal(rc, 1);
    assert_true(strncmp(text,
                        "Usage: inferplane-test [OPTIONS]\nTests the configuration "
                        "class.\n",
                        60) == 0);
    assert_non_null(strstr(text, "  --max-body-bytes INT "));
    assert_non_null(strstr(text, "largest request body (default 8388608; env "
                                 "INFERPLANE_MAX_BODY_BYTES)\n"));
    assert_non_null(strstr(text, "  --[no-]verbose "));
    assert_non_null(strstr(text, "  --model TEXT "));
    assert_non_null(strstr(text, "model name (env INFERPLANE_MODEL)\n"));
    assert_non_null(strstr(text, "  --config FILE "));
    assert_non_null(strstr(text, "  --version "));
    free(text);

    text = s_capture_stdout(f, "-h", &rc);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(text, "Usage: "));
    free(text);

    text = s_capture_stdout(f, "--version", &rc);
    assert_int_equal(rc, 1);
    // "inferplane-test <IPL_VERSION>\n": one line, a non-empty version.
    assert_true(strncmp(text, "inferplane-test ", 16) == 0);
    assert_true(strlen(text) > 17);
    assert_non_null(strchr(text, '\n'));
    assert_ptr_equal(strchr(text, '\n') + 1, text + strlen(text));
    free(text);

    // print_help writes to the stream it is given.
    FILE *tmp = tmpfile();
    ipl_config_print_help(f->config, tmp);
    assert_true(ftell(tmp) > 100);
    fclose(tmp);
}

static void test_duplicate_option_aborts(void **state)
{
    s_fixture_t *f = *state;
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        fclose(stderr); // the abort message is expected
        int64_t other;
        ipl_config_add(f->config, "max-body-bytes", IPL_OPT_INT, &other, "1", "again");
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);

    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        fclose(stderr);
        int64_t other;
        ipl_config_add(f->config, "bad-default", IPL_OPT_INT, &other, "ten", "bad");
        _exit(0);
    }
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, s_setup, s_teardown)
    const struct CMUnitTest tests[] = {
        T(test_defaults),
        T(test_flag_forms),
        T(test_precedence),
        T(test_env_prefix),
        T(test_ranges),
        T(test_env_values),
        T(test_unknown_flag_hints),
        T(test_bad_flag_values),
        T(test_yaml_unknown_key),
        T(test_yaml_syntax_error),
        T(test_yaml_unterminated_quote),
        T(test_yaml_wrong_types),
        T(test_yaml_structure_errors),
        T(test_help_and_version),
        T(test_duplicate_option_aborts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
