/* Unit tests of exporter_outcome: the vocabulary, and the outcome derived for gateways that do
 * not send RECORD.outcome. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "exporter_outcome.h"

static void test_vocabulary(void **state)
{
    (void)state;
    const char *words[] = {"ok",          "rejected", "rate_limited", "queue_timeout",
                           "failed_over", "spilled",  "error",        "cancelled"};
    for (int i = 0; i < EXPORTER_OUTCOME_COUNT; i++) {
        assert_string_equal(exporter_outcome_name((exporter_outcome_t)i), words[i]);
        assert_int_equal(exporter_outcome_parse(words[i]), i);
    }
    assert_string_equal(exporter_outcome_name(EXPORTER_OUTCOME_COUNT), "error");
    assert_int_equal(exporter_outcome_parse(NULL), -1);
    assert_int_equal(exporter_outcome_parse(""), -1);
    assert_int_equal(exporter_outcome_parse("OK"), -1);
    assert_true(exporter_outcome_failed(EXPORTER_OUTCOME_REJECTED));
    assert_true(exporter_outcome_failed(EXPORTER_OUTCOME_ERROR));
    assert_false(exporter_outcome_failed(EXPORTER_OUTCOME_SPILLED));
    assert_false(exporter_outcome_failed(EXPORTER_OUTCOME_FAILED_OVER));
    assert_false(exporter_outcome_failed(EXPORTER_OUTCOME_CANCELLED)); /* the client left */
}

static exporter_outcome_t s_of(uint64_t status, const char *reason, uint64_t attempts,
                               const char *target_kind, const char *outcome)
{
    ipl_record_t r = {.status_code = status,
                      .reason = (char *)reason,
                      .attempts = attempts,
                      .target_kind = (char *)target_kind,
                      .outcome = (char *)outcome};
    return exporter_outcome_of(&r);
}

static void test_derived(void **state)
{
    (void)state;
    assert_int_equal(s_of(200, "cache_hit", 0, NULL, NULL), EXPORTER_OUTCOME_OK);
    assert_int_equal(s_of(200, "cache_hit", 2, "worker", NULL), EXPORTER_OUTCOME_FAILED_OVER);
    assert_int_equal(s_of(200, "spill", 1, "provider", NULL), EXPORTER_OUTCOME_SPILLED);
    assert_int_equal(s_of(200, "overflow", 0, NULL, NULL), EXPORTER_OUTCOME_SPILLED);
    assert_int_equal(s_of(200, "rule_provider", 1, "provider", NULL), EXPORTER_OUTCOME_OK);
    assert_int_equal(s_of(200, "spill", 1, "worker", NULL), EXPORTER_OUTCOME_OK);
    assert_int_equal(s_of(429, "rate_limit_error", 0, NULL, NULL), EXPORTER_OUTCOME_RATE_LIMITED);
    assert_int_equal(s_of(429, "limit_input_tokens_per_minute", 0, NULL, NULL),
                     EXPORTER_OUTCOME_RATE_LIMITED);
    assert_int_equal(s_of(429, "overloaded", 0, NULL, NULL), EXPORTER_OUTCOME_REJECTED);
    assert_int_equal(s_of(499, "client_gone", 1, "worker", NULL), EXPORTER_OUTCOME_CANCELLED);
    assert_int_equal(s_of(503, "queue_full", 0, NULL, NULL), EXPORTER_OUTCOME_QUEUE_TIMEOUT);
    assert_int_equal(s_of(504, "queue_timeout", 0, NULL, NULL), EXPORTER_OUTCOME_QUEUE_TIMEOUT);
    assert_int_equal(s_of(404, "no_pool", 0, NULL, NULL), EXPORTER_OUTCOME_REJECTED);
    assert_int_equal(s_of(403, "rejected", 0, NULL, NULL), EXPORTER_OUTCOME_REJECTED);
    assert_int_equal(s_of(503, "rejected", 0, NULL, NULL), EXPORTER_OUTCOME_REJECTED);
    assert_int_equal(s_of(503, "no_worker", 0, NULL, NULL), EXPORTER_OUTCOME_ERROR);
    assert_int_equal(s_of(502, "upstream_failed", 1, "worker", NULL), EXPORTER_OUTCOME_ERROR);
    assert_int_equal(s_of(0, NULL, 0, NULL, NULL), EXPORTER_OUTCOME_ERROR);
    assert_int_equal(s_of(7, "", 0, NULL, NULL), EXPORTER_OUTCOME_ERROR);
}

static void test_the_gateway_word_wins(void **state)
{
    (void)state;
    assert_int_equal(s_of(200, "cache_hit", 1, "worker", "spilled"), EXPORTER_OUTCOME_SPILLED);
    assert_int_equal(s_of(503, "x", 0, NULL, "rate_limited"), EXPORTER_OUTCOME_RATE_LIMITED);
    /* an unknown word (a newer gateway's): derived */
    assert_int_equal(s_of(200, "cache_hit", 1, "worker", "teleported"), EXPORTER_OUTCOME_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vocabulary),
        cmocka_unit_test(test_derived),
        cmocka_unit_test(test_the_gateway_word_wins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
