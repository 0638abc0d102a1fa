/* The pin trie's read-only walks: its size, in order, from a hash, by rank, two versions side by side, and
 * what a tree holds (layout: pin_trie.h). SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Nothing here writes a node, so any holder may walk while other holders change their own versions:
 * what a holder reaches is never written (pin_trie.h). */
#include <stdbool.h>

#include "pin_trie.h"

uint32_t shard__pin_count(uintptr_t t)
{
    return !t ? 0 : pin_is_leaf(t) ? pin_as_leaf(t)->n : pin_as_node(t)->count;
}

int shard__pin_each(uintptr_t t, shard__pin_fn fn, void *ctx)
{
    if (!t)
        return 0;
    if (pin_is_leaf(t)) {
        const struct pin_leaf *l = pin_as_leaf(t);
        for (uint32_t i = 0; i < l->n; i++) {
            int r = fn(l->hash[i], pin_leaf_num(l)[i], ctx);
            if (r)
                return r;
        }
        return 0;
    }
    for (unsigned c = 0; c < SHARD_PIN_FANOUT; c++) {
        int r = shard__pin_each(pin_as_node(t)->child[c], fn, ctx);
        if (r)
            return r;
    }
    return 0;
}

/* The first entry >= from below t at depth d; bounded: t lies on from's path (else any entry of t is
 * above from, and the first is the answer). */
static int next_in(uintptr_t t, unsigned d, uint64_t from, bool bounded, uint64_t *hash, uint32_t *num)
{
    if (!t)
        return 0;
    if (pin_is_leaf(t)) {
        const struct pin_leaf *l = pin_as_leaf(t);
        uint32_t i = bounded ? pin_leaf_pos(l, from) : 0;
        if (i == l->n)
            return 0;
        *hash = l->hash[i];
        *num = pin_leaf_num(l)[i];
        return 1;
    }
    unsigned first = bounded ? pin_child(from, d) : 0;
    for (unsigned c = first; c < SHARD_PIN_FANOUT; c++)
        if (next_in(pin_as_node(t)->child[c], d + 1, from, bounded && c == first, hash, num))
            return 1;
    return 0;
}

int shard__pin_next(uintptr_t t, uint64_t from, uint64_t *hash, uint32_t *num)
{
    return next_in(t, 0, from, true, hash, num);
}

void shard__pin_at(uintptr_t t, uint32_t i, uint64_t *hash, uint32_t *num)
{
    while (!pin_is_leaf(t)) {
        const struct pin_node *n = pin_as_node(t);
        for (unsigned c = 0;; c++) {
            uint32_t k = shard__pin_count(n->child[c]);
            if (i < k) {
                t = n->child[c];
                break;
            }
            i -= k;
        }
    }
    *hash = pin_as_leaf(t)->hash[i];
    *num = pin_leaf_num(pin_as_leaf(t))[i];
}

/* A merge of a leaf (or nothing) with another subtree in the same place, the other walked in order. */
struct merge {
    const struct pin_leaf *leaf; /* NULL: nothing */
    uint32_t               i;
    bool                   leaf_is_a;
    shard__pin_diff_fn     fn;
    void                  *ctx;
};

static int merge_emit(const struct merge *m, uint64_t hash, uint32_t in_leaf, uint32_t in_other)
{
    return m->leaf_is_a ? m->fn(hash, in_leaf, in_other, m->ctx) : m->fn(hash, in_other, in_leaf, m->ctx);
}

/* Leaf entries below hash, then hash itself. */
static int merge_step(uint64_t hash, uint32_t num, void *ctx)
{
    struct merge *m = ctx;
    const struct pin_leaf *l = m->leaf;
    for (; l && m->i < l->n && l->hash[m->i] < hash; m->i++) {
        int r = merge_emit(m, l->hash[m->i], pin_leaf_num(l)[m->i], 0);
        if (r)
            return r;
    }
    if (l && m->i < l->n && l->hash[m->i] == hash) {
        uint32_t in_leaf = pin_leaf_num(l)[m->i++];
        return in_leaf == num ? 0 : merge_emit(m, hash, in_leaf, num);
    }
    return merge_emit(m, hash, 0, num);
}

static int diff_in(uintptr_t a, uintptr_t b, shard__pin_diff_fn fn, void *ctx)
{
    if (a == b)
        return 0; /* shared: the same entries */
    if (a && b && !pin_is_leaf(a) && !pin_is_leaf(b)) {
        for (unsigned c = 0; c < SHARD_PIN_FANOUT; c++) {
            int r = diff_in(pin_as_node(a)->child[c], pin_as_node(b)->child[c], fn, ctx);
            if (r)
                return r;
        }
        return 0;
    }
    /* One side is a leaf or nothing (a node only where there are entries): merge it with the other. */
    bool a_small = !a || pin_is_leaf(a);
    uintptr_t small = a_small ? a : b, other = a_small ? b : a;
    struct merge m = { small ? pin_as_leaf(small) : NULL, 0, a_small, fn, ctx };
    int r = shard__pin_each(other, merge_step, &m);
    for (; !r && m.leaf && m.i < m.leaf->n; m.i++)
        r = merge_emit(&m, m.leaf->hash[m.i], pin_leaf_num(m.leaf)[m.i], 0);
    return r;
}

int shard__pin_diff(uintptr_t a, uintptr_t b, shard__pin_diff_fn fn, void *ctx)
{
    return diff_in(a, b, fn, ctx);
}

size_t shard__pin_memory(uintptr_t t)
{
    if (!t)
        return 0;
    if (pin_is_leaf(t))
        return sizeof(struct pin_leaf) + pin_as_leaf(t)->cap * (sizeof(uint64_t) + sizeof(uint32_t));
    size_t bytes = sizeof(struct pin_node);
    for (unsigned c = 0; c < SHARD_PIN_FANOUT; c++)
        bytes += shard__pin_memory(pin_as_node(t)->child[c]);
    return bytes;
}

size_t shard__pin_unshared(uintptr_t a, uintptr_t b)
{
    if (!b || a == b)
        return 0;
    size_t n = 1;
    if (!pin_is_leaf(b))
        for (unsigned c = 0; c < SHARD_PIN_FANOUT; c++)
            n += shard__pin_unshared(a && !pin_is_leaf(a) ? pin_as_node(a)->child[c] : 0, pin_as_node(b)->child[c]);
    return n;
}

unsigned shard__pin_depth(uintptr_t t)
{
    unsigned deepest = 0;
    if (t && !pin_is_leaf(t))
        for (unsigned c = 0; c < SHARD_PIN_FANOUT; c++)
            if (pin_as_node(t)->child[c]) {
                unsigned d = 1 + shard__pin_depth(pin_as_node(t)->child[c]);
                deepest = d > deepest ? d : deepest;
            }
    return deepest;
}
