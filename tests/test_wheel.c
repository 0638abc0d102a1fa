/* The timing wheel's internals (src/wheel.c) against a model: a list of deadlines. Every advance must
 * hand out exactly the timers whose tick has wholly passed, none early, none twice, none lost; next
 * must never be later than the earliest pending deadline; removal must find a timer wherever
 * cascades have taken it. */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "timer_table.h"
#include "wheel.h"

#define N 4000

static struct timer_table tt;
static struct wheel wh;
static uint32_t idx[N];
static bool pending[N], expired[N];

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Deadlines from a tick to days ahead, so every level and cascade is used. */
static uint64_t ahead(uint64_t *x)
{
    unsigned bits = 10 + (unsigned)(rnd(x) % 38);
    return rnd(x) & ((1ull << bits) - 1);
}

static int who[N]; /* record index -> j */

static void take(uint32_t list, uint64_t now)
{
    for (uint32_t i = list; i; i = shard__timer_at(&tt, i - 1)->next) {
        cr_assert_lt(i - 1, (uint32_t)N);
        int k = who[i - 1];
        cr_assert(pending[k], "timer %d came out but is not pending", k);
        cr_assert_leq(shard__wheel_tick(shard__timer_at(&tt, i - 1)->deadline), now >> WHEEL_TICK_SHIFT,
                      "timer %d came out early", k);
        pending[k] = false;
        expired[k] = true;
    }
}

static void check_none_overdue(uint64_t now)
{
    uint64_t earliest = UINT64_MAX;
    size_t n = 0;
    for (int j = 0; j < N; j++) {
        if (!pending[j])
            continue;
        n++;
        uint64_t tick = shard__wheel_tick(shard__timer_at(&tt, idx[j])->deadline);
        cr_assert_gt(tick, now >> WHEEL_TICK_SHIFT, "timer %d is overdue but was not handed out", j);
        if (tick < earliest)
            earliest = tick;
    }
    cr_assert_eq(wh.count, n);
    if (earliest != UINT64_MAX)
        cr_assert_leq(shard__wheel_next(&wh), earliest << WHEEL_TICK_SHIFT, "next is later than a deadline");
    else
        cr_assert_eq(shard__wheel_next(&wh), UINT64_MAX);
}

Test(wheel, hands_out_exactly_the_due_timers_at_every_level)
{
    shard__timer_table_init(&tt);
    for (int j = 0; j < N; j++) {
        uint64_t id;
        cr_assert_not_null(shard__timer_alloc(&tt, &idx[j], &id));
        cr_assert_lt(idx[j], (uint32_t)N);
        who[idx[j]] = j;
    }
    uint64_t x = 88172645463325252ull, now = 123456789012345ull;
    shard__wheel_init(&wh, &tt, now);
    long inserted = 0, removed = 0, fired = 0;
    for (int round = 0; round < 200000; round++) {
        int j = (int)(rnd(&x) % N);
        unsigned op = (unsigned)(rnd(&x) % 16);
        if (op < 8 && !pending[j]) {
            /* A third are already due (late re-arms). */
            shard__timer_at(&tt, idx[j])->deadline = rnd(&x) % 3 == 0 ? now - rnd(&x) % 100000 : now + ahead(&x);
            shard__wheel_insert(&wh, idx[j]);
            pending[j] = true;
            inserted++;
        } else if (op < 11 && pending[j]) {
            shard__wheel_remove(&wh, idx[j]);
            pending[j] = false;
            removed++;
        } else if (op >= 11) {
            now += rnd(&x) % 64 == 0 ? ahead(&x) : rnd(&x) % (1u << 20);
            uint32_t list = shard__wheel_advance(&wh, now);
            for (uint32_t i = list; i; i = shard__timer_at(&tt, i - 1)->next)
                fired++;
            take(list, now);
            if (round % 64 == 0)
                check_none_overdue(now);
        }
    }
    check_none_overdue(now);
    cr_assert_gt(inserted, 50000, "%ld inserted", inserted);
    cr_assert_gt(removed, 3000, "%ld removed", removed);
    cr_assert_gt(fired, 10000, "%ld fired", fired);
    printf("wheel model: %ld inserted, %ld removed, %ld fired\n", inserted, removed, fired);
    /* Everything left comes out, at the end of time or all at once. */
    size_t left = wh.count;
    uint32_t all = shard__wheel_take_all(&wh);
    size_t n = 0;
    for (uint32_t i = all; i; i = shard__timer_at(&tt, i - 1)->next)
        n++;
    cr_assert_eq(n, left);
    cr_assert_eq(wh.count, 0);
    cr_assert_eq(shard__wheel_next(&wh), UINT64_MAX);
    shard__timer_table_destroy(&tt);
}

