/*
 * Unit tests of sim_options: the defaults give vLLM's engine and API configs, a bad value is
 * refused with the line a person reads, the --sim-* and --num-gpu-blocks-override overrides
 * change the profile (and cap max-model-len), and --lora-modules, --served-model-name and
 * --api-key take several values as vLLM; the provider stand-in is off unless asked for.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_config.h"
#include "sim_options.h"

typedef struct {
    ipl_config_t *config;
    sim_options_t o;
    char *errors; /* what sim_options_check wrote */
    size_t nerrors;
} s_run_t;

/* Declares, parses `argv` (NULL-terminated, without the program name) and checks. Returns
 * sim_options_check's result; the parse must succeed. */
static int s_run(s_run_t *r, const char *const *argv)
{
    char *args[32] = {"inferplane-sim"};
    int argc = 1;
    while (argv && argv[argc - 1])
        args[argc] = (char *)argv[argc - 1], argc++;
    r->config = ipl_config_new("inferplane-sim", "test");
    sim_options_add(&r->o, r->config);
    char err[512] = "";
    assert_int_equal(ipl_config_parse(r->config, argc, args, err, sizeof err), 0);
    FILE *f = open_memstream(&r->errors, &r->nerrors);
    assert_non_null(f);
    int rc = sim_options_check(&r->o, r->config, f);
    fclose(f);
    return rc;
}

static void s_done(s_run_t *r)
{
    sim_options_clear(&r->o);
    sim_options_clear(&r->o); /* idempotent */
    assert_null(r->o.loras);
    ipl_config_destroy(&r->config);
    free(r->errors);
}

static void test_defaults_are_vllms(void **state)
{
    (void)state;
    s_run_t r = {0};
    assert_int_equal(s_run(&r, NULL), 0);
    assert_string_equal(r.errors, "");
    assert_string_equal(r.o.host, "0.0.0.0");
    assert_int_equal(r.o.port, 8000);
    const sim_profile_t *p = sim_profile_find("l40s-27b-fp8");
    assert_non_null(p);
    sim_engine_config_t e;
    sim_options_engine_config(&r.o, &e);
    assert_int_equal(e.block_size, 16);
    assert_int_equal(e.num_gpu_blocks, p->num_gpu_blocks);
    assert_int_equal(e.max_num_seqs, 256);
    assert_int_equal(e.max_num_batched_tokens, 8192);
    assert_true(e.time_scale == 1.0);
    assert_true(e.profile.step_s == p->step_s);
    assert_string_equal(e.profile.name, "l40s-27b-fp8");
    assert_int_equal(e.hash_algo, SIM_HASH_SHA256);
    assert_string_equal(e.model_name, "sim-model");
    assert_null(e.kv_publish);
    assert_null(e.metrics);
    assert_false(r.o.kv_config.enabled);
    assert_int_equal(r.o.kv_opts.format, SIM_KV_FORMAT_MAP);
    assert_int_equal(r.o.kv_opts.replay_layout, 3);
    sim_api_config_t a;
    sim_options_api_config(&r.o, &a);
    uint32_t cap = p->num_gpu_blocks * 16;
    assert_int_equal(a.max_model_len, cap < 32768 ? cap : 32768);
    assert_string_equal(a.vllm_version, "0.26.0");
    assert_string_equal(a.model_name, "sim-model");
    assert_int_equal(a.nloras, 0);
    assert_false(a.prompt_tokens_details);
    assert_int_equal(a.nmodel_aliases, 0);
    assert_null(a.standin); /* make run: no key, no latency, no counting */
    s_done(&r);
}

