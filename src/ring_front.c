/* The ring's lookup tables: the front table and its blocks, rebuilt over the sorted points after every
 * add and remove (layout and lookup: ring_internal.h). SPDX-License-Identifier: LGPL-2.1-or-later */
#include <string.h>

#include "ring_internal.h"

/* Front table entries for npoints points: a power of two, the fewest at least 8 a point while that
 * is at most 2^19 (1 MiB, a core's L2 on the machines measured), else the fewest at least 4 a point.
 * Measured (bench_lookup, 262,144 keys): at 64 members 8 a point is 30% faster than 4 (11.6% of buckets
 * mixed instead of 22%, both in L2); at 1,000 members 8 a point (16 MiB) is no faster than 4 (8 MiB)
 * once the table is out of L2, and crowds out the points a mixed bucket reads. Never fewer entries for
 * more points, so a remove needs no allocation. At least 2, so the shift stays below 64. */
size_t shard__ring_front_count(size_t npoints)
{
    size_t per_point = 8 * npoints <= ((size_t)1 << 19) ? 8 : 4, nf = 2;
    while (nf < per_point * npoints)
        nf *= 2;
    return nf;
}

size_t shard__ring_blocks_count(size_t nfront)
{
    return (nfront + (1u << SHARD_RING_BLOCK_BITS) - 1) >> SHARD_RING_BLOCK_BITS;
}

static size_t bucket_of(const shard_ring *r, uint64_t point)
{
    return (size_t)((point - r->min) >> r->front_shift);
}

/* blocks[j] = the first point whose bucket is in block j or later. */
static void blocks_fill(shard_ring *r)
{
    size_t j = 0;
    for (size_t i = 0; i < r->npoints; i++) {
        size_t pj = bucket_of(r, r->points[i]) >> SHARD_RING_BLOCK_BITS;
        while (j <= pj)
            r->blocks[j++] = (uint32_t)i;
    }
}

/* The entry of a mixed bucket whose first point is i: the offset from its block's first point, or the
 * largest that fits, which names an earlier point (lookups search on from it). */
static uint16_t mixed_entry(const shard_ring *r, size_t bucket, size_t i)
{
    size_t d = i - r->blocks[bucket >> SHARD_RING_BLOCK_BITS];
    size_t most = UINT16_MAX - SHARD_RING_FRONT_MIXED;
    return (uint16_t)(SHARD_RING_FRONT_MIXED + (d < most ? d : most));
}

/* Stores o in f[b..end], 8 entries a store. Runs are a few entries long, so one store covers most:
 * up to 7 entries past end are written too (never past nfront), and later arcs rewrite them. */
static void fill_run(uint16_t *f, size_t b, size_t end, size_t nfront, uint16_t o)
{
    uint16_t run[8] = { o, o, o, o, o, o, o, o };
    for (; b + 8 <= nfront; b += 8) {
        memcpy(&f[b], run, sizeof run);
        if (b + 8 > end)
            return;
    }
    for (; b <= end; b++)
        f[b] = o;
}

/* Fills the front table of a ring of at most 32768 members; blocks are filled. The hashes of
 * (points[k-1], points[k]] belong to owners[k], and min to owners[0]: a bucket keeps its owner while
 * every such arc reaching into it has the same one. The arc ending at a point equal to the one before
 * is empty: of equal points only the first (by name) is ever found. One pass over the points, one
 * store a bucket. */
static void front_fill(shard_ring *r)
{
    uint16_t *f = r->front;
    size_t last = 0, last_first = 0; /* the bucket the previous arc ended in, and its first point */
    f[0] = (uint16_t)r->owners[0];
    for (size_t k = 1; k < r->npoints; k++) {
        if (r->points[k] == r->points[k - 1])
            continue;
        uint16_t o = (uint16_t)r->owners[k];
        size_t first = bucket_of(r, r->points[k - 1] + 1), end = bucket_of(r, r->points[k]);
        if (first == last) {
            if (f[first] != o)
                f[first] = mixed_entry(r, first, last_first);
            first++;
        }
        if (first <= end)
            fill_run(f, first, end, r->nfront, o);
        if (end != last)
            last_first = k;
        last = end;
    }
}

/* Rebuilds the front table and blocks over the sorted points. The caller has made front_cap and
 * blocks_cap at least shard__ring_front_count(npoints) and its blocks_count: entries in use are at most that many
 * whatever the span, and both only shrink with fewer points, so a remove needs no allocation. */
void shard__ring_front_build(shard_ring *r)
{
    size_t n = r->npoints;
    if (n == 0) {
        r->nfront = 0;
        r->nblocks = 0;
        r->min = 0;
        r->span = 0;
        return;
    }
    r->min = r->points[0];
    r->span = r->points[n - 1] - r->points[0];
    size_t nf = shard__ring_front_count(n);
    unsigned fs = 0;
    while ((r->span >> fs) >= nf)
        fs++;
    r->front_shift = fs;
    r->nfront = (size_t)(r->span >> fs) + 1; /* fewer than nf when the points span less than 2^64 */
    r->nblocks = shard__ring_blocks_count(r->nfront);
    blocks_fill(r);
    if (r->nmembers <= SHARD_RING_FRONT_MIXED) {
        front_fill(r);
    } else {
        /* Member indices past 15 bits: every bucket searches on from its block's first point. */
        for (size_t b = 0; b < r->nfront; b++)
            r->front[b] = SHARD_RING_FRONT_MIXED;
    }
}

