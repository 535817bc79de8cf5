/*
 * exporter_outcome — see the header for the vocabulary; the derivation for gateways that do not
 * send RECORD.outcome is below.
 */
#include "exporter_outcome.h"

#include <string.h>

static const char *const s_names[EXPORTER_OUTCOME_COUNT] = {
    "ok",     "rejected", "rate_limited", "queue_timeout", "failed_over", "spilled", "error",
    "cancelled"};

const char *exporter_outcome_name(exporter_outcome_t outcome)
{
    return (unsigned)outcome < EXPORTER_OUTCOME_COUNT ? s_names[outcome] : "error";
}

int exporter_outcome_parse(const char *name)
{
    if (!name) return -1;
    for (int i = 0; i < EXPORTER_OUTCOME_COUNT; i++)
        if (!strcmp(name, s_names[i])) return i;
    return -1;
}

static bool s_has(const char *s, const char *part)
{
    return s && strstr(s, part);
}

/* Derived outcome:
 *   2xx: attempts > 1 → failed_over; a provider answering for the decider's "spill" or
 *        "overflow" reason (or a record without target_kind that has that reason: deciders
 *        give those reasons to provider decisions only) → spilled; else ok.
 *   a reason naming the queue ("queue_timeout", "queue_full") → queue_timeout.
 *   429 with a limit reason ("rate_limit...", "limit...", "...tokens_per_minute") →
 *        rate_limited; other 4xx → rejected (429 "overloaded" included: load shedding).
 *   5xx that routing chose to give (a rule's "rejected", "keep_local" with nowhere to go,
 *        "overloaded") → rejected.
 *   everything else → error: 5xx, no status, and "no_worker" / "not_ready" (an availability
 *        problem, not a decision). */
exporter_outcome_t exporter_outcome_of(const ipl_record_t *rec)
{
    int known = exporter_outcome_parse(rec->outcome);
    if (known >= 0) return (exporter_outcome_t)known;
    uint64_t st = rec->status_code;
    const char *reason = rec->reason ? rec->reason : "";
    if (st >= 200 && st <= 299) {
        if (rec->attempts > 1) return EXPORTER_OUTCOME_FAILED_OVER;
        bool provider = !rec->target_kind || !strcmp(rec->target_kind, "provider");
        if (provider && (!strcmp(reason, "spill") || !strcmp(reason, "overflow")))
            return EXPORTER_OUTCOME_SPILLED;
        return EXPORTER_OUTCOME_OK;
    }
    if (st == 499 || !strcmp(reason, "client_gone")) return EXPORTER_OUTCOME_CANCELLED;
    if (s_has(reason, "queue")) return EXPORTER_OUTCOME_QUEUE_TIMEOUT;
    if (st == 429 && (s_has(reason, "rate_limit") || !strncmp(reason, "limit", 5) ||
                      s_has(reason, "per_minute") || s_has(reason, "concurrent")))
        return EXPORTER_OUTCOME_RATE_LIMITED;
    if (st >= 400 && st <= 499) return EXPORTER_OUTCOME_REJECTED;
    if (st >= 500 && (!strcmp(reason, "overloaded") || !strcmp(reason, "rejected") ||
                      !strcmp(reason, "keep_local")))
        return EXPORTER_OUTCOME_REJECTED;
    return EXPORTER_OUTCOME_ERROR;
}

bool exporter_outcome_failed(exporter_outcome_t outcome)
{
    return outcome == EXPORTER_OUTCOME_REJECTED || outcome == EXPORTER_OUTCOME_RATE_LIMITED ||
           outcome == EXPORTER_OUTCOME_QUEUE_TIMEOUT || outcome == EXPORTER_OUTCOME_ERROR;
}
