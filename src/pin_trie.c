/* The pin trie's references and changes: counts, bulk build, set, delete (layout, sharing and why:
 * pin_trie.h; walks: pin_trie_walk.c). SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Reference counts: a holder that takes a reference already holds one (a ring cloning its own trie,
 * a node copy taking its children), so the increment orders nothing and is relaxed. A decrement is
 * acq_rel: release so that this holder's reads of the node come before its free by whichever holder
 * drops the last reference, acquire so that the one freeing it comes after every other holder's
 * release (PT1, the same edge as in a shared_ptr). A change writes in place only where it reads a
 * count of 1 with acquire: the other holders, if there were any, have let go (PT1) and no new one can
 * appear meanwhile, since a new holder needs a reference from one it holds, and this change's holder
 * holds the only one. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pin_trie.h"

static atomic_uint *refs_of(uintptr_t t)
{
    return pin_is_leaf(t) ? &pin_as_leaf(t)->refs : &pin_as_node(t)->refs;
}

/* PT1 (file header): the only holder. */
static bool exclusive(uintptr_t t)
{
    return atomic_load_explicit(refs_of(t), memory_order_acquire) == 1;
}

uintptr_t shard__pin_ref(uintptr_t t)
{
    if (t)
        atomic_fetch_add_explicit(refs_of(t), 1, memory_order_relaxed); /* the caller holds one: file header */
    return t;
}

void shard__pin_unref(uintptr_t t)
{
    /* acq_rel: PT1 (file header). */
    if (!t || atomic_fetch_sub_explicit(refs_of(t), 1, memory_order_acq_rel) != 1)
        return;
    if (pin_is_leaf(t)) {
        free(pin_as_leaf(t));
        return;
    }
    struct pin_node *n = pin_as_node(t);
    for (unsigned c = 0; c < SHARD_PIN_FANOUT; c++)
        shard__pin_unref(n->child[c]);
    free(n);
}

/* Room for n entries, a power of two from 2: a leaf written in place grows by doubling. */
static uint16_t leaf_cap(uint32_t n)
{
    uint32_t cap = 2;
    while (cap < n)
        cap *= 2;
    return (uint16_t)cap;
}

static struct pin_leaf *leaf_new(uint32_t cap)
{
    struct pin_leaf *l = malloc(sizeof *l + cap * (sizeof(uint64_t) + sizeof(uint32_t)));
    if (l) {
        atomic_init(&l->refs, 1);
        l->n = 0;
        l->cap = (uint16_t)cap;
    }
    return l;
}

/* A leaf of the n entries; NULL when out of memory. */
static struct pin_leaf *leaf_of(const uint64_t *hash, const uint32_t *num, uint32_t n)
{
    struct pin_leaf *l = leaf_new(leaf_cap(n));
    if (l) {
        memcpy(l->hash, hash, n * sizeof *hash);
        memcpy(pin_leaf_num(l), num, n * sizeof *num);
        l->n = (uint16_t)n;
    }
    return l;
}

static int build_in(uintptr_t *out, const uint64_t *hash, const uint32_t *num, size_t n, unsigned d)
{
    *out = 0;
    if (n == 0)
        return 0;
    /* Distinct hashes below depth 10 differ only in their 4 lowest bits: 16 at most, a leaf. */
    if (n <= SHARD_PIN_LEAF_MAX || d == SHARD_PIN_DEPTH) {
        struct pin_leaf *l = leaf_of(hash, num, (uint32_t)n);
        if (!l)
            return -ENOMEM;
        *out = (uintptr_t)l + 1;
        return 0;
    }
    struct pin_node *node = calloc(1, sizeof *node);
    if (!node)
        return -ENOMEM;
    atomic_init(&node->refs, 1);
    node->count = (uint32_t)n;
    for (size_t i = 0, j; i < n; i = j) {
        unsigned c = pin_child(hash[i], d);
        for (j = i + 1; j < n && pin_child(hash[j], d) == c; j++)
            ;
        if (build_in(&node->child[c], hash + i, num + i, j - i, d + 1) != 0) {
            shard__pin_unref((uintptr_t)node);
            return -ENOMEM;
        }
    }
    *out = (uintptr_t)node;
    return 0;
}

int shard__pin_build(uintptr_t *t, const uint64_t *hash, const uint32_t *num, size_t n)
{
    uintptr_t built;
    int err = build_in(&built, hash, num, n, 0);
    if (!err)
        *t = built;
    return err;
}

