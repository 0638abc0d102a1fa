/* A hierarchical timing wheel (wheel.h). SPDX-License-Identifier: LGPL-2.1-or-later */
#include <string.h>

#include "wheel.h"

#define DIGIT(tick, level) ((unsigned)((tick) >> (6 * (level))) & (WHEEL_SLOTS - 1))

void shard__wheel_init(struct wheel *wh, const struct timer_table *tt, uint64_t now_ns)
{
    memset(wh, 0, sizeof *wh);
    wh->tt = tt;
    wh->cur = now_ns >> WHEEL_TICK_SHIFT;
}

/* Where a timer due at tick e sits now: the highest digit in which e differs from cur. */
static void locate(const struct wheel *wh, uint64_t e, unsigned *level, unsigned *slot)
{
    if (e < wh->cur) {
        *level = WHEEL_LEVELS; /* late: due at a tick already passed */
        *slot = 0;
        return;
    }
    if (e == wh->cur) {
        *level = 0;
        *slot = DIGIT(e, 0);
        return;
    }
    unsigned l = (unsigned)(63 - __builtin_clzll(e ^ wh->cur)) / 6;
    if (l >= WHEEL_LEVELS)
        l = WHEEL_LEVELS - 1; /* not reached: deadlines stay below 2^(48 + 16) ns (SHARD_TIMER_MAX_NS: timer_arm.c) */
    *level = l;
    *slot = DIGIT(e, l);
}

static void link_in(struct wheel *wh, uint32_t idx, unsigned level, unsigned slot)
{
    struct timer *t = shard__timer_at(wh->tt, idx);
    uint32_t first = wh->head[level][slot];
    t->prev = 0;
    t->next = first;
    if (first)
        shard__timer_at(wh->tt, first - 1)->prev = idx + 1;
    wh->head[level][slot] = idx + 1;
    wh->map[level] |= 1ull << slot;
}

uint64_t shard__wheel_insert(struct wheel *wh, uint32_t idx)
{
    unsigned level, slot;
    uint64_t e = shard__wheel_tick(shard__timer_at(wh->tt, idx)->deadline);
    locate(wh, e, &level, &slot);
    link_in(wh, idx, level, slot);
    wh->count++;
    if (level == WHEEL_LEVELS)
        return 0;
    /* The tick at which its slot is expired (level 0) or cascaded. */
    unsigned shift = 6 * level;
    uint64_t at = level == 0 ? e : (wh->cur >> (shift + 6) << (shift + 6)) + ((uint64_t)slot << shift);
    return at > (UINT64_MAX >> WHEEL_TICK_SHIFT) ? UINT64_MAX : at << WHEEL_TICK_SHIFT;
}

static void unlink_from(struct wheel *wh, uint32_t idx, unsigned level, unsigned slot)
{
    struct timer *t = shard__timer_at(wh->tt, idx);
    if (t->prev)
        shard__timer_at(wh->tt, t->prev - 1)->next = t->next;
    else
        wh->head[level][slot] = t->next;
    if (t->next)
        shard__timer_at(wh->tt, t->next - 1)->prev = t->prev;
    if (!wh->head[level][slot])
        wh->map[level] &= ~(1ull << slot);
    t->next = t->prev = 0;
}

void shard__wheel_remove(struct wheel *wh, uint32_t idx)
{
    unsigned level, slot;
    /* Where insert (or a cascade) put it: the wheel keeps every timer of level l >= 1 in a slot after
     * cur's digit (cascade_at_cur), so its level is still the highest digit in which it differs. */
    locate(wh, shard__wheel_tick(shard__timer_at(wh->tt, idx)->deadline), &level, &slot);
    unlink_from(wh, idx, level, slot);
    wh->count--;
}

/* The first tick at or after cur at which a slot needs work, UINT64_MAX when none. A timer at level l
 * agrees with cur above l and has a greater digit at l, so only slots from cur's digit on are looked
 * at; one at cur's digit is due now (level 0) or is to be cascaded now (cur just reached it). */
static uint64_t next_tick(const struct wheel *wh)
{
    uint64_t best = UINT64_MAX;
    for (unsigned l = 0; l < WHEEL_LEVELS; l++) {
        unsigned d = DIGIT(wh->cur, l), shift = 6 * l;
        uint64_t m = wh->map[l] & (~0ull << d);
        if (!m)
            continue;
        unsigned s = (unsigned)__builtin_ctzll(m);
        if (s == d)
            return wh->cur;
        uint64_t t = (wh->cur >> (shift + 6) << (shift + 6)) + ((uint64_t)s << shift);
        if (t < best)
            best = t;
    }
    return best;
}

