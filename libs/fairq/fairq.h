/*
 * fairq — a fair queue of requests keyed by tenant, fair by tokens, with tenant weights,
 * three priority classes with reserved shares, deadlines and bounded memory.
 *
 * What it implements (docs/queueing.md, "The algorithm"):
 *
 *   - Fairness by tokens: the Virtual Token Counter of Sheng et al., "Fairness in Serving
 *     Large Language Models" (OSDI 2024), which is start-time fair queuing (Goyal, Vin and
 *     Cheng, SIGCOMM 1996; in the line of Demers, Keshav and Shenker's weighted fair queuing,
 *     SIGCOMM 1989) with a request's cost in tokens. Every (tenant, class) flow has a counter
 *     of the service it received, in tokens divided by its weight. The next request is the
 *     head of the backlogged flow with the smallest counter; dispatching it adds
 *     cost × FAIRQ_WEIGHT_SCALE / weight to that counter. A request's cost is what the caller
 *     says: its prompt tokens plus the output it expects (at least 1); fairq_settle corrects
 *     it when the real figure is known.
 *   - Counter lift (VTC, Algorithm 2): a flow that becomes backlogged again starts from
 *     max(its counter, the class's virtual time), the virtual time being the smallest
 *     backlogged counter at the last dispatch (never decreasing). A tenant that was idle
 *     therefore gets no burst of credit for the time it did not ask.
 *   - Priority classes: interactive before standard before batch, with reserved shares: a
 *     backlogged class c earns reserve_percent[c] credit per dispatch and, once it has 100,
 *     is served next whatever else waits (the highest class among those so due first); being
 *     served costs a class 100 credit (floor 0); an empty class holds none. So each class
 *     gets at least its reserve of the dispatches while it has work (batch is never starved)
 *     and interactive goes first otherwise.
 *   - Deadlines: an entry may carry one; fairq_expire removes and returns those past it.
 *   - Bounds: max entries and max tokens overall and per tenant, and max flows; a push over
 *     any bound is refused at once with its reason (nothing is evicted but idle flows'
 *     counters, see max_flows).
 *
 *     fairq_t
 *      ├── class 0 interactive: vtime, credit, backlogged flows ─► flow(tenant a) ─► e ─► e
 *      ├── class 1 standard                                      └► flow(tenant b) ─► e
 *      ├── class 2 batch                                 (each flow: FIFO of entries, counter)
 *      └── tenants (hash by name): per tenant depth and tokens, and its three flows
 *
 * Entries are the caller's (intrusive, libuv style): a fairq_entry_t lives inside the caller's
 * object, is handed to fairq_push and is the caller's again when fairq_pop, fairq_remove or
 * fairq_expire gives it back. fairq allocates only its tenants (at most max_flows of them).
 * Cost: push, remove and unpop O(1) (a tenant hash lookup); pop O(backlogged flows of a
 * class); expire O(entries).
 *
 * Threads: none of its own and no locks: the caller serialises every call on one queue
 * (gateway_queue holds its mutex around each). Time is injected (every `now_ns` is the
 * caller's monotonic clock), so tests need no sleeps.
 */
#ifndef FAIRQ_H
#define FAIRQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { FAIRQ_INTERACTIVE = 0, FAIRQ_STANDARD = 1, FAIRQ_BATCH = 2 } fairq_class_t;
#define FAIRQ_CLASSES 3

#define FAIRQ_WEIGHT_MAX   1000u
#define FAIRQ_WEIGHT_SCALE 1000u /* a counter unit: 1/1000 token at weight 1 */
#define FAIRQ_TENANT_MAX   64    /* longest tenant name kept, bytes (longer ones are cut) */

/* Why a push was refused or an entry left without being popped. */
typedef enum {
    FAIRQ_OK = 0,
    FAIRQ_FULL_ENTRIES,        /* max_entries queued in all */
    FAIRQ_FULL_TOKENS,         /* max_tokens queued in all */
    FAIRQ_TENANT_FULL_ENTRIES, /* tenant_max_entries queued for this tenant */
    FAIRQ_TENANT_FULL_TOKENS,  /* tenant_max_tokens queued for this tenant */
    FAIRQ_FULL_FLOWS,          /* max_flows tenants, each with entries queued */
    FAIRQ_EXPIRED,             /* its deadline passed (fairq_expire) */
} fairq_reason_t;

/* "full_entries", "tenant_full_tokens", "expired"... (static strings). */
const char *fairq_reason_name(fairq_reason_t reason);
/* "interactive", "standard", "batch"; "?" out of range. */
const char *fairq_class_name(fairq_class_t cls);
/* The class named `name` (as fairq_class_name; NULL or unknown: -1). */
int fairq_class_parse(const char *name);

typedef struct {
    size_t max_entries;         /* 0: 10000 */
    uint64_t max_tokens;        /* 0: no bound */
    size_t tenant_max_entries;  /* 0: max_entries */
    uint64_t tenant_max_tokens; /* 0: max_tokens */
    size_t max_flows;           /* tenants known at once, 0: 4096; when full, an idle tenant's
                                   counters are forgotten to make room (it comes back lifted
                                   to the virtual time, as after a long idle time) */
    bool reserve_set;           /* false: the default reserves {0, 10, 5} */
    unsigned reserve_percent[FAIRQ_CLASSES]; /* each 0..100, sum at most 100 */
} fairq_config_t;

