/*
 * Unit tests of gateway_queue: one request let go per freed slot and in fair order, a routed
 * one letting the next go, OVERLOADED again sending it back to the head, the pause timer, the
 * deadline (429 queue_timeout with Retry-After, counted), a full queue refusing at once (also
 * per tenant), a client hanging up while waiting (499, counted), stopping answering every
 * waiter 503, priority order, the tenant's weight and class from the policy's limits, and the
 * request's hints (priority only lowered, deadline clamped). Waiters are real threads (a handler blocks in gateway_queue_wait); every wait in
 * the test is bounded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway_queue.h"
#include "ipl_clock.h"
#include "ipl_error.h"
#include "ipl_metrics.h"

enum { C_NONE = 0, C_AGAIN, C_ROUTED, C_FAILED };

/* A handler thread: waits, reports, then obeys the test's command (wait again, or leave). */
typedef struct {
    gateway_queue_t *q;
    gateway_queue_ticket_t t;
    gateway_api_error_t err;
    atomic_int rc, waits, command;
    atomic_bool done;
    pthread_t thread;
} s_waiter_t;

static void *s_waiter_run(void *arg)
{
    s_waiter_t *w = arg;
    for (;;) {
        int rc = gateway_queue_wait(w->q, &w->t, &w->err);
        atomic_store(&w->rc, rc);
        atomic_fetch_add(&w->waits, 1);
        int cmd = C_FAILED;
        if (rc == 0)
            for (int i = 0; i < 5000 && (cmd = atomic_exchange(&w->command, C_NONE)) == C_NONE; i++)
                ipl_sleep_ms(1);
        if (cmd != C_AGAIN) {
            gateway_queue_leave(w->q, &w->t, cmd == C_ROUTED);
            break;
        }
    }
    atomic_store(&w->done, true);
    return NULL;
}

static s_waiter_t *s_start_fd(gateway_queue_t *q, const char *tenant, fairq_class_t cls,
                              uint64_t prompt_tokens, const gateway_queue_hints_t *hints,
                              int client_fd)
{
    s_waiter_t *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->q = q;
    gateway_queue_hints_t h = {.priority = -1, .output = 0};
    gateway_queue_ticket(q, &w->t, "m", tenant, 1, cls, hints ? hints : &h, prompt_tokens,
                         ipl_mono_ns());
    w->t.client_fd = client_fd;
    atomic_store(&w->rc, 1);
    size_t before = gateway_queue_len(q);
    assert_int_equal(pthread_create(&w->thread, NULL, s_waiter_run, w), 0);
    // it is queued (or refused) before the next one starts: the order is the test's
    for (int i = 0; i < 2000 && gateway_queue_len(q) == before && !atomic_load(&w->waits); i++)
        ipl_sleep_ms(1);
    return w;
}

static s_waiter_t *s_start(gateway_queue_t *q, const char *tenant, fairq_class_t cls,
                           uint64_t prompt_tokens, const gateway_queue_hints_t *hints)
{
    return s_start_fd(q, tenant, cls, prompt_tokens, hints, -1);
}

/* Waits (bounded) until w has returned from `n` waits; its last rc. */
static int s_returned(s_waiter_t *w, int n)
{
    for (int i = 0; i < 3000 && atomic_load(&w->waits) < n; i++)
        ipl_sleep_ms(1);
    assert_int_equal(atomic_load(&w->waits), n);
    return atomic_load(&w->rc);
}

static void s_end(s_waiter_t **w_p, int command)
{
    s_waiter_t *w = *w_p;
    atomic_store(&w->command, command);
    pthread_join(w->thread, NULL);
    assert_true(atomic_load(&w->done));
    free(w);
    *w_p = NULL;
}

