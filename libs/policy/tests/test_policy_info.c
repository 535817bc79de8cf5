/*
 * Unit tests of policy_info: no policy shows hash "" at 1; a policy shows its 16 hex digits at
 * 1 and the hash before at 0; setting the same hash again changes nothing; a followed view
 * with no policy yet reads as none at each render.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <unistd.h>

#include "policy_info.h"

// Whether the rendered registry holds the line `line` (a whole line).
static bool s_has(ipl_metrics_t *m, const char *line)
{
    size_t len;
    char *text = ipl_metrics_render(m, &len);
    assert_non_null(text);
    char want[256];
    snprintf(want, sizeof want, "\n%s\n", line);
    bool found = strstr(text, want) != NULL;
    free(text);
    return found;
}

static void test_hashes_shown_and_replaced(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    policy_info_t *pi = policy_info_new(m, "x_policy_info", "The policy in use.");
    assert_non_null(pi);
    assert_true(s_has(m, "x_policy_info{hash=\"\"} 1"));
    policy_info_set(pi, 0xabcULL);
    assert_true(s_has(m, "x_policy_info{hash=\"\"} 0"));
    assert_true(s_has(m, "x_policy_info{hash=\"0000000000000abc\"} 1"));
    policy_info_set(pi, 0xabcULL); // the same: still 1
    assert_true(s_has(m, "x_policy_info{hash=\"0000000000000abc\"} 1"));
    policy_info_set(pi, 0xffffffffffffffffULL);
    assert_true(s_has(m, "x_policy_info{hash=\"0000000000000abc\"} 0"));
    assert_true(s_has(m, "x_policy_info{hash=\"ffffffffffffffff\"} 1"));
    policy_info_set(pi, 0xabcULL); // back: the old series again
    assert_true(s_has(m, "x_policy_info{hash=\"0000000000000abc\"} 1"));
    assert_true(s_has(m, "x_policy_info{hash=\"ffffffffffffffff\"} 0"));
    assert_true(s_has(m, "# TYPE x_policy_info gauge"));
    policy_info_destroy(&pi);
    assert_null(pi);
    policy_info_destroy(&pi);
    ipl_metrics_destroy(&m);
}

static void test_view_without_policy_reads_none(void **state)
{
    (void)state;
    char eps[2][96];
    for (int i = 0; i < 2; i++)
        snprintf(eps[i], sizeof eps[i], "ipc:///tmp/ipl-test-policy-info-%ld-%d.sock",
                 (long)getpid(), i);
    ipl_policy_view_t *view = ipl_policy_view_new(eps[0], eps[1]); // nobody binds them
    assert_non_null(view);
    ipl_metrics_t *m = ipl_metrics_new();
    policy_info_t *pi = policy_info_new_view(m, "y_policy_info", "The policy in use.", view);
    assert_non_null(pi);
    policy_info_set(pi, 7); // the view's answer (none) wins at the next render
    assert_true(s_has(m, "y_policy_info{hash=\"\"} 1"));
    assert_true(s_has(m, "y_policy_info{hash=\"0000000000000007\"} 0"));
    ipl_metrics_destroy(&m); // the renderer first: its callback uses pi
    policy_info_destroy(&pi);
    ipl_policy_view_destroy(&view);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hashes_shown_and_replaced),
        cmocka_unit_test(test_view_without_policy_reads_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
