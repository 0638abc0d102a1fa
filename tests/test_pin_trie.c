/* The pin trie (src/pin_trie.c) alone, against a sorted array: lookups, order, ranks and diffs after
 * random changes, for evenly spread hashes and for hashes crowded into narrow ranges; persistence (a
 * version a holder keeps never changes) and what a change costs in structure: it copies one path
 * (and the leaves of a leaf it splits), whatever the number of entries. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pin_trie.h"

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* How hashes are drawn: each shape makes another tree. */
enum shape {
    SPREAD,  /* key hashes: even over 2^64 */
    SMALL,   /* 0..2^17: one path of single-child nodes down to where they differ */
    STRIDED, /* multiples of 2^40: differ only in their top 24 bits */
    CLUSTER, /* around 2^63 +- 2^20, and the very ends 0.. and ..2^64-1 */
    SHAPES
};

static uint64_t draw(enum shape s, uint64_t *rng)
{
    uint64_t x = mix(rng);
    switch (s) {
    case SMALL:
        return x & ((1u << 17) - 1);
    case STRIDED:
        return (x >> 40) << 40;
    case CLUSTER:
        return x % 3 == 0 ? (x >> 44) : x % 3 == 1 ? UINT64_MAX - (x >> 44) : (1ull << 63) + (x >> 43) - (1ull << 20);
    default:
        return x;
    }
}

/* The model: a sorted array of (hash, number). */
struct model {
    uint64_t *h;
    uint32_t *num;
    size_t    n;
};

static size_t model_pos(const struct model *m, uint64_t h)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->h[mid] < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static uint32_t model_find(const struct model *m, uint64_t h)
{
    size_t i = model_pos(m, h);
    return i < m->n && m->h[i] == h ? m->num[i] : 0;
}

static void model_set(struct model *m, uint64_t h, uint32_t num)
{
    size_t i = model_pos(m, h);
    if (i < m->n && m->h[i] == h) {
        m->num[i] = num;
        return;
    }
    memmove(m->h + i + 1, m->h + i, (m->n - i) * sizeof *m->h);
    memmove(m->num + i + 1, m->num + i, (m->n - i) * sizeof *m->num);
    m->h[i] = h;
    m->num[i] = num;
    m->n++;
}

static void model_del(struct model *m, uint64_t h)
{
    size_t i = model_pos(m, h);
    if (i < m->n && m->h[i] == h) {
        memmove(m->h + i, m->h + i + 1, (m->n - i - 1) * sizeof *m->h);
        memmove(m->num + i, m->num + i + 1, (m->n - i - 1) * sizeof *m->num);
        m->n--;
    }
}

static struct model model_new(size_t cap)
{
    struct model m = { malloc(cap * sizeof *m.h), malloc(cap * sizeof *m.num), 0 };
    cr_assert(m.h && m.num);
    return m;
}

static void model_free(struct model *m)
{
    free(m->h);
    free(m->num);
}

struct walk {
    const struct model *m;
    size_t              i;
};

static int walk_one(uint64_t h, uint32_t num, void *ctx)
{
    struct walk *w = ctx;
    cr_assert_lt(w->i, w->m->n, "more entries than the model");
    cr_assert_eq(h, w->m->h[w->i], "entry %zu", w->i);
    cr_assert_eq(num, w->m->num[w->i]);
    w->i++;
    return 0;
}

/* Every entry in order, ranks, counts, and lookups of the entries and their neighbours. */
static void check(uintptr_t t, const struct model *m, uint64_t *rng, enum shape s)
{
    cr_assert_eq(shard__pin_count(t), m->n);
    struct walk w = { m, 0 };
    shard__pin_each(t, walk_one, &w);
    cr_assert_eq(w.i, m->n);
    cr_assert_leq(shard__pin_depth(t), SHARD_PIN_DEPTH);
    for (size_t i = 0; i < m->n; i += 1 + m->n / 64) {
        uint64_t h;
        uint32_t num;
        shard__pin_at(t, (uint32_t)i, &h, &num);
        cr_assert_eq(h, m->h[i], "rank %zu", i);
        cr_assert_eq(num, m->num[i]);
        cr_assert_eq(shard__pin_find(t, m->h[i]), m->num[i]);
        cr_assert_eq(shard__pin_find(t, m->h[i] + 1), model_find(m, m->h[i] + 1));
        cr_assert_eq(shard__pin_find(t, m->h[i] - 1), model_find(m, m->h[i] - 1));
    }
    for (int k = 0; k < 200; k++) {
        uint64_t q = draw(s, rng), h;
        uint32_t num;
        cr_assert_eq(shard__pin_find(t, q), model_find(m, q));
        size_t i = model_pos(m, q);
        int found = shard__pin_next(t, q, &h, &num);
        cr_assert_eq(found, i < m->n, "next(%#llx)", (unsigned long long)q);
        if (found) {
            cr_assert_eq(h, m->h[i]);
            cr_assert_eq(num, m->num[i]);
        }
    }
}

