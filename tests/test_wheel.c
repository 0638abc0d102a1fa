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