/* A caller-owned entry: set `item`, `cost` and `deadline_ns`, then fairq_push. The fields after
 * `deadline_ns` are fairq's (read-only for the caller: `enqueued_ns` and `cls` may be read). */
typedef struct fairq_entry fairq_entry_t;
struct fairq_entry {
    void *item;           /* the caller's object */
    uint64_t cost;        /* tokens: prompt + expected output (0 counts as 1) */
    uint64_t deadline_ns; /* 0: none */
    /* fairq's */
    uint64_t enqueued_ns; /* when first pushed (kept by fairq_unpop) */
    fairq_class_t cls;
    struct fairq_tenant *tenant;
    uint64_t tenant_gen;
    char tenant_name[FAIRQ_TENANT_MAX + 1];
    fairq_entry_t *prev, *next;
    uint64_t charged, pop_seq, popped_ns;
    unsigned credit_before[FAIRQ_CLASSES];
    int state; /* 0 free, 1 queued, 2 popped */
};

/* Per flow (tenant, class) or per tenant (summed) figures. */
typedef struct {
    size_t depth;        /* entries queued now */
    uint64_t tokens;     /* their cost */
    uint64_t dispatched; /* entries popped (net of fairq_unpop) */
    uint64_t dispatched_tokens;
    uint64_t expired;       /* removed by fairq_expire */
    uint64_t refused;       /* pushes refused */
    uint64_t wait_total_ns; /* queue time of the popped entries */
    uint64_t wait_max_ns;
    uint64_t counter; /* the flow's virtual counter (the tenant's: its largest) */
} fairq_stats_t;

typedef struct fairq fairq_t;

/* A queue (config copied; NULL config: defaults), or NULL when out of memory or the config is
 * invalid (reserves over 100 in sum). */
fairq_t *fairq_new(const fairq_config_t *config);
/* Frees the queue and its tenants; entries still queued are simply forgotten (they are the
 * caller's: drain them first with fairq_pop if they need an answer). NULLs *self_p. */
void fairq_destroy(fairq_t **self_p);

/* Queues `e` at the tail of `tenant`'s flow of class `cls` with `weight` (1..1000; 0 is 1,
 * larger is 1000; the tenant's latest weight counts for all its queued work). 0, or IPL_E_RANGE
 * with *why (if not NULL) set when a bound refuses it (nothing changes but the refused count),
 * IPL_E_INVAL for a bad class or an entry already queued, IPL_E_NOMEM. */
int fairq_push(fairq_t *self, const char *tenant, uint32_t weight, fairq_class_t cls,
               fairq_entry_t *e, uint64_t now_ns, fairq_reason_t *why);

/* The next entry by class, reserve and fairness, removed and charged; NULL when empty.
 * Expired entries are not skipped: call fairq_expire first when deadlines matter. */
fairq_entry_t *fairq_pop(fairq_t *self, uint64_t now_ns);

/* Puts `e` (popped, not pushed since) back at the head of its flow as if it had never been
 * popped: its charge and statistics are refunded, its enqueue time kept, and, when nothing
 * was popped since, the classes' reserve credits restored. For a request that could not be
 * placed after all (late binding found the pool still full). Bounds are not checked: it was
 * counted before. 0, or IPL_E_INVAL when `e` is not popped. */
int fairq_unpop(fairq_t *self, fairq_entry_t *e);

/* Corrects what a dispatched request of `tenant` in class `cls` was charged (`charged`, its
 * cost when popped) once the tokens it really took are known (`actual`): VTC counts the
 * service actually given, and the output is only estimated at dispatch. The flow's counter
 * moves by (actual - charged) / weight, never below 0. Nothing when the tenant is not known
 * (forgotten meanwhile: it will be lifted anyway). */
void fairq_settle(fairq_t *self, const char *tenant, fairq_class_t cls, uint64_t charged,
                  uint64_t actual);

/* Removes a queued entry (its owner gave up); false when `e` is not queued here. */
bool fairq_remove(fairq_t *self, fairq_entry_t *e);

/* Removes up to `max` entries whose deadline is at or before `now_ns` into out[] (reason
 * FAIRQ_EXPIRED), oldest flows first; returns how many. */
size_t fairq_expire(fairq_t *self, uint64_t now_ns, fairq_entry_t **out, size_t max);

size_t fairq_len(const fairq_t *self);
uint64_t fairq_tokens(const fairq_t *self);
/* Entries queued in class `cls`. */
size_t fairq_class_len(const fairq_t *self, fairq_class_t cls);

/* `tenant`'s figures summed over its classes (cls < 0) or of one class; false (zeroed *out)
 * when the tenant is not known. */
bool fairq_stats(const fairq_t *self, const char *tenant, int cls, fairq_stats_t *out);

/* Calls fn for every known flow (tenant, class) that has entries or was ever used, in no
 * particular order. `fn` must not call into the queue. */
typedef void(fairq_flow_fn)(void *arg, const char *tenant, fairq_class_t cls,
                            const fairq_stats_t *stats);
void fairq_foreach(const fairq_t *self, fairq_flow_fn *fn, void *arg);

#endif