static int keep_even(uint64_t hash, void *ctx)
{
    (void)ctx;
    return hash % 2 == 0;
}

Test(wheel, take_if_not_takes_exactly_the_others)
{
    shard__timer_table_init(&tt);
    shard__wheel_init(&wh, &tt, 1000);
    for (int j = 0; j < 300; j++) {
        uint64_t id;
        struct timer *t = shard__timer_alloc(&tt, &idx[j], &id);
        t->hash = (uint64_t)j;
        t->deadline = 1000 + (uint64_t)j * 7919 * 65536;
        shard__wheel_insert(&wh, idx[j]);
    }
    size_t n = 0;
    for (uint32_t i = shard__wheel_take_if_not(&wh, keep_even, NULL); i; i = shard__timer_at(&tt, i - 1)->next) {
        cr_assert_eq(shard__timer_at(&tt, i - 1)->hash % 2, 1);
        n++;
    }
    cr_assert_eq(n, 150);
    cr_assert_eq(wh.count, 150);
    /* The rest still expire, each once, at their time. */
    size_t fired = 0;
    for (uint32_t i = shard__wheel_advance(&wh, UINT64_MAX >> 2); i; i = shard__timer_at(&tt, i - 1)->next) {
        cr_assert_eq(shard__timer_at(&tt, i - 1)->hash % 2, 0);
        fired++;
    }
    cr_assert_eq(fired, 150);
    shard__timer_table_destroy(&tt);
}

Test(wheel, ids_tell_a_reused_record_apart)
{
    shard__timer_table_init(&tt);
    uint32_t i1, i2;
    uint64_t id1, id2;
    cr_assert_not_null(shard__timer_alloc(&tt, &i1, &id1));
    cr_assert_eq(shard__timer_find(&tt, id1), (long)i1);
    shard__timer_free(&tt, i1);
    cr_assert_not_null(shard__timer_alloc(&tt, &i2, &id2));
    cr_assert_eq(i2, i1, "the freed record is reused first");
    cr_assert_neq(id2, id1, "but its id is a new one");
    cr_assert_eq((uint32_t)(atomic_load(&shard__timer_at(&tt, i2)->word) >> 32), (uint32_t)(id2 >> 32));
    cr_assert_eq(shard__timer_find(&tt, 0), -1);
    cr_assert_eq(shard__timer_find(&tt, (uint64_t)1 << 40 | 0xffffffffu), -1, "an index never allocated");
    shard__timer_table_destroy(&tt);
}

/* What insert says about when to look next agrees with next itself. */
Test(wheel, insert_returns_when_the_wheel_must_look_at_it)
{
    shard__timer_table_init(&tt);
    uint64_t x = 99, now = 5000000000ull;
    shard__wheel_init(&wh, &tt, now);
    uint64_t expect = UINT64_MAX;
    for (int j = 0; j < 2000; j++) {
        uint64_t id;
        struct timer *t = shard__timer_alloc(&tt, &idx[j], &id);
        t->deadline = rnd(&x) % 5 == 0 ? now - rnd(&x) % 1000000 : now + ahead(&x);
        uint64_t at = shard__wheel_insert(&wh, idx[j]);
        if (at < expect)
            expect = at;
        cr_assert_eq(shard__wheel_next(&wh), expect, "insert %d", j);
        cr_assert_leq(at, shard__wheel_tick(t->deadline) << WHEEL_TICK_SHIFT, "not after its own tick");
    }
    shard__timer_table_destroy(&tt);
}

/* An advance that ends exactly where a higher level's slot is due for its cascade (cur on the first
 * tick of a block of 64) must leave no timer there: a remove right after it looks for the timer by
 * the highest digit in which it differs from cur. */