/* Makes the node *slot holds the holder's alone: a copy, taking references to its children, when
 * another holder shares it. */
static int own_node(uintptr_t *slot)
{
    uintptr_t t = *slot;
    if (exclusive(t))
        return 0;
    struct pin_node *c = malloc(sizeof *c);
    if (!c)
        return -ENOMEM;
    atomic_init(&c->refs, 1); /* not copied: other holders change the original's count meanwhile */
    c->count = pin_as_node(t)->count;
    memcpy(c->child, pin_as_node(t)->child, sizeof c->child);
    for (unsigned i = 0; i < SHARD_PIN_FANOUT; i++)
        shard__pin_ref(c->child[i]);
    *slot = (uintptr_t)c;
    shard__pin_unref(t); /* the parent's reference to the shared node: its other holders keep it */
    return 0;
}

/* Replaces the leaf *slot holds with l (tagged), dropping the reference to the old one. */
static void swap_leaf(uintptr_t *slot, struct pin_leaf *l)
{
    uintptr_t old = *slot;
    *slot = (uintptr_t)l + 1;
    shard__pin_unref(old);
}

/* hash is not in the full leaf *slot at depth d < 10 (a full leaf is never deeper): the leaf's
 * entries and hash become a node. */
static int split_leaf(uintptr_t *slot, unsigned d, uint32_t pos, uint64_t hash, uint32_t num)
{
    const struct pin_leaf *l = pin_as_leaf(*slot);
    uint64_t h[SHARD_PIN_LEAF_MAX + 1];
    uint32_t m[SHARD_PIN_LEAF_MAX + 1];
    memcpy(h, l->hash, pos * sizeof *h);
    memcpy(m, pin_leaf_num(l), pos * sizeof *m);
    h[pos] = hash;
    m[pos] = num;
    memcpy(h + pos + 1, l->hash + pos, (l->n - pos) * sizeof *h);
    memcpy(m + pos + 1, pin_leaf_num(l) + pos, (l->n - pos) * sizeof *m);
    uintptr_t node;
    if (build_in(&node, h, m, l->n + 1u, d) != 0)
        return -ENOMEM;
    uintptr_t old = *slot;
    *slot = node;
    shard__pin_unref(old);
    return 0;
}

/* hash is not in *slot: adds it. */
static int add_in(uintptr_t *slot, unsigned d, uint64_t hash, uint32_t num)
{
    if (!*slot) {
        struct pin_leaf *l = leaf_of(&hash, &num, 1);
        if (!l)
            return -ENOMEM;
        *slot = (uintptr_t)l + 1;
        return 0;
    }
    if (!pin_is_leaf(*slot)) {
        if (own_node(slot) != 0)
            return -ENOMEM;
        struct pin_node *n = pin_as_node(*slot);
        if (add_in(&n->child[pin_child(hash, d)], d + 1, hash, num) != 0)
            return -ENOMEM;
        n->count++;
        return 0;
    }
    struct pin_leaf *l = pin_as_leaf(*slot);
    uint32_t pos = pin_leaf_pos(l, hash);
    if (l->n == SHARD_PIN_LEAF_MAX)
        return split_leaf(slot, d, pos, hash, num);
    if (l->n < l->cap && exclusive(*slot)) {
        memmove(l->hash + pos + 1, l->hash + pos, (l->n - pos) * sizeof *l->hash);
        memmove(pin_leaf_num(l) + pos + 1, pin_leaf_num(l) + pos, (l->n - pos) * sizeof(uint32_t));
        l->hash[pos] = hash;
        pin_leaf_num(l)[pos] = num;
        l->n++;
        return 0;
    }
    struct pin_leaf *c = leaf_new(leaf_cap(l->n + 1u));
    if (!c)
        return -ENOMEM;
    memcpy(c->hash, l->hash, pos * sizeof *c->hash);
    memcpy(pin_leaf_num(c), pin_leaf_num(l), pos * sizeof(uint32_t));
    c->hash[pos] = hash;
    pin_leaf_num(c)[pos] = num;
    memcpy(c->hash + pos + 1, l->hash + pos, (l->n - pos) * sizeof *c->hash);
    memcpy(pin_leaf_num(c) + pos + 1, pin_leaf_num(l) + pos, (l->n - pos) * sizeof(uint32_t));
    c->n = (uint16_t)(l->n + 1);
    swap_leaf(slot, c);
    return 0;
}