static gateway_queue_t *s_queue(ipl_metrics_t *m, int max_wait_ms, size_t max_requests,
                                size_t tenant_max, int retry_ms)
{
    gateway_queue_config_t c = {.max_wait_ms = max_wait_ms,
                                .max_requests = max_requests,
                                .tenant_max_requests = tenant_max,
                                .retry_ms = retry_ms};
    gateway_queue_t *q = gateway_queue_new(&c, m);
    assert_non_null(q);
    return q;
}

static double s_metric(ipl_metrics_t *m, const char *series)
{
    size_t len = 0;
    char *text = ipl_metrics_render(m, &len);
    char line[512];
    snprintf(line, sizeof line, "\n%s", series); // a sample line, not the # HELP one
    const char *at = strstr(text, line);
    double v = at ? strtod(at + strlen(line), NULL) : -1;
    free(text);
    return v;
}

static void test_freed_lets_one_go_fairly(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    gateway_queue_t *q = s_queue(m, 10000, 100, 0, 60000); // the timer never fires here
    assert_false(gateway_queue_busy(q, "m"));
    s_waiter_t *a = s_start(q, "heavy", FAIRQ_STANDARD, 50000, NULL);
    s_waiter_t *b = s_start(q, "heavy", FAIRQ_STANDARD, 50000, NULL);
    s_waiter_t *c = s_start(q, "light", FAIRQ_STANDARD, 500, NULL);
    assert_int_equal(gateway_queue_len(q), 3);
    assert_true(gateway_queue_busy(q, "m"));
    assert_false(gateway_queue_busy(q, "other"));
    assert_float_equal(s_metric(m, "inferplane_gateway_queue_depth{tenant=\"heavy\","
                                   "priority=\"standard\"} "),
                       2, 0);
    // one freed slot: one request goes (the first), nobody else
    gateway_queue_freed(q, "other"); // another model's slot: nothing
    ipl_sleep_ms(20);
    assert_int_equal(gateway_queue_len(q), 3);
    gateway_queue_freed(q, "m");
    assert_int_equal(s_returned(a, 1), 0);
    assert_int_equal(gateway_queue_len(q), 3); // a is out asking: it still waits for a slot
    gateway_queue_freed(q, "m");               // ... and takes this one: nobody else goes
    ipl_sleep_ms(20);
    assert_int_equal(atomic_load(&b->waits), 0);
    assert_int_equal(atomic_load(&c->waits), 0);
    // a was routed: the next goes too, and by tokens that is light's (heavy was charged 50k)
    s_end(&a, C_ROUTED);
    assert_int_equal(s_returned(c, 1), 0);
    assert_int_equal(atomic_load(&b->waits), 0);
    // OVERLOADED again: c goes back to the head and the model pauses (no let-go until freed)
    assert_int_equal(gateway_queue_len(q), 2); // c, out asking, still counts
    assert_true(gateway_queue_asking(q, "m"));
    atomic_store(&c->command, C_AGAIN);
    for (int i = 0; i < 2000 && gateway_queue_asking(q, "m"); i++)
        ipl_sleep_ms(1);
    assert_false(gateway_queue_asking(q, "m"));
    assert_int_equal(gateway_queue_len(q), 2);
    ipl_sleep_ms(20);
    assert_int_equal(atomic_load(&b->waits), 0);
    gateway_queue_freed(q, "m");
    assert_int_equal(s_returned(c, 2), 0); // its place was kept: before b
    assert_int_equal(atomic_load(&b->waits), 0);
    s_end(&c, C_FAILED); // not routed, not saturated either: b tries too
    assert_int_equal(s_returned(b, 1), 0);
    s_end(&b, C_ROUTED);
    assert_int_equal(gateway_queue_len(q), 0);
    assert_float_equal(s_metric(m, "inferplane_gateway_queue_dispatches_total "), 4, 0);
    assert_float_equal(
        s_metric(m, "inferplane_gateway_queue_wait_seconds_count{tenant=\"light\"} "), 1, 0);
    assert_float_equal(s_metric(m, "inferplane_gateway_queue_depth{tenant=\"heavy\","
                                   "priority=\"standard\"} "),
                       0, 0);
    gateway_queue_destroy(&q);
    assert_null(q);
    ipl_metrics_destroy(&m);
}