static void test_bad_values_are_refused_with_their_message(void **state)
{
    (void)state;
    s_run_t r = {0};
    assert_int_equal(s_run(&r, (const char *[]){"--profile", "nope", NULL}), -1);
    assert_string_equal(r.errors, "inferplane-sim: --profile \"nope\" is unknown (known: "
                                  "l40s-27b-fp8, h100-8b)\n");
    s_done(&r);

    r = (s_run_t){0};
    assert_int_equal(s_run(&r, (const char *[]){"--kv-events-format", "maps", NULL}), -1);
    assert_string_equal(r.errors, "inferplane-sim: --kv-events-format \"maps\": use map, array "
                                  "or array-legacy\n");
    s_done(&r);

    r = (s_run_t){0};
    assert_int_equal(s_run(&r, (const char *[]){"--sim-step-s", "-1", NULL}), -1);
    assert_string_equal(r.errors, "inferplane-sim: --sim-step-s -1: must be >= 0 (seconds)\n");
    s_done(&r);

    /* Every problem of --lora-modules is a line of its own, as vLLM would list them. */
    r = (s_run_t){0};
    assert_int_equal(s_run(&r, (const char *[]){"--lora-modules", "=b", NULL}), -1);
    assert_string_equal(r.errors,
                        "inferplane-sim: --lora-modules: an adapter needs a name (1..4096 "
                        "bytes), as name=path\n"
                        "inferplane-sim: --lora-modules: \"=b\": use name=path\n"
                        "inferplane-sim: --lora-modules needs --enable-lora (as vLLM)\n");
    assert_int_equal(r.o.nloras, 0);
    s_done(&r);

    setenv("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", "yes", 1);
    r = (s_run_t){0};
    assert_int_equal(s_run(&r, NULL), -1);
    assert_non_null(strstr(r.errors, "VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=\"yes\" is not an "
                                     "integer"));
    s_done(&r);
    setenv("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", "0", 1);
    r = (s_run_t){0};
    assert_int_equal(s_run(&r, NULL), 0);
    assert_true(r.o.kv_opts.bytes_hashes);
    s_done(&r);
    unsetenv("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES");
}

static void test_overrides_change_the_profile(void **state)
{
    (void)state;
    const sim_profile_t *p = sim_profile_find("h100-8b");
    assert_non_null(p);
    s_run_t r = {0};
    assert_int_equal(s_run(&r, (const char *[]){"--profile", "h100-8b", "--sim-step-s", "0.5",
                                                "--num-gpu-blocks-override", "100",
                                                "--kv-events-format", "array", "--replay-layout",
                                                "2", "--served-model-name", "m", NULL}),
                     0);
    sim_engine_config_t e;
    sim_options_engine_config(&r.o, &e);
    assert_true(e.profile.step_s == 0.5);
    assert_true(e.profile.prefill_token_s == p->prefill_token_s); /* not given: the profile's */
    assert_int_equal(e.num_gpu_blocks, 100);
    assert_string_equal(e.model_name, "m");
    sim_api_config_t a;
    sim_options_api_config(&r.o, &a);
    assert_int_equal(a.max_model_len, 1600); /* capped to 100 blocks of 16 tokens */
    assert_string_equal(a.vllm_version, "0.25.0");
    s_done(&r);
}

static void test_lora_modules_take_several_values(void **state)
{
    (void)state;
    char *argv[] = {"inferplane-sim", "--lora-modules",
                    "a=/x",           "{\"name\":\"b\",\"path\":\"/y\"}",
                    "--enable-lora",  NULL};
    int nargc = 0;
    char *joined = NULL;
    char **args = sim_options_argv(5, argv, &nargc, &joined);
    assert_non_null(args);
    assert_int_equal(nargc, 4);
    assert_string_equal(joined, "a=/x\n{\"name\":\"b\",\"path\":\"/y\"}");
    assert_ptr_equal(args[2], joined);
    assert_string_equal(args[3], "--enable-lora");
    s_run_t r = {0};
    assert_int_equal(s_run(&r, (const char *const *)args + 1), 0);
    free(args);
    free(joined);
    sim_api_config_t a;
    sim_options_api_config(&r.o, &a);
    assert_int_equal(a.nloras, 2);
    assert_string_equal(a.loras[0].name, "a");
    assert_string_equal(a.loras[0].path, "/x");
    assert_string_equal(a.loras[1].name, "b");
    assert_string_equal(a.loras[1].path, "/y");
    s_done(&r);
}

