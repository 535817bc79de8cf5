/*
 * limits_bucket — one token bucket: a per-minute limit as a level that refills continuously.
 *
 *      capacity ┬─────────────  level never rises above capacity (the burst a tenant may send)
 *               │   ╱╲    ╱     refill: limit / 60 000 per ms, continuously
 *         level │  ╱  ╲  ╱
 *             0 ┼─╱────╲╱────   a charge is taken whole, so the level may go below zero
 *               │       debt    (a settled overshoot, a peer's admissions): admissions wait
 *                               until the refill has paid it back
 *
 * A request of cost c *fits* when level ≥ min(c, capacity): a request larger than the whole
 * burst waits for a full bucket and then takes it into debt, rather than never passing.
 * Pure arithmetic on caller-supplied times (ms, any consistent clock; a clock that steps
 * back refills nothing): no locks, no clock reads. The caller serialises access.
 */
#ifndef LIMITS_BUCKET_H
#define LIMITS_BUCKET_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    double level;    /* may be negative (debt) */
    double capacity; /* the per-minute limit */
    double rate;     /* refill per ms: capacity / 60000 */
    int64_t last_ms; /* the time level was last brought up to date */
} limits_bucket_t;

/* A full bucket for `per_minute` (> 0) at time now_ms. */
void limits_bucket_init(limits_bucket_t *b, uint64_t per_minute, int64_t now_ms);
/* A new limit: capacity and rate change, the level is kept (clamped to the new capacity). */
void limits_bucket_resize(limits_bucket_t *b, uint64_t per_minute, int64_t now_ms);
/* Brings the level up to now_ms (refill, capped at capacity). */
void limits_bucket_refill(limits_bucket_t *b, int64_t now_ms);
/* Whether cost fits now (after limits_bucket_refill). */
bool limits_bucket_fits(const limits_bucket_t *b, double cost);
/* Milliseconds until cost fits (0 when it fits now), rounded up. */
int64_t limits_bucket_wait_ms(const limits_bucket_t *b, double cost);
/* Debt is bounded: at most this many minutes' worth (a bogus peer report, or one request
 * far larger than the limit, cannot lock a tenant out for longer). */
#define LIMITS_BUCKET_MAX_DEBT 10.0

/* Takes cost (may go into debt, at most LIMITS_BUCKET_MAX_DEBT × capacity); a negative cost
 * gives back, capped at capacity. */
void limits_bucket_charge(limits_bucket_t *b, double cost);
/* Milliseconds until the bucket is full again (the "reset" of x-ratelimit-reset-*). */
int64_t limits_bucket_reset_ms(const limits_bucket_t *b);
/* The whole units left now, 0 in debt (x-ratelimit-remaining-*). */
uint64_t limits_bucket_remaining(const limits_bucket_t *b);

#endif