static void test_timer_retries_without_freed(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    gateway_queue_t *q = s_queue(m, 10000, 100, 0, 20);
    uint64_t t0 = ipl_mono_ms();
    s_waiter_t *a = s_start(q, "t", FAIRQ_STANDARD, 10, NULL);
    assert_int_equal(s_returned(a, 1), 0); // the pause ended: it tries again
    atomic_store(&a->command, C_AGAIN);    // still saturated: back, another pause
    assert_int_equal(s_returned(a, 2), 0);
    uint64_t took = ipl_mono_ms() - t0;
    assert_true(took >= 40 && took < 2000);
    s_end(&a, C_ROUTED);
    assert_float_equal(s_metric(m, "inferplane_gateway_queue_dispatches_total "), 2, 0);
    gateway_queue_destroy(&q);
    ipl_metrics_destroy(&m);
}

static void test_deadline(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    gateway_queue_t *q = s_queue(m, 60, 100, 0, 60000);
    uint64_t t0 = ipl_mono_ms();
    s_waiter_t *a = s_start(q, "t", FAIRQ_STANDARD, 10, NULL);
    assert_int_equal(s_returned(a, 1), IPL_E_TIMEOUT);
    uint64_t took = ipl_mono_ms() - t0;
    assert_true(took >= 55 && took < 2000);
    assert_int_equal(a->err.status, 429);
    assert_string_equal(a->err.code, "queue_timeout");
    assert_non_null(strstr(a->err.message, "model \"m\""));
    assert_true(a->t.retry_after_s >= 1);
    s_end(&a, C_NONE);
    // the request's own deadline, shorter than the maximum
    gateway_queue_hints_t h;
    gateway_queue_hints("batch", "15", 0, &h);
    t0 = ipl_mono_ms();
    a = s_start(q, "t", FAIRQ_STANDARD, 10, &h);
    assert_int_equal(s_returned(a, 1), IPL_E_TIMEOUT);
    assert_true(ipl_mono_ms() - t0 < 55);
    assert_non_null(strstr(a->err.message, "priority batch"));
    s_end(&a, C_NONE);
    assert_int_equal(gateway_queue_len(q), 0);
    assert_float_equal(s_metric(m, "inferplane_gateway_queue_dropped_total{tenant=\"t\","
                                   "reason=\"deadline\"} "),
                       2, 0);
    gateway_queue_destroy(&q);
    ipl_metrics_destroy(&m);
}

static void test_client_gone(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    gateway_queue_t *q = s_queue(m, 10000, 100, 0, 60000);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    s_waiter_t *a = s_start_fd(q, "t", FAIRQ_STANDARD, 10, NULL, sv[0]);
    s_waiter_t *b = s_start(q, "t", FAIRQ_STANDARD, 10, NULL);
    ipl_sleep_ms(GATEWAY_QUEUE_HANGUP_CHECK_MS + 50);
    assert_int_equal(atomic_load(&a->waits), 0); // still connected: still waiting
    uint64_t t0 = ipl_mono_ms();
    close(sv[1]); // the client hangs up
    assert_int_equal(s_returned(a, 1), IPL_E_IO);
    assert_true(ipl_mono_ms() - t0 < 2 * GATEWAY_QUEUE_HANGUP_CHECK_MS + 500);
    assert_int_equal(a->err.status, 499);
    assert_string_equal(a->err.code, "client_gone");
    s_end(&a, C_NONE);
    close(sv[0]);
    assert_int_equal(gateway_queue_len(q), 1); // b is next
    gateway_queue_freed(q, "m");
    assert_int_equal(s_returned(b, 1), 0);
    s_end(&b, C_ROUTED);
    assert_float_equal(s_metric(m, "inferplane_gateway_queue_dropped_total{tenant=\"t\","
                                   "reason=\"client_gone\"} "),
                       1, 0);
    gateway_queue_destroy(&q);
    ipl_metrics_destroy(&m);
}