Test(wheel, a_remove_right_after_an_advance_that_stopped_at_a_cascade_point)
{
    shard__timer_table_init(&tt);
    uint64_t C = 1000 * WHEEL_SLOTS; /* the first tick of a block */
    shard__wheel_init(&wh, &tt, (C - 10) << WHEEL_TICK_SHIFT);
    uint64_t id;
    uint32_t a, b1, b2;
    shard__timer_alloc(&tt, &a, &id)->deadline = (C - 1) << WHEEL_TICK_SHIFT;
    shard__timer_alloc(&tt, &b1, &id)->deadline = (C + 5) << WHEEL_TICK_SHIFT;
    shard__timer_alloc(&tt, &b2, &id)->deadline = (C + 5) << WHEEL_TICK_SHIFT;
    shard__wheel_insert(&wh, a);
    shard__wheel_insert(&wh, b1); /* level 1: they differ from cur in the second digit */
    shard__wheel_insert(&wh, b2);
    /* Hands out a (tick C - 1); cur moves to C, where b1 and b2's slot is cascaded. */
    uint32_t out = shard__wheel_advance(&wh, ((C - 1) << WHEEL_TICK_SHIFT) + 100);
    cr_assert_eq(out, a + 1);
    cr_assert_eq(shard__timer_at(&tt, a)->next, 0);
    shard__wheel_remove(&wh, b2);
    cr_assert_eq(wh.count, 1);
    out = shard__wheel_advance(&wh, (C + 100) << WHEEL_TICK_SHIFT);
    cr_assert_eq(out, b1 + 1, "only b1 comes out");
    cr_assert_eq(shard__timer_at(&tt, b1)->next, 0, "b2 was removed, not left in its old slot");
    cr_assert_eq(wh.count, 0);
    cr_assert_eq(shard__wheel_next(&wh), UINT64_MAX);
    shard__timer_table_destroy(&tt);
}

/* The model again, with the deadlines and times that find edges: ticks and block boundaries of every
 * level, the past, the largest delay, advances to the wheel's own next event, and removes after all
 * of them. */
static uint64_t edge_deadline(uint64_t *x, uint64_t now)
{
    switch (rnd(x) % 8) {
    case 0:
        return now - rnd(x) % (now < 1000000 ? now + 1 : 1000000); /* past */
    case 1:
        return now + rnd(x) % (1ull << 61); /* up to SHARD_TIMER_MAX_NS */
    case 2:
        return now + (1ull << 61);
    case 3: { /* around tick boundaries */
        uint64_t b = ((now >> WHEEL_TICK_SHIFT) + rnd(x) % 5000) << WHEEL_TICK_SHIFT;
        return b + (uint64_t)((int)(rnd(x) % 3) - 1);
    }
    case 4: { /* around block boundaries of a level */
        uint64_t span = 1ull << (WHEEL_TICK_SHIFT + 6 * (unsigned)(rnd(x) % WHEEL_LEVELS));
        return (now / span + 1 + rnd(x) % 3) * span + (uint64_t)((int)(rnd(x) % 3) - 1);
    }
    default:
        return now + (rnd(x) & ((1ull << (10 + rnd(x) % 40)) - 1));
    }
}

static uint64_t edge_now(uint64_t *x, uint64_t now)
{
    uint64_t next = shard__wheel_next(&wh), tick = 1ull << WHEEL_TICK_SHIFT;
    switch (rnd(x) % 16) {
    case 0: { /* a jump of any size a clock makes, up to 2^62 ns */
        uint64_t to = now + ((rnd(x) % (1ull << 62)) >> (rnd(x) % 40));
        return to < (1ull << 62) ? to : now + rnd(x) % (1u << 22);
    }
    case 1:
        return ((now >> WHEEL_TICK_SHIFT) + 1) * tick + (rnd(x) % 2 ? 0 : tick - 1);
    case 2:
        return now;
    case 3:
        return next != UINT64_MAX && next > now ? next : now;
    default:
        return now + rnd(x) % (1u << 22);
    }
}

Test(wheel, the_model_holds_at_the_edges)
{
    for (uint64_t seed = 1; seed <= 2; seed++) {
        shard__timer_table_init(&tt);
        for (int j = 0; j < N; j++) {
            uint64_t id;
            shard__timer_alloc(&tt, &idx[j], &id);
            who[idx[j]] = j;
            pending[j] = false;
        }
        uint64_t x = 0x9e3779b97f4a7c15ull * seed, now = seed == 1 ? 5 : 123456789012345ull * seed;
        shard__wheel_init(&wh, &tt, now);
        for (int round = 0; round < 200000; round++) {
            int j = (int)(rnd(&x) % N);
            unsigned op = (unsigned)(rnd(&x) % 20);
            if (op < 9 && !pending[j]) {
                shard__timer_at(&tt, idx[j])->deadline = edge_deadline(&x, now);
                shard__wheel_insert(&wh, idx[j]);
                pending[j] = true;
            } else if (op < 12 && pending[j]) {
                shard__wheel_remove(&wh, idx[j]);
                pending[j] = false;
            } else if (op >= 13) {
                now = edge_now(&x, now);
                take(shard__wheel_advance(&wh, now), now);
                check_none_overdue(now);
                cr_assert(wh.count == 0 || shard__wheel_next(&wh) > now, "next is due already: a busy loop");
            }
        }
        take(shard__wheel_advance(&wh, now), now); /* late ones inserted since the last advance */
        check_none_overdue(now);
        shard__timer_table_destroy(&tt);
    }
}
