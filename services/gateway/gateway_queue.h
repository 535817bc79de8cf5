/*
 * gateway_queue — where a request waits while its pool is saturated (the decider answered
 * OVERLOADED: every worker above its --max-queue), in a fair queue per model (libs/fairq:
 * per tenant, fair by tokens, weights, priority classes with reserved shares), until it is
 * let go and asks the decider again (late binding: the KV-aware choice is made with the
 * state at dispatch time). docs/queueing.md.
 *
 *   handler thread                          gateway_queue                       decider
 *   ask ─────────────────────────────────────────────────────────────────────► OVERLOADED
 *   gateway_queue_wait ──push──► fairq(model) ── blocks on the ticket's own condition
 *        ▲                          │ let one go when none is out:
 *        │ let go (signal one)      │  - gateway_queue_freed(model): a routed request of
 *        └──────────────────────────┤    that model finished
 *                                   │  - the pause timer (retry_ms) when none is in flight
 *                                   │  - a let-go request that was routed (the pool had room:
 *                                   │    the next one tries too)
 *   ask again ─────────────────────────────────────────────────────────────► OK / OVERLOADED
 *   OVERLOADED again: gateway_queue_wait puts it back at the head of its flow (keeping its
 *   place, its charge refunded) and pauses the model's dispatching for retry_ms
 *   anything else: gateway_queue_leave
 *
 * At most one request of a model is out asking at a time (no thundering herd, and no later
 * request taking the slot an earlier one was refused for while the decider's view lagged),
 * and nothing polls while nothing is queued: the timer thread sleeps on a condition until a model
 * is paused with requests waiting. A new request for a model whose queue is not empty joins
 * it without asking first (gateway_queue_busy), so that it cannot overtake those waiting.
 *
 * Deadlines: a request waits at most min(its x-inferplane-deadline-ms, --queue-max-wait-ms)
 * from its arrival; then 429 rate_limit_error `queue_timeout` with Retry-After. A full queue
 * (--queue-max-requests, --queue-max-tokens, --queue-max-tenant-requests) refuses at once:
 * 429 `queue_full`. Stopping answers every waiter 503 `shutting_down` at once.
 *
 * Metrics (registry given at creation):
 *   inferplane_gateway_queue_depth{tenant,priority}      gauge, requests waiting (the one
 *                                                        out asking the decider included)
 *   inferplane_gateway_queue_wait_seconds{tenant}        histogram, of requests let go
 *   inferplane_gateway_queue_dropped_total{tenant,reason} deadline | full | shutdown |
 *                                                        client_gone
 *   inferplane_gateway_queue_dispatches_total            requests let go (retries included)
 *
 * Threads: every function may be called from any thread; the queue has its own mutex and one
 * timer thread. A ticket belongs to the one handler thread that waits with it.
 */
#ifndef GATEWAY_QUEUE_H
#define GATEWAY_QUEUE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fairq.h"
#include "gateway_api.h"
#include "ipl_metrics.h"
#include "ipl_proto.h"

#define GATEWAY_QUEUE_MODEL_MAX      256  /* models with a queue at once */
#define GATEWAY_QUEUE_OUTPUT_DEFAULT 256  /* expected output tokens without max_tokens */
#define GATEWAY_QUEUE_OUTPUT_CAP     4096 /* at most this much of max_tokens is charged */
#define GATEWAY_QUEUE_HANGUP_CHECK_MS 250 /* a waiting client's socket is polled this often */

typedef struct {
    int max_wait_ms;     /* --queue-max-wait-ms; 0: no queuing (OVERLOADED → 429 at once) */
    size_t max_requests; /* --queue-max-requests, all models together (0: 10000) */
    uint64_t max_tokens; /* --queue-max-tokens, all models together (0: no bound) */
    size_t tenant_max_requests; /* --queue-max-tenant-requests (0: max_requests) */
    int retry_ms;               /* pause after a let-go request met OVERLOADED again (0: 20) */
} gateway_queue_config_t;

/* What a request says about its queuing, read from its headers once (gateway_queue_hints). */
typedef struct {
    int priority;         /* x-inferplane-priority as a fairq class, or -1: the tenant's */
    uint64_t deadline_ms; /* x-inferplane-deadline-ms, 0: none */
    uint64_t output;      /* the output tokens it is expected to take (charged to its tenant) */
} gateway_queue_hints_t;

/* A request's place in the queue: on its handler's stack, set up by gateway_queue_ticket,
 * used by gateway_queue_wait (any number of times) and ended by gateway_queue_leave (once). */
