/*
 * Unit tests of policy_yaml: the field checks' messages and places, the error cap, and the
 * helpers over arrays of named resources.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "policy_yaml.h"

// Checks the fields of the document {i: ..., b: ..., e: ..., w: [...]}.
static void s_on_document(void *arg, policy_doc_t *d, yaml_node_t *root)
{
    static const char *const fields[] = {"i", "b", "e", "w", NULL};
    static const char *const values[] = {"In", "NotIn", NULL};
    int64_t *out = arg;
    yaml_node_t *f[4];
    d->kind = "Test";
    d->name = "t";
    assert_true(policy_yaml_fields(d, root, "spec", fields, f));
    policy_yaml_int(d, f[0], "spec.i", -5, 5, &out[0]);
    bool b = false;
    if (policy_yaml_bool(d, f[1], "spec.b", &b)) out[1] = b;
    out[2] = policy_yaml_enum(d, f[2], root, "spec.e", values, false);
    size_t n = 0;
    policy_yaml_words(d, f[3], root, "spec.w", 2, 8, false, &n);
    out[3] = (int64_t)n;
}

static policy_yaml_t *s_load(const char *text, int64_t *out)
{
    policy_yaml_t *y = policy_yaml_new(3);
    const char *file = policy_yaml_strdup(y, "t.yaml");
    policy_yaml_load(y, file, text, strlen(text), s_on_document, out);
    policy_yaml_close(y);
    return y;
}

static void test_values_and_messages(void **state)
{
    (void)state;
    int64_t out[4] = {0, 0, 0, 0};
    policy_yaml_t *y = s_load("{i: -3, b: true, e: NotIn, w: [a, b]}", out);
    assert_int_equal(policy_yaml_nerrors(y), 0);
    assert_int_equal(out[0], -3);
    assert_int_equal(out[1], 1);
    assert_int_equal(out[2], 1);
    assert_int_equal(out[3], 2);
    policy_yaml_destroy(&y);
    assert_null(y);

    y = s_load("{i: 9, b: maybe, e: in, w: [a, a, b]}", out);
    assert_int_equal(policy_yaml_nerrors(y), 3 + 1); // capped at 3, then "... and N more"
    assert_string_equal(policy_yaml_error(y, 0),
                        "t.yaml:1:5: Test \"t\": spec.i must be a whole number from -5 to 5, got "
                        "\"9\"");
    assert_string_equal(policy_yaml_error(y, 1),
                        "t.yaml:1:11: Test \"t\": spec.b must be true or false, got \"maybe\"");
    assert_string_equal(policy_yaml_error(y, 2),
                        "t.yaml:1:21: Test \"t\": spec.e \"in\" is not one of the allowed values; "
                        "did you mean \"In\"? (known: In, NotIn)");
    assert_string_equal(policy_yaml_error(y, 3), "... and 1 more errors");
    assert_int_equal(policy_yaml_error_count(y), 4);
    policy_yaml_destroy(&y);
}

static void test_syntax_error_has_place(void **state)
{
    (void)state;
    int64_t out[4] = {0};
    policy_yaml_t *y = s_load("a: [1, 2\nb: c\n", out);
    assert_int_equal(policy_yaml_nerrors(y), 1);
    assert_non_null(strstr(policy_yaml_error(y, 0), "t.yaml:2:2: YAML syntax error"));
    policy_yaml_destroy(&y);
}

typedef struct {
    int pad;
    const char *name;
    policy_loc_t loc;
} s_item_t;

static void test_named_arrays(void **state)
{
    (void)state;
    policy_yaml_t *y = policy_yaml_new(10);
    s_item_t items[] = {
        {0, "a", {"x.yaml", 1, 2}}, {0, "b", {"x.yaml", 3, 4}}, {0, "a", {"y.yaml", 5, 6}}};
    policy_yaml_unique(y, "Thing", items, 3, sizeof *items, offsetof(s_item_t, name),
                       offsetof(s_item_t, loc));
    assert_int_equal(policy_yaml_nerrors(y), 1);
    assert_string_equal(policy_yaml_error(y, 0),
                        "y.yaml:5:6: Thing \"a\": metadata.name is already used by the Thing at "
                        "x.yaml:1:2; rename one of them");
    const s_item_t *b = policy_yaml_find(items, 3, sizeof *items, offsetof(s_item_t, name), "b");
    assert_ptr_equal(b, &items[1]);
    assert_null(policy_yaml_find(items, 3, sizeof *items, offsetof(s_item_t, name), "c"));
    const char **names = policy_yaml_names(y, items, 3, sizeof *items, offsetof(s_item_t, name));
    assert_string_equal(names[1], "b");
    char hint[128];
    assert_string_equal(policy_yaml_hint(hint, sizeof hint, "bb", names, 2),
                        "; did you mean \"b\"? (known: a, b)");
    assert_true(policy_yaml_valid_name("a-b.c"));
    assert_false(policy_yaml_valid_name("-a"));
    assert_false(policy_yaml_valid_name("A"));
    policy_yaml_destroy(&y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_and_messages),
        cmocka_unit_test(test_syntax_error_has_place),
        cmocka_unit_test(test_named_arrays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
