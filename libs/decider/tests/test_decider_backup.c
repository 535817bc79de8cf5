/*
 * Unit tests of decider_backup, with the test playing the policy service (a PUB on inproc):
 * nothing to decide without a policy; a request without a full block goes to the least-loaded
 * worker of its pool by the backup's own in-flight counts, which decider_backup_done brings
 * down; the answer says "fallback" and which path decided; avoided workers are skipped; an
 * unknown model is refused as a decider refuses it; the policy's rules hold (a reject rule
 * refuses); a new policy version keeps the counts of the workers it still has. Prefix
 * affinity: a learned prefix wins, the longest one first; the load bound overrides it; a
 * learned worker that is unknown, avoided, or a decision that is not a worker's, is ignored;
 * the table never holds more than its capacity; the rendezvous hash spreads new prompts,
 * agrees between two backups and moves only a removed worker's prompts.
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
    /* no full block: nothing to hash, nothing ties the prompt to a worker (least loaded) */
    char *av[] = {(char *)avoid};
    ipl_route_req_t rq = {.req_id = 77,
                          .model = (char *)model,
                          .tenant = (char *)tenant,
                          .prompt_tokens = 12,
                          .block_size = 16,
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

static void test_least_loaded_without_a_block(void **state)
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
    assert_non_null(strstr(r->detail, "fallback: least loaded → "));
    assert_non_null(strstr(r->detail, "no full block to hash"));
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

/* ---- prefix affinity ---------------------------------------------------------------------- */

#define S_BLOCKS 80 /* 1,280 tokens of 16: the 256- and 1024-token prefixes are reached */

/* A prompt of S_BLOCKS chained hashes: its first `shared` blocks those of prompt family `a`, the
 * rest its own (`b`). Two prompts share a prefix exactly when their hashes agree up to it. */
static void s_prompt(uint64_t *h, uint64_t a, size_t shared, uint64_t b)
{
    for (size_t i = 0; i < S_BLOCKS; i++)
        h[i] = (i < shared ? a * 1000000 : b * 1000000 + 500000) + i + 1;
}

static ipl_route_req_t s_req(const uint64_t *h, size_t n, char **avoid, size_t navoid)
{
    return (ipl_route_req_t){.req_id = 78,
                             .model = "m",
                             .tenant = "",
                             .prompt_tokens = n * 16,
                             .block_size = 16,
                             .hashes = (uint64_t *)h,
                             .hashes_len = n,
                             .strategy = "",
                             .brief = 1,
                             .avoid = avoid,
                             .avoid_len = navoid};
}

/* A decider's answer for prompt h: routed to `worker` in pool chat. */
static void s_learn(decider_backup_t *b, const uint64_t *h, size_t n, const char *worker,
                    bool observe)
{
    ipl_route_req_t rq = s_req(h, n, NULL, 0);
    ipl_route_rep_t rep = {.status = IPL_ROUTE_OK,
                           .reason = "cache_hit",
                           .worker = (char *)worker,
                           .pool = "chat",
                           .target_kind = "worker",
                           .observe = observe};
    decider_backup_learn(b, &rq, &rep);
}

/* Decides prompt h (avoiding `avoid`, or none); the worker into worker[64], the detail into
 * detail[768]; done at once unless `keep` (so the loads stay 0). */
static void s_ask(decider_backup_t *b, const uint64_t *h, size_t n, const char *avoid,
                  char *worker, char *detail, bool keep)
{
    char *av[] = {(char *)avoid};
    ipl_route_req_t rq = s_req(h, n, avoid ? av : NULL, avoid ? 1 : 0);
    ipl_msg_t rep = {0};
    assert_int_equal(decider_backup_route(b, &rq, &rep), 0);
    assert_int_equal(rep.u.route_rep.status, IPL_ROUTE_OK);
    assert_string_equal(rep.u.route_rep.reason, "fallback");
    assert_string_equal(rep.u.route_rep.strategy, "fallback");
    snprintf(worker, 64, "%s", rep.u.route_rep.worker);
    snprintf(detail, 768, "%s", rep.u.route_rep.detail);
    ipl_msg_clear(&rep);
    if (!keep) decider_backup_done(b, worker);
}

static void test_learned_affinity_wins(void **state)
{
    (void)state;
    s_policy_t p = s_policy("inproc://test-backup-5", false);
    decider_backup_t *b = decider_backup_new(p.view);
    uint64_t x[S_BLOCKS], y[S_BLOCKS];
    char w[64], detail[768];
    for (uint64_t k = 1; k <= 12; k++) { /* each prompt to a learned worker, whatever its hash */
        s_prompt(x, k, S_BLOCKS, k);
        const char *to = k % 3 == 0 ? "w0" : k % 3 == 1 ? "w1" : "w2";
        s_learn(b, x, S_BLOCKS, to, false);
        s_prompt(y, k, 64, 100 + k); /* the first 1,024 tokens of x, then its own */
        s_ask(b, y, S_BLOCKS, NULL, w, detail, false);
        assert_string_equal(w, to);
        char want[128];
        snprintf(want, sizeof want, "fallback: learned prefix 1024 tokens → %s", to);
        assert_non_null(strstr(detail, want));
    }
    /* a decider's decision that asks for an OBSERVED counts in flight until it comes */
    s_prompt(x, 50, S_BLOCKS, 50);
    s_learn(b, x, S_BLOCKS, "w2", true);
    assert_int_equal(decider_backup_inflight(b, "w2"), 1);
    decider_backup_done(b, "w2");
    assert_int_equal(decider_backup_inflight(b, "w2"), 0);
    decider_backup_destroy(&b);
    s_policy_close(&p);
}

static void test_longest_prefix_wins(void **state)
{
    (void)state;
    s_policy_t p = s_policy("inproc://test-backup-6", false);
    decider_backup_t *b = decider_backup_new(p.view);
    uint64_t x[S_BLOCKS], y[S_BLOCKS], z[S_BLOCKS];
    char w[64], detail[768];
    s_prompt(x, 7, S_BLOCKS, 7);
    s_prompt(y, 7, 16, 8); /* y shares x's first 256 tokens only */
    s_learn(b, x, S_BLOCKS, "w0", false);
    s_learn(b, y, S_BLOCKS, "w2", false); /* the 256-token prefix now → w2 */
    uint64_t u[S_BLOCKS];
    s_prompt(u, 7, 20, 10); /* only x's first 256 tokens */
    s_ask(b, u, S_BLOCKS, NULL, w, detail, false);
    assert_string_equal(w, "w2");
    assert_non_null(strstr(detail, "learned prefix 256 tokens → w2"));
    s_prompt(z, 7, 70, 9); /* x's first 1,024 tokens and more */
    s_ask(b, z, S_BLOCKS, NULL, w, detail, false);
    assert_string_equal(w, "w0");
    assert_non_null(strstr(detail, "learned prefix 1024 tokens → w0"));
    /* the backup learns its own decisions: w0 holds the 256 tokens too now, the latest */
    s_prompt(u, 7, 20, 11);
    s_ask(b, u, S_BLOCKS, NULL, w, detail, false);
    assert_string_equal(w, "w0");
    assert_non_null(strstr(detail, "learned prefix 256 tokens → w0"));
    /* a prompt shorter than 1,024 tokens reaches the 256 only */
    s_learn(b, y, S_BLOCKS, "w1", false);
    s_ask(b, x, 40, NULL, w, detail, false);
    assert_string_equal(w, "w1");
    assert_non_null(strstr(detail, "learned prefix 256 tokens → w1"));
    decider_backup_destroy(&b);
    s_policy_close(&p);
}

static void test_bounded_load_overrides_affinity(void **state)
{
    (void)state;
    s_policy_t p = s_policy("inproc://test-backup-7", false);
    decider_backup_t *b = decider_backup_new(p.view);
    uint64_t x[S_BLOCKS];
    char w[64], detail[768];
    s_prompt(x, 3, S_BLOCKS, 3);
    s_learn(b, x, S_BLOCKS, "w1", false);
    /* bound = max(2, ceil(1.25 × (in flight + 1) / 3)): w1 takes two, not a third */
    s_ask(b, x, S_BLOCKS, NULL, w, detail, true);
    assert_string_equal(w, "w1");
    assert_non_null(strstr(detail, "(0 in flight here, bound 2)"));
    s_ask(b, x, S_BLOCKS, NULL, w, detail, true);
    assert_string_equal(w, "w1");
    s_ask(b, x, S_BLOCKS, NULL, w, detail, true);
    assert_string_not_equal(w, "w1");
    assert_non_null(
        strstr(detail, "learned prefix 1024 tokens → w1 over the load bound (2 in flight here, "
                       "bound 2)"));
    assert_int_equal(decider_backup_inflight(b, "w1"), 2);
    /* with more in flight everywhere the bound grows: 2 each → bound ceil(1.25 × 7 / 3) = 3 */
    decider_backup_t *c = decider_backup_new(p.view);
    uint64_t fill[S_BLOCKS];
    for (int i = 0; i < 6; i++) { /* two each, by least load: no full block */
        ipl_route_req_t rq = s_req(fill, 0, NULL, 0);
        ipl_msg_t rep = {0};
        assert_int_equal(decider_backup_route(c, &rq, &rep), 0);
        ipl_msg_clear(&rep);
    }
    for (int i = 0; i < 3; i++)
        assert_int_equal(decider_backup_inflight(c, (const char *[]){"w0", "w1", "w2"}[i]), 2);
    s_learn(c, x, S_BLOCKS, "w1", false);
    s_ask(c, x, S_BLOCKS, NULL, w, detail, true);
    assert_string_equal(w, "w1");
    assert_non_null(strstr(detail, "(2 in flight here, bound 3)"));
    decider_backup_destroy(&c);
    decider_backup_destroy(&b);
    s_policy_close(&p);
}

static void test_unknown_or_ineligible_worker_ignored(void **state)
{
    (void)state;
    s_policy_t p = s_policy("inproc://test-backup-8", false);
    decider_backup_t *b = decider_backup_new(p.view);
    uint64_t x[S_BLOCKS];
    char w[64], detail[768];
    /* not a worker's decision: nothing learned */
    s_prompt(x, 4, S_BLOCKS, 4);
    ipl_route_req_t rq = s_req(x, S_BLOCKS, NULL, 0);
    ipl_route_rep_t no = {.status = IPL_ROUTE_NO_WORKER, .worker = "w1", .pool = "chat"};
    decider_backup_learn(b, &rq, &no);
    ipl_route_rep_t provider = {
        .status = IPL_ROUTE_OK, .worker = "openai", .pool = "chat", .target_kind = "provider"};
    decider_backup_learn(b, &rq, &provider);
    ipl_route_rep_t nameless = {.status = IPL_ROUTE_OK, .worker = "", .pool = "chat"};
    decider_backup_learn(b, &rq, &nameless);
    ipl_route_req_t unsized = rq;
    unsized.block_size = 0;
    ipl_route_rep_t ok = {.status = IPL_ROUTE_OK, .worker = "w1", .pool = "chat"};
    decider_backup_learn(b, &unsized, &ok);
    assert_int_equal(decider_backup_learned(b), 0);
    /* a worker the policy does not have: the rendezvous hash decides */
    s_learn(b, x, S_BLOCKS, "nobody", true);
    assert_int_equal(decider_backup_learned(b), 2);
    s_ask(b, x, S_BLOCKS, NULL, w, detail, false);
    assert_non_null(strstr(detail, "rendezvous hash of the first 256 tokens → "));
    assert_non_null(strstr(detail, "learned prefix 1024 tokens: its worker is no candidate"));
    /* a learned worker avoided (a retry, an open breaker): not chosen */
    s_prompt(x, 5, S_BLOCKS, 5);
    s_learn(b, x, S_BLOCKS, "w1", false);
    s_ask(b, x, S_BLOCKS, "w1", w, detail, false);
    assert_string_not_equal(w, "w1");
    assert_non_null(strstr(detail, "its worker is no candidate"));
    decider_backup_destroy(&b);
    s_policy_close(&p);
}

static void test_capacity_bound(void **state)
{
    (void)state;
    s_policy_t p = s_policy("inproc://test-backup-9", false);
    decider_backup_t *b = decider_backup_new(p.view);
    assert_int_equal(decider_backup_capacity(b), DECIDER_BACKUP_CAPACITY);
    decider_backup_destroy(&b);
    b = decider_backup_new_sized(p.view, 100);
    assert_int_equal(decider_backup_capacity(b), 128);
    decider_backup_destroy(&b);
    b = decider_backup_new_sized(p.view, 64);
    assert_int_equal(decider_backup_capacity(b), 64);
    uint64_t x[S_BLOCKS];
    char w[64], detail[768];
    for (uint64_t k = 1; k <= 1000; k++) { /* 2,000 prefixes (256 and 1,024 tokens each) */
        s_prompt(x, k, S_BLOCKS, k);
        s_learn(b, x, S_BLOCKS, k % 2 ? "w0" : "w2", false);
        assert_true(decider_backup_learned(b) <= 64);
    }
    assert_int_equal(decider_backup_learned(b), 64);
    s_prompt(x, 1000, S_BLOCKS, 1000); /* the newest is there */
    s_ask(b, x, S_BLOCKS, NULL, w, detail, false);
    assert_string_equal(w, "w2");
    assert_non_null(strstr(detail, "learned prefix 1024 tokens → w2"));
    s_prompt(x, 1, S_BLOCKS, 1); /* the oldest went out */
    s_ask(b, x, S_BLOCKS, NULL, w, detail, false);
    assert_null(strstr(detail, "learned prefix"));
    assert_int_equal(decider_backup_learned(b), 64); /* learning its own decisions too */
    decider_backup_destroy(&b);
    s_policy_close(&p);
}

static void test_rendezvous_stable(void **state)
{
    (void)state;
    s_policy_t p = s_policy("inproc://test-backup-10", false);
    decider_backup_t *b = decider_backup_new(p.view), *other = decider_backup_new(p.view);
    enum { N = 300 };
    static char first[N][64];
    int per[3] = {0};
    uint64_t x[S_BLOCKS];
    char w[64], detail[768];
    for (int k = 0; k < N; k++) { /* loads stay 0: the hash alone decides */
        s_prompt(x, 10000 + (uint64_t)k, S_BLOCKS, 10000 + (uint64_t)k);
        s_ask(b, x, S_BLOCKS, NULL, first[k], detail, false);
        assert_non_null(strstr(detail, "rendezvous hash of the first 256 tokens → "));
        per[first[k][1] - '0']++;
        s_ask(other, x, S_BLOCKS, NULL, w, detail, false); /* another gateway agrees */
        assert_string_equal(w, first[k]);
    }
    for (int i = 0; i < 3; i++) /* spread: a third each, give or take */
        assert_true(per[i] > N / 5);
    decider_backup_destroy(&other);
    /* w2 leaves the pool: only its prompts move (a backup that has not seen them) */
    s_publish(&p, 2, false, 2);
    other = decider_backup_new(p.view);
    int moved = 0;
    for (int k = 0; k < N; k++) {
        s_prompt(x, 10000 + (uint64_t)k, S_BLOCKS, 10000 + (uint64_t)k);
        s_ask(other, x, S_BLOCKS, NULL, w, detail, false);
        if (!strcmp(first[k], "w2")) {
            assert_string_not_equal(w, "w2");
            moved++;
        } else {
            assert_string_equal(w, first[k]);
        }
    }
    assert_int_equal(moved, per[2]);
    decider_backup_destroy(&other);
    decider_backup_destroy(&b);
    s_policy_close(&p);
}

int main(void)
{
    ipl_log_set_level(IPL_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nothing_without_a_policy),
        cmocka_unit_test(test_least_loaded_without_a_block),
        cmocka_unit_test(test_avoid_and_unknown_model),
        cmocka_unit_test(test_rules_hold),
        cmocka_unit_test(test_new_policy_keeps_counts),
        cmocka_unit_test(test_learned_affinity_wins),
        cmocka_unit_test(test_longest_prefix_wins),
        cmocka_unit_test(test_bounded_load_overrides_affinity),
        cmocka_unit_test(test_unknown_or_ineligible_worker_ignored),
        cmocka_unit_test(test_capacity_bound),
        cmocka_unit_test(test_rendezvous_stable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
