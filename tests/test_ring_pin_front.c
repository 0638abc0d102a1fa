/* Pins in the front table (src/ring_layout.h): a bucket is marked exactly while it holds a live pin
 * (with the sub-buckets that hold one, where the entry keeps its owner), every other entry is what a
 * ring with the same members and no pins has, byte for byte, and once the last pin goes the table is
 * that ring's again; through pins, unpins, adds, removes and new weights, for rings whose points
 * crowd, tie, sit at the ends of the space, or have too many members for the owner-keeping mark.
 * Lookups answer the pin, else what the ring without pins answers (test_ring_front checks that one
 * against a model). */
#include <criterion/criterion.h>
#include <shard.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring_layout.h"

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

enum shape { DEFAULT, NARROW, COLLIDING, EXTREMES, SHAPES };

static uint64_t shaped_point(const char *member, uint32_t i, void *ctx)
{
    enum shape s = *(const enum shape *)ctx;
    uint64_t x = strlen(member) * 0x100000001b3ull ^ (uint64_t)member[1] << 40 ^ (uint64_t)i << 20;
    for (const char *c = member; *c; c++)
        x = (x ^ (uint64_t)*c) * 0x100000001b3ull;
    switch (s) {
    case NARROW:
        return mix(&x) >> 44;
    case COLLIDING:
        return (uint64_t)(i % 3) << 62;
    default:
        return i == 0 ? 0 : i == 1 ? UINT64_MAX : mix(&x);
    }
}

#define MAX_PINS 2048

/* Sorted by hash. */
struct pins {
    uint64_t h[MAX_PINS];
    char     name[MAX_PINS][16];
    size_t   n;
};

