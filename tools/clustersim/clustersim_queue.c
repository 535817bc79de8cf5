/*
 * clustersim_queue — binary min-heap on (t, seq); see the header.
 */
#include "clustersim_queue.h"

#include <stdlib.h>

#include "ipl_error.h"

struct clustersim_queue {
    clustersim_event_t *heap;
    size_t n, cap;
    uint64_t next_seq;
};

clustersim_queue_t *clustersim_queue_new(void)
{
    return calloc(1, sizeof(clustersim_queue_t));
}

void clustersim_queue_destroy(clustersim_queue_t **self_p)
{
    if (!self_p || !*self_p) return;
    free((*self_p)->heap);
    free(*self_p);
    *self_p = NULL;
}

static inline bool s_before(const clustersim_event_t *a, const clustersim_event_t *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

int clustersim_queue_push(clustersim_queue_t *self, const clustersim_event_t *ev)
{
    if (self->n == self->cap) {
        size_t cap = self->cap ? self->cap * 2 : 256;
        clustersim_event_t *h = realloc(self->heap, cap * sizeof *h);
        if (!h) return IPL_E_NOMEM;
        self->heap = h;
        self->cap = cap;
    }
    clustersim_event_t e = *ev;
    e.seq = self->next_seq++;
    // Sift up: move parents down until e's place is found, then write e once.
    size_t i = self->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!s_before(&e, &self->heap[parent])) break;
        self->heap[i] = self->heap[parent];
        i = parent;
    }
    self->heap[i] = e;
    return 0;
}

bool clustersim_queue_pop(clustersim_queue_t *self, clustersim_event_t *out)
{
    if (self->n == 0) return false;
    *out = self->heap[0];
    clustersim_event_t last = self->heap[--self->n];
    // Sift the last element down from the root.
    size_t i = 0, n = self->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && s_before(&self->heap[c + 1], &self->heap[c])) c++;
        if (!s_before(&self->heap[c], &last)) break;
        self->heap[i] = self->heap[c];
        i = c;
    }
    if (n) self->heap[i] = last;
    return true;
}

const clustersim_event_t *clustersim_queue_peek(const clustersim_queue_t *self)
{
    return self->n ? &self->heap[0] : NULL;
}

size_t clustersim_queue_size(const clustersim_queue_t *self)
{
    return self->n;
}

uint64_t clustersim_queue_pushed(const clustersim_queue_t *self)
{
    return self->next_seq;
}
