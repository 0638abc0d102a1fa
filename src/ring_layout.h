/* Internal: the ring's layout (its points, members, front table and pins) and the inline lookup every
 * submit makes; below every ring_*.c file. SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_RING_LAYOUT_H
#define SHARD_SRC_RING_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pin_filter.h"
#include "pin_trie.h"
#include "shard/ring.h"

struct ring_member {
    char    *name;
    uint32_t weight;
    uint32_t pin_no; /* the number its pins carry in the pin trie (ring_pin.c); 0: none given yet */
};

/* Points are kept sorted by (point, member index) in two parallel arrays; members are kept sorted by
 * name, so member-index order is name order and ties between equal points resolve by name.
 *
 * The front table splits [min, max] into buckets of 2^front_shift hashes, a power of two of them: 8 to
 * 16 a point up to 2^19 entries, 4 to 8 a point beyond (ring_front.c, shard__ring_front_count). A bucket then holds a
 * point with probability at most 1/8 or 1/4, so 78 to 94% of buckets hold none and have a single owner.
 * An entry e is
 *   < front_plain             the member owning every hash of the bucket: a lookup is one load;
 *   < SHARD_RING_FRONT_MIXED  (rings of at most 8192 members, whose front_plain is
 *                             SHARD_RING_FRONT_PINNED_OWNER) the bucket holds a pinned hash, and its
 *                             low owner_bits name the owner of its other hashes; above them one bit
 *                             for each of its sub_mask + 1 sub-buckets says whether a pin is there:
 *                             a lookup asks the pins only in a sub-bucket that holds one, and else
 *                             answers the owner;
 *   SHARD_RING_FRONT_PINNED   the bucket holds a pinned hash (and would be mixed, or the ring has
 *                             more members): the lookup asks the pins, then searches from the block's
 *                             first point (shard__ring_find);
 *   otherwise                 mixed: blocks[bucket >> SHARD_RING_BLOCK_BITS] + e - SHARD_RING_FRONT_MIXED
 *                             is the bucket's first point, or an earlier one when the offset does not
 *                             fit below 0x7fff (a block of thousands of points: hooks that repeat
 *                             points). Most mixed buckets hold one point: one compare picks the owner.
 * Rings of more than 32768 members, whose indices do not fit, get only mixed entries.
 * blocks[j] is the first point of block j (2^SHARD_RING_BLOCK_BITS buckets, 4 to 16 points on average).
 * Memory (shard_ring_memory): 12 bytes a point (point and owner), 2 an entry and 4 a block, so
 * 12n + 2.0625 * entries + 4 bytes: under 45 bytes a point up to 65,536 points (the table at most
 * 1 MiB), under 29 above. At the default vnodes 64 members get 2^19 entries (1 MiB), 1,000 members 2^22
 * (8 MiB, beyond L2: see ring_front.c, shard__ring_front_count).
 * Every add and remove rebuilds all of it (ring.c, through ring_points.c), so it is published with
 * the ring; a published ring is read-only.
 *
 * Pins (ring_pin.c) live in a pin trie (pin_trie.h) that a clone shares, so a pin costs one path of it,
 * not a copy of every pin. Its entries carry numbers, which pin_member maps to member indices: adding
 * and removing members renumbers the members by rewriting that small map in place (a remove may not
 * allocate), never the shared entries. The buckets that hold a live pin are marked in the front table
 * (PINNED_OWNER, with the sub-buckets that hold one, or PINNED): every other lookup costs what it costs
 * without pins. A lookup in a marked sub-bucket, or a PINNED bucket, asks the pin filter (pin_filter.h)
 * before the trie: one read that answers "not pinned" for all but 1.5 to 6 % of the hashes that are not,
 * instead of the trie's three or four dependent ones (8,000 pins on 8 members: 2.6 % of lookups reach
 * it). (Testing every named entry's sub-bucket bit instead, without a branch, spares the
 * marked buckets' mispredictions, but measured it cost every warm lookup 0.6 ns, or 0.7 ns in rings
 * with pins only: not done.) Pins outside [min, max] fall in no bucket; lookups there ask the pins
 * while there are any. */
