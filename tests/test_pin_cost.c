/* What a placement costs against the placements already made, counted rather than timed: the bytes
 * one placement allocates must not grow with the pins. Measured for the ring work of a placement
 * (clone the ring in force, pin on the clone, diff the two: what shard_key_place does to the ring) and
 * for shard_key_place_hash itself, each at few pins and at many. Before pins were shared between a
 * ring and its clones, each placement copied every pin and its table into the clone and the diff
 * sorted every pin of both rings: bytes, and time, grew with the pins.
 *
 * The library is linked statically and its allocator calls wrapped (-Wl,--wrap=...), counting the
 * bytes the calling thread asks for (the workers' allocations are theirs). The speed the counts stand
 * for is measured by bench/bench_pins. */
#include <criterion/criterion.h>
#include <shard.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local size_t asked;

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
char *__real_strdup(const char *s);

void *__wrap_malloc(size_t n)
{
    asked += n;
    return __real_malloc(n);
}

void *__wrap_calloc(size_t a, size_t b)
{
    asked += a * b;
    return __real_calloc(a, b);
}

void *__wrap_realloc(void *p, size_t n)
{
    asked += n;
    return __real_realloc(p, n);
}

void *__wrap_aligned_alloc(size_t a, size_t n)
{
    asked += n;
    return __real_aligned_alloc(a, n);
}

char *__wrap_strdup(const char *s)
{
    asked += strlen(s) + 1;
    return __real_strdup(s);
}

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static const char *const names[] = { "w0", "w1", "w2", "w3" };

static void count_arc(uint64_t first, uint64_t last, const char *a, const char *b, void *ctx)
{
    (void)first;
    (void)last;
    (void)a;
    (void)b;
    (*(int *)ctx)++;
}

#define SAMPLES 32

/* The mean bytes of SAMPLES placements as a dispatcher makes them, on *ring (replaced by the last). */
static size_t ring_placement_bytes(shard_ring **ring, uint64_t *rng)
{
    size_t before = asked;
    for (int i = 0; i < SAMPLES; i++) {
        shard_ring *next;
        int arcs = 0;
        cr_assert_eq(shard_ring_clone(*ring, &next), 0);
        cr_assert_eq(shard_ring_pin(next, mix(rng), names[i % 4]), 0);
        cr_assert_eq(shard_ring_diff(*ring, next, count_arc, &arcs), 0);
        cr_assert_leq(arcs, 1);
        shard_ring_destroy(*ring);
        *ring = next;
    }
    return (asked - before) / SAMPLES;
}

Test(pin_cost, a_rings_placement_allocates_the_same_at_1000_pins_and_at_30000)
{
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, NULL), 0);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(shard_ring_add(r, names[i], 1), 0);
    uint64_t rng = 1;
    while (shard_ring_pin_count(r) < 1000)
        cr_assert_eq(shard_ring_pin(r, mix(&rng), names[rng % 4]), 0);
    size_t few = ring_placement_bytes(&r, &rng);
    while (shard_ring_pin_count(r) < 30000)
        cr_assert_eq(shard_ring_pin(r, mix(&rng), names[rng % 4]), 0);
    size_t many = ring_placement_bytes(&r, &rng);
    /* The clone's points and tables, the same for both, and a path of the pin trie. */
    cr_assert_lt(many, few + few / 8, "a placement at 30,000 pins allocates %zu bytes, at 1,000 %zu", many, few);
    shard_ring_destroy(r);
}

static size_t place_bytes(shard_dispatcher *d, uint64_t *rng)
{
    size_t before = asked;
    for (int i = 0; i < SAMPLES; i++)
        cr_assert_eq(shard_key_place_hash(d, mix(rng), names[i % 4]), 0);
    return (asked - before) / SAMPLES;
}

Test(pin_cost, a_placement_allocates_the_same_at_100_pins_and_at_4000, .timeout = 300)
{
    struct shard_config cfg = { .workers = 4, .queue_capacity = 64 };
    shard_dispatcher *d;
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    uint64_t rng = 2;
    for (int i = 0; i < 100; i++)
        cr_assert_eq(shard_key_place_hash(d, mix(&rng), names[i % 4]), 0);
    size_t few = place_bytes(d, &rng);
    for (int i = 100 + SAMPLES; i < 4000; i++)
        cr_assert_eq(shard_key_place_hash(d, mix(&rng), names[i % 4]), 0);
    size_t many = place_bytes(d, &rng);
    cr_assert_lt(many, few + few / 8, "a placement at 4,000 pins allocates %zu bytes, at 100 %zu", many, few);
    struct shard_stats st;
    shard_dispatcher_stats(d, &st);
    cr_assert_eq(st.placements, 4000 + SAMPLES);
    shard_dispatcher_destroy(d);
}
