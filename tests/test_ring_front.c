/* The ring's front table (ring_layout.h): lookups through it equal a brute-force model of placement
 * for random rings after random adds and removes, at every point, next to every point, at bucket
 * edges and at random hashes; and the edges the table has to get right on its own: rings of one
 * point, equal points, points at 0 and 2^64-1, crowded blocks, rings too wide for 15-bit entries.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include <criterion/criterion.h>
#include <shard.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "ring_layout.h"

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* How a ring places points: each shape stresses another part of the table. */
enum shape {
    SHAPE_DEFAULT,   /* the ring's own XXH3 points, recomputed by the model */
    SHAPE_NARROW,    /* 20-bit points: a span far below 2^64, many equal points */
    SHAPE_COLLIDING, /* 6 distinct values: most points tie with another member's */
    SHAPE_EXTREMES,  /* each member's first points at 0 and 2^64-1, the rest spread */
    SHAPE_COUNT
};

struct shape_ctx {
    enum shape shape;
    uint64_t   seed;
};

static uint64_t name_hash(const char *member, uint64_t seed)
{
    return XXH3_64bits_withSeed(member, strlen(member), seed);
}

static uint64_t shaped_point(const char *member, uint32_t i, void *ctx)
{
    const struct shape_ctx *c = ctx;
    uint64_t s = name_hash(member, c->seed) ^ ((uint64_t)i << 32);
    switch (c->shape) {
    case SHAPE_NARROW:
        return mix(&s) >> 44;
    case SHAPE_COLLIDING:
        return (uint64_t)(i % 3) << 62 ^ (uint64_t)(name_hash(member, 0) & 1) << 61;
    case SHAPE_EXTREMES:
        return i == 0 ? 0 : i == 1 ? UINT64_MAX : mix(&s);
    default:
        return 0; /* SHAPE_DEFAULT installs no hook */
    }
}

/* The model: every point recomputed from the members and the placement rule, sorted by (point, name). */
struct model_point {
    uint64_t    p;
    const char *name;
};

struct model {
    struct shape_ctx    shape;
    uint32_t            vnodes;
    uint64_t            seed;
    char              (*names)[16];
    uint32_t           *weights;
    size_t              n, cap;
    struct model_point *pts;
    size_t              npts;
};

static uint64_t model_point_of(const struct model *m, const char *name, uint32_t i)
{
    if (m->shape.shape != SHAPE_DEFAULT)
        return shaped_point(name, i, (void *)&m->shape);
    char buf[40];
    int len = snprintf(buf, sizeof buf, "%s#%u", name, i);
    return XXH3_64bits_withSeed(buf, (size_t)len, m->seed);
}

static int cmp_model_point(const void *a, const void *b)
{
    const struct model_point *x = a, *y = b;
    if (x->p != y->p)
        return x->p < y->p ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void model_rebuild(struct model *m)
{
    size_t total = 0;
    for (size_t i = 0; i < m->n; i++)
        total += (size_t)m->vnodes * m->weights[i];
    free(m->pts);
    m->pts = malloc((total ? total : 1) * sizeof *m->pts);
    cr_assert_not_null(m->pts);
    m->npts = 0;
    for (size_t i = 0; i < m->n; i++)
        for (uint32_t k = 0; k < m->vnodes * m->weights[i]; k++)
            m->pts[m->npts++] = (struct model_point){ model_point_of(m, m->names[i], k), m->names[i] };
    qsort(m->pts, m->npts, sizeof *m->pts, cmp_model_point);
}

/* Position in the model of the first point >= hash, wrapping to the smallest. */
static size_t model_find(const struct model *m, uint64_t hash)
{
    size_t lo = 0, hi = m->npts;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->pts[mid].p < hash)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == m->npts ? 0 : lo;
}