struct shard_ring {
    /* Read by every lookup, first so they share a cache line. */
    uint64_t  min, span;
    uint16_t *front;
    uint32_t *owners;
    unsigned  front_shift;
    uint32_t  front_plain; /* entries below it name the bucket's owner (see above) */
    uint32_t  npins;       /* live pins (entries of members in the ring) */
    uint8_t   owner_bits;  /* PINNED_OWNER entries: the owner's bits, then a bit a sub-bucket */
    uint8_t   sub_shift;   /* a hash's sub-bucket: ((hash - min) >> sub_shift) & sub_mask */
    uint8_t   sub_mask;
    /* Read by lookups of pinned buckets. */
    uintptr_t pins;       /* the pin trie, this ring's reference: hash -> number */
    struct pin_filter *pin_filter; /* a superset of the live pins (pin_filter.h), this ring's reference */
    uint32_t *pin_member; /* number -> member index, or SHARD_PIN_GONE; [0] unused */
    uint32_t  npin_numbers, pin_numbers_cap;
    uint32_t  pins_dead;  /* entries whose member was removed, left when purging them found no memory */
    /* Read by lookups in mixed buckets. */
    uint32_t *blocks;
    uint64_t *points;
    size_t    npoints, points_cap;
    size_t    nfront, front_cap;
    size_t    nblocks, blocks_cap;
    /* Unique to these points and members: changed by every add, remove and new weight, copied by a
     * clone, so two rings with the same id differ at most in their pins (ring_diff.c's fast path). */
    uint64_t  points_id;
    struct shard_ring_config cfg;
    struct ring_member *members;
    size_t    nmembers, members_cap;
};

#define SHARD_RING_FRONT_PINNED_OWNER 0x4000u
#define SHARD_RING_FRONT_MIXED        0x8000u
#define SHARD_RING_FRONT_PINNED       0xffffu
#define SHARD_RING_BLOCK_BITS   6
#define SHARD_PIN_GONE          UINT32_MAX

/* Position of the first point >= hash, given points[i] < hash <= the largest point: doubling steps
 * from i, then a binary search, so a crowded block costs O(log) and a usual one a step or two. */
