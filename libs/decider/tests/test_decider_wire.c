/*
 * Unit tests of decider_wire: a ROUTE_REQ's request, and a decision's ROUTE_REP decoded back —
 * full (every candidate's figures), brief (none), and a refusal (no worker named).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decider_wire.h"
#include "ipl_error.h"

static ipl_pool_t s_pool = {.name = "chat", .model = "m", .strategy = ""};
static ipl_worker_t s_worker = {
    .name = "w2", .pool = "chat", .model = "m-up", .url = "http://w2", .block_size = 16};

// A routed decision with three candidates, w2 the winner.
static void s_decision(decider_decision_t *d)
{
    decider_decision_init(d);
    d->cands = calloc(3, sizeof *d->cands);
    assert_non_null(d->cands);
    d->cap = d->ncands = 3;
    const char *names[] = {"w1", "w2", "w3"};
    for (int i = 0; i < 3; i++) {
        decider_candidate_t *c = &d->cands[i];
        c->c.worker = (char *)names[i];
        c->c.url = "http://x";
        c->c.note = c->note;
        c->c.cached_tokens = 16u * (uint64_t)i;
        c->c.predicted_ttft_s = 0.1 * (i + 1);
        c->c.running = (uint64_t)i;
        c->c.eligible = true;
        snprintf(c->note, sizeof c->note, "note %d", i);
    }
    d->status = IPL_ROUTE_OK;
    d->reason = "cache_hit";
    snprintf(d->detail, sizeof d->detail, "w2 wins");
    d->pool = &s_pool;
    d->worker = &s_worker;
    d->winner = 1;
    d->predicted_ttft_s = 0.2;
    d->cached_tokens = 16;
    d->state_seq = 77;
}

static ipl_route_rep_t s_decode(const msgpack_sbuffer *b, ipl_msg_t *msg)
{
    assert_int_equal(ipl_msg_decode(b->data, b->size, msg), 0);
    assert_int_equal(msg->type, IPL_MSG_ROUTE_REP);
    return msg->u.route_rep;
}

static void test_request(void **state)
{
    (void)state;
    uint64_t h[2] = {5, 6};
    ipl_route_req_t rq = {.req_id = 9,
                          .model = NULL,
                          .tenant = "t",
                          .prompt_tokens = 40,
                          .block_size = 16,
                          .hashes = h,
                          .hashes_len = 2,
                          .strategy = "ttft",
                          .explain = 0};
    decider_request_t r = decider_wire_request(&rq);
    assert_string_equal(r.model, ""); // a nil model asks for no pool, not a crash
    assert_string_equal(r.tenant, "t");
    assert_string_equal(r.strategy, "ttft");
    assert_int_equal(r.prompt_tokens, 40);
    assert_int_equal(r.block_size, 16);
    assert_ptr_equal(r.hashes, h);
    assert_int_equal(r.nhashes, 2);
    assert_true(r.terse);
    rq.explain = 1;
    rq.model = "m";
    r = decider_wire_request(&rq);
    assert_false(r.terse);
    assert_string_equal(r.model, "m");
    assert_int_equal(r.nlabels, 0);
    assert_null(r.rules); // the server attaches the policy's
    char *labels[] = {"pii"}, *headers[] = {"x-class=batch"};
    rq.labels = labels;
    rq.labels_len = 1;
    rq.headers = headers;
    rq.headers_len = 1;
    r = decider_wire_request(&rq);
    assert_int_equal(r.nlabels, 1);
    assert_string_equal(r.labels[0], "pii");
    assert_int_equal(r.nheaders, 1);
    assert_string_equal(r.headers[0], "x-class=batch");
}

static void test_full_and_brief_replies(void **state)
{
    (void)state;
    decider_decision_t d;
    s_decision(&d);
    decider_wire_t w = {0};
    msgpack_sbuffer b;
    msgpack_sbuffer_init(&b);
    assert_int_equal(decider_wire_reply(&w, 42, &d, true, false, &b), 0);
    ipl_msg_t msg;
    ipl_route_rep_t rep = s_decode(&b, &msg);
    assert_int_equal(rep.req_id, 42);
    assert_int_equal(rep.status, IPL_ROUTE_OK);
    assert_string_equal(rep.reason, "cache_hit");
    assert_string_equal(rep.detail, "w2 wins");
    assert_string_equal(rep.worker, "w2");
    assert_string_equal(rep.url, "http://w2");
    assert_string_equal(rep.pool, "chat");
    assert_string_equal(rep.model, "m-up");
    assert_int_equal(rep.cached_tokens, 16);
    assert_int_equal(rep.state_seq, 77);
    assert_int_equal(rep.observe, 1);
    assert_int_equal(rep.candidates_len, 3);
    assert_string_equal(rep.candidates[2].worker, "w3");
    assert_string_equal(rep.candidates[2].note, "note 2");
    assert_int_equal(rep.candidates[2].cached_tokens, 32);
    size_t full = b.size;
    ipl_msg_clear(&msg);

    // Brief: the same answer without the candidates (appended after the first frame).
    assert_int_equal(decider_wire_reply(&w, 43, &d, false, true, &b), 0);
    msgpack_sbuffer tail = {.size = b.size - full, .data = b.data + full, .alloc = 0};
    rep = s_decode(&tail, &msg);
    assert_int_equal(rep.req_id, 43);
    assert_string_equal(rep.worker, "w2");
    assert_int_equal(rep.observe, 0);
    assert_int_equal(rep.candidates_len, 0);
    assert_true(b.size - full < full / 2);
    ipl_msg_clear(&msg);

    msgpack_sbuffer_destroy(&b);
    decider_wire_clear(&w);
    decider_decision_clear(&d);
}

static void test_refusal_names_no_worker(void **state)
{
    (void)state;
    decider_decision_t d;
    s_decision(&d);
    d.status = IPL_ROUTE_OVERLOADED;
    d.reason = "overloaded";
    decider_wire_t w = {0};
    msgpack_sbuffer b;
    msgpack_sbuffer_init(&b);
    assert_int_equal(decider_wire_reply(&w, 7, &d, false, false, &b), 0);
    ipl_msg_t msg;
    ipl_route_rep_t rep = s_decode(&b, &msg);
    assert_int_equal(rep.status, IPL_ROUTE_OVERLOADED);
    assert_string_equal(rep.reason, "overloaded");
    assert_string_equal(rep.worker, "");
    assert_string_equal(rep.url, "");
    assert_string_equal(rep.model, "");
    assert_int_equal(rep.cached_tokens, 0);
    assert_string_equal(rep.pool, "chat");
    assert_int_equal(rep.candidates_len, 3); // why each was refused is in the candidates
    ipl_msg_clear(&msg);
    msgpack_sbuffer_destroy(&b);
    decider_wire_clear(&w);
    decider_decision_clear(&d);
}

/* A provider decision names the provider, the backend's URL and name, the remote model and
 * the rule; it asks for no OBSERVED (only local workers calibrate the predictor). */
