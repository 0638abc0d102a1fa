/* bench_lookup: owner lookup per key for 8, 64 and 1,000 members at the default vnodes, with 4,096 keys
 * (warm: every structure a lookup touches stays in cache) and 262,144 distinct keys cycled (cold: the
 * ring's tables of a large ring do not fit in L2), against, on the same keys in the same run:
 *   hash     XXH3 of the key alone (the floor every lookup pays)
 *   shard    shard_ring_owner: the hash included, through the public API
 *   shard_of_hash  shard_ring_owner_of_hash on hashes computed beforehand: the hash excluded, as the
 *            dispatcher looks up a job's stored hash
 *   bsearch  a plain sorted array of points, upper_bound-style binary search (most rings)
 *   tree     a balanced search tree of points (the std::map design; an AVL tree written here)
 *   jump     jump consistent hash (Lamping & Veach): no ring, but no arbitrary removals either
 *   maglev   a Maglev lookup table (65,537 entries): one load after the hash
 * One line per measurement: bench=lookup members=N keys=K impl=NAME ns_per_lookup=X ratio_vs_hash=R */
#include <shard.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "bench_common.h"

#define WARM_KEYS 4096
#define COLD_KEYS 262144

static char (*keys)[24];
static size_t *klen;
static uint64_t *hashes;
static volatile uint64_t sink;

/* ---- baselines ---- */

struct pt {
    uint64_t p;
    uint32_t owner;
};

static int cmp_pt(const void *a, const void *b)
{
    const struct pt *x = a, *y = b;
    return (x->p > y->p) - (x->p < y->p);
}

static uint32_t bsearch_owner(const struct pt *v, size_t n, uint64_t h)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].p < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return v[lo == n ? 0 : lo].owner;
}

struct avl {
    uint64_t    p;
    uint32_t    owner;
    int         height;
    struct avl *l, *r;
};

static int height(struct avl *t)
{
    return t ? t->height : 0;
}

static void fix(struct avl *t)
{
    int a = height(t->l), b = height(t->r);
    t->height = (a > b ? a : b) + 1;
}

static struct avl *rot_right(struct avl *t)
{
    struct avl *l = t->l;
    t->l = l->r;
    l->r = t;
    fix(t);
    fix(l);
    return l;
}

static struct avl *rot_left(struct avl *t)
{
    struct avl *r = t->r;
    t->r = r->l;
    r->l = t;
    fix(t);
    fix(r);
    return r;
}

static struct avl *avl_insert(struct avl *t, struct avl *n)
{
    if (!t)
        return n;
    if (n->p < t->p)
        t->l = avl_insert(t->l, n);
    else
        t->r = avl_insert(t->r, n);
    fix(t);
    int bal = height(t->l) - height(t->r);
    if (bal > 1) {
        if (n->p >= t->l->p)
            t->l = rot_left(t->l);
        return rot_right(t);
    }
    if (bal < -1) {
        if (n->p < t->r->p)
            t->r = rot_right(t->r);
        return rot_left(t);
    }
    return t;
}

static uint32_t avl_owner(const struct avl *t, const struct avl *first, uint64_t h)
{
    const struct avl *best = NULL;
    while (t) {
        if (t->p >= h) {
            best = t;
            t = t->l;
        } else {
            t = t->r;
        }
    }
    return (best ? best : first)->owner;
}

static int32_t jump_hash(uint64_t key, int32_t buckets)
{
    int64_t b = -1, j = 0;
    while (j < buckets) {
        b = j;
        key = key * 2862933555777941757ULL + 1;
        j = (int64_t)((double)(b + 1) * ((double)(1LL << 31) / (double)((key >> 33) + 1)));
    }
    return (int32_t)b;
}

#define MAGLEV_M 65537u

static uint32_t *maglev_build(uint32_t n)
{
    uint32_t *table = malloc(MAGLEV_M * sizeof *table);
    uint64_t *offset = malloc(n * sizeof *offset), *skip = malloc(n * sizeof *skip), *next = calloc(n, sizeof *next);
    for (uint32_t i = 0; i < MAGLEV_M; i++)
        table[i] = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        char name[16];
        int len = snprintf(name, sizeof name, "node-%u", i);
        offset[i] = XXH3_64bits_withSeed(name, (size_t)len, 1) % MAGLEV_M;
        skip[i] = XXH3_64bits_withSeed(name, (size_t)len, 2) % (MAGLEV_M - 1) + 1;
    }
    for (uint32_t filled = 0; filled < MAGLEV_M;)
        for (uint32_t i = 0; i < n && filled < MAGLEV_M; i++) {
            uint64_t c;
            do
                c = (offset[i] + next[i]++ * skip[i]) % MAGLEV_M;
            while (table[c] != UINT32_MAX);
            table[c] = i;
            filled++;
        }
    free(offset);
    free(skip);
    free(next);
    return table;
}

/* ---- timing ---- */

