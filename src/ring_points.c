/* A ring's points: made from members, sorted, merged in and dropped; the lookup tables rebuilt over
 * them (ring_front.c). SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "ring_points.h"

/* A new points_id (ring_layout.h). relaxed: only its uniqueness matters, which the atomic
 * increment gives on its own. */
uint64_t shard__ring_new_points_id(void)
{
    static atomic_uint_fast64_t last;
    return atomic_fetch_add_explicit(&last, 1, memory_order_relaxed) + 1;
}

/* The lookup tables over the points as they are now, the buckets of the pins marked. */
void shard__ring_tables_build(shard_ring *r)
{
    shard__ring_front_build(r);
    shard__ring_pins_mark(r);
    r->points_id = shard__ring_new_points_id();
}

uint64_t shard__ring_member_point(const struct shard_ring *r, const char *member, uint32_t i)
{
    if (r->cfg.point)
        return r->cfg.point(member, i, r->cfg.ctx);
    return shard__hash_point(member, i, r->cfg.seed);
}

/* Makes room for npoints points, their front table and blocks; on failure nothing changes but
 * capacities (realloc keeps what grew, and the old arrays, contents included, when it fails). */
int shard__ring_reserve_points(shard_ring *r, size_t npoints)
{
    if (npoints > r->points_cap) {
        size_t cap = r->points_cap ? r->points_cap : 64;
        while (cap < npoints)
            cap *= 2;
        uint64_t *p = realloc(r->points, cap * sizeof *p);
        if (!p)
            return -ENOMEM;
        r->points = p;
        uint32_t *o = realloc(r->owners, cap * sizeof *o);
        if (!o)
            return -ENOMEM; /* points_cap stays: owners has only the old capacity */
        r->owners = o;
        r->points_cap = cap;
    }
    size_t nf = shard__ring_front_count(npoints), nb = shard__ring_blocks_count(nf);
    if (nf > r->front_cap) {
        uint16_t *f = realloc(r->front, nf * sizeof *f);
        if (!f)
            return -ENOMEM;
        r->front = f;
        r->front_cap = nf;
    }
    if (nb > r->blocks_cap) {
        uint32_t *bl = realloc(r->blocks, nb * sizeof *bl);
        if (!bl)
            return -ENOMEM;
        r->blocks = bl;
        r->blocks_cap = nb;
    }
    return 0;
}

/* Stable LSD radix sort by point, 11 bits a pass, skipping passes where every digit is equal (the high
 * bits of 32-bit ketama points, say). Stability keeps equal points in owner (= name) order. Written by
 * hand because libc has only qsort, several times slower here (bench_rebuild measures both). */
void shard__ring_points_sort(struct point_rec *a, struct point_rec *tmp, size_t n)
{
    enum { BITS = 11, BUCKETS = 1 << BITS };
    size_t count[BUCKETS];
    struct point_rec *src = a, *dst = tmp;
    for (unsigned shift = 0; shift < 64 && n > 1; shift += BITS) {
        memset(count, 0, sizeof count);
        for (size_t i = 0; i < n; i++)
            count[(src[i].point >> shift) & (BUCKETS - 1)]++;
        if (count[(src[0].point >> shift) & (BUCKETS - 1)] == n)
            continue;
        size_t sum = 0;
        for (size_t d = 0; d < BUCKETS; d++) {
            size_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[count[(src[i].point >> shift) & (BUCKETS - 1)]++] = src[i];
        struct point_rec *t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        memcpy(a, src, n * sizeof *a);
}

/* Merges the sorted new points (owners already final indices) into the ring, whose old owners at or
 * above each inserted member's position have been renumbered. Requires
 * shard__ring_reserve_points(total). */
void shard__ring_points_merge(shard_ring *r, const struct point_rec *add, size_t nadd)
{
    size_t i = r->npoints, j = nadd, k = r->npoints + nadd;
    /* Merge from the back so the ring's arrays serve as the destination without a copy. */
    while (j > 0) {
        bool take_old = i > 0 && (r->points[i - 1] > add[j - 1].point ||
                                  (r->points[i - 1] == add[j - 1].point && r->owners[i - 1] > add[j - 1].owner));
        k--;
        if (take_old) {
            i--;
            r->points[k] = r->points[i];
            r->owners[k] = r->owners[i];
        } else {
            j--;
            r->points[k] = add[j].point;
            r->owners[k] = add[j].owner;
        }
    }
    r->npoints += nadd;
}

/* The points member owns with vnode numbers [from, to), sorted. NULL when out of memory. */
struct point_rec *shard__ring_member_points(const shard_ring *r, uint32_t idx, uint32_t from, uint32_t to)
{
    size_t n = to - from;
    struct point_rec *recs = malloc((2 * n + 1) * sizeof *recs);
    if (!recs)
        return NULL;
    for (uint32_t p = from; p < to; p++)
        recs[p - from] = (struct point_rec){ shard__ring_member_point(r, r->members[idx].name, p), idx };
    shard__ring_points_sort(recs, recs + n, n);
    return recs;
}

/* Drops the sorted points gone (all of member idx) from the ring: one pass, as both are sorted. */
void shard__ring_points_drop(shard_ring *r, uint32_t idx, const struct point_rec *gone, size_t ngone)
{
    size_t k = 0, g = 0;
    for (size_t i = 0; i < r->npoints; i++) {
        while (g < ngone && gone[g].point < r->points[i])
            g++; /* cannot happen for points the ring has, kept for a hook that changed its mind */
        if (g < ngone && r->owners[i] == idx && gone[g].point == r->points[i]) {
            g++;
            continue;
        }
        r->points[k] = r->points[i];
        r->owners[k++] = r->owners[i];
    }
    r->npoints = k;
}

