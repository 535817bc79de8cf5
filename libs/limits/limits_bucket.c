/*
 * limits_bucket — one token bucket (see the header for the picture).
 */
#include "limits_bucket.h"

#include <math.h>

void limits_bucket_init(limits_bucket_t *b, uint64_t per_minute, int64_t now_ms)
{
    b->capacity = (double)per_minute;
    b->rate = b->capacity / 60000.0;
    b->level = b->capacity;
    b->last_ms = now_ms;
}

void limits_bucket_resize(limits_bucket_t *b, uint64_t per_minute, int64_t now_ms)
{
    limits_bucket_refill(b, now_ms);
    b->capacity = (double)per_minute;
    b->rate = b->capacity / 60000.0;
    if (b->level > b->capacity) b->level = b->capacity;
}

void limits_bucket_refill(limits_bucket_t *b, int64_t now_ms)
{
    if (now_ms <= b->last_ms) return; // a clock that stepped back refills nothing
    b->level += (double)(now_ms - b->last_ms) * b->rate;
    if (b->level > b->capacity) b->level = b->capacity;
    b->last_ms = now_ms;
}

static double s_need(const limits_bucket_t *b, double cost)
{
    return cost < b->capacity ? cost : b->capacity;
}

bool limits_bucket_fits(const limits_bucket_t *b, double cost)
{
    // A hair of tolerance: a refill of exactly the missing amount must fit.
    return b->level + 1e-9 >= s_need(b, cost);
}

int64_t limits_bucket_wait_ms(const limits_bucket_t *b, double cost)
{
    if (limits_bucket_fits(b, cost) || b->rate <= 0) return 0;
    return (int64_t)ceil((s_need(b, cost) - b->level) / b->rate - 1e-9);
}

void limits_bucket_charge(limits_bucket_t *b, double cost)
{
    b->level -= cost;
    if (b->level > b->capacity) b->level = b->capacity;
    if (b->level < -LIMITS_BUCKET_MAX_DEBT * b->capacity)
        b->level = -LIMITS_BUCKET_MAX_DEBT * b->capacity;
}

int64_t limits_bucket_reset_ms(const limits_bucket_t *b)
{
    if (b->level >= b->capacity || b->rate <= 0) return 0;
    return (int64_t)ceil((b->capacity - b->level) / b->rate - 1e-9);
}

uint64_t limits_bucket_remaining(const limits_bucket_t *b)
{
    return b->level > 0 ? (uint64_t)floor(b->level + 1e-9) : 0;
}
