/*
 * Unit tests of bench_runner (and bench_client under it) against a local thread server
 * (bench_test_server.h): every request ends as one record whatever the answer — success with
 * its timings and usage, an HTTP error, a truncated stream, a timeout, a request cancelled at
 * the deadline — and multi-turn conversations resend the answers they got.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <curl/curl.h>
#include <math.h>

#include "bench_client.h"
#include "bench_data.h"
#include "bench_runner.h"
#include "bench_test_server.h"

static s_server_t srv;

typedef struct {
    bench_client_t *client;
    bench_data_t *data;
} s_fix_t;

static int setup(void **state)
{
    static s_fix_t f;
    atomic_store(&srv.mode, S_OK);
    char url[64], err[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", srv.port);
    bench_client_config_t cc = {url, BENCH_API_CHAT, NULL, 0.3, 16};
    f.client = bench_client_new(&cc, NULL, NULL, err, sizeof err);
    bench_data_config_t dc;
    bench_data_config_defaults(&dc);
    dc.turns = 2;
    f.data = bench_data_new_synthetic(&dc);
    *state = &f;
    return f.client && f.data ? 0 : -1;
}

static int teardown(void **state)
{
    s_fix_t *f = *state;
    bench_client_destroy(&f->client);
    bench_data_destroy(&f->data);
    return 0;
}

static bench_run_config_t s_cfg(bench_strat_kind_t kind, uint64_t max_requests, double max_s)
{
    bench_run_config_t c = {.strategy = {.kind = kind, .streams = 3, .rate = 50},
                            .max_requests = max_requests,
                            .max_duration_s = max_s,
                            .model = "m",
                            .api = BENCH_API_CHAT,
                            .stream = true,
                            .ignore_eos = true};
    return c;
}

static void test_successes_and_multi_turn(void **state)
{
    s_fix_t *f = *state;
    /* one stream: its three conversations' turns go strictly in order (with several streams
     * one may start a new conversation before another's second turn, and the count of second
     * turns then depends on timing) */
    bench_run_config_t c = s_cfg(BENCH_STRAT_CONCURRENT, 6, 10);
    c.strategy.streams = 1;
    bench_run_result_t r;
    char err[128];
    assert_int_equal(bench_run(f->client, f->data, &c, &r, err, sizeof err), 0);
    assert_int_equal(r.n, 6);
    int second_turns = 0;
    for (size_t i = 0; i < r.n; i++) {
        bench_req_t *q = &r.reqs[i];
        assert_int_equal(q->status, BENCH_SUCCESSFUL);
        assert_int_equal(q->iterations, 3);
        assert_int_equal(q->output_tokens, 3);
        assert_int_equal(q->cached_tokens, 4);
        assert_int_equal(q->http_status, 200);
        assert_true(q->start <= q->first_token && q->first_token <= q->last_token &&
                    q->last_token <= q->end);
        assert_true(q->scheduled <= q->start + 1e-6);
        second_turns += q->turn == 1;
    }
    assert_int_equal(second_turns, 3); // each conversation's two turns
    // The last request sent was a second turn: it carries the first answer back.
    pthread_mutex_lock(&srv.lock);
    assert_non_null(strstr(srv.last_body, "{\"role\":\"assistant\",\"content\":\" ok ok ok\"}"));
    assert_non_null(strstr(srv.last_body, "\"max_tokens\":64"));
    assert_non_null(strstr(srv.last_body, "\"stream_options\":{\"include_usage\":true}"));
    pthread_mutex_unlock(&srv.lock);
    assert_true(r.next_conversation >= 3);
    assert_true(r.cpu_s >= 0 && r.wall_s > 0);
    bench_run_result_free(&r);
}

static void s_expect_all(s_fix_t *f, bench_run_config_t *c, int status, int error, size_t n)
{
    bench_run_result_t r;
    char err[128];
    assert_int_equal(bench_run(f->client, f->data, c, &r, err, sizeof err), 0);
    assert_int_equal(r.n, n);
    for (size_t i = 0; i < r.n; i++) {
        assert_int_equal(r.reqs[i].status, status);
        assert_int_equal(r.reqs[i].error, error);
        assert_int_equal(r.reqs[i].turn, 0); // a failed turn ends its conversation
    }
    bench_run_result_free(&r);
}

static void test_failures_are_records(void **state)
{
    s_fix_t *f = *state;
    bench_run_config_t c = s_cfg(BENCH_STRAT_SYNCHRONOUS, 3, 10);
    atomic_store(&srv.mode, S_HTTP_500);
    s_expect_all(f, &c, BENCH_ERRORED, BENCH_ERR_HTTP, 3);
    atomic_store(&srv.mode, S_TRUNCATED);
    s_expect_all(f, &c, BENCH_ERRORED, BENCH_ERR_TRUNCATED, 3);
    atomic_store(&srv.delay_ms, 1000); // beyond the client's 0.3 s timeout
    atomic_store(&srv.mode, S_SLOW);
    c.max_requests = 1;
    s_expect_all(f, &c, BENCH_ERRORED, BENCH_ERR_TIMEOUT, 1);
    atomic_store(&srv.mode, S_OK);
}

