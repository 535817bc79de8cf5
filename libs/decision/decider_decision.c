/*
 * decider_decision — the decision's life cycle and the candidates' notes (see the header).
 */
#include "decider_decision.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void decider_decision_init(decider_decision_t *d)
{
    memset(d, 0, sizeof *d);
    d->winner = -1;
}

void decider_decision_clear(decider_decision_t *d)
{
    free(d->cands);
    decider_decision_init(d);
}

void decider_candidate_note(decider_candidate_t *c, const char *fmt, ...)
{
    size_t len = strlen(c->note);
    if (len + 3 >= sizeof c->note) return;
    if (len) {
        strcpy(c->note + len, "; ");
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->note + len, sizeof c->note - len, fmt, ap);
    va_end(ap);
}