static void test_served_names_and_keys_take_several_values(void **state)
{
    (void)state;
    char *argv[] = {"inferplane-sim",
                    "--served-model-name",
                    "remote-a",
                    "remote-b",
                    "--api-key",
                    "sk-1",
                    "sk-2",
                    "--lora-modules",
                    "l=/p",
                    "--enable-lora",
                    "--network-latency-ms",
                    "50",
                    "--network-jitter-ms",
                    "5",
                    "--accept-x-api-key",
                    NULL};
    int nargc = 0;
    char *joined = NULL;
    char **args = sim_options_argv(15, argv, &nargc, &joined);
    assert_non_null(args);
    assert_int_equal(nargc, 13);
    assert_string_equal(args[2], "remote-a\nremote-b");
    assert_string_equal(args[4], "sk-1\nsk-2");
    assert_string_equal(args[6], "l=/p");
    s_run_t r = {0};
    assert_int_equal(s_run(&r, (const char *const *)args + 1), 0);
    free(args);
    free(joined);
    sim_engine_config_t e;
    sim_options_engine_config(&r.o, &e);
    assert_string_equal(e.model_name, "remote-a"); /* metrics say the first, as vLLM */
    sim_api_config_t a;
    sim_options_api_config(&r.o, &a);
    assert_string_equal(a.model_name, "remote-a");
    assert_int_equal(a.nmodel_aliases, 1);
    assert_string_equal(a.model_aliases[0], "remote-b");
    assert_non_null(a.standin);
    assert_int_equal(a.standin->napi_keys, 2);
    assert_string_equal(a.standin->api_keys[1], "sk-2");
    assert_true(a.standin->accept_x_api_key);
    assert_int_equal(a.standin->latency_ms, 50);
    assert_int_equal(a.standin->jitter_ms, 5);
    assert_int_equal(a.standin->history, 100);
    assert_int_equal(a.nloras, 1);
    s_done(&r);
    assert_null(r.o.api_keys);
    assert_null(r.o.model_names);

    /* Latency alone turns the stand-in on, without a key; so does --stand-in. */
    r = (s_run_t){0};
    assert_int_equal(s_run(&r, (const char *[]){"--network-latency-ms", "20", NULL}), 0);
    sim_options_api_config(&r.o, &a);
    assert_non_null(a.standin);
    assert_int_equal(a.standin->napi_keys, 0);
    s_done(&r);
    r = (s_run_t){0};
    assert_int_equal(s_run(&r, (const char *[]){"--stand-in", "--stand-in-history", "5",
                                                "--stand-in-headers", "x-a,x-b", NULL}),
                     0);
    sim_options_api_config(&r.o, &a);
    assert_non_null(a.standin);
    assert_int_equal(a.standin->history, 5);
    assert_string_equal(a.standin->extra_headers, "x-a,x-b");
    s_done(&r);

    /* vLLM reads VLLM_API_KEY when --api-key is not given. */
    setenv("VLLM_API_KEY", "sk-env", 1);
    r = (s_run_t){0};
    assert_int_equal(s_run(&r, NULL), 0);
    sim_options_api_config(&r.o, &a);
    assert_non_null(a.standin);
    assert_int_equal(a.standin->napi_keys, 1);
    assert_string_equal(a.standin->api_keys[0], "sk-env");
    s_done(&r);
    unsetenv("VLLM_API_KEY");
}

static void test_stand_in_mistakes_are_refused(void **state)
{
    (void)state;
    s_run_t r = {0};
    assert_int_equal(s_run(&r, (const char *[]){"--accept-x-api-key", NULL}), -1);
    assert_string_equal(r.errors, "inferplane-sim: --accept-x-api-key needs --api-key KEY\n");
    s_done(&r);
    r = (s_run_t){0};
    assert_int_equal(s_run(&r, (const char *[]){"--stand-in-history", "3", NULL}), -1);
    assert_non_null(strstr(r.errors, "apply to the provider stand-in: add --stand-in"));
    s_done(&r);
    r = (s_run_t){0};
    assert_int_equal(s_run(&r, (const char *[]){"--api-key", "", NULL}), -1);
    assert_string_equal(r.errors,
                        "inferplane-sim: --api-key needs a key (e.g. --api-key sk-test)\n");
    s_done(&r);
    r = (s_run_t){0};
    assert_int_equal(s_run(&r, (const char *[]){"--served-model-name", ",", NULL}), -1);
    assert_non_null(strstr(r.errors, "--served-model-name needs a name"));
    s_done(&r);
}

int main(void)
{
    unsetenv("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES");
    unsetenv("VLLM_API_KEY");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_vllms),
        cmocka_unit_test(test_bad_values_are_refused_with_their_message),
        cmocka_unit_test(test_overrides_change_the_profile),
        cmocka_unit_test(test_lora_modules_take_several_values),
        cmocka_unit_test(test_served_names_and_keys_take_several_values),
        cmocka_unit_test(test_stand_in_mistakes_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