static void test_full_refuses_at_once(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    gateway_queue_t *q = s_queue(m, 10000, 2, 1, 60000);
    s_waiter_t *a = s_start(q, "t1", FAIRQ_STANDARD, 10, NULL);
    uint64_t t0 = ipl_mono_ms();
    s_waiter_t *a2 = s_start(q, "t1", FAIRQ_STANDARD, 10, NULL); // the tenant's one is taken
    assert_int_equal(s_returned(a2, 1), IPL_E_RANGE);
    assert_string_equal(a2->err.code, "queue_full");
    assert_int_equal(a2->err.status, 429);
    assert_non_null(strstr(a2->err.message, "tenant_full_entries"));
    s_end(&a2, C_NONE);
    s_waiter_t *b = s_start(q, "t2", FAIRQ_STANDARD, 10, NULL);
    s_waiter_t *c = s_start(q, "t3", FAIRQ_STANDARD, 10, NULL); // two in all
    assert_int_equal(s_returned(c, 1), IPL_E_RANGE);
    assert_non_null(strstr(c->err.message, "requests"));
    assert_true(ipl_mono_ms() - t0 < 1000);
    s_end(&c, C_NONE);
    assert_int_equal(gateway_queue_len(q), 2);
    assert_float_equal(s_metric(m, "inferplane_gateway_queue_dropped_total{tenant=\"t3\","
                                   "reason=\"full\"} "),
                       1, 0);
    // stopping answers both at once, 503, and refuses new waits
    t0 = ipl_mono_ms();
    gateway_queue_stop(q);
    assert_int_equal(s_returned(a, 1), IPL_E_AGAIN);
    assert_int_equal(s_returned(b, 1), IPL_E_AGAIN);
    assert_true(ipl_mono_ms() - t0 < 1000);
    assert_int_equal(a->err.status, 503);
    assert_string_equal(a->err.code, "shutting_down");
    s_end(&a, C_NONE);
    s_end(&b, C_NONE);
    a = s_start(q, "t1", FAIRQ_STANDARD, 10, NULL);
    assert_int_equal(s_returned(a, 1), IPL_E_AGAIN);
    s_end(&a, C_NONE);
    assert_float_equal(s_metric(m, "inferplane_gateway_queue_dropped_total{tenant=\"t2\","
                                   "reason=\"shutdown\"} "),
                       1, 0);
    gateway_queue_destroy(&q);
    ipl_metrics_destroy(&m);
}

static void test_priority_order(void **state)
{
    (void)state;
    ipl_metrics_t *m = ipl_metrics_new();
    gateway_queue_t *q = s_queue(m, 10000, 100, 0, 60000);
    s_waiter_t *b = s_start(q, "bulk", FAIRQ_BATCH, 10, NULL);
    s_waiter_t *s = s_start(q, "std", FAIRQ_STANDARD, 10, NULL);
    s_waiter_t *i = s_start(q, "chat", FAIRQ_INTERACTIVE, 10, NULL);
    gateway_queue_freed(q, "m");
    assert_int_equal(s_returned(i, 1), 0);
    assert_int_equal(atomic_load(&b->waits) + atomic_load(&s->waits), 0);
    s_end(&i, C_ROUTED);
    assert_int_equal(s_returned(s, 1), 0);
    s_end(&s, C_ROUTED);
    assert_int_equal(s_returned(b, 1), 0);
    s_end(&b, C_ROUTED);
    gateway_queue_destroy(&q);
    ipl_metrics_destroy(&m);
}