static void test_deadline_cancels(void **state)
{
    s_fix_t *f = *state;
    atomic_store(&srv.delay_ms, 250);
    atomic_store(&srv.mode, S_SLOW);
    // The server answers one connection at a time: one slow request at the deadline.
    bench_run_config_t c = s_cfg(BENCH_STRAT_SYNCHRONOUS, 0, 0.1);
    bench_run_result_t r;
    char err[128];
    assert_int_equal(bench_run(f->client, f->data, &c, &r, err, sizeof err), 0);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.reqs[0].status, BENCH_INCOMPLETE);
    assert_int_equal(r.reqs[0].error, BENCH_ERR_CANCELLED);
    assert_true(r.cancelled);
    assert_true(r.wall_s < 0.2);
    bench_run_result_free(&r);
    atomic_store(&srv.mode, S_OK);
    usleep(300000); // let the server finish that answer
}

static void test_open_loop_rate(void **state)
{
    s_fix_t *f = *state;
    bench_run_config_t c = s_cfg(BENCH_STRAT_CONSTANT, 5, 10);
    c.strategy.rate = 20; // 50 ms apart: 5 first turns over ~0.2 s (second turns follow)
    bench_run_result_t r;
    char err[128];
    assert_int_equal(bench_run(f->client, f->data, &c, &r, err, sizeof err), 0);
    assert_int_equal(r.n, 5);
    double first = INFINITY, last = 0;
    for (size_t i = 0; i < r.n; i++)
        if (r.reqs[i].turn == 0) {
            first = fmin(first, r.reqs[i].scheduled);
            last = fmax(last, r.reqs[i].scheduled);
        }
    assert_true(last - first >= 0.099); // at least 3 arrivals, 50 ms apart
    bench_run_result_free(&r);
}

/* max_conversations: exactly that many conversations, each with all its turns (here 2), in
 * an open loop whose arrivals would go on, and in a closed loop with more streams than
 * conversations. */
static void test_max_conversations(void **state)
{
    s_fix_t *f = *state;
    bench_run_config_t open = s_cfg(BENCH_STRAT_POISSON, 0, 10);
    bench_run_config_t closed = s_cfg(BENCH_STRAT_CONCURRENT, 0, 10);
    closed.strategy.streams = 6;
    bench_run_config_t *cfgs[] = {&open, &closed};
    for (int k = 0; k < 2; k++) {
        cfgs[k]->max_conversations = 4;
        cfgs[k]->first_conversation = 10;
        bench_run_result_t r;
        char err[128];
        assert_int_equal(bench_run(f->client, f->data, cfgs[k], &r, err, sizeof err), 0);
        assert_int_equal(r.n, 8);
        int turns[2] = {0, 0};
        uint32_t seen = 0;
        for (size_t i = 0; i < r.n; i++) {
            assert_int_equal(r.reqs[i].status, BENCH_SUCCESSFUL);
            assert_true(r.reqs[i].turn < 2);
            turns[r.reqs[i].turn]++;
            assert_in_range(r.reqs[i].conversation, 10, 13);
            seen |= 1u << (r.reqs[i].conversation - 10);
        }
        assert_int_equal(turns[0], 4);
        assert_int_equal(turns[1], 4);
        assert_int_equal(seen, 0xf);
        assert_int_equal(r.next_conversation, 14);
        bench_run_result_free(&r);
    }
}

static void test_config_errors(void **state)
{
    s_fix_t *f = *state;
    bench_run_result_t r;
    char err[128];
    bench_run_config_t c = s_cfg(BENCH_STRAT_CONSTANT, 5, 0);
    c.strategy.rate = 0;
    assert_true(bench_run(f->client, f->data, &c, &r, err, sizeof err) < 0);
    assert_non_null(strstr(err, "rate"));
    c = s_cfg(BENCH_STRAT_THROUGHPUT, 0, 0);
    assert_true(bench_run(f->client, f->data, &c, &r, err, sizeof err) < 0);
    assert_non_null(strstr(err, "nothing bounds"));
    c = s_cfg(BENCH_STRAT_REPLAY, 1, 0);
    assert_true(bench_run(f->client, f->data, &c, &r, err, sizeof err) < 0);
    assert_non_null(strstr(err, "trace"));
    bench_strategy_t s = {.kind = BENCH_STRAT_POISSON, .rate = 2.5};
    assert_string_equal(bench_strategy_label(&s), "poisson@2.50");
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (s_server_start(&srv) != 0) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_successes_and_multi_turn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failures_are_records, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadline_cancels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_loop_rate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_conversations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_errors, setup, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    s_server_stop(&srv);
    return rc;
}
