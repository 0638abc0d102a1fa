/* shard_ring_diff reports exactly the arcs whose owner changed, checked key by key. */
#include <criterion/criterion.h>
#include <errno.h>
#include <shard.h>
#include <stdlib.h>
#include <string.h>

#include "ring_oracle.h"

#define KEYS 100000

struct arc {
    uint64_t first, last;
    char a[32], b[32];
};

struct arcs {
    struct arc *v;
    size_t n, cap;
};

static void collect(uint64_t first, uint64_t last, const char *oa, const char *ob, void *ctx)
{
    struct arcs *s = ctx;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
    }
    struct arc *a = &s->v[s->n++];
    a->first = first;
    a->last = last;
    snprintf(a->a, sizeof a->a, "%s", oa ? oa : "(null)");
    snprintf(a->b, sizeof a->b, "%s", ob ? ob : "(null)");
}

static int in_arc(const struct arc *a, uint64_t h)
{
    if (a->first == a->last)
        return 1;
    if (a->first < a->last)
        return a->first < h && h <= a->last;
    return h > a->first || h <= a->last; /* wraps past 2^64 - 1 */
}

/* The arc holding h, or NULL. Arcs are disjoint and in clockwise order: binary search on last,
 * the wrapping arc (if any) checked on its own. */
static const struct arc *find_arc(const struct arcs *s, uint64_t h)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->v[mid].last < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < s->n && in_arc(&s->v[lo], h))
        return &s->v[lo];
    if (s->n && in_arc(&s->v[0], h))
        return &s->v[0];
    if (s->n && in_arc(&s->v[s->n - 1], h))
        return &s->v[s->n - 1];
    return NULL;
}

static void check_diff_against_keys(const shard_ring *a, const shard_ring *b)
{
    struct arcs s = { 0 };
    cr_assert_eq(shard_ring_diff(a, b, collect, &s), 0);
    /* Clockwise order: after the first arc, each starts at or after the previous one ends. */
    for (size_t i = 1; i < s.n; i++) {
        cr_assert_geq(s.v[i].first, s.v[i - 1].last, "arc %zu out of order", i);
        cr_assert_lt(s.v[i].first, s.v[i].last, "only the first arc may wrap");
        cr_assert(strcmp(s.v[i].a, s.v[i].b) != 0);
    }
    char key[32];
    for (unsigned k = 0; k < KEYS; k++) {
        size_t n = test_key(key, sizeof key, "d", k);
        uint64_t h = shard_ring_hash(a, key, n);
        const char *oa = shard_ring_owner_of_hash(a, h), *ob = shard_ring_owner_of_hash(b, h);
        const struct arc *arc = find_arc(&s, h);
        int differs = (oa == NULL) != (ob == NULL) || (oa && strcmp(oa, ob) != 0);
        if (!differs) {
            cr_assert_null(arc, "key %u unchanged (%s) but inside a diff arc", k, oa ? oa : "-");
        } else {
            cr_assert_not_null(arc, "key %u moved %s -> %s, no arc reported", k, oa, ob);
            cr_assert_str_eq(arc->a, oa ? oa : "(null)");
            cr_assert_str_eq(arc->b, ob ? ob : "(null)");
        }
    }
    free(s.v);
}

static shard_ring *ring_of(int from, int to)
{
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, NULL), 0);
    for (int i = from; i < to; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", i);
        cr_assert_eq(shard_ring_add(r, name, 1), 0);
    }
    return r;
}

Test(diff, add_one_member)
{
    shard_ring *a = ring_of(0, 4), *b = ring_of(0, 5);
    check_diff_against_keys(a, b);
    check_diff_against_keys(b, a);
    shard_ring_destroy(a);
    shard_ring_destroy(b);
}

Test(diff, remove_and_add_at_once)
{
    shard_ring *a = ring_of(0, 8), *b = ring_of(2, 11);
    cr_assert_eq(shard_ring_remove(b, "w9"), 0);
    cr_assert_eq(shard_ring_add(b, "heavy", 3), 0);
    check_diff_against_keys(a, b);
    shard_ring_destroy(a);
    shard_ring_destroy(b);
}

Test(diff, moved_arcs_sum_to_the_new_members_share)
{
    shard_ring *a = ring_of(0, 4), *b = ring_of(0, 5);
    struct arcs s = { 0 };
    cr_assert_eq(shard_ring_diff(a, b, collect, &s), 0);
    double total = 0;
    for (size_t i = 0; i < s.n; i++) {
        cr_assert_str_eq(s.v[i].b, "w4");
        total += (double)(s.v[i].last - s.v[i].first); /* unsigned wrap gives the wrapping arc's length */
    }
    cr_assert_float_eq(total / 18446744073709551616.0, shard_ring_share(b, "w4"), 1e-9);
    free(s.v);
    shard_ring_destroy(a);
    shard_ring_destroy(b);
}

Test(diff, equal_rings_have_no_arcs)
{
    shard_ring *a = ring_of(0, 6), *b = ring_of(0, 6);
    struct arcs s = { 0 };
    cr_assert_eq(shard_ring_diff(a, b, collect, &s), 0);
    cr_assert_eq(s.n, 0);
    shard_ring_destroy(a);
    shard_ring_destroy(b);
}