/* Where h is in the sorted pins, or would go. */
static size_t pin_slot(const struct pins *p, uint64_t h)
{
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->h[mid] < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static long pin_pos(const struct pins *p, uint64_t h)
{
    size_t i = pin_slot(p, h);
    return i < p->n && p->h[i] == h ? (long)i : -1;
}

static void pin_drop(struct pins *p, size_t i)
{
    p->n--;
    memmove(&p->h[i], &p->h[i + 1], (p->n - i) * sizeof *p->h);
    memmove(p->name[i], p->name[i + 1], (p->n - i) * sizeof *p->name);
}

/* The ring under test, its members (names "m0".. and weights), and its pins, in a model. */
struct rig {
    struct shard_ring_config cfg;
    enum shape               shape;
    shard_ring              *r;
    char                   (*names)[16];
    uint32_t                *weights;
    size_t                   n;
    struct pins              pins;
};

/* A ring with the rig's members and no pin, built from nothing. */
static shard_ring *clean_ring(const struct rig *g)
{
    shard_ring *c;
    cr_assert_eq(shard_ring_create(&c, &g->cfg), 0);
    struct shard_ring_member *mm = malloc((g->n ? g->n : 1) * sizeof *mm);
    for (size_t i = 0; i < g->n; i++)
        mm[i] = (struct shard_ring_member){ g->names[i], g->weights[i] };
    cr_assert_eq(shard_ring_add_many(c, mm, g->n), 0);
    free(mm);
    return c;
}

static void check_hash(const struct rig *g, const shard_ring *clean, uint64_t h)
{
    long p = pin_pos(&g->pins, h);
    const char *want = p >= 0 ? g->pins.name[p] : shard_ring_owner_of_hash(clean, h);
    cr_assert_str_eq(g->r->members[shard__ring_owner_index(g->r, h)].name, want, "hash %#llx",
                     (unsigned long long)h);
}

static void check(const struct rig *g)
{
    const shard_ring *r = g->r;
    shard_ring *clean = clean_ring(g);
    cr_assert_eq(shard_ring_pin_count(r), g->pins.n);
    cr_assert_eq(r->nfront, clean->nfront);
    cr_assert_eq(r->front_plain, clean->front_plain);
    /* Each bucket's sub-buckets that hold a pin, a bit each. */
    uint32_t *held = calloc(r->nfront ? r->nfront : 1, sizeof *held);
    for (size_t i = 0; i < g->pins.n; i++) {
        uint64_t off = g->pins.h[i] - r->min;
        if (off <= r->span)
            held[off >> r->front_shift] |= 1u << ((off >> r->sub_shift) & r->sub_mask);
    }
    for (size_t b = 0; b < r->nfront; b++) {
        uint16_t e = r->front[b], c = clean->front[b];
        if (!held[b]) {
            cr_assert_eq(e, c, "bucket %zu, no pin: %#x, without pins %#x", b, e, c);
        } else if (c < r->front_plain && r->front_plain == SHARD_RING_FRONT_PINNED_OWNER) {
            uint32_t want = SHARD_RING_FRONT_PINNED_OWNER | held[b] << r->owner_bits | c;
            cr_assert_eq(e, want, "bucket %zu keeps its owner %#x and sub-buckets %#x: %#x", b, c, held[b], e);
        } else {
            cr_assert_eq(e, SHARD_RING_FRONT_PINNED, "bucket %zu, mixed or wide (%#x): %#x", b, c, e);
        }
    }
    free(held);
    /* Every live pin has its bit in the ring's filter (pin_filter.h): a clear bit answers "not pinned". */
    for (size_t i = 0; i < g->pins.n; i++)
        cr_assert(shard__pin_filter_may(r->pin_filter, g->pins.h[i]), "pin %#llx is not in the filter",
                  (unsigned long long)g->pins.h[i]);
    uint64_t rng = g->pins.n;
    for (size_t i = 0; i < g->pins.n; i++) {
        check_hash(g, clean, g->pins.h[i]);
        check_hash(g, clean, g->pins.h[i] - 1);
        check_hash(g, clean, g->pins.h[i] + 1);
    }
    for (int k = 0; k < 3000; k++)
        check_hash(g, clean, k % 2 ? mix(&rng) : r->min + mix(&rng) % (r->span + (r->span < UINT64_MAX)));
    shard_ring_destroy(clean);
}

/* Hashes where marks go wrong: points and their neighbours, bucket edges, the ends of the space. */
static uint64_t pick_hash(const shard_ring *r, uint64_t *rng)
{
    uint64_t x = mix(rng), p;
    switch (x % 8) {
    case 0:
    case 1:
        cr_assert_eq(shard_ring_point(r, mix(rng) % shard_ring_point_count(r), &p, NULL), 0);
        return p + x % 3 - 1;
    case 2: {
        uint64_t lo = r->min + ((mix(rng) % r->nfront) << r->front_shift);
        return lo - (x >> 8) % 2;
    }
    case 3:
        return x & 16 ? 0 : UINT64_MAX;
    case 4:
        return r->min + mix(rng) % (r->span + (r->span < UINT64_MAX));
    default:
        return mix(rng);
    }
}

static void pin_some(struct rig *g, uint64_t *rng, int count)
{
    for (int k = 0; k < count && g->pins.n < MAX_PINS; k++) {
        uint64_t h = pick_hash(g->r, rng);
        const char *to = g->names[mix(rng) % g->n];
        cr_assert_eq(shard_ring_pin(g->r, h, to), 0);
        size_t i = pin_slot(&g->pins, h);
        if (i == g->pins.n || g->pins.h[i] != h) {
            memmove(&g->pins.h[i + 1], &g->pins.h[i], (g->pins.n - i) * sizeof *g->pins.h);
            memmove(g->pins.name[i + 1], g->pins.name[i], (g->pins.n - i) * sizeof *g->pins.name);
            g->pins.n++;
        }
        g->pins.h[i] = h;
        snprintf(g->pins.name[i], 16, "%s", to);
    }
}

static void unpin_some(struct rig *g, uint64_t *rng, int count)
{
    for (int k = 0; k < count && g->pins.n; k++) {
        size_t i = mix(rng) % g->pins.n;
        cr_assert_eq(shard_ring_unpin(g->r, g->pins.h[i]), 0);
        pin_drop(&g->pins, i);
    }
}

static void rig_add(struct rig *g, const char *name, uint32_t w)
{
    if ((g->n & (g->n - 1)) == 0) { /* 0, 1, 2, 4, ...: doubled */
        g->names = realloc(g->names, (g->n ? 2 * g->n : 1) * sizeof *g->names);
        g->weights = realloc(g->weights, (g->n ? 2 * g->n : 1) * sizeof *g->weights);
        cr_assert(g->names && g->weights);
    }
    snprintf(g->names[g->n], 16, "%s", name);
    g->weights[g->n++] = w;
}

static void rig_remove(struct rig *g, size_t i)
{
    cr_assert_eq(shard_ring_remove(g->r, g->names[i]), 0);
    for (size_t k = 0; k < g->pins.n;)
        if (strcmp(g->pins.name[k], g->names[i]) == 0)
            pin_drop(&g->pins, k);
        else
            k++;
    g->n--;
    memmove(g->names[i], g->names[g->n], 16);
    g->weights[i] = g->weights[g->n];
}

static void rig_free(struct rig *g)
{
    shard_ring_destroy(g->r);
    free(g->names);
    free(g->weights);
}

static void random_rig(uint64_t seed)
{
    uint64_t rng = seed;
    static struct rig g;
    memset(&g, 0, sizeof g);
    g.shape = (enum shape)(seed % SHAPES);
    g.cfg.vnodes = mix(&rng) % 2 ? 1 + (uint32_t)(mix(&rng) % 8) : 64;
    if (g.shape != DEFAULT) {
        g.cfg.point = shaped_point;
        g.cfg.ctx = &g.shape;
    }
    cr_assert_eq(shard_ring_create(&g.r, &g.cfg), 0);
    unsigned next = 0;
    for (size_t n = 1 + mix(&rng) % 12; g.n < n;) {
        char name[16];
        snprintf(name, sizeof name, "m%u", next++);
        uint32_t w = 1 + (uint32_t)(mix(&rng) % 3);
        cr_assert_eq(shard_ring_add(g.r, name, w), 0);
        rig_add(&g, name, w);
    }
    for (int round = 0; round < 12; round++) {
        pin_some(&g, &rng, 1 + (int)(mix(&rng) % 200));
        check(&g);
        unpin_some(&g, &rng, (int)(mix(&rng) % 150));
        check(&g);
        uint64_t op = mix(&rng) % 4;
        if (op == 0) {
            char name[16];
            snprintf(name, sizeof name, "%c%u", mix(&rng) % 2 ? 'a' : 'z', next++ % 10000); /* before and after "m" */
            cr_assert_eq(shard_ring_add(g.r, name, 1), 0);
            rig_add(&g, name, 1);
        } else if (op == 1 && g.n > 1) {
            rig_remove(&g, mix(&rng) % g.n);
        } else if (op == 2) {
            size_t i = mix(&rng) % g.n;
            g.weights[i] = 1 + (uint32_t)(mix(&rng) % 3);
            cr_assert_eq(shard_ring_set_weight(g.r, g.names[i], g.weights[i]), 0);
        }
        if (round % 4 == 3) { /* go on in a clone: it shares the pins and copies the table */
            shard_ring *c;
            cr_assert_eq(shard_ring_clone(g.r, &c), 0);
            shard_ring_destroy(g.r);
            g.r = c;
        }
        check(&g);
    }
    unpin_some(&g, &rng, MAX_PINS);
    shard_ring *clean = clean_ring(&g);
    cr_assert_eq(memcmp(g.r->front, clean->front, g.r->nfront * sizeof *g.r->front), 0,
                 "without pins again, the table is a pinless ring's");
    shard_ring_destroy(clean);
    rig_free(&g);
}

Test(ring_pin_front, random_rings, .timeout = 600)
{
    for (uint64_t seed = 1; seed <= 24; seed++)
        random_rig(seed);
}

/* Wider rings leave fewer bits for sub-buckets (4 at 300 members, 2 at 3,000, 1 at 8192); past 8192
 * the owner-keeping mark has no room: pinned buckets are PINNED; past 32768 every entry is mixed, and a
 * pinned one PINNED too. */
Test(ring_pin_front, wide_rings, .timeout = 600)
{
    static const size_t sizes[] = { 300, 3000, 8192, 8193, 32769 };
    static const unsigned subs[] = { 4, 2, 1, 0, 0 };
    for (int s = 0; s < 5; s++) {
        static struct rig g;
        memset(&g, 0, sizeof g);
        g.cfg.vnodes = 1;
        g.shape = DEFAULT;
        cr_assert_eq(shard_ring_create(&g.r, &g.cfg), 0);
        struct shard_ring_member *mm = calloc(sizes[s], sizeof *mm);
        for (size_t i = 0; i < sizes[s]; i++) {
            char name[16];
            snprintf(name, sizeof name, "m%u", (unsigned)i);
            rig_add(&g, name, 1);
        }
        for (size_t i = 0; i < sizes[s]; i++)
            mm[i] = (struct shard_ring_member){ g.names[i], 1 };
        cr_assert_eq(shard_ring_add_many(g.r, mm, sizes[s]), 0);
        free(mm);
        cr_assert_eq(g.r->front_plain, sizes[s] <= 8192 ? SHARD_RING_FRONT_PINNED_OWNER : SHARD_RING_FRONT_MIXED);
        if (subs[s])
            cr_assert_eq(g.r->sub_mask + 1u, subs[s], "%zu members", sizes[s]);
        uint64_t rng = 40 + (uint64_t)s;
        pin_some(&g, &rng, 1500);
        check(&g);
        unpin_some(&g, &rng, 1000);
        check(&g);
        unpin_some(&g, &rng, MAX_PINS);
        check(&g);
        rig_free(&g);
    }
}
