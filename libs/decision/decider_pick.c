/*
 * decider_pick — the helpers a pick function calls (see the header): the router's generator
 * (xorshift64*, its state in the router) and declaring the winner.
 */
#include "decider_pick.h"

#include <stdarg.h>
#include <stdio.h>

// xorshift64*
static uint64_t s_next(decider_pick_t *ctx)
{
    uint64_t x = *ctx->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *ctx->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

uint32_t decider_pick_random(decider_pick_t *ctx, uint32_t n)
{
    return n ? (uint32_t)((s_next(ctx) >> 32) % n) : 0;
}

double decider_pick_uniform(decider_pick_t *ctx)
{
    return (double)(s_next(ctx) >> 11) / 9007199254740992.0; // 53 bits / 2^53
}

bool decider_pick_explains(const decider_pick_t *ctx)
{
    return ctx->explain;
}

void decider_pick_win(decider_pick_t *ctx, int winner, const char *reason, const char *fmt, ...)
{
    decider_decision_t *out = ctx->out;
    out->winner = winner;
    out->reason = reason;
    out->status = IPL_ROUTE_OK;
    out->cands[winner].c.eligible = true;
    out->detail[0] = '\0';
    if (!decider_pick_explains(ctx)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->detail, sizeof out->detail, fmt, ap);
    va_end(ap);
}