/* hash is in *slot: its number becomes num. */
static int renumber_in(uintptr_t *slot, unsigned d, uint64_t hash, uint32_t num)
{
    if (!pin_is_leaf(*slot)) {
        if (own_node(slot) != 0)
            return -ENOMEM;
        return renumber_in(&pin_as_node(*slot)->child[pin_child(hash, d)], d + 1, hash, num);
    }
    struct pin_leaf *l = pin_as_leaf(*slot);
    if (!exclusive(*slot)) {
        struct pin_leaf *c = leaf_of(l->hash, pin_leaf_num(l), l->n);
        if (!c)
            return -ENOMEM;
        swap_leaf(slot, c);
        l = c;
    }
    pin_leaf_num(l)[pin_leaf_pos(l, hash)] = num;
    return 0;
}

int shard__pin_set(uintptr_t *t, uint64_t hash, uint32_t num, uint32_t *old)
{
    *old = shard__pin_find(*t, hash);
    if (*old == num)
        return 0;
    return *old ? renumber_in(t, 0, hash, num) : add_in(t, 0, hash, num);
}

struct gather {
    uint64_t *hash;
    uint32_t *num;
    uint32_t  n;
};

static int gather_one(uint64_t hash, uint32_t num, void *ctx)
{
    struct gather *g = ctx;
    g->hash[g->n] = hash;
    g->num[g->n++] = num;
    return 0;
}

/* A node left with few entries becomes a leaf again, so that lookups and changes stay short after
 * pins go. Optional: without memory, the node stays as it is (still a valid trie). */
static void collapse(uintptr_t *slot)
{
    uint64_t h[SHARD_PIN_LEAF_MAX / 2];
    uint32_t m[SHARD_PIN_LEAF_MAX / 2];
    struct gather g = { h, m, 0 };
    shard__pin_each(*slot, gather_one, &g);
    struct pin_leaf *l = g.n ? leaf_of(h, m, g.n) : NULL;
    if (g.n && !l)
        return;
    uintptr_t old = *slot;
    *slot = l ? (uintptr_t)l + 1 : 0;
    shard__pin_unref(old);
}

/* hash is in *slot: removes it. */
static int del_in(uintptr_t *slot, unsigned d, uint64_t hash)
{
    if (!pin_is_leaf(*slot)) {
        if (own_node(slot) != 0)
            return -ENOMEM;
        struct pin_node *n = pin_as_node(*slot);
        if (del_in(&n->child[pin_child(hash, d)], d + 1, hash) != 0)
            return -ENOMEM;
        if (--n->count <= SHARD_PIN_LEAF_MAX / 2)
            collapse(slot); /* split at LEAF_MAX + 1, merged at half: no flapping at one size */
        return 0;
    }
    struct pin_leaf *l = pin_as_leaf(*slot);
    uint32_t pos = pin_leaf_pos(l, hash);
    if (l->n == 1) {
        uintptr_t old = *slot;
        *slot = 0;
        shard__pin_unref(old);
        return 0;
    }
    if (exclusive(*slot)) {
        memmove(l->hash + pos, l->hash + pos + 1, (l->n - pos - 1u) * sizeof *l->hash);
        memmove(pin_leaf_num(l) + pos, pin_leaf_num(l) + pos + 1, (l->n - pos - 1u) * sizeof(uint32_t));
        l->n--;
        return 0;
    }
    struct pin_leaf *c = leaf_new(leaf_cap(l->n - 1u));
    if (!c)
        return -ENOMEM;
    memcpy(c->hash, l->hash, pos * sizeof *c->hash);
    memcpy(pin_leaf_num(c), pin_leaf_num(l), pos * sizeof(uint32_t));
    memcpy(c->hash + pos, l->hash + pos + 1, (l->n - pos - 1u) * sizeof *c->hash);
    memcpy(pin_leaf_num(c) + pos, pin_leaf_num(l) + pos + 1, (l->n - pos - 1u) * sizeof(uint32_t));
    c->n = (uint16_t)(l->n - 1);
    swap_leaf(slot, c);
    return 0;
}

int shard__pin_del(uintptr_t *t, uint64_t hash, uint32_t *old)
{
    *old = shard__pin_find(*t, hash);
    return *old ? del_in(t, 0, hash) : 0;
}
