/* Unit tests of gateway_models: GET /v1/models's list — each model once, at its first pool,
 * with every pool serving it; pools without a model left out; an empty policy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "gateway_models.h"

static char *s_render(const ipl_policy_t *p)
{
    cJSON *root = gateway_models_list(p, 1700000000);
    assert_non_null(root);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

static void test_models(void **state)
{
    (void)state;
    ipl_pool_t pools[] = {{.name = "chat", .model = "sim-model"},
                          {.name = "nomodel", .model = ""},
                          {.name = "big", .model = "big-model"},
                          {.name = "batch", .model = "sim-model"},
                          {.name = "null", .model = NULL}};
    ipl_policy_t p = {.pools = pools, .pools_len = 5};
    char *text = s_render(&p);
    assert_string_equal(text, "{\"object\":\"list\",\"data\":["
                              "{\"id\":\"sim-model\",\"object\":\"model\",\"created\":1700000000,"
                              "\"owned_by\":\"inferplane\",\"pools\":[\"chat\",\"batch\"]},"
                              "{\"id\":\"big-model\",\"object\":\"model\",\"created\":1700000000,"
                              "\"owned_by\":\"inferplane\",\"pools\":[\"big\"]}]}");
    free(text);
}

static void test_empty(void **state)
{
    (void)state;
    ipl_policy_t p = {0};
    char *text = s_render(&p);
    assert_string_equal(text, "{\"object\":\"list\",\"data\":[]}");
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models),
        cmocka_unit_test(test_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
