/* Internal: a ring's points, as its edits change them (ring_points.c; the edits: ring.c).
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_RING_POINTS_H
#define SHARD_SRC_RING_POINTS_H

#include <stddef.h>
#include <stdint.h>

#include "ring_layout.h"

/* A point and the index of the member that owns it. */
struct point_rec {
    uint64_t point;
    uint32_t owner;
};

/* A new points_id (ring_layout.h): never one given before. */
uint64_t shard__ring_new_points_id(void);
/* Member's i-th point: the ring's point hook's, or the hash's. */
uint64_t shard__ring_member_point(const struct shard_ring *r, const char *member, uint32_t i);
/* Room for npoints points, their front table and blocks. Return: 0 or -ENOMEM (nothing changes but
 * capacities). */
int  shard__ring_reserve_points(shard_ring *r, size_t npoints);
/* Sorts a[0..n) by point, stably (tmp: room for n more). */
void shard__ring_points_sort(struct point_rec *a, struct point_rec *tmp, size_t n);
/* Merges the sorted points add[0..nadd) into the ring. Requires: shard__ring_reserve_points. */
void shard__ring_points_merge(shard_ring *r, const struct point_rec *add, size_t nadd);
/* Member idx's points with vnode numbers [from, to), sorted (with room for a sort after them).
 * Return: NULL when out of memory; the caller frees it. */
struct point_rec *shard__ring_member_points(const shard_ring *r, uint32_t idx, uint32_t from, uint32_t to);
/* Drops the sorted points gone (all of member idx) from the ring. */
void shard__ring_points_drop(shard_ring *r, uint32_t idx, const struct point_rec *gone, size_t ngone);
/* Rebuilds the lookup tables over the points as they are now (room reserved: cannot fail). */
void shard__ring_tables_build(shard_ring *r);

#endif