Test(pin_trie, random_changes_against_a_sorted_array)
{
    for (enum shape s = 0; s < SHAPES; s++) {
        uint64_t rng = 1000 + s;
        struct model m = model_new(20000);
        uintptr_t t = 0;
        for (int round = 0; round < 8; round++) {
            /* Grow, then shrink most of the way: splits and collapses both happen. */
            int adds = round % 2 == 0 ? 6000 : 1500, dels = round % 2 == 0 ? 1000 : 4500;
            for (int i = 0; i < adds; i++) {
                uint64_t h = draw(s, &rng);
                uint32_t num = 1 + (uint32_t)(mix(&rng) % 7), old;
                cr_assert_eq(shard__pin_set(&t, h, num, &old), 0);
                cr_assert_eq(old, model_find(&m, h));
                model_set(&m, h, num);
            }
            for (int i = 0; i < dels && m.n; i++) {
                uint64_t h = i % 4 == 0 ? draw(s, &rng) : m.h[mix(&rng) % m.n]; /* absent ones too */
                uint32_t old;
                cr_assert_eq(shard__pin_del(&t, h, &old), 0);
                cr_assert_eq(old, model_find(&m, h));
                model_del(&m, h);
            }
            check(t, &m, &rng, s);
        }
        while (m.n) {
            uint32_t old;
            cr_assert_eq(shard__pin_del(&t, m.h[m.n - 1], &old), 0);
            m.n--;
        }
        cr_assert_eq(t, 0, "an emptied trie holds nothing");
        model_free(&m);
    }
}

Test(pin_trie, a_kept_version_never_changes)
{
    uint64_t rng = 5;
    struct model m = model_new(4096), kept = model_new(4096);
    uintptr_t t = 0;
    for (int i = 0; i < 3000; i++) {
        uint64_t h = draw(i % 2 ? SPREAD : SMALL, &rng);
        uint32_t old;
        cr_assert_eq(shard__pin_set(&t, h, 1, &old), 0);
        model_set(&m, h, 1);
    }
    uintptr_t v = shard__pin_ref(t); /* a clone's reference */
    memcpy(kept.h, m.h, m.n * sizeof *m.h);
    memcpy(kept.num, m.num, m.n * sizeof *m.num);
    kept.n = m.n;
    for (int i = 0; i < 3000; i++) {
        uint32_t old;
        if (i % 3 == 0) {
            uint64_t h = m.h[mix(&rng) % m.n];
            cr_assert_eq(shard__pin_del(&t, h, &old), 0);
            model_del(&m, h);
        } else {
            uint64_t h = i % 3 == 1 ? m.h[mix(&rng) % m.n] : draw(SPREAD, &rng);
            cr_assert_eq(shard__pin_set(&t, h, 2, &old), 0);
            model_set(&m, h, 2);
        }
    }
    check(v, &kept, &rng, SPREAD);
    check(t, &m, &rng, SPREAD);
    shard__pin_unref(v);
    check(t, &m, &rng, SPREAD);
    shard__pin_unref(t);
    model_free(&m);
    model_free(&kept);
}

struct diffs {
    const struct model *a, *b;
    size_t              n;
    uint64_t            last;
};

static int note_diff(uint64_t h, uint32_t na, uint32_t nb, void *ctx)
{
    struct diffs *d = ctx;
    cr_assert(d->n == 0 || h > d->last, "diffs in hash order");
    cr_assert_eq(na, model_find(d->a, h));
    cr_assert_eq(nb, model_find(d->b, h));
    cr_assert_neq(na, nb);
    d->last = h;
    d->n++;
    return 0;
}

/* One change copies one path: at most depth + 1 nodes of the new version are not shared with the old
 * one, and the leaves of a leaf it splits, at 10 entries as at 65,536; evenly spread hashes keep the
 * tree 2 nodes deep. A diff of the two finds the change, and only it. */
