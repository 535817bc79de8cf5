/*
 * Unit tests of clustersim_queue: earliest first, equal times in insertion order (the
 * determinism of every run rests on it), payload kept, growth past the initial capacity, and
 * a random interleaving of pushes and pops checked against a sorted reference.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "clustersim_queue.h"

static void test_empty(void **state)
{
    (void)state;
    clustersim_queue_t *q = clustersim_queue_new();
    assert_non_null(q);
    clustersim_event_t ev;
    assert_false(clustersim_queue_pop(q, &ev));
    assert_null(clustersim_queue_peek(q));
    assert_int_equal(clustersim_queue_size(q), 0);
    clustersim_queue_destroy(&q);
    assert_null(q);
    clustersim_queue_destroy(&q); // idempotent
}

static void test_earliest_first_and_payload(void **state)
{
    (void)state;
    clustersim_queue_t *q = clustersim_queue_new();
    const double times[] = {3.0, 1.0, 2.5, 0.5, 10.0, 2.0};
    int dummy;
    for (uint32_t i = 0; i < 6; i++) {
        clustersim_event_t ev = {.t = times[i],
                                 .kind = i,
                                 .id = 100 + i,
                                 .a = i * 7,
                                 .b = i * 9,
                                 .x = times[i] * 2,
                                 .p = &dummy};
        assert_int_equal(clustersim_queue_push(q, &ev), 0);
    }
    assert_int_equal(clustersim_queue_size(q), 6);
    assert_true(clustersim_queue_peek(q)->t == 0.5);
    const double want[] = {0.5, 1.0, 2.0, 2.5, 3.0, 10.0};
    for (int i = 0; i < 6; i++) {
        clustersim_event_t ev;
        assert_true(clustersim_queue_pop(q, &ev));
        assert_true(ev.t == want[i]);
        assert_int_equal(ev.id, 100 + ev.kind);
        assert_int_equal(ev.a, ev.kind * 7);
        assert_int_equal(ev.b, ev.kind * 9);
        assert_true(ev.x == ev.t * 2);
        assert_ptr_equal(ev.p, &dummy);
    }
    assert_int_equal(clustersim_queue_pushed(q), 6);
    clustersim_queue_destroy(&q);
}

static void test_ties_pop_in_insertion_order(void **state)
{
    (void)state;
    clustersim_queue_t *q = clustersim_queue_new();
    // Interleave two times so that the heap's layout is not trivially insertion order.
    for (uint32_t i = 0; i < 1000; i++) {
        clustersim_event_t ev = {.t = (i % 2) ? 1.0 : 2.0, .id = i};
        assert_int_equal(clustersim_queue_push(q, &ev), 0);
    }
    uint32_t last_odd = 0, last_even = 0;
    bool first_odd = true, first_even = true;
    for (uint32_t i = 0; i < 1000; i++) {
        clustersim_event_t ev;
        assert_true(clustersim_queue_pop(q, &ev));
        if (i < 500) {
            assert_true(ev.t == 1.0);
            assert_true(first_odd || ev.id > last_odd);
            last_odd = ev.id;
            first_odd = false;
        } else {
            assert_true(ev.t == 2.0);
            assert_true(first_even || ev.id > last_even);
            last_even = ev.id;
            first_even = false;
        }
    }
    clustersim_queue_destroy(&q);
}

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void test_random_against_reference(void **state)
{
    (void)state;
    clustersim_queue_t *q = clustersim_queue_new();
    enum { N = 20000 };
    double *ref = malloc(N * sizeof *ref);
    size_t nref = 0;
    uint64_t x = 12345;
    double now = 0;
    for (int round = 0; round < N; round++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if (x % 3 != 0 || nref == 0) { // push at or after "now", as a simulation does
            clustersim_event_t ev = {.t = now + (double)(x % 1000) / 100.0};
            assert_int_equal(clustersim_queue_push(q, &ev), 0);
            ref[nref++] = ev.t;
        } else {
            qsort(ref, nref, sizeof *ref, s_cmp);
            clustersim_event_t ev;
            assert_true(clustersim_queue_pop(q, &ev));
            assert_true(ev.t == ref[0]);
            assert_true(ev.t >= now);
            now = ev.t;
            ref[0] = ref[--nref];
        }
        assert_int_equal(clustersim_queue_size(q), nref);
    }
    qsort(ref, nref, sizeof *ref, s_cmp);
    for (size_t i = 0; i < nref; i++) {
        clustersim_event_t ev;
        assert_true(clustersim_queue_pop(q, &ev));
        assert_true(ev.t == ref[i]);
    }
    assert_int_equal(clustersim_queue_size(q), 0);
    free(ref);
    clustersim_queue_destroy(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_earliest_first_and_payload),
        cmocka_unit_test(test_ties_pop_in_insertion_order),
        cmocka_unit_test(test_random_against_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