#define TIME_LOOP(reps, body)                                                                   \
    ({                                                                                          \
        uint64_t t0 = bench_now_ns(), acc = 0;                                                  \
        for (int r_ = 0; r_ < (reps); r_++)                                                     \
            for (size_t k = 0; k < nkeys; k++) {                                                \
                body;                                                                           \
            }                                                                                   \
        sink += acc;                                                                            \
        (double)(bench_now_ns() - t0) / ((double)(reps) * (double)nkeys);                       \
    })

static void bench_members(uint32_t n, size_t nkeys, int reps)
{
    shard_ring *ring;
    shard_ring_create(&ring, NULL);
    struct shard_ring_member *m = calloc(n, sizeof *m);
    char (*names)[16] = calloc(n, 16);
    for (uint32_t i = 0; i < n; i++) {
        snprintf(names[i], 16, "node-%u", i);
        m[i] = (struct shard_ring_member){ names[i], 1 };
    }
    shard_ring_add_many(ring, m, n);
    size_t np = shard_ring_point_count(ring);
    struct pt *v = malloc(np * sizeof *v);
    struct avl *nodes = calloc(np, sizeof *nodes), *root = NULL, *first = NULL;
    for (size_t i = 0; i < np; i++) {
        const char *o;
        shard_ring_point(ring, i, &v[i].p, &o);
        v[i].owner = (uint32_t)atoi(o + 5);
    }
    /* insert in a shuffled order, as members' points would arrive */
    uint64_t seed = 7;
    for (size_t i = np; i > 1; i--) {
        size_t j = bench_mix(&seed) % i;
        struct pt t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
    for (size_t i = 0; i < np; i++) {
        nodes[i] = (struct avl){ v[i].p, v[i].owner, 1, NULL, NULL };
        root = avl_insert(root, &nodes[i]);
        if (!first || nodes[i].p < first->p)
            first = &nodes[i];
    }
    qsort(v, np, sizeof *v, cmp_pt);
    uint32_t *maglev = maglev_build(n);

    for (size_t k = 0; k < nkeys; k++)
        hashes[k] = shard_ring_hash(ring, keys[k], klen[k]);

    double t_hash = TIME_LOOP(reps, acc += XXH3_64bits(keys[k], klen[k]));
    double t_shard = TIME_LOOP(reps, acc += (uintptr_t)shard_ring_owner(ring, keys[k], klen[k]));
    double t_shash = TIME_LOOP(reps, acc += (uintptr_t)shard_ring_owner_of_hash(ring, hashes[k]));
    double t_bs = TIME_LOOP(reps, acc += bsearch_owner(v, np, XXH3_64bits(keys[k], klen[k])));
    double t_tree = TIME_LOOP(reps, acc += avl_owner(root, first, XXH3_64bits(keys[k], klen[k])));
    double t_jump = TIME_LOOP(reps, acc += (uint64_t)jump_hash(XXH3_64bits(keys[k], klen[k]), (int32_t)n));
    double t_mag = TIME_LOOP(reps, acc += maglev[XXH3_64bits(keys[k], klen[k]) % MAGLEV_M]);
    const char *names_[] = { "hash", "shard", "shard_of_hash", "bsearch", "tree", "jump", "maglev" };
    double t[] = { t_hash, t_shard, t_shash, t_bs, t_tree, t_jump, t_mag };
    for (int i = 0; i < 7; i++)
        printf("bench=lookup members=%u points=%zu keys=%zu impl=%s ns_per_lookup=%.2f ratio_vs_hash=%.2f "
               "ratio_vs_bsearch=%.2f memory=%zu\n",
               n, np, nkeys, names_[i], t[i], t[i] / t_hash, t_bs / t[i], shard_ring_memory(ring));
    free(maglev);
    free(nodes);
    free(v);
    free(names);
    free(m);
    shard_ring_destroy(ring);
}

int main(int argc, char **argv)
{
    bool quick = bench_quick(argc, argv);
    keys = malloc(COLD_KEYS * sizeof *keys);
    klen = malloc(COLD_KEYS * sizeof *klen);
    hashes = malloc(COLD_KEYS * sizeof *hashes);
    if (!keys || !klen || !hashes)
        return 1;
    /* Keys spread over a large id space, as player or session ids are; the warm set is the cold set's
     * first 4,096. */
    uint64_t s = 99;
    for (size_t k = 0; k < COLD_KEYS; k++)
        klen[k] = (size_t)snprintf(keys[k], sizeof keys[k], "session-%llu",
                                   (unsigned long long)(bench_mix(&s) % 1000000000000ull));
    static const uint32_t sizes[] = { 8, 64, 1000 };
    for (int i = 0; i < 3; i++) {
        bench_members(sizes[i], WARM_KEYS, quick ? 20 : 400);
        bench_members(sizes[i], COLD_KEYS, quick ? 1 : 8);
    }
    free(keys);
    free(klen);
    free(hashes);
    return 0;
}
