/*
 * Unit tests of decider_backup, with the test playing the policy service (a PUB on inproc):
 * nothing to decide without a policy; a request goes to the least-loaded worker of its pool by
 * the backup's own in-flight counts, which decider_backup_done brings down; the answer says
 * "fallback"; avoided workers are skipped; an unknown model is refused as a decider refuses it;
 * the policy's rules hold (a reject rule refuses); a new policy version keeps the counts of the
 * workers it still has.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <czmq.h>

#include "decider_backup.h"
#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_log.h"

static void s_send_policy(zsock_t *pub, uint64_t version, bool reject_rule, int nworkers)
{
    ipl_pool_t pool = {.name = "chat", .model = "m", .strategy = "ttft"};
    ipl_worker_t workers[3] = {
        {.name = "w0", .pool = "chat", .model = "m", .url = "http://w0", .block_size = 16},
        {.name = "w1", .pool = "chat", .model = "m", .url = "http://w1", .block_size = 16},
        {.name = "w2", .pool = "chat", .model = "m", .url = "http://w2", .block_size = 16},
    };
    char *bad[] = {"bad"};
    ipl_rule_t rule = {.policy = "p",
                       .name = "no-bad",
                       .tenants = bad,
                       .tenants_len = 1,
                       .prompt_max = UINT64_MAX,
                       .action = "reject",
                       .pool = "",
                       .target = "",
                       .unless_holder = "",
                       .provider = "",
                       .reason = "tenant bad is blocked",
                       .status = 403};
    ipl_policy_t p = {.version = version,
                      .source = "test",
                      .pools = &pool,
                      .pools_len = 1,
                      .workers = workers,
                      .workers_len = (uint32_t)nworkers,
                      .rules = reject_rule ? &rule : NULL,
                      .rules_len = reject_rule ? 1 : 0};
    assert_int_equal(ipl_msg_send(zsock_resolve(pub), IPL_MSG_POLICY, &p, 0), 0);
}

typedef struct {
    zsock_t *pub;
    ipl_policy_view_t *view;
} s_policy_t;

static void s_publish(s_policy_t *p, uint64_t version, bool reject_rule, int nworkers)
{
    uint64_t deadline = ipl_mono_ms() + 5000; // PUB/SUB drops messages until connected
    while (ipl_policy_view_version(p->view) != version && ipl_mono_ms() < deadline) {
        s_send_policy(p->pub, version, reject_rule, nworkers);
        zclock_sleep(10);
    }
    assert_int_equal(ipl_policy_view_version(p->view), version);
}

static s_policy_t s_policy(const char *endpoint, bool reject_rule)
{
    s_policy_t p = {.pub = zsock_new_pub(endpoint)};
    assert_non_null(p.pub);
    p.view = ipl_policy_view_new(endpoint, "");
    assert_non_null(p.view);
    s_publish(&p, 1, reject_rule, 3);
    return p;
}

static void s_policy_close(s_policy_t *p)
{
    ipl_policy_view_destroy(&p->view);
    zsock_destroy(&p->pub);
}

/* Decides a request for `model` by `tenant`, avoiding `avoid` (NULL: none); the reply's
 * status, the worker in worker[64]. */
static uint64_t s_route(decider_backup_t *b, const char *model, const char *tenant,
                        const char *avoid, char *worker, ipl_msg_t *keep)
{
    static uint64_t prompt; /* a new prompt each time: no prefix ties them to a worker */
    prompt++;
    uint64_t hashes[] = {prompt * 1000 + 1, prompt * 1000 + 2, prompt * 1000 + 3};
    char *av[] = {(char *)avoid};
    ipl_route_req_t rq = {.req_id = 77,
                          .model = (char *)model,
                          .tenant = (char *)tenant,
                          .prompt_tokens = 48,
                          .block_size = 16,
                          .hashes = hashes,
                          .hashes_len = 3,
                          .strategy = "",
                          .brief = 1,
                          .avoid = avoid ? av : NULL,
                          .avoid_len = avoid ? 1 : 0};
    ipl_msg_t rep = {0};
    assert_int_equal(decider_backup_route(b, &rq, &rep), 0);
    assert_int_equal(rep.type, IPL_MSG_ROUTE_REP);
    assert_int_equal(rep.u.route_rep.req_id, 77);
    snprintf(worker, 64, "%s", rep.u.route_rep.worker ? rep.u.route_rep.worker : "");
    uint64_t status = rep.u.route_rep.status;
    if (keep)
        *keep = rep;
    else
        ipl_msg_clear(&rep);
    return status;
}

static void test_nothing_without_a_policy(void **state)
{
    (void)state;
    ipl_policy_view_t *view = ipl_policy_view_new("inproc://test-backup-none", "");
    decider_backup_t *b = decider_backup_new(view);
    assert_non_null(b);
    ipl_route_req_t rq = {.model = "m", .tenant = "", .strategy = ""};
    ipl_msg_t rep = {0};
    assert_int_equal(decider_backup_route(b, &rq, &rep), IPL_E_NOTFOUND);
    assert_int_equal(decider_backup_decisions(b), 0);
    decider_backup_destroy(&b);
    assert_null(b);
    ipl_policy_view_destroy(&view);
}

