/* The timing wheel's internals (src/wheel.c, compiled in with src/timer_table.c) fuzzed against a
 * model, at the edges test_wheel's model does not reach as often: deadlines from the past to
 * SHARD_TIMER_MAX_NS ahead, on and around tick and block boundaries of every level; clocks that
 * jump, stand still, stop on the first or last ns of a tick or on the wheel's own next event (where
 * cur lands on a cascade point); removes right after any of those; take_if_not now and then. After
 * every advance: nothing came out early or twice, the count agrees, next is not already due (a worker
 * would spin on it); nothing due was left in and next is not later than any deadline (each timer
 * checked every few advances). At the end of a seed take_all hands out exactly what is pending.
 *
 * Usage: fuzz_wheel [seeds] (default 4). Each seed stops at its first failed check (the wheel may be
 * corrupt then); the closing line counts seeds. The wheel before cascade_at_cur (whose remove right
 * after an advance that stopped on a cascade point unlinked the wrong slot) fails seeds 1 and 2. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "timer_table.h"
#include "wheel.h"

#define N      3000   /* timers: record idx[j] is timer j, in the wheel when pending[j] */
#define ROUNDS 300000 /* operations a seed */

static struct timer_table tt;
static struct wheel wh;
static uint32_t idx[N];
static int who[N]; /* record index -> j (a fresh table hands out indexes 0 .. N - 1) */
static bool pending[N];
static size_t npending;
static uint64_t x; /* the seed's xorshift state */
static int seed, round_no;

/* Reports a failed check with where it happened, and ends the seed. */
#define REQUIRE(cond, ...)                                                                        \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "seed %d, round %d: %s: ", seed, round_no, #cond);                    \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fputc('\n', stderr);                                                                  \
            return false;                                                                         \
        }                                                                                         \
    } while (0)

static uint64_t rnd(void)
{
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
}

static struct timer *rec(uint32_t i)
{
    return shard__timer_at(&tt, i);
}

static unsigned long long tick_of(uint64_t ns)
{
    return (unsigned long long)(ns >> WHEEL_TICK_SHIFT);
}

static uint64_t pick_deadline(uint64_t now)
{
    switch (rnd() % 8) {
    case 0: /* in the past: due at the next advance */
        return now - rnd() % (now < 1000000 ? now + 1 : 1000000);
    case 1: /* up to the largest delay */
        return now + rnd() % (1ull << 61);
    case 2:
        return now + (1ull << 61);
    case 3: { /* on a tick boundary, or 1 ns either side */
        uint64_t b = (tick_of(now) + rnd() % 5000) << WHEEL_TICK_SHIFT;
        return b + (uint64_t)((int)(rnd() % 3) - 1);
    }
    case 4: { /* on a block boundary of some level, or 1 ns either side */
        uint64_t span = 1ull << (WHEEL_TICK_SHIFT + 6 * (unsigned)(rnd() % WHEEL_LEVELS));
        uint64_t b = (now / span + 1 + rnd() % 3) * span;
        return b + (uint64_t)((int)(rnd() % 3) - 1);
    }
    default: { /* from 1 us to days ahead */
        unsigned bits = 10 + (unsigned)(rnd() % 40);
        return now + (rnd() & ((1ull << bits) - 1));
    }
    }
}

static uint64_t pick_now(uint64_t now)
{
    uint64_t tick = 1ull << WHEEL_TICK_SHIFT, next = shard__wheel_next(&wh), to;
    switch (rnd() % 16) {
    case 0: { /* a jump of any size */
        uint64_t span = rnd() % (1ull << 62);
        to = now + (span >> (rnd() % 40));
        break;
    }
    case 1: /* the first or the last ns of the next tick */
        to = (tick_of(now) + 1) * tick + (rnd() % 2 ? 0 : tick - 1);
        break;
    case 2: /* no time passed */
        to = now;
        break;
    case 3: /* the wheel's next event: a due timer or a cascade point */
        to = next != UINT64_MAX && next > now ? next : now;
        break;
    default:
        to = now + rnd() % (1u << 22);
    }
    return to < (1ull << 62) ? to : now + rnd() % (1u << 22); /* a clock stays far below 2^62 ns */
}

#define SPREAD 8 /* advances between two checks of one timer after advances */
static int window; /* the first of the timers the next advance's check looks at */

/* The wheel against the model. advanced: right after an advance to now. The count and next's sanity
 * are checked every time; each pending timer (not left in when due, next not after its tick) either
 * now (all) or in a slice of N / SPREAD an advance, which keeps a seed fast: a timer left in stays
 * overdue, so a later slice still finds it. */
