/* Internal: ring layout and the lookup used by the dispatcher. SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_RING_INTERNAL_H
#define SHARD_SRC_RING_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "shard/ring.h"

struct ring_member {
    char    *name;
    uint32_t weight;
};

/* Points are kept sorted by (point, member index) in two parallel arrays; members are kept sorted by
 * name, so member-index order is name order and ties between equal points resolve by name.
 * The index maps the top bits of (hash - min) to the first point of that bucket: a lookup reads one
 * index entry and then, on average, one or two adjacent points. */
struct shard_ring {
    struct shard_ring_config cfg;
    struct ring_member *members;
    size_t    nmembers, members_cap;
    uint64_t *points;
    uint32_t *owners;
    size_t    npoints, points_cap;
    uint32_t *index;
    size_t    nbuckets, index_cap;
    unsigned  shift;
    uint64_t  min, span;
};

/* Position of the first point >= hash, wrapping to 0. The ring must not be empty. */
static inline size_t shard__ring_find(const struct shard_ring *r, uint64_t hash)
{
    uint64_t off = hash - r->min;
    if (off > r->span)
        return 0; /* below the smallest point or above the largest: wraps to the smallest */
    size_t b = (size_t)(off >> r->shift);
    size_t i = r->index[b];
    /* The largest point is >= hash, so this stops; it stays within bucket b or at the next one's
     * first point, except in crowded buckets, handled by a binary search after a few steps. */
    for (int step = 0; step < 8; step++, i++)
        if (r->points[i] >= hash)
            return i;
    size_t hi = b + 1 < r->nbuckets ? r->index[b + 1] : r->npoints;
    while (i < hi) {
        size_t mid = i + (hi - i) / 2;
        if (r->points[mid] < hash)
            i = mid + 1;
        else
            hi = mid;
    }
    return i;
}

/* Member index owning hash; the ring must not be empty. */
static inline uint32_t shard__ring_owner_index(const struct shard_ring *r, uint64_t hash)
{
    return r->owners[shard__ring_find(r, hash)];
}

/* Index of member by name, or -1. */
long shard__ring_member_index(const struct shard_ring *r, const char *name);
/* Whether name may name a member: not NULL, not empty, at most SHARD_NAME_MAX bytes.
 * Return: 0; -EINVAL; -ENAMETOOLONG. */
int shard__ring_check_name(const char *name);

/* The size of the hash space, 2^64, as a double: for shares of it. */
#define SHARD_HASH_SPACE 18446744073709551616.0

#endif