uint64_t shard__wheel_next(const struct wheel *wh)
{
    if (!wh->count)
        return UINT64_MAX;
    if (wh->map[WHEEL_LEVELS])
        return 0; /* late ones: now */
    uint64_t t = next_tick(wh);
    return t > (UINT64_MAX >> WHEEL_TICK_SHIFT) ? UINT64_MAX : t << WHEEL_TICK_SHIFT;
}

/* Detaches slot (level, slot) and returns its list (through next). */
static uint32_t detach(struct wheel *wh, unsigned level, unsigned slot)
{
    uint32_t first = wh->head[level][slot];
    wh->head[level][slot] = 0;
    wh->map[level] &= ~(1ull << slot);
    return first;
}

/* The list advance hands out, appended to in tick order. */
struct out {
    uint32_t head, tail;
};

/* Appends a detached slot's list to out. */
static void hand_out(struct wheel *wh, struct out *out, uint32_t list)
{
    for (uint32_t i = list, next; i; i = next) {
        struct timer *t = shard__timer_at(wh->tt, i - 1);
        next = t->next;
        t->prev = 0;
        t->next = 0;
        if (out->tail)
            shard__timer_at(wh->tt, out->tail - 1)->next = i;
        else
            out->head = i;
        out->tail = i;
        wh->count--;
    }
}

/* Cascades every slot of level 1 and up at cur's digit there (cur has just reached it), top down:
 * what comes down from one may land in the next one's. Keeps the invariant that a timer at level l
 * >= 1 sits in a slot after cur's digit, which locate (so remove) relies on. */
static void cascade_at_cur(struct wheel *wh)
{
    for (unsigned l = WHEEL_LEVELS - 1; l > 0; l--) {
        unsigned s = DIGIT(wh->cur, l);
        if (!(wh->map[l] >> s & 1))
            continue;
        for (uint32_t i = detach(wh, l, s), next; i; i = next) {
            next = shard__timer_at(wh->tt, i - 1)->next;
            unsigned nl, ns;
            locate(wh, shard__wheel_tick(shard__timer_at(wh->tt, i - 1)->deadline), &nl, &ns);
            link_in(wh, i - 1, nl, ns);
        }
    }
}

uint32_t shard__wheel_advance(struct wheel *wh, uint64_t now_ns)
{
    uint64_t now = now_ns >> WHEEL_TICK_SHIFT; /* ticks wholly passed */
    struct out out = { 0, 0 };
    if (wh->map[WHEEL_LEVELS])
        hand_out(wh, &out, detach(wh, WHEEL_LEVELS, 0));
    while (wh->count) {
        uint64_t ev = next_tick(wh);
        if (ev > now)
            break;
        wh->cur = ev;
        cascade_at_cur(wh);
        unsigned s0 = DIGIT(ev, 0);
        if (wh->map[0] >> s0 & 1)
            hand_out(wh, &out, detach(wh, 0, s0));
        wh->cur = ev + 1;
    }
    /* Nothing is due before now + 1: cur may skip the gap (every timer keeps its place). Wherever cur
     * stops, a slot it has reached is cascaded now, not at the next advance: a remove in between
     * would look for its timers a level down. */
    if (wh->cur < now + 1)
        wh->cur = now + 1;
    cascade_at_cur(wh);
    return out.head;
}

uint32_t shard__wheel_take_if_not(struct wheel *wh, int (*keep)(uint64_t hash, void *ctx), void *ctx)
{
    uint32_t out = 0;
    for (unsigned l = 0; l <= WHEEL_LEVELS; l++) {
        for (uint64_t m = wh->map[l]; m; m &= m - 1) {
            unsigned s = (unsigned)__builtin_ctzll(m);
            for (uint32_t i = wh->head[l][s], next; i; i = next) {
                struct timer *t = shard__timer_at(wh->tt, i - 1);
                next = t->next;
                if (keep && keep(t->hash, ctx))
                    continue;
                unlink_from(wh, i - 1, l, s);
                wh->count--;
                t->next = out;
                out = i;
            }
        }
    }
    return out;
}

uint32_t shard__wheel_take_all(struct wheel *wh)
{
    return shard__wheel_take_if_not(wh, NULL, NULL);
}