static bool agrees(uint64_t now, bool advanced, bool all)
{
    uint64_t next = shard__wheel_next(&wh);
    int from = all ? 0 : window, to = all || window + N / SPREAD > N ? N : window + N / SPREAD;
    if (!all)
        window = to % N;
    for (int j = from; j < to; j++) {
        if (!pending[j])
            continue;
        uint64_t t = shard__wheel_tick(rec(idx[j])->deadline);
        REQUIRE(!advanced || t > tick_of(now), "timer %d (tick %llu) is due at tick %llu but was left in", j,
                (unsigned long long)t, tick_of(now));
        REQUIRE(!advanced || next <= t << WHEEL_TICK_SHIFT, "next (tick %llu) is after timer %d's tick %llu",
                tick_of(next), j, (unsigned long long)t);
    }
    REQUIRE(wh.count == npending, "the wheel counts %zu timers, %zu are pending", wh.count, npending);
    REQUIRE((wh.count == 0) == (next == UINT64_MAX), "%zu timers, next %llu", wh.count, (unsigned long long)next);
    REQUIRE(!advanced || next > now, "next %llu is not after now %llu: a worker would spin", (unsigned long long)next,
            (unsigned long long)now);
    return true;
}

/* Takes a list the wheel handed out off the model. odd_only: take_if_not's, of odd hashes only. */
static bool take(uint32_t list, uint64_t now, bool odd_only, long *taken)
{
    long n = 0;
    for (uint32_t i = list; i; i = rec(i - 1)->next) {
        REQUIRE(++n <= N, "a list longer than the timers there are (a cycle)");
        REQUIRE(i - 1 < (uint32_t)N, "record %u was never a timer", i - 1);
        int j = who[i - 1];
        REQUIRE(pending[j], "timer %d came out but was not in (twice?)", j);
        if (odd_only)
            REQUIRE(rec(i - 1)->hash & 1, "take_if_not took timer %d, which it keeps", j);
        else
            REQUIRE(shard__wheel_tick(rec(i - 1)->deadline) <= tick_of(now), "timer %d came out early", j);
        pending[j] = false;
        npending--;
    }
    *taken += n;
    return true;
}

static int keep_even(uint64_t hash, void *ctx)
{
    (void)ctx;
    return hash % 2 == 0;
}

static bool run_seed(void)
{
    x = 0x9e3779b97f4a7c15ull * (uint64_t)seed;
    for (int j = 0; j < N; j++) {
        uint64_t id;
        REQUIRE(shard__timer_alloc(&tt, &idx[j], &id) != NULL, "out of memory");
        REQUIRE(idx[j] < (uint32_t)N, "index %u", idx[j]);
        who[idx[j]] = j;
        pending[j] = false;
    }
    npending = 0;
    window = 0;
    /* The clock near 0, anywhere, or where test_wheel has it. */
    uint64_t now = seed % 3 == 0 ? 5 : seed % 3 == 1 ? rnd() % (1ull << 50) : 123456789012345ull;
    shard__wheel_init(&wh, &tt, now);
    long inserted = 0, removed = 0, fired = 0, taken = 0;
    for (round_no = 0; round_no < ROUNDS; round_no++) {
        int j = (int)(rnd() % N);
        unsigned op = (unsigned)(rnd() % 20);
        if (op < 9 && !pending[j]) {
            rec(idx[j])->deadline = pick_deadline(now);
            rec(idx[j])->hash = rnd();
            shard__wheel_insert(&wh, idx[j]);
            pending[j] = true;
            npending++;
            inserted++;
        } else if (op < 12 && pending[j]) {
            /* Wherever the last advance left cur: on a cascade point too. */
            shard__wheel_remove(&wh, idx[j]);
            pending[j] = false;
            npending--;
            removed++;
        } else if (op == 12 && rnd() % 50 == 0) {
            if (!take(shard__wheel_take_if_not(&wh, keep_even, NULL), now, true, &taken))
                return false;
            for (int k = 0; k < N; k++)
                REQUIRE(!pending[k] || keep_even(rec(idx[k])->hash, NULL), "take_if_not left timer %d in", k);
        } else if (op >= 13) {
            now = pick_now(now);
            if (!take(shard__wheel_advance(&wh, now), now, false, &fired) || !agrees(now, true, false))
                return false;
        }
    }
    if (!agrees(now, false, true))
        return false;
    size_t left = wh.count, n = 0;
    for (uint32_t i = shard__wheel_take_all(&wh); i; i = rec(i - 1)->next)
        REQUIRE(++n <= left, "take_all handed out more than the %zu timers in", left);
    REQUIRE(n == left && wh.count == 0, "take_all handed out %zu of %zu, %zu left", n, left, wh.count);
    REQUIRE(shard__wheel_next(&wh) == UINT64_MAX, "empty, but next is set");
    printf("seed %d: %ld inserted, %ld removed, %ld fired, %ld taken by take_if_not, %zu left at the end\n", seed,
           inserted, removed, fired, taken, left);
    return true;
}

int main(int argc, char **argv)
{
    int seeds = argc > 1 ? atoi(argv[1]) : 4;
    if (seeds < 1) {
        fprintf(stderr, "usage: fuzz_wheel [seeds]\n");
        return 2;
    }
    int passed = 0, failed = 0;
    for (seed = 1; seed <= seeds; seed++) {
        shard__timer_table_init(&tt);
        if (run_seed())
            passed++;
        else
            failed++;
        shard__timer_table_destroy(&tt); /* frees the records whatever the wheel's state */
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