Test(diff, empty_against_one_member_is_the_whole_space)
{
    shard_ring *a = ring_of(0, 0), *b = ring_of(0, 1);
    struct arcs s = { 0 };
    cr_assert_eq(shard_ring_diff(a, b, collect, &s), 0);
    cr_assert_eq(s.n, 1);
    cr_assert_eq(s.v[0].first, s.v[0].last);
    cr_assert_str_eq(s.v[0].a, "(null)");
    cr_assert_str_eq(s.v[0].b, "w0");
    free(s.v);
    check_diff_against_keys(a, b);
    shard_ring_destroy(a);
    shard_ring_destroy(b);
}

Test(diff, errors)
{
    shard_ring *a = ring_of(0, 1);
    struct arcs s = { 0 };
    cr_assert_eq(shard_ring_diff(NULL, a, collect, &s), -EINVAL);
    cr_assert_eq(shard_ring_diff(a, NULL, collect, &s), -EINVAL);
    cr_assert_eq(shard_ring_diff(a, a, NULL, &s), -EINVAL);
    shard_ring_destroy(a);
}

/* A copy of r built from nothing: the same members, weights and pins, but not a clone, so a diff
 * against it takes the full walk over every point and pin. */
static shard_ring *rebuilt(const shard_ring *r)
{
    shard_ring *c;
    cr_assert_eq(shard_ring_create(&c, NULL), 0);
    for (size_t i = 0; i < shard_ring_member_count(r); i++)
        cr_assert_eq(shard_ring_add(c, shard_ring_member(r, i), shard_ring_weight(r, shard_ring_member(r, i))), 0);
    for (size_t i = 0; i < shard_ring_pin_count(r); i++) {
        uint64_t h;
        const char *m;
        cr_assert_eq(shard_ring_pin_at(r, i, &h, &m), 0);
        cr_assert_eq(shard_ring_pin(c, h, m), 0);
    }
    cr_assert_eq(shard_ring_checksum(c), shard_ring_checksum(r));
    return c;
}

static uint64_t lcg(uint64_t *x)
{
    return *x = *x * 6364136223846793005ull + 1442695040888963407ull;
}

/* Two clones a few pins apart (the diff of a placement, which walks only the pins that changed)
 * report exactly the arcs the full walk reports: the same arcs, owners and order, with runs of
 * consecutive pinned hashes, a run through 2^64 - 1 and 0, pins on points and next to them, and
 * pins that change nothing. */
Test(diff, pins_only_equals_the_full_walk)
{
    uint64_t x = 5;
    for (int round = 0; round < 40; round++) {
        shard_ring *a = ring_of(0, 3 + round % 3), *b;
        size_t nm = shard_ring_member_count(a);
        uint64_t p;
        cr_assert_eq(shard_ring_point(a, lcg(&x) % shard_ring_point_count(a), &p, NULL), 0);
        uint64_t spots[] = { 0, 1, UINT64_MAX, UINT64_MAX - 1, p - 1, p, p + 1, lcg(&x), lcg(&x) };
        for (int i = 0; i < 200; i++) {
            uint64_t h = i < 9 ? spots[i] : lcg(&x);
            if (i >= 9 && i % 3 == 0)
                h = spots[lcg(&x) % 9] + lcg(&x) % 5 - 2; /* runs of neighbours */
            cr_assert_eq(shard_ring_pin(a, h, shard_ring_member(a, lcg(&x) % nm)), 0);
        }
        cr_assert_eq(shard_ring_clone(a, &b), 0);
        for (int i = 0; i < 1 + round * 3; i++) {
            uint64_t h, op = lcg(&x) % 4;
            if (op == 0 && shard_ring_pin_count(b)) {
                cr_assert_eq(shard_ring_pin_at(b, lcg(&x) % shard_ring_pin_count(b), &h, NULL), 0);
                cr_assert_eq(shard_ring_unpin(b, h), 0);
                continue;
            }
            h = op == 1 ? spots[lcg(&x) % 9] + lcg(&x) % 7 - 3 : lcg(&x);
            /* A run through the end of the space, all moved to one member. */
            if (round % 5 == 4 && i < 4)
                h = (uint64_t)i - 2;
            const char *to = round % 5 == 4 && i < 4 ? "w0" : shard_ring_member(b, lcg(&x) % nm);
            cr_assert_eq(shard_ring_pin(b, h, to), 0);
        }
        shard_ring *full = rebuilt(a);
        struct arcs fast = { 0 }, slow = { 0 };
        cr_assert_eq(shard_ring_diff(a, b, collect, &fast), 0);
        cr_assert_eq(shard_ring_diff(full, b, collect, &slow), 0);
        cr_assert_eq(fast.n, slow.n, "round %d: %zu arcs, the full walk %zu", round, fast.n, slow.n);
        for (size_t i = 0; i < fast.n; i++) {
            cr_assert_eq(fast.v[i].first, slow.v[i].first, "round %d arc %zu", round, i);
            cr_assert_eq(fast.v[i].last, slow.v[i].last, "round %d arc %zu", round, i);
            cr_assert_str_eq(fast.v[i].a, slow.v[i].a);
            cr_assert_str_eq(fast.v[i].b, slow.v[i].b);
        }
        free(fast.v);
        free(slow.v);
        check_diff_against_keys(b, a);
        shard_ring_destroy(full);
        shard_ring_destroy(a);
        shard_ring_destroy(b);
    }
}