static inline size_t shard__ring_gallop(const struct shard_ring *r, size_t i, uint64_t hash)
{
    size_t lo = i, hi = r->npoints - 1;
    for (size_t step = 1; step < hi - lo; step *= 2) {
        if (r->points[lo + step] >= hash) {
            hi = lo + step;
            break;
        }
        lo += step;
    }
    while (hi - lo > 1) { /* points[lo] < hash <= points[hi] */
        size_t mid = lo + (hi - lo) / 2;
        if (r->points[mid] < hash)
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

/* Position of the first point >= hash, wrapping to 0. The ring must not be empty.
 * Context: any reader of r; no allocation, no lock. */
static inline size_t shard__ring_find(const struct shard_ring *r, uint64_t hash)
{
    uint64_t off = hash - r->min;
    if (off > r->span)
        return 0; /* below the smallest point or above the largest: wraps to the smallest */
    size_t i = r->blocks[(size_t)(off >> r->front_shift) >> SHARD_RING_BLOCK_BITS];
    return r->points[i] >= hash ? i : shard__ring_gallop(r, i, hash);
}

/* The member hash is pinned to, or -1. Context: any reader of r. */
static inline int64_t shard__ring_pinned(const struct shard_ring *r, uint64_t hash)
{
    uint32_t num = shard__pin_find(r->pins, hash);
    if (!num)
        return -1;
    uint32_t m = r->pin_member[num];
    return m == SHARD_PIN_GONE ? -1 : (int64_t)m;
}

/* The member hash is pinned to, or -1, asking the pin filter first: what lookups ask. */
static inline int64_t shard__ring_pinned_filtered(const struct shard_ring *r, uint64_t hash)
{
    return r->npins && shard__pin_filter_may(r->pin_filter, hash) ? shard__ring_pinned(r, hash) : -1;
}

/* The owner of a hash in a PINNED bucket, or outside [min, max]: its pin, else its point's member. */
static inline uint32_t shard__ring_owner_pinned(const struct shard_ring *r, uint64_t hash)
{
    int64_t m = shard__ring_pinned_filtered(r, hash);
    return m >= 0 ? (uint32_t)m : r->owners[shard__ring_find(r, hash)];
}

/* Member index owning hash: its pin if it has one; else the owner of shard__ring_find(r, hash), from
 * the front table when one member owns the hash's bucket. The ring must not be empty. Context: any
 * reader of r (a published ring: inside the RCU read-side section that loaded it); no allocation,
 * no lock. */
static inline uint32_t shard__ring_owner_index(const struct shard_ring *r, uint64_t hash)
{
    uint64_t off = hash - r->min;
    if (__builtin_expect(off > r->span, 0))
        return shard__ring_owner_pinned(r, hash); /* wraps to the smallest point, unless pinned */
    size_t b = (size_t)(off >> r->front_shift);
    uint32_t e = r->front[b];
    if (e < r->front_plain)
        return e;
    if (__builtin_expect(e < SHARD_RING_FRONT_MIXED, 0)) {
        uint32_t owner = e & ((1u << r->owner_bits) - 1);
        if (!(e >> r->owner_bits & 1u << ((off >> r->sub_shift) & r->sub_mask)))
            return owner; /* no pin in this sub-bucket */
        int64_t m = shard__ring_pinned_filtered(r, hash);
        return m >= 0 ? (uint32_t)m : owner;
    }
    if (__builtin_expect(e == SHARD_RING_FRONT_PINNED, 0))
        return shard__ring_owner_pinned(r, hash);
    size_t i = r->blocks[b >> SHARD_RING_BLOCK_BITS] + (e - SHARD_RING_FRONT_MIXED);
    /* Points before i are < hash. A compare without a branch settles the usual mixed bucket, of one
     * point; the largest point is >= hash, so the search stops. */
    i += r->points[i] < hash;
    return r->owners[r->points[i] >= hash ? i : shard__ring_gallop(r, i, hash)];
}

/* ring_front.c. Front table entries for npoints points, and blocks for nfront entries: what a ring
 * of npoints must have room for (never fewer for more points). */
size_t shard__ring_front_count(size_t npoints);
size_t shard__ring_blocks_count(size_t nfront);
/* Rebuilds the front table and blocks over the sorted points, no bucket marked PINNED; the capacities
 * are the caller's. */
void   shard__ring_front_build(shard_ring *r);
/* Whether hash falls in a bucket (min <= hash <= max), and that bucket's hashes [*lo, *hi]. */
bool   shard__ring_front_bucket(const shard_ring *r, uint64_t hash, uint64_t *lo, uint64_t *hi);
/* hash's sub-bucket in its bucket (shard__ring_front_bucket must hold). */
unsigned shard__ring_front_sub(const shard_ring *r, uint64_t hash);
/* Marks hash's bucket and sub-bucket pinned (nothing outside [min, max]). */
void   shard__ring_front_mark(shard_ring *r, uint64_t hash);
/* A pin of hash's bucket went: subs has a bit for each sub-bucket that holds a live pin still (0:
 * none, and the entry becomes what shard__ring_front_build makes). */
void   shard__ring_front_remark(shard_ring *r, uint64_t hash, uint32_t subs);
/* ring_pin.c. Pins of a clone (c has none yet; its members carry their pin_no). Return: 0; -ENOMEM. */
int    shard__ring_pins_copy(shard_ring *c, const shard_ring *r);
/* Member indices changed: remap[old] is the new index of each (add). Cannot fail. */
void   shard__ring_pins_remap(shard_ring *r, const uint32_t *remap);
/* Member gone is being removed (before its entry leaves members): its pins go, indices above it drop
 * by one. Cannot fail. */
void   shard__ring_pins_drop_member(shard_ring *r, uint32_t gone);
/* Marks the bucket of every live pin, after shard__ring_front_build. */
void   shard__ring_pins_mark(shard_ring *r);
void   shard__ring_pins_free(shard_ring *r);
/* A live pin, by member index. */
struct ring_pin {
    uint64_t hash;
    uint32_t member;
};
/* The live pins of r in hash order, into a new array of r->npins (NULL for none). Return: 0; -ENOMEM. */
int    shard__ring_pins_list(const shard_ring *r, struct ring_pin **out);
/* Calls fn for every live pin in hash order with its member index; stops at a non-zero return. */
int    shard__ring_pins_each(const shard_ring *r, int (*fn)(uint64_t hash, uint32_t member, void *ctx), void *ctx);
/* Every member's shard_ring_share, by member index, in one pass over the points (ring_query.c). */
void   shard__ring_shares(const shard_ring *r, double *out);

/* Index of member by name (members are sorted by name); when there is none, -(the index it would
 * take) - 1, a negative number. Binary search; inline because the ring's pins (ring_pin.c) look names
 * up too, and live below ring.c. */
static inline long shard__ring_member_index(const struct shard_ring *r, const char *name)
{
    size_t lo = 0, hi = r->nmembers;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(r->members[mid].name, name);
        if (c == 0)
            return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -(long)lo - 1;
}
/* Whether name may name a member: not NULL, not empty, at most SHARD_NAME_MAX bytes.
 * Return: 0; -EINVAL; -ENAMETOOLONG. */
int shard__ring_check_name(const char *name);

/* The size of the hash space, 2^64, as a double: for shares of it. */
#define SHARD_HASH_SPACE 18446744073709551616.0

#endif