typedef struct gateway_queue_ticket {
    char model[128];
    char tenant[FAIRQ_TENANT_MAX + 1];
    uint32_t weight;
    fairq_class_t cls;
    uint64_t deadline_ns; /* mono ns; 0: none */
    int client_fd;        /* the client's socket, watched for a hang-up while waiting (-1:
                             none; gateway_queue_ticket sets -1, the caller may set it) */
    int retry_after_s;    /* after a refusal or timeout: the Retry-After to send */
    /* the queue's */
    fairq_entry_t entry;
    pthread_cond_t cond;
    int state;
    void *scope;
} gateway_queue_ticket_t;

typedef struct gateway_queue gateway_queue_t;

/* The queue and its timer thread, or NULL (out of memory, no thread). `metrics` borrowed. */
gateway_queue_t *gateway_queue_new(const gateway_queue_config_t *config, ipl_metrics_t *metrics);
/* Stops (gateway_queue_stop), joins the timer thread and frees. Every ticket must have left. */
void gateway_queue_destroy(gateway_queue_t **self_p);
/* Every waiting request is answered now (shutting_down) and new waits are refused. */
void gateway_queue_stop(gateway_queue_t *self);

/* Whether requests that meet OVERLOADED wait (false: queuing off, or NULL). */
bool gateway_queue_enabled(const gateway_queue_t *self);
/* Whether requests for `model` are waiting now (a new one then joins them first). */
bool gateway_queue_busy(gateway_queue_t *self, const char *model);

/* Parses the request's x-inferplane-priority and x-inferplane-deadline-ms values (NULL: absent;
 * unparseable values are ignored: counted by the caller's logs, never fatal) and its
 * max_tokens (0: absent) into *out. */
void gateway_queue_hints(const char *priority, const char *deadline_ms, int64_t max_tokens,
                         gateway_queue_hints_t *out);

/* The tenant's fair-queuing weight and priority from the policy's limits (its own entry, else
 * "*", else weight 1 and standard). `policy` may be NULL. */
void gateway_queue_tenant(const ipl_policy_t *policy, const char *tenant, uint32_t *weight,
                          fairq_class_t *cls);

/* Sets up `t` for a request of `model` by `tenant` with `prompt_tokens` that arrived at
 * `start_ns`: its class is the tenant's, lowered (never raised) by hints->priority; its
 * deadline start_ns + min(hints->deadline_ms, max_wait_ms). */
void gateway_queue_ticket(const gateway_queue_t *self, gateway_queue_ticket_t *t, const char *model,
                          const char *tenant, uint32_t weight, fairq_class_t tenant_cls,
                          const gateway_queue_hints_t *hints, uint64_t prompt_tokens,
                          uint64_t start_ns);

/* Waits until `t` is let go: 0 (ask the decider again). Called after each OVERLOADED answer
 * (the first time `t` joins the tail of its flow, later it goes back to the head and the
 * model pauses) or before asking when gateway_queue_busy. Otherwise fills *err and returns
 * IPL_E_RANGE (queue full, 429 queue_full), IPL_E_TIMEOUT (the deadline passed, 429
 * queue_timeout), IPL_E_IO (t->client_fd hung up, 499 client_gone: checked every
 * GATEWAY_QUEUE_HANGUP_CHECK_MS) or IPL_E_AGAIN (stopping, 503 shutting_down);
 * t->retry_after_s is set for the 429s. The ticket has then left the queue
 * (gateway_queue_leave is still called). */
int gateway_queue_wait(gateway_queue_t *self, gateway_queue_ticket_t *t, gateway_api_error_t *err);

/* The end of `t` (after its last wait, whatever came of it): `routed` when the decider then
 * routed it, which lets the next request of the model go as well. Returns how long it waited
 * in the queue, ns: from joining it to its last let-go, or, when it was given up (deadline,
 * hang-up, stopping), to now; 0 when it never joined. */
uint64_t gateway_queue_leave(gateway_queue_t *self, gateway_queue_ticket_t *t, bool routed);

/* A request of `model` by `tenant` that was let go in class `cls`, charged `charged` tokens
 * (its ticket's entry.cost), finished having taken `actual` (prompt + completion, from its
 * usage): its tenant's fair share is corrected (fairq_settle). Call before
 * gateway_queue_freed, so that the next request let go sees it. */
void gateway_queue_settle(gateway_queue_t *self, const char *model, const char *tenant,
                          fairq_class_t cls, uint64_t charged, uint64_t actual);

/* A routed request of `model` finished (its slot is free): one waiting request is let go,
 * unless one is out asking already (it takes the slot, or retries after the pause). Cheap
 * when nothing waits (no lock taken). */
void gateway_queue_freed(gateway_queue_t *self, const char *model);

/* Requests waiting now, in all, those out asking the decider included (for tests). */
size_t gateway_queue_len(gateway_queue_t *self);
/* Whether a request of `model` is out asking the decider now (for tests). */
bool gateway_queue_asking(gateway_queue_t *self, const char *model);

#endif