static void check_hash(const shard_ring *r, const struct model *m, uint64_t hash)
{
    const struct model_point *want = &m->pts[model_find(m, hash)];
    uint32_t o = shard__ring_owner_index(r, hash);
    cr_assert_lt(o, r->nmembers);
    cr_assert_str_eq(r->members[o].name, want->name, "hash %#llx: owner %s, model %s (point %#llx)",
                     (unsigned long long)hash, r->members[o].name, want->name, (unsigned long long)want->p);
    size_t pos = shard__ring_find(r, hash);
    cr_assert_lt(pos, r->npoints);
    cr_assert_eq(r->points[pos], want->p, "hash %#llx", (unsigned long long)hash);
    cr_assert_eq(r->owners[pos], o, "hash %#llx: find and the front table disagree", (unsigned long long)hash);
    cr_assert_str_eq(shard_ring_owner_of_hash(r, hash), want->name);
}

/* Every point, its neighbours, 0 and 2^64-1, the edges of buckets and random hashes. */
static void check_ring(const shard_ring *r, struct model *m, uint64_t *rng)
{
    model_rebuild(m);
    cr_assert_eq(shard_ring_point_count(r), m->npts);
    cr_assert_eq(shard_ring_member_count(r), m->n);
    if (m->npts == 0) {
        cr_assert_null(shard_ring_owner_of_hash(r, mix(rng)));
        return;
    }
    check_hash(r, m, 0);
    check_hash(r, m, UINT64_MAX);
    for (size_t i = 0; i < m->npts; i++) {
        check_hash(r, m, m->pts[i].p);
        check_hash(r, m, m->pts[i].p - 1);
        check_hash(r, m, m->pts[i].p + 1);
    }
    /* Both edges of buckets, all of them in small tables. */
    size_t step = r->nfront > 4096 ? r->nfront / 4096 : 1;
    for (size_t b = mix(rng) % step; b < r->nfront; b += step) {
        uint64_t lo = r->min + ((uint64_t)b << r->front_shift);
        check_hash(r, m, lo);
        check_hash(r, m, lo - 1);
    }
    for (int k = 0; k < 2000; k++)
        check_hash(r, m, mix(rng));
    /* Random hashes inside the span: in a narrow ring random 64-bit hashes almost all wrap. */
    for (int k = 0; k < 2000; k++)
        check_hash(r, m, r->min + (r->span == UINT64_MAX ? mix(rng) : mix(rng) % (r->span + 1)));
}

static void model_add(struct model *m, const char *name, uint32_t weight)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 16;
        m->names = realloc(m->names, m->cap * sizeof *m->names);
        m->weights = realloc(m->weights, m->cap * sizeof *m->weights);
        cr_assert(m->names && m->weights);
    }
    snprintf(m->names[m->n], sizeof m->names[m->n], "%s", name);
    m->weights[m->n++] = weight;
}

static void model_remove(struct model *m, size_t i)
{
    m->n--;
    memmove(&m->names[i], &m->names[m->n], sizeof *m->names);
    m->weights[i] = m->weights[m->n];
}

static void model_free(struct model *m)
{
    free(m->names);
    free(m->weights);
    free(m->pts);
}

static uint32_t random_vnodes(uint64_t *rng)
{
    switch (mix(rng) % 4) {
    case 0:
    case 1:
        return 1 + (uint32_t)(mix(rng) % 8); /* few points: most buckets between them, many mixed */
    case 2:
        return 16 + (uint32_t)(mix(rng) % 64);
    default:
        return 0; /* SHARD_DEFAULT_VNODES */
    }
}

/* One random ring: grown towards a random size in 1..300 members by single adds and batches, with
 * removes mixed in, then shrunk to empty; checked against the model after every change. */
