/*
 * clustersim_queue — the simulation's future events, earliest first.
 *
 * A binary min-heap in one growable array, ordered by (t, seq): `seq` is the insertion number,
 * so events at the same virtual time pop in the order they were pushed and a run is
 * reproducible bit for bit whatever the heap's internal layout.
 *
 *              [0] t=1.00 seq=7            parent of i = (i - 1) / 2
 *             /                \           children    = 2i + 1, 2i + 2
 *     [1] t=1.20 seq=3    [2] t=1.00 seq=9
 *
 * The payload (kind, id, a, b, x, p) is the caller's; the queue never looks at it.
 * Push and pop are O(log n) with no allocation once the array has grown to the high-water mark.
 * Not thread-safe.
 */
#ifndef CLUSTERSIM_QUEUE_H
#define CLUSTERSIM_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    double t;      /* virtual seconds */
    uint64_t seq;  /* set by clustersim_queue_push */
    uint32_t kind; /* the caller's payload from here on */
    uint32_t id;
    uint64_t a, b;
    double x;
    void *p;
} clustersim_event_t;

typedef struct clustersim_queue clustersim_queue_t;

/* NULL on allocation failure. */
clustersim_queue_t *clustersim_queue_new(void);
/* Frees the queue; pointers in pending payloads are the caller's (pop them first). */
void clustersim_queue_destroy(clustersim_queue_t **self_p);

/* Adds a copy of *ev (its seq is overwritten). 0 or IPL_E_NOMEM (nothing added). */
int clustersim_queue_push(clustersim_queue_t *self, const clustersim_event_t *ev);
/* Removes the earliest event into *out. False when empty. */
bool clustersim_queue_pop(clustersim_queue_t *self, clustersim_event_t *out);
/* The earliest event, borrowed until the next push or pop; NULL when empty. */
const clustersim_event_t *clustersim_queue_peek(const clustersim_queue_t *self);
size_t clustersim_queue_size(const clustersim_queue_t *self);
/* Events pushed since creation. */
uint64_t clustersim_queue_pushed(const clustersim_queue_t *self);

#endif
