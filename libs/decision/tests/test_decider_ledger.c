/*
 * Unit tests of decider_ledger: in-flight counting against load-sample times, and optimistic
 * blocks that last between TTL and 1.5 × TTL and are never extended by later routings; peer
 * routings (the inbox) counting exactly like local ones, at their own times.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "decider_ledger.h"
#include "ipl_error.h"

static const uint64_t s_h[8] = {1, 2, 3, 4, 5, 6, 7, 8};

static uint32_t s_prefix(decider_ledger_t *l, int w, size_t n, uint64_t mono)
{
    uint32_t prefix[8] = {0};
    decider_ledger_match(l, s_h, n, prefix, 8, mono);
    return prefix[w];
}

static void test_ids_and_inflight(void **state)
{
    (void)state;
    decider_ledger_t *l = decider_ledger_new(2000);
    int a = decider_ledger_worker(l, "a"), b = decider_ledger_worker(l, "b");
    assert_int_equal(a, 0);
    assert_int_equal(b, 1);
    assert_int_equal(decider_ledger_worker(l, "a"), 0);
    decider_ledger_routed(l, a, NULL, 0, 100, 0);
    decider_ledger_routed(l, a, NULL, 0, 200, 0);
    decider_ledger_routed(l, a, NULL, 0, 300, 0);
    assert_int_equal(decider_ledger_inflight(l, a, 0, 400), 3);
    assert_int_equal(decider_ledger_inflight(l, a, 150, 400), 2); // a sample at 150 saw one
    assert_int_equal(decider_ledger_inflight(l, a, 300, 400), 0);
    assert_int_equal(decider_ledger_inflight(l, b, 0, 400), 0);
    // Beyond the horizon nothing counts, whatever the sample time.
    assert_int_equal(decider_ledger_inflight(l, a, 0, 300 + DECIDER_LEDGER_INFLIGHT_HORIZON_MS), 0);
    // The ring keeps the newest DECIDER_LEDGER_RING routings.
    for (int i = 0; i < DECIDER_LEDGER_RING + 10; i++)
        decider_ledger_routed(l, b, NULL, 0, 1000 + (uint64_t)i, 0);
    assert_int_equal(decider_ledger_inflight(l, b, 0, 2000), DECIDER_LEDGER_RING);
    assert_int_equal(decider_ledger_inflight(l, -1, 0, 2000), 0);
    decider_ledger_destroy(&l);
    assert_null(l);
}

static void test_optimistic_lifetime_without_extension(void **state)
{
    (void)state;
    decider_ledger_t *l = decider_ledger_new(2000); // rotation every 1000 ms, 3 generations
    int a = decider_ledger_worker(l, "a"), b = decider_ledger_worker(l, "b");
    assert_int_equal(s_prefix(l, a, 8, 0), 0);
    decider_ledger_routed(l, a, s_h, 4, 0, 0);
    assert_int_equal(s_prefix(l, a, 8, 0), 4);
    assert_int_equal(s_prefix(l, b, 8, 0), 0);
    // Routed again with a longer prompt: only the 4 new blocks are added (to the newest gen).
    decider_ledger_routed(l, a, s_h, 8, 0, 1500);
    assert_int_equal(s_prefix(l, a, 8, 1500), 8);
    assert_int_equal(decider_ledger_memberships(l), 8);
    decider_ledger_routed(l, a, s_h, 4, 0, 1600); // already assumed: not extended
    assert_int_equal(decider_ledger_memberships(l), 8);
    assert_int_equal(s_prefix(l, a, 8, 2999), 8);
    // The first 4 blocks, assumed at 0, expire at 3000 (between TTL and 1.5 × TTL): the prefix
    // is broken even though blocks 5..8 (assumed at 1500) are still there.
    assert_int_equal(s_prefix(l, a, 8, 3000), 0);
    assert_int_equal(decider_ledger_memberships(l), 4);
    // After a long idle time every generation is gone at once.
    assert_int_equal(s_prefix(l, a, 8, 100000), 0);
    assert_int_equal(decider_ledger_memberships(l), 0);
    // Ids survive rotations.
    assert_int_equal(decider_ledger_worker(l, "b"), b);
    decider_ledger_routed(l, b, s_h, 2, 0, 100001);
    assert_int_equal(s_prefix(l, b, 8, 100001), 2);
    decider_ledger_destroy(&l);
}

// decider_ledger_record_matched reuses the match of the same prompt, and matches again when the
// prompt or the optimistic blocks changed since (here a peer routing applied in between, into
// an older generation: reusing the match would assume its blocks again in the newest one).
static void test_record_matched_reuses_only_a_valid_match(void **state)
{
    (void)state;
    decider_ledger_t *l = decider_ledger_new(2000); // rotation every 1000 ms
    int a = decider_ledger_worker(l, "a"), b = decider_ledger_worker(l, "b");
    decider_ledger_routed(l, a, s_h, 4, 0, 0);
    uint32_t prefix[8] = {0};
    decider_ledger_match(l, s_h, 8, prefix, 8, 1500); // rotates: a's 4 blocks are in gen 1
    assert_int_equal(prefix[a], 4);
    decider_ledger_peer_t peer = {.worker = "a", .hashes = s_h, .nhashes = 6, .wall_ms = 10};
    assert_int_equal(decider_ledger_post(l, &peer, 10, 900), IPL_OK); // before the rotation
    assert_int_equal(decider_ledger_worker(l, "a"), a);               // applies it: gen 1
    assert_int_equal(decider_ledger_memberships(l), 6);
    decider_ledger_record_matched(l, a, s_h, 8, 0, 20, 1500);
    assert_int_equal(decider_ledger_memberships(l), 8); // only blocks 7 and 8 were new
    assert_int_equal(s_prefix(l, a, 8, 1500), 8);
    // Another prompt length than the one matched: matched again.
    decider_ledger_match(l, s_h, 2, prefix, 8, 1500);
    decider_ledger_record_matched(l, b, s_h, 4, 0, 20, 1500);
    assert_int_equal(s_prefix(l, b, 8, 1500), 4);
    assert_int_equal(decider_ledger_memberships(l), 12);
    // The valid case: the same as decider_ledger_record.
    decider_ledger_match(l, s_h, 8, prefix, 8, 1600);
    assert_int_equal(prefix[b], 4);
    decider_ledger_record_matched(l, b, s_h, 8, 0, 30, 1600);
    assert_int_equal(s_prefix(l, b, 8, 1600), 8);
    assert_int_equal(decider_ledger_memberships(l), 16);
    assert_int_equal(decider_ledger_inflight(l, b, 0, 40), 2);
    decider_ledger_destroy(&l);
}

// Chains split across generations continue per worker, also when several continue from the
// same block (one match serves them all) and a third only holds the start.
static void test_split_chains_of_several_workers(void **state)
{
    (void)state;
    decider_ledger_t *l = decider_ledger_new(2000);
    int a = decider_ledger_worker(l, "a"), b = decider_ledger_worker(l, "b");
    int c = decider_ledger_worker(l, "c");
    decider_ledger_routed(l, a, s_h, 4, 0, 0);
    decider_ledger_routed(l, b, s_h, 4, 0, 0);
    decider_ledger_routed(l, c, s_h, 4, 0, 0);
    decider_ledger_routed(l, a, s_h, 8, 0, 1500); // blocks 5..8 in the newest generation
    decider_ledger_routed(l, b, s_h, 6, 0, 1500); // blocks 5..6
    uint32_t prefix[8] = {0};
    assert_int_equal(decider_ledger_match(l, s_h, 8, prefix, 8, 1500), 8);
    assert_int_equal(prefix[a], 8);
    assert_int_equal(prefix[b], 6);
    assert_int_equal(prefix[c], 4);
    decider_ledger_destroy(&l);
}

static void test_ttl_zero_disables(void **state)
{
    (void)state;
    decider_ledger_t *l = decider_ledger_new(0);
    int a = decider_ledger_worker(l, "a");
    decider_ledger_routed(l, a, s_h, 8, 10, 0);
    assert_int_equal(s_prefix(l, a, 8, 0), 0);
    assert_int_equal(decider_ledger_inflight(l, a, 0, 20), 1);
    decider_ledger_destroy(&l);
}

static void test_inflight_tokens_and_order(void **state)
{
    (void)state;
    decider_ledger_t *l = decider_ledger_new(2000);
    int a = decider_ledger_worker(l, "a");
    decider_ledger_record(l, a, NULL, 0, 100, 100, 0);
    decider_ledger_record(l, a, NULL, 0, 300, 300, 0);
    decider_ledger_record(l, a, NULL, 0, 200, 200, 0); // recorded late: kept in time order
    decider_ledger_routed(l, a, NULL, 0, 250, 0);      // no token count
    assert_int_equal(decider_ledger_inflight(l, a, 0, 400), 4);
    assert_int_equal(decider_ledger_inflight(l, a, 150, 400), 3);
    assert_int_equal(decider_ledger_inflight_tokens(l, a, 150, 400), 500);
    assert_int_equal(decider_ledger_inflight(l, a, 225, 400), 2);
    assert_int_equal(decider_ledger_inflight_tokens(l, a, 225, 400), 300);
    assert_int_equal(decider_ledger_inflight_tokens(l, a, 300, 400), 0);
    // A full ring drops a routing older than everything it keeps.
    int b = decider_ledger_worker(l, "b");
    for (int i = 0; i < DECIDER_LEDGER_RING; i++)
        decider_ledger_record(l, b, NULL, 0, 1, 1000 + (uint64_t)i, 0);
    decider_ledger_record(l, b, NULL, 0, 1, 999, 0);
    assert_int_equal(decider_ledger_inflight(l, b, 999, 2000), DECIDER_LEDGER_RING);
    decider_ledger_record(l, b, NULL, 0, 1, 1100, 0); // inside the window: the oldest goes
    assert_int_equal(decider_ledger_inflight(l, b, 1000, 2000), DECIDER_LEDGER_RING);
    assert_int_equal(decider_ledger_inflight(l, b, 1100, 2000), DECIDER_LEDGER_RING - 101);
    decider_ledger_destroy(&l);
}

// In-flight counts and tokens against a model (a sorted list of at most RING routings: one
// older than all of a full list is dropped, else the oldest leaves), over random routings that
// arrive partly out of order (peers), wrapping the ring many times.
static void test_inflight_matches_a_model(void **state)
{
    (void)state;
    enum { N = 5000, CAP = DECIDER_LEDGER_RING };
    static uint64_t at[CAP + 1], tok[CAP + 1];
    size_t n = 0;
    decider_ledger_t *l = decider_ledger_new(0);
    int w = decider_ledger_worker(l, "w");
    uint64_t x = 12345, now = 100000;
    for (int k = 0; k < N; k++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        now += x % 3;
        uint64_t t = x % 5 == 0 ? now - (x >> 8) % 400 : now; // a fifth late by up to 400 ms
        uint64_t tokens = (x >> 20) % 10000;
        decider_ledger_record(l, w, NULL, 0, tokens, t, 1);
        if (!(n == CAP && t < at[0])) {
            size_t pos = n;
            while (pos > 0 && at[pos - 1] > t)
                pos--;
            memmove(&at[pos + 1], &at[pos], (n - pos) * sizeof *at);
            memmove(&tok[pos + 1], &tok[pos], (n - pos) * sizeof *tok);
            at[pos] = t, tok[pos] = tokens, n++;
            if (n > CAP) {
                memmove(&at[0], &at[1], CAP * sizeof *at);
                memmove(&tok[0], &tok[1], CAP * sizeof *tok);
                n = CAP;
            }
        }
        for (int q = 0; q < 3; q++) {
            uint64_t since = now - (x >> (30 + q * 8)) % 600;
            uint32_t want = 0;
            uint64_t want_tokens = 0;
            for (size_t i = 0; i < n; i++)
                if (at[i] > since) want++, want_tokens += tok[i];
            uint64_t got_tokens = 0;
            assert_int_equal(decider_ledger_inflight_sum(l, w, since, now + 1, &got_tokens), want);
            assert_int_equal(got_tokens, want_tokens);
            assert_int_equal(decider_ledger_inflight(l, w, since, now + 1), want);
            assert_int_equal(decider_ledger_inflight_tokens(l, w, since, now + 1), want_tokens);
        }
    }
    decider_ledger_destroy(&l);
}

// decider_ledger_inflight_sum remembers its last answer per worker: asked again it answers the
// same; a routing recorded to that worker (a peer's late one too) or another question, anew.
static void test_inflight_sum_asked_again(void **state)
{
    (void)state;
    decider_ledger_t *l = decider_ledger_new(2000);
    int a = decider_ledger_worker(l, "a"), b = decider_ledger_worker(l, "b");
    decider_ledger_record(l, a, NULL, 0, 100, 1000, 1);
    decider_ledger_record(l, b, NULL, 0, 7, 1000, 1);
    uint64_t tokens = 0;
    for (int k = 0; k < 2; k++) {
        assert_int_equal(decider_ledger_inflight_sum(l, a, 500, 2000, &tokens), 1);
        assert_int_equal(tokens, 100);
    }
    decider_ledger_record(l, a, NULL, 0, 20, 1500, 1);
    assert_int_equal(decider_ledger_inflight_sum(l, a, 500, 2000, &tokens), 2);
    assert_int_equal(tokens, 120);
    decider_ledger_record(l, a, NULL, 0, 3, 800, 1); // late: lands before the newest
    assert_int_equal(decider_ledger_inflight_sum(l, a, 500, 2000, &tokens), 3);
    assert_int_equal(tokens, 123);
    assert_int_equal(decider_ledger_inflight_sum(l, a, 900, 2000, &tokens), 2);
    assert_int_equal(tokens, 120);
    // Only the worker recorded to answers anew; the horizon moves the question too.
    decider_ledger_record(l, b, NULL, 0, 5, 1200, 1);
    assert_int_equal(decider_ledger_inflight_sum(l, a, 900, 2000, &tokens), 2);
    assert_int_equal(tokens, 120);
    assert_int_equal(decider_ledger_inflight_sum(l, b, 500, 2000, &tokens), 2);
    assert_int_equal(tokens, 12);
    assert_int_equal(
        decider_ledger_inflight_sum(l, a, 900, 1100 + DECIDER_LEDGER_INFLIGHT_HORIZON_MS, &tokens),
        1);
    assert_int_equal(tokens, 20);
    assert_int_equal(decider_ledger_inflight_sum(l, -1, 0, 2000, &tokens), 0);
    assert_int_equal(tokens, 0);
    decider_ledger_destroy(&l);
}

static void test_clock_going_back_keeps_generations(void **state)
{
    (void)state;
    decider_ledger_t *l = decider_ledger_new(2000);
    int a = decider_ledger_worker(l, "a");
    assert_int_equal(s_prefix(l, a, 8, 0), 0);
    decider_ledger_routed(l, a, s_h, 4, 0, 1500); // rotates once (to 1000)
    // A decision that read the clock just before another thread's: nothing is dropped.
    assert_int_equal(s_prefix(l, a, 8, 900), 4);
    assert_int_equal(s_prefix(l, a, 8, 1500), 4);
    decider_ledger_destroy(&l);
}

static decider_ledger_peer_t s_peer(const char *worker, size_t n, uint64_t tokens, uint64_t wall)
{
    return (decider_ledger_peer_t){
        .worker = worker, .hashes = s_h, .nhashes = n, .uncached_tokens = tokens, .wall_ms = wall};
}

static void test_peer_routings_count_like_local_ones(void **state)
{
    (void)state;
    decider_ledger_t *l = decider_ledger_new(2000);
    int a = decider_ledger_worker(l, "a");
    decider_ledger_routed(l, a, NULL, 0, 300, 0);
    decider_ledger_peer_t p = s_peer("b", 4, 120, 500);
    assert_int_equal(decider_ledger_post(l, &p, 1000, 0), IPL_OK);
    p = s_peer("a", 0, 7, 200); // before our own routing of "a"
    assert_int_equal(decider_ledger_post(l, &p, 1000, 0), IPL_OK);
    decider_ledger_peer_stats_t st;
    decider_ledger_peer_stats(l, &st);
    assert_int_equal(st.posted, 2);
    assert_int_equal(st.pending, 2);
    assert_int_equal(st.applied, 0);
    // Applied by the next call of the owner's thread: "b" gets the next id.
    int b = decider_ledger_worker(l, "b");
    assert_int_equal(b, 1);
    decider_ledger_peer_stats(l, &st);
    assert_int_equal(st.applied, 2);
    assert_int_equal(st.pending, 0);
    assert_int_equal(decider_ledger_inflight(l, b, 400, 1000), 1);
    assert_int_equal(decider_ledger_inflight_tokens(l, b, 400, 1000), 120);
    assert_int_equal(decider_ledger_inflight(l, b, 500, 1000), 0); // a sample at 500 saw it
    assert_int_equal(decider_ledger_inflight(l, a, 100, 1000), 2);
    assert_int_equal(decider_ledger_inflight(l, a, 250, 1000), 1);
    assert_int_equal(s_prefix(l, b, 8, 0), 4); // optimistic, like a local routing
    assert_int_equal(s_prefix(l, a, 8, 0), 0);
    // A peer clock ahead of ours: the routing counts from our "now", not from its future.
    p = s_peer("a", 0, 0, 9000);
    assert_int_equal(decider_ledger_post(l, &p, 1000, 0), IPL_OK);
    decider_ledger_apply_peers(l);
    assert_int_equal(decider_ledger_inflight(l, a, 999, 1000), 1);
    assert_int_equal(decider_ledger_inflight(l, a, 1000, 1001), 0);
    // No worker name: refused.
    p = s_peer("", 0, 0, 1);
    assert_int_equal(decider_ledger_post(l, &p, 1000, 0), IPL_E_INVAL);
    decider_ledger_destroy(&l);
}

static void test_peer_blocks_age_from_their_arrival(void **state)
{
    (void)state;
    decider_ledger_t *l = decider_ledger_new(2000); // rotation every 1000 ms
    int a = decider_ledger_worker(l, "a");
    assert_int_equal(s_prefix(l, a, 8, 0), 0);    // generations start at 0
    assert_int_equal(s_prefix(l, a, 8, 1500), 0); // rotated at 1000
    // Arrived at 500, applied only at 2999: it sits in the generation that was newest at 500,
    // so it expires at 3000 exactly like a local routing at 500 would.
    decider_ledger_peer_t p = s_peer("a", 4, 0, 1);
    assert_int_equal(decider_ledger_post(l, &p, 10, 500), IPL_OK);
    assert_int_equal(s_prefix(l, a, 8, 2999), 4);
    assert_int_equal(s_prefix(l, a, 8, 3000), 0);
    // Arrived at 3100 but applied at 9000: long expired, never assumed.
    assert_int_equal(decider_ledger_post(l, &p, 10, 3100), IPL_OK);
    assert_int_equal(s_prefix(l, a, 8, 9000), 0);
    assert_int_equal(decider_ledger_memberships(l), 0);
    decider_ledger_destroy(&l);
}

// A routing posted to one ledger reaches that ledger only: no ledger is shared behind its
// owner's back.
static void test_inboxes_are_per_ledger_and_bounded(void **state)
{
    (void)state;
    decider_ledger_t *x = decider_ledger_new(2000), *y = decider_ledger_new(2000);
    decider_ledger_peer_t p = s_peer("w", 2, 1, 5);
    assert_int_equal(decider_ledger_post(x, &p, 10, 0), IPL_OK);
    assert_int_equal(decider_ledger_post(x, &p, 10, 0), IPL_OK);
    int w = decider_ledger_worker(x, "w");
    assert_int_equal(decider_ledger_inflight(x, w, 0, 10), 2);
    int wy = decider_ledger_worker(y, "w");
    assert_int_equal(decider_ledger_inflight(y, wy, 0, 10), 0);
    decider_ledger_peer_stats_t sy;
    decider_ledger_peer_stats(y, &sy);
    assert_int_equal(sy.posted, 0);
    decider_ledger_destroy(&y);
    assert_null(y);
    p.worker = NULL;
    assert_int_equal(decider_ledger_post(x, &p, 10, 0), IPL_E_INVAL);
    // The inbox keeps the newest DECIDER_LEDGER_INBOX_MAX routings.
    p = s_peer("w", 0, 1, 5);
    for (int i = 0; i < DECIDER_LEDGER_INBOX_MAX + 5; i++)
        assert_int_equal(decider_ledger_post(x, &p, 10, 0), IPL_OK);
    decider_ledger_peer_stats_t st;
    decider_ledger_peer_stats(x, &st);
    assert_int_equal(st.dropped, 5);
    assert_int_equal(st.pending, DECIDER_LEDGER_INBOX_MAX);
    decider_ledger_destroy(&x); // frees what is still queued
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids_and_inflight),
        cmocka_unit_test(test_optimistic_lifetime_without_extension),
        cmocka_unit_test(test_record_matched_reuses_only_a_valid_match),
        cmocka_unit_test(test_split_chains_of_several_workers),
        cmocka_unit_test(test_ttl_zero_disables),
        cmocka_unit_test(test_inflight_tokens_and_order),
        cmocka_unit_test(test_inflight_matches_a_model),
        cmocka_unit_test(test_inflight_sum_asked_again),
        cmocka_unit_test(test_clock_going_back_keeps_generations),
        cmocka_unit_test(test_peer_routings_count_like_local_ones),
        cmocka_unit_test(test_peer_blocks_age_from_their_arrival),
        cmocka_unit_test(test_inboxes_are_per_ledger_and_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