static void test_least_loaded_by_its_own_counts(void **state)
{
    (void)state;
    s_policy_t p = s_policy("inproc://test-backup-1", false);
    decider_backup_t *b = decider_backup_new(p.view);
    char w[3][64];
    ipl_msg_t rep;
    assert_int_equal(s_route(b, "m", "", NULL, w[0], &rep), IPL_ROUTE_OK);
    const ipl_route_rep_t *r = &rep.u.route_rep;
    assert_string_equal(r->reason, "fallback");
    assert_string_equal(r->strategy, "fallback");
    assert_string_equal(r->target_kind, "worker");
    assert_string_equal(r->pool, "chat");
    assert_int_equal(r->observe, 1);
    assert_int_equal(r->cached_tokens, 0);
    assert_non_null(strstr(r->detail, "no decider answered"));
    assert_string_equal(r->url, !strcmp(w[0], "w0")   ? "http://w0"
                                : !strcmp(w[0], "w1") ? "http://w1"
                                                      : "http://w2");
    ipl_msg_clear(&rep);
    assert_int_equal(decider_backup_inflight(b, w[0]), 1);
    /* The next two go elsewhere: each worker gets one. */
    assert_int_equal(s_route(b, "m", "", NULL, w[1], NULL), IPL_ROUTE_OK);
    assert_int_equal(s_route(b, "m", "", NULL, w[2], NULL), IPL_ROUTE_OK);
    assert_string_not_equal(w[0], w[1]);
    assert_string_not_equal(w[0], w[2]);
    assert_string_not_equal(w[1], w[2]);
    for (int i = 0; i < 3; i++)
        assert_int_equal(decider_backup_inflight(b, w[i]), 1);
    /* Two finish at w[1]'s... one at w[1]: the fourth goes there. */
    decider_backup_done(b, w[1]);
    decider_backup_done(b, w[1]); /* one too many: never below 0 */
    decider_backup_done(b, "nobody");
    assert_int_equal(decider_backup_inflight(b, w[1]), 0);
    char w4[64];
    assert_int_equal(s_route(b, "m", "", NULL, w4, NULL), IPL_ROUTE_OK);
    assert_string_equal(w4, w[1]);
    assert_int_equal(decider_backup_decisions(b), 4);
    decider_backup_destroy(&b);
    s_policy_close(&p);
}

static void test_avoid_and_unknown_model(void **state)
{
    (void)state;
    s_policy_t p = s_policy("inproc://test-backup-2", false);
    decider_backup_t *b = decider_backup_new(p.view);
    char w[64];
    for (int i = 0; i < 5; i++) {
        assert_int_equal(s_route(b, "m", "", "w1", w, NULL), IPL_ROUTE_OK);
        assert_string_not_equal(w, "w1");
    }
    ipl_msg_t rep;
    assert_int_equal(s_route(b, "nope", "", NULL, w, &rep), IPL_ROUTE_NO_POOL);
    assert_string_equal(w, "");
    assert_int_equal(rep.u.route_rep.observe, 0);
    ipl_msg_clear(&rep);
    decider_backup_destroy(&b);
    s_policy_close(&p);
}

static void test_rules_hold(void **state)
{
    (void)state;
    s_policy_t p = s_policy("inproc://test-backup-3", true);
    decider_backup_t *b = decider_backup_new(p.view);
    char w[64];
    ipl_msg_t rep;
    assert_int_equal(s_route(b, "m", "bad", NULL, w, &rep), IPL_ROUTE_REJECTED);
    assert_int_equal(rep.u.route_rep.http_status, 403);
    assert_string_equal(rep.u.route_rep.rule, "p/no-bad");
    ipl_msg_clear(&rep);
    assert_int_equal(s_route(b, "m", "good", NULL, w, NULL), IPL_ROUTE_OK);
    decider_backup_destroy(&b);
    s_policy_close(&p);
}

static void test_new_policy_keeps_counts(void **state)
{
    (void)state;
    s_policy_t p = s_policy("inproc://test-backup-4", false);
    decider_backup_t *b = decider_backup_new(p.view);
    char w[64];
    for (int i = 0; i < 3; i++)
        assert_int_equal(s_route(b, "m", "", NULL, w, NULL), IPL_ROUTE_OK);
    s_publish(&p, 2, false, 2); /* w2 is gone */
    assert_int_equal(s_route(b, "m", "", NULL, w, NULL), IPL_ROUTE_OK);
    assert_string_not_equal(w, "w2");
    assert_int_equal(decider_backup_inflight(b, "w0") + decider_backup_inflight(b, "w1"), 3);
    assert_int_equal(decider_backup_inflight(b, "w2"), 0);
    decider_backup_destroy(&b);
    s_policy_close(&p);
}

int main(void)
{
    ipl_log_set_level(IPL_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nothing_without_a_policy),
        cmocka_unit_test(test_least_loaded_by_its_own_counts),
        cmocka_unit_test(test_avoid_and_unknown_model),
        cmocka_unit_test(test_rules_hold),
        cmocka_unit_test(test_new_policy_keeps_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