static void test_tenant_and_hints(void **state)
{
    (void)state;
    ipl_limit_t limits[] = {
        {.tenant = "*", .weight = 0, .priority = NULL},
        {.tenant = "gold", .weight = 5, .priority = "interactive"},
        {.tenant = "bulk", .weight = 2000, .priority = "batch"},
        {.tenant = "odd", .priority = "urgent"},
    };
    ipl_policy_t p = {.limits = limits, .limits_len = 4};
    uint32_t w;
    fairq_class_t c;
    gateway_queue_tenant(&p, "gold", &w, &c);
    assert_int_equal(w, 5);
    assert_int_equal(c, FAIRQ_INTERACTIVE);
    gateway_queue_tenant(&p, "bulk", &w, &c);
    assert_int_equal(w, FAIRQ_WEIGHT_MAX);
    assert_int_equal(c, FAIRQ_BATCH);
    gateway_queue_tenant(&p, "someone", &w, &c); // "*"
    assert_int_equal(w, 1);
    assert_int_equal(c, FAIRQ_STANDARD);
    gateway_queue_tenant(&p, "odd", &w, &c); // an unknown class: the default
    assert_int_equal(c, FAIRQ_STANDARD);
    gateway_queue_tenant(NULL, "gold", &w, &c);
    assert_int_equal(w, 1);
    assert_int_equal(c, FAIRQ_STANDARD);

    gateway_queue_hints_t h;
    gateway_queue_hints(NULL, NULL, 0, &h);
    assert_int_equal(h.priority, -1);
    assert_int_equal(h.deadline_ms, 0);
    assert_int_equal(h.output, GATEWAY_QUEUE_OUTPUT_DEFAULT);
    gateway_queue_hints("standard", "-5", 100000, &h);
    assert_int_equal(h.priority, FAIRQ_STANDARD);
    assert_int_equal(h.deadline_ms, 0);
    assert_int_equal(h.output, GATEWAY_QUEUE_OUTPUT_CAP);
    gateway_queue_hints("high", "250ms", 64, &h);
    assert_int_equal(h.priority, -1);
    assert_int_equal(h.deadline_ms, 0);
    assert_int_equal(h.output, 64);

    ipl_metrics_t *m = ipl_metrics_new();
    gateway_queue_t *q = s_queue(m, 1000, 10, 0, 20);
    gateway_queue_ticket_t t;
    gateway_queue_hints("batch", "50", 0, &h);
    gateway_queue_ticket(q, &t, "m", "gold", 5, FAIRQ_INTERACTIVE, &h, 100, 1000000000ULL);
    assert_int_equal(t.cls, FAIRQ_BATCH); // lowered
    assert_int_equal(t.deadline_ns, 1000000000ULL + 50000000ULL);
    assert_int_equal(t.entry.cost, 100 + GATEWAY_QUEUE_OUTPUT_DEFAULT);
    gateway_queue_leave(q, &t, false); // never waited: nothing happens
    gateway_queue_hints("interactive", "5000", 0, &h);
    gateway_queue_ticket(q, &t, "m", "bulk", 1, FAIRQ_BATCH, &h, 100, 1000000000ULL);
    assert_int_equal(t.cls, FAIRQ_BATCH);                           // never raised
    assert_int_equal(t.deadline_ns, 1000000000ULL + 1000000000ULL); // clamped to the maximum
    gateway_queue_leave(q, &t, false);
    gateway_queue_destroy(&q);

    gateway_queue_config_t off = {.max_wait_ms = 0};
    q = gateway_queue_new(&off, m);
    assert_false(gateway_queue_enabled(q));
    assert_false(gateway_queue_enabled(NULL));
    assert_false(gateway_queue_busy(q, "m"));
    gateway_queue_freed(NULL, "m");
    gateway_queue_destroy(&q);
    ipl_metrics_destroy(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_freed_lets_one_go_fairly),
        cmocka_unit_test(test_timer_retries_without_freed),
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_client_gone),
        cmocka_unit_test(test_full_refuses_at_once),
        cmocka_unit_test(test_priority_order),
        cmocka_unit_test(test_tenant_and_hints),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
