/* Internal: the pin trie's layout (pin_trie.h): its nodes and leaves, and the lookup that every
 * holder may make without a lock. Below both the trie's changes (pin_trie.c) and its walks
 * (pin_trie_walk.c). SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A node splits the hashes below it by 6 bits of the hash, from the top (58..63 at the root, then
 * 52..57, ..., 4..9 at depth 9), into 64 children; a leaf holds up to SHARD_PIN_LEAF_MAX entries sorted
 * by hash. The top bits come first, so a walk in child order visits the hashes in order (enumeration,
 * ranks, diffs need that). Real pins are key hashes, spread evenly: 8,000 of them sit under the root and
 * 64 nodes, 2 a leaf; 65,536, 16 a leaf. Hashes crowded in a narrow range only make the tree deeper: a
 * leaf at depth 10 holds hashes equal but for their 4 lowest bits, 16 at most, so it never splits and
 * no path is longer than 11.
 *
 * A reference is a uintptr_t: 0 is the empty trie, bit 0 set a leaf, clear a node. Entries carry a
 * number, not a member index: ring_pin.c maps numbers to members, so that renumbering the members
 * touches no entry. Number 0 is never stored (shard__pin_find's "absent"). */
#ifndef SHARD_SRC_PIN_NODE_H
#define SHARD_SRC_PIN_NODE_H

#include <stdatomic.h>
#include <stdint.h>

#define SHARD_PIN_BITS     6
#define SHARD_PIN_FANOUT   (1u << SHARD_PIN_BITS)
#define SHARD_PIN_LEAF_MAX 32
#define SHARD_PIN_DEPTH    10 /* leaves only at this depth */

struct pin_node {
    atomic_uint refs;
    uint32_t    count; /* entries below */
    uintptr_t   child[SHARD_PIN_FANOUT];
};

/* hash[cap] is followed by num[cap] (pin_leaf_num). */
struct pin_leaf {
    atomic_uint refs;
    uint16_t    n, cap;
    uint64_t    hash[];
};

static inline uint32_t *pin_leaf_num(const struct pin_leaf *l)
{
    return (uint32_t *)(l->hash + l->cap);
}

/* The shift of a node's 6 bits at depth d < SHARD_PIN_DEPTH. */
static inline unsigned pin_shift(unsigned d)
{
    return 64 - SHARD_PIN_BITS * (d + 1);
}

static inline unsigned pin_child(uint64_t hash, unsigned d)
{
    return (unsigned)(hash >> pin_shift(d)) & (SHARD_PIN_FANOUT - 1);
}

static inline int pin_is_leaf(uintptr_t t)
{
    return (int)(t & 1);
}

static inline struct pin_leaf *pin_as_leaf(uintptr_t t)
{
    return (struct pin_leaf *)(t - 1);
}

static inline struct pin_node *pin_as_node(uintptr_t t)
{
    return (struct pin_node *)t;
}

/* Position of the first entry >= hash in l (entries are sorted; a leaf holds at most 32). */
static inline uint32_t pin_leaf_pos(const struct pin_leaf *l, uint64_t hash)
{
    uint32_t i = 0;
    while (i < l->n && l->hash[i] < hash)
        i++;
    return i;
}

/* The number hash has in t, or 0. Context: any holder of t; no allocation, no lock. */
static inline uint32_t shard__pin_find(uintptr_t t, uint64_t hash)
{
    for (unsigned d = 0; t; d++) {
        if (pin_is_leaf(t)) {
            const struct pin_leaf *l = pin_as_leaf(t);
            uint32_t i = pin_leaf_pos(l, hash);
            return i < l->n && l->hash[i] == hash ? pin_leaf_num(l)[i] : 0;
        }
        t = pin_as_node(t)->child[pin_child(hash, d)];
    }
    return 0;
}

#endif
