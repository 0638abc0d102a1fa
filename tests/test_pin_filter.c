/* The pin filter (src/pin_filter.h): lookups ask it before the pin trie, so what users rely on is that
 * a lookup still answers every pin, in every ring that shares the filter, whatever the others did to it
 * (a clone's pins set bits the original reads; unpins leave bits), and that the filter keeps doing its
 * job: at most about one hash in 16 that is not pinned reads "maybe" after any sequence of pins and
 * unpins, and its memory follows the pins, not their history. */
#include <criterion/criterion.h>
#include <shard.h>
#include <stdio.h>
#include <stdlib.h>

#include "ring_layout.h"

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static const char *const names[] = { "w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7" };

static shard_ring *ring8(void)
{
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, NULL), 0);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(shard_ring_add(r, names[i], 1), 0);
    return r;
}

/* The share of n random hashes, none of them pinned, that the filter of r lets through to the trie. */
static double false_maybe(const shard_ring *r, uint64_t seed, int n)
{
    int maybe = 0;
    for (int i = 0; i < n; i++) {
        uint64_t h = mix(&seed);
        cr_assert_null(shard_ring_pin_of(r, h), "a random hash pinned");
        maybe += shard__pin_filter_may(r->pin_filter, h);
    }
    return (double)maybe / n;
}

#define SHARED 3000

/* Two clones share one filter: pins made in one set bits the other reads. Each answers exactly its own
 * pins, for the hashes the other pinned too, and after unpins on either side. */
Test(pin_filter, clones_that_share_it_answer_only_their_own_pins)
{
    static uint64_t a[SHARED], b[SHARED];
    uint64_t seed = 11;
    shard_ring *r = ring8(), *plain = ring8(), *c;
    for (int i = 0; i < SHARED; i++)
        cr_assert_eq(shard_ring_pin(r, a[i] = mix(&seed), names[i % 8]), 0);
    cr_assert_eq(shard_ring_clone(r, &c), 0);
    cr_assert_eq(c->pin_filter, r->pin_filter, "a clone shares the filter");
    for (int i = 0; i < SHARED; i++)
        cr_assert_eq(shard_ring_pin(c, b[i] = mix(&seed), names[(i + 3) % 8]), 0);
    for (int i = 0; i < SHARED; i += 2) {
        cr_assert_eq(shard_ring_unpin(r, a[i]), 0);
        cr_assert_eq(shard_ring_unpin(c, a[i + 1]), 0);
    }
    for (int i = 0; i < SHARED; i++) {
        const char *ra = i % 2 ? names[i % 8] : shard_ring_owner_of_hash(plain, a[i]);
        const char *ca = i % 2 ? shard_ring_owner_of_hash(plain, a[i]) : names[i % 8];
        cr_assert_str_eq(shard_ring_owner_of_hash(r, a[i]), ra, "ring, its pin %d", i);
        cr_assert_str_eq(shard_ring_owner_of_hash(c, a[i]), ca, "clone, the ring's pin %d", i);
        cr_assert_str_eq(shard_ring_owner_of_hash(r, b[i]), shard_ring_owner_of_hash(plain, b[i]),
                         "ring, the clone's pin %d", i);
        cr_assert_str_eq(shard_ring_owner_of_hash(c, b[i]), names[(i + 3) % 8], "clone, its pin %d", i);
    }
    shard_ring_destroy(r); /* the clone keeps the filter it still refers to */
    for (int i = 0; i < SHARED; i++)
        cr_assert_str_eq(shard_ring_owner_of_hash(c, b[i]), names[(i + 3) % 8], "clone, its pin %d", i);
    shard_ring_destroy(c);
    shard_ring_destroy(plain);
}

/* A producer of placements that come and go (each pinned hash unpinned a while later, new hashes all
 * the time): 200,000 pins made, never more than 1,000 live. The bits of the gone ones must not pile up:
 * the false "maybe"s stay near a sixteenth and the filter near 4 to 8 bytes a live pin. */
Test(pin_filter, pins_that_come_and_go_leave_it_as_sharp_and_as_small)
{
    enum { LIVE = 1000, MADE = 200000 };
    static uint64_t live[LIVE];
    uint64_t seed = 5;
    shard_ring *r = ring8();
    for (int i = 0; i < MADE; i++) {
        if (i >= LIVE)
            cr_assert_eq(shard_ring_unpin(r, live[i % LIVE]), 0);
        cr_assert_eq(shard_ring_pin(r, live[i % LIVE] = mix(&seed), names[i % 8]), 0);
        if (i % 20000 == 19999) {
            cr_assert_leq(false_maybe(r, 1000 + (uint64_t)i, 20000), 0.075, "after %d pins", i + 1);
            size_t bytes = shard__pin_filter_memory(r->pin_filter);
            cr_assert_leq(bytes, 64 + 8 * 2 * LIVE, "%zu bytes for %d live pins", bytes, LIVE);
        }
    }
    for (int i = 0; i < LIVE; i++)
        cr_assert_str_eq(shard_ring_pin_of(r, live[i]), names[(MADE - LIVE + i) % 8]);
    shard_ring_destroy(r);
}

/* A ring that grows to 8,000 pins one placement at a time, as a dispatcher's do (a clone each): the
 * filter is rebuilt as it fills, its false "maybe"s stay near a sixteenth, and every pin is answered. */
Test(pin_filter, a_ring_placed_one_pin_at_a_time_keeps_it_sharp)
{
    enum { PINS = 8000 };
    static uint64_t h[PINS];
    uint64_t seed = 3;
    shard_ring *r = ring8();
    for (int i = 0; i < PINS; i++) {
        shard_ring *c;
        cr_assert_eq(shard_ring_clone(r, &c), 0);
        cr_assert_eq(shard_ring_pin(c, h[i] = mix(&seed), names[i % 8]), 0);
        shard_ring_destroy(r);
        r = c;
    }
    cr_assert_leq(false_maybe(r, 77, 100000), 0.07);
    cr_assert_leq(shard_ring_memory(r), shard_ring_point_count(r) * 45 + (size_t)PINS * (27 + 8));
    for (int i = 0; i < PINS; i++)
        cr_assert_str_eq(shard_ring_owner_of_hash(r, h[i]), names[i % 8], "pin %d", i);
    shard_ring_destroy(r);
}