Test(pin_trie, a_change_copies_one_path_and_a_diff_finds_only_it)
{
    for (enum shape s = 0; s < SHAPES; s++) {
        uint64_t rng = 77 + s;
        struct model m = model_new(70000), next = model_new(70000);
        uintptr_t t = 0;
        size_t checkpoints[] = { 10, 2000, 20000, 65536 }, k = 0;
        while (k < 4) {
            uint64_t h = draw(s, &rng);
            uint32_t old;
            if (model_find(&m, h))
                continue;
            cr_assert_eq(shard__pin_set(&t, h, 1, &old), 0);
            model_set(&m, h, 1);
            if (m.n != checkpoints[k])
                continue;
            k++;
            if (s == SPREAD)
                cr_assert_leq(shard__pin_depth(t), 2, "%zu spread hashes", m.n);
            for (int op = 0; op < 3; op++) {
                uint64_t x = op == 0 ? draw(s, &rng) : m.h[mix(&rng) % m.n];
                if (op == 0 && model_find(&m, x))
                    continue;
                uintptr_t v = shard__pin_ref(t), c = shard__pin_ref(t);
                memcpy(next.h, m.h, m.n * sizeof *m.h);
                memcpy(next.num, m.num, m.n * sizeof *m.num);
                next.n = m.n;
                if (op == 2) {
                    cr_assert_eq(shard__pin_del(&c, x, &old), 0);
                    model_del(&next, x);
                } else {
                    cr_assert_eq(shard__pin_set(&c, x, 3, &old), 0);
                    model_set(&next, x, 3);
                }
                size_t copied = shard__pin_unshared(v, c);
                cr_assert_leq(copied, shard__pin_depth(c) + 1u + SHARD_PIN_LEAF_MAX + 1u,
                              "op %d at %zu entries copied %zu nodes", op, m.n, copied);
                if (s == SPREAD && m.n == 65536)
                    cr_assert_leq(copied, 3, "op %d copied %zu nodes", op, copied); /* no leaf is full there */
                struct diffs d = { &m, &next, 0, 0 };
                cr_assert_eq(shard__pin_diff(v, c, note_diff, &d), 0);
                cr_assert_eq(d.n, 1, "op %d at %zu entries", op, m.n);
                shard__pin_unref(c);
                shard__pin_unref(v);
            }
        }
        shard__pin_unref(t);
        model_free(&m);
        model_free(&next);
    }
}

/* Diffs between versions many changes apart, and against the empty trie. */
Test(pin_trie, diffs_of_distant_versions)
{
    uint64_t rng = 9;
    struct model a = model_new(8000), b = model_new(8000), none = { 0 };
    uintptr_t ta = 0;
    for (int i = 0; i < 5000; i++) {
        uint64_t h = draw(i % 2 ? SPREAD : CLUSTER, &rng);
        uint32_t old;
        cr_assert_eq(shard__pin_set(&ta, h, 1 + (uint32_t)(i % 3), &old), 0);
        model_set(&a, h, 1 + (uint32_t)(i % 3));
    }
    uintptr_t tb = shard__pin_ref(ta);
    memcpy(b.h, a.h, a.n * sizeof *a.h);
    memcpy(b.num, a.num, a.n * sizeof *a.num);
    b.n = a.n;
    for (int i = 0; i < 2500; i++) {
        uint32_t old;
        uint64_t h = i % 2 ? draw(CLUSTER, &rng) : b.h[mix(&rng) % b.n];
        if (i % 5 == 0) {
            cr_assert_eq(shard__pin_del(&tb, h, &old), 0);
            model_del(&b, h);
        } else {
            cr_assert_eq(shard__pin_set(&tb, h, 4, &old), 0);
            model_set(&b, h, 4);
        }
    }
    size_t expect = 0;
    for (size_t i = 0, j = 0; i < a.n || j < b.n;) {
        if (j == b.n || (i < a.n && a.h[i] < b.h[j]))
            expect++, i++;
        else if (i == a.n || b.h[j] < a.h[i])
            expect++, j++;
        else
            expect += a.num[i++] != b.num[j++];
    }
    struct diffs d = { &a, &b, 0, 0 };
    cr_assert_eq(shard__pin_diff(ta, tb, note_diff, &d), 0);
    cr_assert_eq(d.n, expect);
    struct diffs e = { &none, &b, 0, 0 };
    cr_assert_eq(shard__pin_diff(0, tb, note_diff, &e), 0);
    cr_assert_eq(e.n, b.n);
    shard__pin_unref(ta);
    shard__pin_unref(tb);
    model_free(&a);
    model_free(&b);
}

/* A bulk build equals the same entries set one by one. */
Test(pin_trie, build_equals_sets)
{
    uint64_t rng = 3;
    struct model m = model_new(3000);
    for (int i = 0; i < 3000; i++)
        model_set(&m, draw(i % 3 ? SPREAD : STRIDED, &rng), 1 + (uint32_t)i);
    uintptr_t t = 0;
    cr_assert_eq(shard__pin_build(&t, m.h, m.num, m.n), 0);
    check(t, &m, &rng, SPREAD);
    uintptr_t u = 0;
    cr_assert_eq(shard__pin_build(&u, NULL, NULL, 0), 0);
    cr_assert_eq(u, 0);
    shard__pin_unref(t);
    model_free(&m);
}
