/* Pinned hashes: a small table of key hashes whose owner is named, not found on the ring, for keys
 * an operator or the balancer places on a chosen member (dispatcher.h: shard_key_place). Lookups ask
 * it first, only when it is not empty (ring_internal.h). SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Kept twice: sorted by hash (for enumeration, diffs and changes) and as an open-addressing table
 * rebuilt on every change (pins change as rarely as members; a lookup is a probe or two). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ring_internal.h"

/* Rebuilds pin_slots for npins pins into a table of at least 2 * npins slots (a power of two),
 * reusing the current one when it is large enough. Return: 0; -ENOMEM (nothing changed). */
static int rebuild_slots(shard_ring *r, uint32_t npins)
{
    uint32_t size = 16;
    while (size < 2 * npins)
        size *= 2;
    uint32_t *slots = r->pin_slots;
    if (!slots || size > r->pin_mask + 1) {
        slots = calloc(size, sizeof *slots);
        if (!slots)
            return -ENOMEM;
        free(r->pin_slots);
        r->pin_slots = slots;
        r->pin_mask = size - 1;
    } else {
        memset(slots, 0, (r->pin_mask + 1) * sizeof *slots);
    }
    for (uint32_t k = 0; k < npins; k++) {
        uint32_t i = (uint32_t)r->pins[k].hash & r->pin_mask;
        while (slots[i])
            i = (i + 1) & r->pin_mask;
        slots[i] = k + 1;
    }
    r->npins = npins;
    return 0;
}

/* Position of hash in the sorted pins, or where it would go. */
static uint32_t pin_pos(const shard_ring *r, uint64_t hash)
{
    uint32_t lo = 0, hi = r->npins;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (r->pins[mid].hash < hash)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

SHARD_API int shard_ring_pin(shard_ring *r, uint64_t hash, const char *member)
{
    if (!r || !member)
        return -EINVAL;
    long m = shard__ring_member_index(r, member);
    if (m < 0)
        return -ENOENT;
    uint32_t pos = pin_pos(r, hash);
    if (pos < r->npins && r->pins[pos].hash == hash) {
        r->pins[pos].member = (uint32_t)m; /* pinned already: moved to member */
        return 0;
    }
    if (r->npins == SHARD_RING_MAX_PINS)
        return -E2BIG;
    if (r->npins == r->pins_cap) {
        uint32_t cap = r->pins_cap ? r->pins_cap * 2 : 8;
        struct ring_pin *p = realloc(r->pins, cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        r->pins = p;
        r->pins_cap = cap;
    }
    memmove(&r->pins[pos + 1], &r->pins[pos], (r->npins - pos) * sizeof *r->pins);
    r->pins[pos] = (struct ring_pin){ hash, (uint32_t)m };
    if (rebuild_slots(r, r->npins + 1) != 0) {
        memmove(&r->pins[pos], &r->pins[pos + 1], (r->npins - pos) * sizeof *r->pins);
        return -ENOMEM;
    }
    return 0;
}

SHARD_API int shard_ring_unpin(shard_ring *r, uint64_t hash)
{
    if (!r)
        return -EINVAL;
    uint32_t pos = pin_pos(r, hash);
    if (pos == r->npins || r->pins[pos].hash != hash)
        return -ENOENT;
    memmove(&r->pins[pos], &r->pins[pos + 1], (r->npins - pos - 1) * sizeof *r->pins);
    rebuild_slots(r, r->npins - 1); /* fits the table it has: cannot fail */
    return 0;
}

SHARD_API size_t shard_ring_pin_count(const shard_ring *r)
{
    return r ? r->npins : 0;
}

SHARD_API int shard_ring_pin_at(const shard_ring *r, size_t i, uint64_t *hash, const char **member)
{
    if (!r)
        return -EINVAL;
    if (i >= r->npins)
        return -ERANGE;
    if (hash)
        *hash = r->pins[i].hash;
    if (member)
        *member = r->members[r->pins[i].member].name;
    return 0;
}

int shard__ring_pins_copy(shard_ring *c, const shard_ring *r)
{
    if (!r->npins)
        return 0;
    c->pins = malloc(r->npins * sizeof *c->pins);
    if (!c->pins)
        return -ENOMEM;
    memcpy(c->pins, r->pins, r->npins * sizeof *c->pins);
    c->pins_cap = r->npins;
    return rebuild_slots(c, r->npins);
}

void shard__ring_pins_remap(shard_ring *r, const uint32_t *remap)
{
    for (uint32_t k = 0; k < r->npins; k++)
        r->pins[k].member = remap[r->pins[k].member];
}

void shard__ring_pins_drop_member(shard_ring *r, uint32_t gone)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < r->npins; i++) {
        if (r->pins[i].member == gone)
            continue;
        r->pins[k] = r->pins[i];
        if (r->pins[k].member > gone)
            r->pins[k].member--;
        k++;
    }
    if (k != r->npins)
        rebuild_slots(r, k); /* fewer: fits */
}

void shard__ring_pins_free(shard_ring *r)
{
    free(r->pins);
    free(r->pin_slots);
}
