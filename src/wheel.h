/* Internal: a hierarchical timing wheel of timer records (wheel.c): one per worker, for the timers of
 * the keys it owns. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Time is counted in ticks of 2^WHEEL_TICK_SHIFT ns (65.5 us); a deadline is due at the first tick at
 * or after it. WHEEL_LEVELS levels of 64 slots each cover every tick a 64-bit nanosecond clock has
 * (48 bits, 6 a level). A timer due at tick E sits at the level of the highest 6-bit digit in which E
 * differs from the wheel's current tick `cur`, in the slot of E's digit there (level 0 when they
 * differ in the lowest digit only; a timer due before cur waits on a list of late ones). When cur reaches
 * a slot of a higher level, the slot's timers go down a level or more (a cascade), so a timer is
 * touched at most once a level: insert, remove and expiry are O(1), cascades amortised O(1).
 * One 64-bit map a level says which slots hold timers, so the next event is found with a count of
 * trailing zeros a level, and an idle gap of any length costs nothing.
 *
 * Written by hand: none of liburcu, ck or libc has a timer wheel, and libevent's and libuv's timers
 * are binary heaps (O(log n) insert) tied to their event loops.
 *
 * Not synchronised: its worker's timer lock guards it (timer.c). */
#ifndef SHARD_SRC_WHEEL_H
#define SHARD_SRC_WHEEL_H

#include <stddef.h>
#include <stdint.h>

#include "timer_table.h"

#define WHEEL_TICK_SHIFT 16
#define WHEEL_LEVELS     8
#define WHEEL_SLOTS      64

struct wheel {
    uint64_t cur;                             /* the first tick not yet expired */
    /* Bit s: slot s of that level holds a timer. Level WHEEL_LEVELS, slot 0, holds timers inserted
     * due before cur (late): the next advance hands them out whatever the time. */
    uint64_t map[WHEEL_LEVELS + 1];
    uint32_t head[WHEEL_LEVELS + 1][WHEEL_SLOTS]; /* index + 1 of a slot's first timer; 0: empty */
    size_t   count;                           /* timers in it */
    const struct timer_table *tt;
};

/* The tick a deadline (ns) is due at: the first tick at or after it. */
static inline uint64_t shard__wheel_tick(uint64_t ns)
{
    return (ns >> WHEEL_TICK_SHIFT) + ((ns & ((1u << WHEEL_TICK_SHIFT) - 1)) != 0);
}

void shard__wheel_init(struct wheel *wh, const struct timer_table *tt, uint64_t now_ns);
/* Inserts the timer of index idx (its deadline set); one already due is due at the next advance.
 * Return: when the wheel must next look at it (ns): shard__wheel_next() is the earlier of this and
 * what it was. */
uint64_t shard__wheel_insert(struct wheel *wh, uint32_t idx);
/* Takes the timer of index idx, which is in wh, out of it. */
void shard__wheel_remove(struct wheel *wh, uint32_t idx);
/* Moves the wheel on to now_ns: takes out every timer due by then and returns them as a list through
 * next (index + 1; 0: none), in the order of their ticks (late ones first), in no order within one. */
uint32_t shard__wheel_advance(struct wheel *wh, uint64_t now_ns);
/* When the wheel next has something to do (a timer due, or a cascade), in ns; UINT64_MAX when empty.
 * Not later than the earliest deadline it holds rounded up to a tick. */
uint64_t shard__wheel_next(const struct wheel *wh);
/* Takes every timer out, as a list through next (as advance). */
uint32_t shard__wheel_take_all(struct wheel *wh);
/* Takes out the timers for which keep(hash, ctx) is false, as a list through next. */
uint32_t shard__wheel_take_if_not(struct wheel *wh, int (*keep)(uint64_t hash, void *ctx), void *ctx);

#endif
