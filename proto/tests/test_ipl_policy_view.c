/*
 * Unit tests of ipl_policy_view: the test plays the policy service on inproc endpoints (a
 * ROUTER answering POLICY_REQ and a PUB), and checks that the view asks, installs only newer
 * versions, keeps held snapshots valid across updates, and counts malformed frames.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <czmq.h>

#include "ipl_clock.h"
#include "ipl_log.h"
#include "ipl_policy_view.h"

static void s_send_policy(zsock_t *sock, uint64_t version, const char *pool_name)
{
    ipl_pool_t pool = {.name = (char *)pool_name, .model = "m", .strategy = "ttft"};
    ipl_worker_t worker = {.name = "w0",
                           .pool = (char *)pool_name,
                           .model = "m",
                           .url = "http://h:1",
                           .kv_endpoint = "",
                           .replay_endpoint = "",
                           .metrics_url = "http://h:1/metrics",
                           .block_size = 16};
    ipl_policy_t p = {.version = version,
                      .source = "test",
                      .pools = &pool,
                      .pools_len = 1,
                      .workers = &worker,
                      .workers_len = 1};
    assert_int_equal(ipl_msg_send(zsock_resolve(sock), IPL_MSG_POLICY, &p, 0), 0);
}

// Publishes `version` until the view has it (PUB/SUB drops messages until connected).
static void s_publish_until(zsock_t *pub, ipl_policy_view_t *view, uint64_t version,
                            uint64_t expect)
{
    uint64_t deadline = ipl_mono_ms() + 5000;
    while (ipl_policy_view_version(view) != expect && ipl_mono_ms() < deadline) {
        s_send_policy(pub, version, "p");
        zclock_sleep(10);
    }
    assert_int_equal(ipl_policy_view_version(view), expect);
}

static void test_no_service_no_policy(void **state)
{
    (void)state;
    ipl_policy_view_t *view = ipl_policy_view_new("", NULL);
    assert_non_null(view);
    assert_null(ipl_policy_view_get(view));
    assert_int_equal(ipl_policy_view_version(view), 0);
    assert_int_equal(ipl_policy_view_dropped(view), 0);
    ipl_policy_view_destroy(&view);
    assert_null(view);
    ipl_policy_view_destroy(&view); // NULL is fine
}

static void test_asks_the_router_and_follows_the_pub(void **state)
{
    (void)state;
    zsock_t *router = zsock_new_router("inproc://test-policy-rep");
    zsock_t *pub = zsock_new_pub("inproc://test-policy-pub");
    assert_non_null(router);
    assert_non_null(pub);
    ipl_policy_view_t *view =
        ipl_policy_view_new("inproc://test-policy-pub", "inproc://test-policy-rep");
    assert_non_null(view);

    // The view asks at start: answer its POLICY_REQ with version 5.
    zsock_set_rcvtimeo(router, 5000);
    zframe_t *id = zframe_recv(router);
    assert_non_null(id);
    zframe_t *req = zframe_recv(router);
    assert_non_null(req);
    ipl_msg_t msg = {0};
    assert_int_equal(ipl_msg_decode(zframe_data(req), zframe_size(req), &msg), 0);
    assert_int_equal(msg.type, IPL_MSG_POLICY_REQ);
    assert_int_equal(msg.u.policy_req.have_version, 0);
    ipl_msg_clear(&msg);
    zframe_destroy(&req);
    zframe_send(&id, router, ZFRAME_MORE);
    s_send_policy(router, 5, "first");
    uint64_t deadline = ipl_mono_ms() + 5000;
    while (ipl_policy_view_version(view) != 5 && ipl_mono_ms() < deadline)
        zclock_sleep(5);
    assert_int_equal(ipl_policy_view_version(view), 5);

    ipl_policy_snap_t *held = ipl_policy_view_get(view);
    assert_non_null(held);
    assert_int_equal(held->policy->version, 5);
    assert_string_equal(held->policy->pools[0].name, "first");
    assert_string_equal(held->policy->workers[0].url, "http://h:1");

    // A newer version replaces it; the held snapshot stays valid until released.
    s_publish_until(pub, view, 9, 9);
    ipl_policy_snap_t *now = ipl_policy_view_get(view);
    assert_int_equal(now->policy->version, 9);
    assert_string_equal(now->policy->pools[0].name, "p");
    assert_string_equal(held->policy->pools[0].name, "first");
    ipl_policy_view_release(view, &held);
    assert_null(held);

    // An older version (a late or replayed publication) is ignored.
    for (int i = 0; i < 5; i++)
        s_send_policy(pub, 7, "old");
    zclock_sleep(50);
    assert_int_equal(ipl_policy_view_version(view), 9);

    // Malformed frames are counted and dropped: garbage, another message type, multipart.
    uint64_t dropped = ipl_policy_view_dropped(view);
    zstr_send(pub, "not msgpack");
    ipl_policy_req_t other = {.have_version = 1};
    ipl_msg_send(zsock_resolve(pub), IPL_MSG_POLICY_REQ, &other, 0);
    zstr_sendm(pub, "part one");
    zstr_send(pub, "part two");
    deadline = ipl_mono_ms() + 5000;
    while (ipl_policy_view_dropped(view) < dropped + 3 && ipl_mono_ms() < deadline)
        zclock_sleep(5);
    assert_int_equal(ipl_policy_view_dropped(view), dropped + 3);
    assert_int_equal(ipl_policy_view_version(view), 9);
    s_publish_until(pub, view, 10, 10); // still working after the garbage

    ipl_policy_view_release(view, &now);
    ipl_policy_view_destroy(&view);
    zsock_destroy(&pub);
    zsock_destroy(&router);
}

static void test_snapshot_outlives_many_updates(void **state)
{
    (void)state;
    zsock_t *pub = zsock_new_pub("inproc://test-policy-pub2");
    ipl_policy_view_t *view = ipl_policy_view_new("inproc://test-policy-pub2", "");
    s_publish_until(pub, view, 1, 1);
    ipl_policy_snap_t *a = ipl_policy_view_get(view);
    ipl_policy_snap_t *b = ipl_policy_view_get(view); // two references to one snapshot
    assert_ptr_equal(a, b);
    for (uint64_t v = 2; v <= 20; v++)
        s_publish_until(pub, view, v, v);
    assert_int_equal(a->policy->version, 1);
    ipl_policy_view_release(view, &a);
    assert_int_equal(b->policy->version, 1);
    ipl_policy_view_release(view, &b);
    ipl_policy_view_release(view, &b); // NULL is fine
    ipl_policy_view_destroy(&view);
    zsock_destroy(&pub);
}

int main(void)
{
    zsys_handler_set(NULL);
    ipl_log_set_level(IPL_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_service_no_policy),
        cmocka_unit_test(test_asks_the_router_and_follows_the_pub),
        cmocka_unit_test(test_snapshot_outlives_many_updates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
