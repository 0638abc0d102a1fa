/* The ring's lookup tables: the front table and its blocks, rebuilt over the sorted points after every
 * add and remove, and the PINNED marks of the buckets that hold pins (layout and lookup:
 * ring_layout.h). SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdbool.h>
#include <string.h>

#include "ring_layout.h"

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
 * largest that fits, which names an earlier point (lookups search on from it). The largest entry is
 * SHARD_RING_FRONT_PINNED's. */
static uint16_t mixed_entry(const shard_ring *r, size_t bucket, size_t i)
{
    size_t d = i - r->blocks[bucket >> SHARD_RING_BLOCK_BITS];
    size_t most = SHARD_RING_FRONT_PINNED - 1 - SHARD_RING_FRONT_MIXED;
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

/* The layout of PINNED_OWNER entries (ring_layout.h): the owner's bits, then a bit a sub-bucket, as
 * many sub-buckets as fit below bit 14, up to 8 (8,000 pins in 8 members' 65,536 buckets mark 11.5 % of
 * the hash space, but with 8 sub-buckets a bucket send 2.6 % of lookups to the pins: 1.4 % in their
 * sub-buckets, 1.3 % in mixed buckets, which have no room for the bits), and none narrower than a
 * hash. A ring of more than 8192 members has no bit to spare: its pinned buckets are PINNED. */
static void sub_buckets(shard_ring *r)
{
    unsigned ob = 0, sb;
    while (ob < 16 && ((size_t)1 << ob) < r->nmembers)
        ob++;
    unsigned spare = ob < 14 ? 14 - ob : 0;
    sb = spare >= 8 ? 3 : spare >= 4 ? 2 : spare >= 2 ? 1 : 0;
    if (sb > r->front_shift)
        sb = r->front_shift;
    r->front_plain = spare ? SHARD_RING_FRONT_PINNED_OWNER : SHARD_RING_FRONT_MIXED;
    r->owner_bits = (uint8_t)ob;
    r->sub_shift = (uint8_t)(r->front_shift - sb);
    r->sub_mask = (uint8_t)((1u << sb) - 1);
}

/* Rebuilds the front table and blocks over the sorted points (no bucket marked). The caller has made front_cap and
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
    sub_buckets(r);
    blocks_fill(r);
    if (r->nmembers <= SHARD_RING_FRONT_MIXED) {
        front_fill(r);
    } else {
        /* Member indices past 15 bits: every bucket searches on from its block's first point. */
        for (size_t b = 0; b < r->nfront; b++)
            r->front[b] = SHARD_RING_FRONT_MIXED;
    }
}


bool shard__ring_front_bucket(const shard_ring *r, uint64_t hash, uint64_t *lo, uint64_t *hi)
{
    uint64_t off = hash - r->min;
    if (r->npoints == 0 || off > r->span)
        return false;
    uint64_t width_1 = (UINT64_C(1) << r->front_shift) - 1; /* front_shift < 64: at least 2 buckets */
    *lo = r->min + (off & ~width_1);
    *hi = r->span - (off & ~width_1) > width_1 ? *lo + width_1 : r->min + r->span;
    return true;
}

/* Whether e is a PINNED_OWNER entry (only rings whose front_plain is PINNED_OWNER have them). */
static bool owner_kept(const shard_ring *r, uint16_t e)
{
    return r->front_plain == SHARD_RING_FRONT_PINNED_OWNER && e >= r->front_plain && e < SHARD_RING_FRONT_MIXED;
}

unsigned shard__ring_front_sub(const shard_ring *r, uint64_t hash)
{
    return (unsigned)((hash - r->min) >> r->sub_shift) & r->sub_mask;
}

void shard__ring_front_mark(shard_ring *r, uint64_t hash)
{
    uint64_t off = hash - r->min;
    if (!r->npoints || off > r->span)
        return;
    uint16_t *e = &r->front[(size_t)(off >> r->front_shift)];
    uint32_t bit = 1u << (r->owner_bits + shard__ring_front_sub(r, hash));
    if (r->front_plain == SHARD_RING_FRONT_PINNED_OWNER && *e < r->front_plain)
        *e = (uint16_t)(SHARD_RING_FRONT_PINNED_OWNER | bit | *e);
    else if (owner_kept(r, *e))
        *e = (uint16_t)(*e | bit);
    else
        *e = SHARD_RING_FRONT_PINNED; /* mixed, PINNED already, or a ring without room for the owner */
}

/* Position of the first point >= hash <= the largest point. */
static size_t lower_bound(const shard_ring *r, uint64_t hash)
{
    size_t lo = 0, hi = r->npoints - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->points[mid] < hash)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* What front_fill writes for the bucket [lo, hi] (hi at most the largest point): the owner of every arc
 * reaching into it if they agree, else a mixed entry for its first point. The arcs are the one ending
 * at that point (it holds lo: the first bucket's lo is min, owners[0]'s) and one ending at each later
 * point while the point before is below hi; an arc ending at a point equal to the one before is empty. */
static uint16_t bucket_entry(const shard_ring *r, size_t b, uint64_t lo, uint64_t hi)
{
    if (r->nmembers > SHARD_RING_FRONT_MIXED)
        return SHARD_RING_FRONT_MIXED;
    size_t i = lower_bound(r, lo);
    uint32_t o = r->owners[i];
    for (size_t k = i + 1; k < r->npoints && r->points[k - 1] < hi; k++)
        if (r->points[k] != r->points[k - 1] && r->owners[k] != o)
            return mixed_entry(r, b, i);
    return (uint16_t)o;
}

void shard__ring_front_remark(shard_ring *r, uint64_t hash, uint32_t subs)
{
    uint64_t lo, hi;
    if (!shard__ring_front_bucket(r, hash, &lo, &hi))
        return;
    size_t b = (size_t)((hash - r->min) >> r->front_shift);
    uint16_t e = r->front[b];
    uint32_t owner = e & ((1u << r->owner_bits) - 1);
    if (owner_kept(r, e))
        r->front[b] = (uint16_t)(subs ? SHARD_RING_FRONT_PINNED_OWNER | subs << r->owner_bits | owner : owner);
    else if (e == SHARD_RING_FRONT_PINNED && !subs)
        r->front[b] = bucket_entry(r, b, lo, hi);
}
