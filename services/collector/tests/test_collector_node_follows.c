/*
 * Unit tests of collector_node_follows: which of the policy's workers a collector follows
 * given --worker-prefix and --node-name (every combination, workers with and without a node,
 * and the chart's DaemonSet setting, where each worker has exactly one collector).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "collector_node.h"

/* A static worker "node-a-w0" (no node), pods "vllm-0" on node-a and "vllm-1" on node-b. */
static const ipl_worker_t s_static = {.name = "node-a-w0", .url = "http://h:1"};
static const ipl_worker_t s_pod_a = {.name = "vllm-0", .url = "http://h:2", .node = "node-a"};
static const ipl_worker_t s_pod_b = {.name = "vllm-1", .url = "http://h:3", .node = "node-b"};

static void test_no_filter_follows_every_worker(void **state)
{
    (void)state;
    assert_true(collector_node_follows(&s_static, NULL, NULL));
    assert_true(collector_node_follows(&s_pod_a, NULL, NULL));
    assert_true(collector_node_follows(&s_pod_b, "", "")); /* "" is not given */
}

static void test_prefix_alone_matches_names(void **state)
{
    (void)state;
    assert_true(collector_node_follows(&s_static, "node-a-", NULL));
    assert_false(collector_node_follows(&s_pod_a, "node-a-", NULL)); /* named after its pod */
    assert_true(collector_node_follows(&s_pod_b, "vllm-", NULL));
}

static void test_node_name_follows_the_workers_of_its_node(void **state)
{
    (void)state;
    assert_true(collector_node_follows(&s_pod_a, NULL, "node-a"));
    assert_false(collector_node_follows(&s_pod_b, NULL, "node-a"));
    assert_true(collector_node_follows(&s_pod_b, "", "node-b"));
    assert_false(collector_node_follows(&s_pod_a, NULL, "node")); /* whole names, no prefix */
    /* a worker without a node: none */
    assert_false(collector_node_follows(&s_static, NULL, "node-a"));
    ipl_worker_t empty = {.name = "w", .url = "http://h:4", .node = ""};
    assert_false(collector_node_follows(&empty, NULL, "node-a"));
}

static void test_both_node_decides_where_known(void **state)
{
    (void)state;
    /* a worker with a node: by its node, whatever its name */
    assert_true(collector_node_follows(&s_pod_a, "node-a-", "node-a"));
    assert_false(collector_node_follows(&s_pod_b, "vllm-", "node-a"));
    /* one without: by the prefix */
    assert_true(collector_node_follows(&s_static, "node-a-", "node-a"));
    assert_false(collector_node_follows(&s_static, "node-b-", "node-b"));
}

/* The chart's setting on each of two nodes: every worker has exactly one collector. */
static void test_each_worker_has_one_collector(void **state)
{
    (void)state;
    const ipl_worker_t static_b = {.name = "node-b-w1", .url = "http://h:5"};
    const ipl_worker_t *all[] = {&s_static, &s_pod_a, &s_pod_b, &static_b};
    const char *nodes[] = {"node-a", "node-b"}, *prefixes[] = {"node-a-", "node-b-"};
    for (size_t w = 0; w < sizeof all / sizeof all[0]; w++) {
        int followers = 0;
        for (size_t n = 0; n < 2; n++)
            followers += collector_node_follows(all[w], prefixes[n], nodes[n]);
        assert_int_equal(followers, 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_filter_follows_every_worker),
        cmocka_unit_test(test_prefix_alone_matches_names),
        cmocka_unit_test(test_node_name_follows_the_workers_of_its_node),
        cmocka_unit_test(test_both_node_decides_where_known),
        cmocka_unit_test(test_each_worker_has_one_collector),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