static void random_ring(uint64_t seed)
{
    uint64_t rng = seed;
    struct model m = { 0 };
    m.shape = (struct shape_ctx){ (enum shape)(mix(&rng) % SHAPE_COUNT), mix(&rng) };
    m.seed = mix(&rng) % 4;
    struct shard_ring_config cfg = { .vnodes = random_vnodes(&rng), .seed = m.seed };
    if (m.shape.shape != SHAPE_DEFAULT) {
        cfg.point = shaped_point;
        cfg.ctx = &m.shape;
    }
    size_t target = 1 + mix(&rng) % 300;
    /* Many large members at the default vnodes make a slow model: keep those rings small. */
    if (cfg.vnodes == 0 && target > 24)
        target = 1 + target % 24;
    m.vnodes = cfg.vnodes ? cfg.vnodes : SHARD_DEFAULT_VNODES;
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, &cfg), 0);
    unsigned next_name = 0;
    while (m.n < target) {
        uint64_t op = mix(&rng) % 10;
        if (op < 2 && m.n > 0) {
            size_t i = mix(&rng) % m.n;
            cr_assert_eq(shard_ring_remove(r, m.names[i]), 0);
            model_remove(&m, i);
        } else if (op < 5) {
            char name[16];
            snprintf(name, sizeof name, "m%u", next_name++);
            uint32_t w = 1 + (uint32_t)(mix(&rng) % 4);
            cr_assert_eq(shard_ring_add(r, name, w), 0);
            model_add(&m, name, w);
        } else {
            size_t k = 1 + mix(&rng) % 16;
            char names[16][16];
            struct shard_ring_member batch[16];
            for (size_t i = 0; i < k; i++) {
                snprintf(names[i], sizeof names[i], "m%u", next_name++);
                batch[i] = (struct shard_ring_member){ names[i], 1 + (uint32_t)(mix(&rng) % 4) };
            }
            cr_assert_eq(shard_ring_add_many(r, batch, k), 0);
            for (size_t i = 0; i < k; i++)
                model_add(&m, names[i], batch[i].weight);
        }
        /* Every change of a small ring, fewer of a large one: the model's cost grows with it. */
        if (m.n < 40 || mix(&rng) % 8 == 0)
            check_ring(r, &m, &rng);
    }
    check_ring(r, &m, &rng);
    /* Shrunk as a clone: removes must fit the tables a clone starts with. */
    shard_ring *c;
    cr_assert_eq(shard_ring_clone(r, &c), 0);
    shard_ring_destroy(r);
    check_ring(c, &m, &rng);
    while (m.n > 0) {
        size_t i = mix(&rng) % m.n;
        cr_assert_eq(shard_ring_remove(c, m.names[i]), 0);
        model_remove(&m, i);
        if (m.n < 8 || mix(&rng) % 16 == 0)
            check_ring(c, &m, &rng);
    }
    check_ring(c, &m, &rng);
    shard_ring_destroy(c);
    model_free(&m);
}

Test(ring_front, random_rings_equal_the_model, .timeout = 600)
{
    for (uint64_t seed = 1; seed <= 48; seed++)
        random_ring(seed);
}

/* A ring of one member, and of one point: one owner everywhere. */
Test(ring_front, one_member_one_point)
{
    uint64_t rng = 5;
    for (uint32_t vnodes = 1; vnodes <= 3; vnodes++) {
        struct model m = { .vnodes = vnodes, .seed = 0 };
        struct shard_ring_config cfg = { .vnodes = vnodes };
        shard_ring *r;
        cr_assert_eq(shard_ring_create(&r, &cfg), 0);
        cr_assert_eq(shard_ring_add(r, "only", 1), 0);
        model_add(&m, "only", 1);
        check_ring(r, &m, &rng);
        for (size_t b = 0; b < r->nfront; b++)
            cr_assert_eq(r->front[b], 0, "bucket %zu", b);
        shard_ring_destroy(r);
        model_free(&m);
    }
}

struct fixed_points {
    const char *name[4];
    uint64_t    p[4];
};

static uint64_t fixed_point(const char *member, uint32_t i, void *ctx)
{
    const struct fixed_points *f = ctx;
    for (int k = 0; k < 4; k++)
        if (f->name[k] && strcmp(f->name[k], member) == 0)
            return f->p[k] + i;
    return 0;
}