static void test_provider_and_policy_fields(void **state)
{
    (void)state;
    static ipl_backend_t backend = {.name = "cloud-backend", .url = "https://cloud/v1"};
    static ipl_provider_t provider = {.name = "cloud", .backend = "cloud-backend"};
    static ipl_rule_t rule = {.policy = "routing", .name = "burst"};
    decider_decision_t d;
    s_decision(&d);
    d.target = DECIDER_TARGET_PROVIDER;
    d.provider = &provider;
    d.backend = &backend;
    d.upstream_model = "remote-m";
    d.worker = NULL;
    d.winner = -1;
    d.reason = "spill";
    d.rule = &rule;
    decider_wire_t w = {0};
    msgpack_sbuffer b;
    msgpack_sbuffer_init(&b);
    assert_int_equal(decider_wire_reply(&w, 9, &d, true, true, &b), 0);
    ipl_msg_t msg;
    ipl_route_rep_t rep = s_decode(&b, &msg);
    assert_int_equal(rep.status, IPL_ROUTE_OK);
    assert_string_equal(rep.target_kind, "provider");
    assert_string_equal(rep.worker, "cloud");
    assert_string_equal(rep.url, "https://cloud/v1");
    assert_string_equal(rep.backend, "cloud-backend");
    assert_string_equal(rep.model, "remote-m");
    assert_string_equal(rep.rule, "routing/burst");
    assert_int_equal(rep.observe, 0);
    assert_int_equal(rep.http_status, 0);
    ipl_msg_clear(&msg);
    // a rejection carries its HTTP status, a deferral its retry time; neither names a target
    d.status = IPL_ROUTE_REJECTED;
    d.http_status = 403;
    msgpack_sbuffer_clear(&b);
    assert_int_equal(decider_wire_reply(&w, 10, &d, false, true, &b), 0);
    rep = s_decode(&b, &msg);
    assert_int_equal(rep.http_status, 403);
    assert_string_equal(rep.target_kind, "");
    assert_string_equal(rep.worker, "");
    assert_string_equal(rep.backend, "");
    ipl_msg_clear(&msg);
    d.status = IPL_ROUTE_DEFERRED;
    d.retry_after_ms = 500;
    msgpack_sbuffer_clear(&b);
    assert_int_equal(decider_wire_reply(&w, 11, &d, false, true, &b), 0);
    rep = s_decode(&b, &msg);
    assert_int_equal(rep.retry_after_ms, 500);
    assert_int_equal(rep.http_status, 0);
    ipl_msg_clear(&msg);
    msgpack_sbuffer_destroy(&b);
    decider_wire_clear(&w);
    decider_decision_clear(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request),
        cmocka_unit_test(test_full_and_brief_replies),
        cmocka_unit_test(test_refusal_names_no_worker),
        cmocka_unit_test(test_provider_and_policy_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
