/*
 * Unit tests of ipl_suggest: the distance (transpositions, case), the threshold, the prefix
 * rule, ties, and the "(known: ...)" list.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ipl_suggest.h"

static const char *s_best(const char *word, const char *const *cands, size_t n)
{
    ipl_suggest_t s;
    ipl_suggest_init(&s, word);
    for (size_t i = 0; i < n; i++)
        ipl_suggest_add(&s, cands[i]);
    return ipl_suggest_best(&s);
}

static void test_distance(void **state)
{
    (void)state;
    assert_int_equal(ipl_suggest_distance("listen", "listen"), 0);
    assert_int_equal(ipl_suggest_distance("listne", "listen"), 1); // one swap
    assert_int_equal(ipl_suggest_distance("hepl", "help"), 1);
    assert_int_equal(ipl_suggest_distance("Strategy", "strategy"), 0);
    assert_int_equal(ipl_suggest_distance("kvEvent", "kvEvents"), 1);
    assert_int_equal(ipl_suggest_distance("", "abc"), 3);
    assert_int_equal(ipl_suggest_distance("abc", ""), 3);
    assert_int_equal(ipl_suggest_distance("kitten", "sitting"), 3);
    assert_int_equal(ipl_suggest_distance("ca", "abc"), 3); // OSA, not full Damerau
    char longer[80];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    assert_int_equal(ipl_suggest_distance(longer, "a"), SIZE_MAX);
}

static void test_suggests_a_plausible_typo_only(void **state)
{
    (void)state;
    const char *opts[] = {"listen", "admin-listen", "max-body-bytes", "verbose", "help"};
    assert_string_equal(s_best("admin-listne", opts, 5), "admin-listen");
    assert_string_equal(s_best("max_body_bytes", opts, 5), "max-body-bytes");
    assert_string_equal(s_best("max-body", opts, 5), "max-body-bytes"); // a prefix
    assert_string_equal(s_best("HELP", opts, 5), "help");
    assert_null(s_best("frobnicate", opts, 5));
    assert_null(s_best("zz", (const char *[]){"abcd"}, 1)); // 4 edits > 2
    assert_null(s_best("max", NULL, 0));
    // two letters are not a prefix worth suggesting; three are
    assert_null(s_best("ad", (const char *[]){"admin-listen"}, 1));
    assert_string_equal(s_best("adm", (const char *[]){"admin-listen"}, 1), "admin-listen");
    // ties go to the first candidate
    assert_string_equal(s_best("tft", (const char *[]){"ttft", "tftt"}, 2), "ttft");
}

static void test_known_list(void **state)
{
    (void)state;
    char buf[64];
    const char *names[] = {"a", "b", "c", "d"};
    assert_string_equal(ipl_suggest_known(buf, sizeof buf, names, 3, 10), "(known: a, b, c)");
    assert_string_equal(ipl_suggest_known(buf, sizeof buf, names, 4, 2),
                        "(known: a, b, and 2 more)");
    assert_string_equal(ipl_suggest_known(buf, sizeof buf, names, 0, 10), "(known: none)");
    assert_string_equal(ipl_suggest_known(buf, 12, names, 4, 4), "(known: a, ");
}

/* NULL candidates (resources whose names did not compile) are skipped, never read. */
static void test_null_candidates_are_skipped(void **state)
{
    (void)state;
    ipl_suggest_t s;
    ipl_suggest_init(&s, "chta");
    ipl_suggest_add(&s, NULL);
    ipl_suggest_add(&s, "chat");
    assert_string_equal(ipl_suggest_best(&s), "chat");
    const char *cands[] = {NULL, "a", NULL, "b"};
    char buf[64];
    assert_string_equal(ipl_suggest_known(buf, sizeof buf, cands, 4, 8), "(known: a, b)");
    const char *none[] = {NULL};
    assert_string_equal(ipl_suggest_known(buf, sizeof buf, none, 1, 8), "(known: none)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distance),
        cmocka_unit_test(test_suggests_a_plausible_typo_only),
        cmocka_unit_test(test_known_list),
        cmocka_unit_test(test_null_candidates_are_skipped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