/* Points at the ends of the hash space, equal points resolved by name, in every order of adds. */
Test(ring_front, ends_of_the_space_and_ties)
{
    static const struct fixed_points sets[] = {
        { { "a", "b" }, { 0, UINT64_MAX } },
        { { "b", "a" }, { UINT64_MAX, UINT64_MAX } }, /* one value: "a" owns everything */
        { { "a", "b", "c" }, { 0, 0, 1 } },
        { { "c", "a", "b" }, { UINT64_MAX - 1, UINT64_MAX - 1, 0 } },
        { { "x", "y", "z", "w" }, { 1ull << 63, (1ull << 63) - 1, 1ull << 63, 7 } },
    };
    uint64_t rng = 9;
    for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) {
        struct fixed_points fp = sets[s];
        struct model m = { .vnodes = 1 };
        shard_ring *r;
        struct shard_ring_config cfg = { .vnodes = 1, .point = fixed_point, .ctx = &fp };
        cr_assert_eq(shard_ring_create(&r, &cfg), 0);
        for (int k = 0; k < 4 && fp.name[k]; k++) {
            cr_assert_eq(shard_ring_add(r, fp.name[k], 1), 0);
            model_add(&m, fp.name[k], 1);
            /* The model's points by hand: model_rebuild knows only the shapes. */
            free(m.pts);
            m.pts = malloc(m.n * sizeof *m.pts);
            m.npts = m.n;
            for (size_t i = 0; i < m.n; i++)
                m.pts[i] = (struct model_point){ fixed_point(m.names[i], 0, &fp), m.names[i] };
            qsort(m.pts, m.npts, sizeof *m.pts, cmp_model_point);
            check_hash(r, &m, 0);
            check_hash(r, &m, UINT64_MAX);
            for (size_t i = 0; i < m.npts; i++) {
                check_hash(r, &m, m.pts[i].p);
                check_hash(r, &m, m.pts[i].p - 1);
                check_hash(r, &m, m.pts[i].p + 1);
            }
            for (int q = 0; q < 1000; q++)
                check_hash(r, &m, mix(&rng));
        }
        shard_ring_destroy(r);
        model_free(&m);
    }
}

/* A remove may use more entries than before: with the span just under a power of two instead of at
 * it, the same table size needs a bucket half as wide. A clone must have room for that too. */
Test(ring_front, remove_from_a_clone_narrows_the_buckets)
{
    struct fixed_points fp = { { "a", "b", "c", "d" }, { 0, 1ull << 20, (1ull << 20) - 1, 7 } };
    struct shard_ring_config cfg = { .vnodes = 1, .point = fixed_point, .ctx = &fp };
    shard_ring *r, *c;
    cr_assert_eq(shard_ring_create(&r, &cfg), 0);
    struct shard_ring_member mm[] = { { "a", 1 }, { "b", 1 }, { "c", 1 }, { "d", 1 } };
    cr_assert_eq(shard_ring_add_many(r, mm, 4), 0);
    size_t before = r->nfront;
    cr_assert_eq(shard_ring_clone(r, &c), 0);
    shard_ring_destroy(r);
    cr_assert_eq(shard_ring_remove(c, "b"), 0);
    cr_assert_gt(c->nfront, before, "the test no longer makes the table grow");
    struct model m = { .vnodes = 1 };
    model_add(&m, "a", 1);
    model_add(&m, "c", 1);
    model_add(&m, "d", 1);
    m.pts = malloc(3 * sizeof *m.pts);
    for (size_t i = 0; i < 3; i++)
        m.pts[m.npts++] = (struct model_point){ fixed_point(m.names[i], 0, &fp), m.names[i] };
    qsort(m.pts, m.npts, sizeof *m.pts, cmp_model_point);
    for (size_t b = 0; b < c->nfront; b++) {
        uint64_t lo = c->min + ((uint64_t)b << c->front_shift);
        check_hash(c, &m, lo);
        check_hash(c, &m, lo - 1);
    }
    shard_ring_destroy(c);
    model_free(&m);
}

/* Two clusters of points in one block, the first with more points than an entry's offset can count:
 * the second cluster's mixed buckets name an earlier point and search on from it. */
static uint64_t crowded_point(const char *member, uint32_t i, void *ctx)
{
    (void)ctx;
    switch (member[0]) {
    case 'a':
        return i;
    case 'b':
        return (1ull << 48) + 2 * (uint64_t)i;
    case 'c':
        return (1ull << 48) + 2 * (uint64_t)i + 1;
    default:
        return UINT64_MAX - i;
    }
}

