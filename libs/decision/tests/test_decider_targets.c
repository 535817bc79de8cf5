/*
 * Unit tests of decider_targets: model → pool resolution (pools, aliases, LoRA adapters of
 * worker sets), which workers serve an adapter, and the provider lookups.
 *
 * Fixture: pool "chat" (model "base") targets worker sets "a" (workers a1, a2; adapters
 * sql-lora, chat-lora) and "b" (worker b1; adapter sql-lora); pool "other" (model "o") targets
 * worker set "c" (worker c1; adapter o-lora); alias "assistant" → model sql-lora; a pool named
 * "shadow" whose model is "chat-lora" (a pool's model wins over an adapter of the same name).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "decider_targets.h"

static char *s_lora_a[] = {"sql-lora", "chat-lora"};
static char *s_lora_b[] = {"sql-lora"};
static char *s_lora_c[] = {"o-lora"};
static ipl_pool_t s_pools[] = {
    {.name = "chat", .model = "base", .strategy = ""},
    {.name = "other", .model = "o", .strategy = ""},
    {.name = "shadow", .model = "chat-lora-pool", .strategy = ""},
};
static ipl_worker_t s_workers[] = {
    {.name = "a1",
     .pool = "chat",
     .model = "base",
     .worker_set = "a",
     .lora_adapters = s_lora_a,
     .lora_adapters_len = 2},
    {.name = "a2",
     .pool = "chat",
     .model = "base",
     .worker_set = "a",
     .lora_adapters = s_lora_a,
     .lora_adapters_len = 2},
    {.name = "b1",
     .pool = "chat",
     .model = "base",
     .worker_set = "b",
     .lora_adapters = s_lora_b,
     .lora_adapters_len = 1},
    {.name = "c1",
     .pool = "other",
     .model = "o",
     .worker_set = "c",
     .lora_adapters = s_lora_c,
     .lora_adapters_len = 1},
    {.name = "n1", .pool = "other", .model = "o", .worker_set = "n"},
};
static ipl_alias_t s_aliases[] = {{.policy = "p", .name = "assistant"}};
static ipl_alias_target_t s_alias_targets[] = {
    {.alias = "assistant", .kind = "model", .name = "sql-lora", .weight = 1}};

static ipl_policy_t s_policy(void)
{
    return (ipl_policy_t){.version = 1,
                          .pools = s_pools,
                          .pools_len = 3,
                          .workers = s_workers,
                          .workers_len = 5,
                          .aliases = s_aliases,
                          .aliases_len = 1,
                          .alias_targets = s_alias_targets,
                          .alias_targets_len = 1};
}

static void test_base_model(void **state)
{
    (void)state;
    ipl_policy_t p = s_policy();
    const char *lora = "x";
    assert_ptr_equal(decider_targets_resolve_lora(&p, "base", 0, NULL, &lora), &s_pools[0]);
    assert_null(lora);
    assert_ptr_equal(decider_targets_resolve(&p, "o", 0, NULL), &s_pools[1]);
    assert_null(decider_targets_resolve_lora(&p, "nothing", 0, NULL, &lora));
    assert_null(lora);
    assert_null(decider_targets_resolve_lora(&p, NULL, 0, NULL, &lora));
}

static void test_adapter_resolves_to_its_pool(void **state)
{
    (void)state;
    ipl_policy_t p = s_policy();
    const char *lora = NULL;
    const ipl_alias_t *alias = (const ipl_alias_t *)&p;
    assert_ptr_equal(decider_targets_resolve_lora(&p, "sql-lora", 0.5, &alias, &lora), &s_pools[0]);
    assert_string_equal(lora, "sql-lora");
    assert_null(alias);
    assert_ptr_equal(decider_targets_resolve_lora(&p, "o-lora", 0, NULL, &lora), &s_pools[1]);
    assert_string_equal(lora, "o-lora");
    // without lora_out: still the pool (the gateway's "is this model served?")
    assert_ptr_equal(decider_targets_resolve(&p, "chat-lora", 0, NULL), &s_pools[0]);
    // a worker set's adapter that names no pool's worker set: not served
    assert_null(decider_targets_resolve_lora(&p, "SQL-LORA", 0, NULL, &lora));
    assert_null(lora);
}

static void test_adapter_through_alias(void **state)
{
    (void)state;
    ipl_policy_t p = s_policy();
    const char *lora = NULL;
    const ipl_alias_t *alias = NULL;
    assert_ptr_equal(decider_targets_resolve_lora(&p, "assistant", 0, &alias, &lora), &s_pools[0]);
    assert_ptr_equal(alias, &s_aliases[0]);
    assert_string_equal(lora, "sql-lora");
}

static void test_pool_model_wins(void **state)
{
    (void)state;
    s_pools[2].model = "chat-lora"; // a pool serves "chat-lora" as its own model
    ipl_policy_t p = s_policy();
    const char *lora = "x";
    assert_ptr_equal(decider_targets_resolve_lora(&p, "chat-lora", 0, NULL, &lora), &s_pools[2]);
    assert_null(lora);
    s_pools[2].model = "chat-lora-pool";
}

static void test_worker_serves(void **state)
{
    (void)state;
    assert_true(decider_targets_worker_serves(&s_workers[0], NULL));
    assert_true(decider_targets_worker_serves(&s_workers[4], NULL));
    assert_true(decider_targets_worker_serves(&s_workers[0], "chat-lora"));
    assert_true(decider_targets_worker_serves(&s_workers[2], "sql-lora"));
    assert_false(decider_targets_worker_serves(&s_workers[2], "chat-lora"));
    assert_false(decider_targets_worker_serves(&s_workers[4], "o-lora"));
    assert_false(decider_targets_worker_serves(&s_workers[3], "o-lor"));
}

static void test_no_adapters_anywhere(void **state)
{
    (void)state;
    ipl_worker_t w = {.name = "w", .pool = "chat", .model = "base"};
    ipl_policy_t p = {.pools = s_pools, .pools_len = 1, .workers = &w, .workers_len = 1};
    const char *lora = "x";
    assert_null(decider_targets_resolve_lora(&p, "sql-lora", 0, NULL, &lora));
    assert_null(lora);
    assert_false(decider_targets_any_alias(&p));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base_model),
        cmocka_unit_test(test_adapter_resolves_to_its_pool),
        cmocka_unit_test(test_adapter_through_alias),
        cmocka_unit_test(test_pool_model_wins),
        cmocka_unit_test(test_worker_serves),
        cmocka_unit_test(test_no_adapters_anywhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
