/*
 * exporter_outcome — what became of a request, as one word of a closed vocabulary.
 *
 *   ok             answered (2xx) by the first target tried, chosen by routing
 *   rejected       refused on purpose before any target answered: a policy rule (reject),
 *                  the pool overloaded (load shedding), an unknown model, a bad or
 *                  unauthorised request — RECORD.reason says which
 *   rate_limited   refused by a tenant limit (429 with a limit reason)
 *   queue_timeout  waited in the gateway's fair queue (or a deferral) and was given up
 *   failed_over    answered (2xx) after an earlier attempt failed (attempts > 1)
 *   spilled        answered (2xx) by a provider that a spill rule or an overflow target chose
 *   error          anything else: an upstream failure, a stream that broke off, a 5xx, no
 *                  worker up or a decider not ready
 *
 * A gateway that knows says so in RECORD.outcome; for older gateways (NULL) and words this
 * exporter does not know, the outcome is derived from status_code, reason, attempts and
 * target_kind (exporter_outcome_of; docs/metrics.md, "Outcomes").
 * Pure functions on borrowed records: any thread.
 */
#ifndef EXPORTER_OUTCOME_H
#define EXPORTER_OUTCOME_H

#include <stdbool.h>

#include "ipl_proto.h"

typedef enum {
    EXPORTER_OUTCOME_OK = 0,
    EXPORTER_OUTCOME_REJECTED,
    EXPORTER_OUTCOME_RATE_LIMITED,
    EXPORTER_OUTCOME_QUEUE_TIMEOUT,
    EXPORTER_OUTCOME_FAILED_OVER,
    EXPORTER_OUTCOME_SPILLED,
    EXPORTER_OUTCOME_ERROR,
    EXPORTER_OUTCOME_CANCELLED, /* the client hung up before its answer (499) */
    EXPORTER_OUTCOME_COUNT
} exporter_outcome_t;

/* "ok", "rejected", ...; "error" for anything out of range. */
const char *exporter_outcome_name(exporter_outcome_t outcome);
/* The outcome named `name`, or -1 (NULL, "", or a word not in the vocabulary). */
int exporter_outcome_parse(const char *name);
/* The record's outcome: RECORD.outcome when it is a known word, else derived. */
exporter_outcome_t exporter_outcome_of(const ipl_record_t *rec);
/* Whether the outcome means the client got no answer (rejected, rate_limited, queue_timeout,
 * error): those are counted by reason too. */
bool exporter_outcome_failed(exporter_outcome_t outcome);

#endif
