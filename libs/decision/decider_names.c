/*
 * decider_names — two slots per bucket, the bucket chosen by a mix of the pointer (see the
 * header). A new name takes a free slot of its bucket, or replaces one chosen by the pointer.
 */
#include "decider_names.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "ipl_hash.h"

_Static_assert(DECIDER_NAMES_BUCKETS == 256, "s_bucket takes the top 8 bits of the mix");

// Pointers of one allocation run differ in few bits: a full 64-bit mix spreads them (a plain
// multiply put 64 policy names in ~40 buckets).
static uint64_t s_mix(const char *name)
{
    return ipl_mix64((uint64_t)(uintptr_t)name);
}

// Whether s holds `name` (this pointer with this text) in `space`. Compares the text with
// its NUL and stops at the first difference, so it never reads past name's end.
static bool s_holds(const decider_names_slot_t *s, uint64_t space, const char *name)
{
    if (s->name != name || s->space != space || !space) return false;
    for (size_t i = 0; i < DECIDER_NAMES_TEXT; i++) {
        if (name[i] != s->text[i]) return false;
        if (!name[i]) return true;
    }
    return false;
}

int decider_names_get(const decider_names_t *self, uint64_t space, const char *name)
{
    const decider_names_slot_t *b = self->slot[s_mix(name) >> 56];
    if (s_holds(&b[0], space, name)) return b[0].id;
    if (s_holds(&b[1], space, name)) return b[1].id;
    return -1;
}

void decider_names_put(decider_names_t *self, uint64_t space, const char *name, int id)
{
    size_t len = strnlen(name, DECIDER_NAMES_TEXT);
    if (len == DECIDER_NAMES_TEXT || id < 0 || !space) return;
    uint64_t h = s_mix(name);
    decider_names_slot_t *b = self->slot[h >> 56];
    int way = b[0].name == name || !b[0].space   ? 0
              : b[1].name == name || !b[1].space ? 1
                                                 : (int)(h & 1);
    b[way].name = name;
    b[way].space = space;
    b[way].id = id;
    memcpy(b[way].text, name, len + 1);
}
