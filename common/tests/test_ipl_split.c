/*
 * Unit tests of ipl_split: trimming, skipped empty items, the count beyond `max`, cutting the
 * items out in place.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "ipl_split.h"

// The items of `list` joined with '|' (the test's view of them).
static const char *s_items(const char *list)
{
    static char out[256];
    const char *cursor = list, *item;
    size_t len, off = 0;
    out[0] = '\0';
    while (ipl_split_next(&cursor, &item, &len)) {
        assert_true(len > 0);
        off +=
            (size_t)snprintf(out + off, sizeof out - off, "%s%.*s", off ? "|" : "", (int)len, item);
    }
    assert_false(ipl_split_next(&cursor, &item, &len)); // stays at the end
    return out;
}

static void test_items_are_trimmed_and_empty_ones_skipped(void **state)
{
    (void)state;
    assert_string_equal(s_items("a"), "a");
    assert_string_equal(s_items("tcp://a:1,tcp://b:2"), "tcp://a:1|tcp://b:2");
    assert_string_equal(s_items(" a ,\tb\t, c d "), "a|b|c d");
    assert_string_equal(s_items("a,,b,"), "a|b");
    assert_string_equal(s_items(",, ,\t,"), "");
    assert_string_equal(s_items(""), "");
    assert_string_equal(s_items(NULL), "");
    assert_string_equal(s_items("w0=http://h:1|tcp://h:2 , w1=x|y"),
                        "w0=http://h:1|tcp://h:2|w1=x|y");
}

static void test_dup_stores_at_most_max_and_counts_all(void **state)
{
    (void)state;
    char *out[3] = {0};
    assert_int_equal(ipl_split_dup(" x , y,,z ", out, 3), 3);
    assert_string_equal(out[0], "x");
    assert_string_equal(out[1], "y");
    assert_string_equal(out[2], "z");
    for (int i = 0; i < 3; i++) {
        free(out[i]);
        out[i] = NULL;
    }
    // one too many: counted, not stored
    assert_int_equal(ipl_split_dup("a,b,c,d", out, 2), 4);
    assert_string_equal(out[0], "a");
    assert_string_equal(out[1], "b");
    assert_null(out[2]);
    free(out[0]);
    free(out[1]);
    assert_int_equal(ipl_split_dup(" , ", out, 3), 0);
    assert_int_equal(ipl_split_dup(NULL, out, 3), 0);
    assert_int_equal(ipl_split_dup("a,b", NULL, 0), 2); // count only
}

static void test_cut_in_place(void **state)
{
    (void)state;
    char list[] = " ttft , random,, least-loaded";
    const char *cursor = list, *item;
    char *items[4];
    size_t len, n = 0;
    while (n < 4 && ipl_split_next(&cursor, &item, &len)) {
        items[n] = list + (item - list);
        items[n++][len] = '\0';
    }
    assert_int_equal(n, 3);
    assert_string_equal(items[0], "ttft");
    assert_string_equal(items[1], "random");
    assert_string_equal(items[2], "least-loaded");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_items_are_trimmed_and_empty_ones_skipped),
        cmocka_unit_test(test_dup_stores_at_most_max_and_counts_all),
        cmocka_unit_test(test_cut_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