Test(ring_front, crowded_block)
{
    struct shard_ring_config cfg = { .vnodes = 40000, .point = crowded_point };
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, &cfg), 0);
    struct shard_ring_member mm[] = { { "a", 1 }, { "b", 1 }, { "c", 1 }, { "z", 1 } };
    cr_assert_eq(shard_ring_add_many(r, mm, 4), 0);
    size_t crowded = 0;
    for (size_t b = 0; b < r->nfront; b++)
        crowded += r->front[b] == SHARD_RING_FRONT_PINNED - 1; /* the largest offset: the first point is further on */
    cr_assert_gt(crowded, 0, "the test no longer reaches a crowded block");
    struct model m = { .vnodes = 40000 };
    for (size_t i = 0; i < 4; i++)
        model_add(&m, mm[i].name, 1);
    m.pts = malloc(160000 * sizeof *m.pts);
    for (size_t i = 0; i < 4; i++)
        for (uint32_t k = 0; k < 40000; k++)
            m.pts[m.npts++] = (struct model_point){ crowded_point(m.names[i], k, NULL), m.names[i] };
    qsort(m.pts, m.npts, sizeof *m.pts, cmp_model_point);
    for (size_t i = 0; i < m.npts; i++) {
        check_hash(r, &m, m.pts[i].p);
        check_hash(r, &m, m.pts[i].p + 1);
        check_hash(r, &m, m.pts[i].p - 1);
    }
    shard_ring_destroy(r);
    model_free(&m);
}

/* 32768 members fit 15-bit entries; one more and every bucket is mixed. Both answer right. */
Test(ring_front, widest_rings)
{
    uint64_t rng = 11;
    for (size_t n = 32768; n <= 32769; n++) {
        struct model m = { .vnodes = 1, .seed = 0 };
        struct shard_ring_config cfg = { .vnodes = 1 };
        struct shard_ring_member *mm = calloc(n, sizeof *mm);
        char (*names)[16] = calloc(n, 16);
        cr_assert(mm && names);
        for (size_t i = 0; i < n; i++) {
            snprintf(names[i], 16, "w%zu", i);
            mm[i] = (struct shard_ring_member){ names[i], 1 };
            model_add(&m, names[i], 1);
        }
        shard_ring *r;
        cr_assert_eq(shard_ring_create(&r, &cfg), 0);
        cr_assert_eq(shard_ring_add_many(r, mm, n), 0);
        size_t named = 0;
        for (size_t b = 0; b < r->nfront; b++)
            named += r->front[b] < SHARD_RING_FRONT_MIXED;
        if (n <= SHARD_RING_FRONT_MIXED)
            cr_assert_gt(named, r->nfront / 2);
        else
            cr_assert_eq(named, 0);
        check_ring(r, &m, &rng);
        shard_ring_destroy(r);
        free(mm);
        free(names);
        model_free(&m);
    }
}

/* The bound ring.h and ring_layout.h state: under 45 bytes a point, under 29 past 65,536 points. */
Test(ring_front, memory_bound)
{
    for (uint32_t vnodes = 1; vnodes <= 64; vnodes++) {
        struct shard_ring_config cfg = { .vnodes = vnodes };
        shard_ring *r;
        cr_assert_eq(shard_ring_create(&r, &cfg), 0);
        for (int n = 1; n <= 40; n++) {
            char name[16];
            snprintf(name, sizeof name, "n%d", n);
            cr_assert_eq(shard_ring_add(r, name, 1), 0);
            cr_assert_lt(shard_ring_memory(r), 45 * shard_ring_point_count(r), "vnodes %u, %d members",
                         vnodes, n);
        }
        shard_ring_destroy(r);
    }
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, NULL), 0);
    for (int n = 1; n <= 130; n++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", n);
        cr_assert_eq(shard_ring_add(r, name, 1), 0);
        size_t points = shard_ring_point_count(r);
        cr_assert_lt(shard_ring_memory(r), (points > 65536 ? 29 : 45) * points, "%d members", n);
        if (points <= 65536)
            cr_assert_leq(r->nfront * sizeof *r->front, (size_t)1 << 20, "%d members", n);
    }
    shard_ring_destroy(r);
}
