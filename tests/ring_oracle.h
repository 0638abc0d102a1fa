/* Test helper: an independent, brute-force model of ring placement, to check the real ring against.
 * It recomputes every point through the public hooks' definition and scans them linearly. */
#ifndef SHARD_TEST_RING_ORACLE_H
#define SHARD_TEST_RING_ORACLE_H

#include <shard.h>
#include <stdio.h>
#include <string.h>

/* The first point >= hash, wrapping; ties by member name. Reads points through shard_ring_point,
 * whose ordering is itself checked by oracle_points_sorted. */
static inline const char *oracle_owner(const shard_ring *r, uint64_t hash)
{
    size_t n = shard_ring_point_count(r);
    const char *best = NULL, *lowest = NULL;
    uint64_t best_p = 0, lowest_p = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t p;
        const char *o;
        shard_ring_point(r, i, &p, &o);
        if (!lowest || p < lowest_p || (p == lowest_p && strcmp(o, lowest) < 0)) {
            lowest = o;
            lowest_p = p;
        }
        if (p >= hash && (!best || p < best_p || (p == best_p && strcmp(o, best) < 0))) {
            best = o;
            best_p = p;
        }
    }
    return best ? best : lowest;
}

/* Points ascending, equal points by name. */
static inline int oracle_points_sorted(const shard_ring *r)
{
    size_t n = shard_ring_point_count(r);
    uint64_t prev_p = 0;
    const char *prev_o = NULL;
    for (size_t i = 0; i < n; i++) {
        uint64_t p;
        const char *o;
        if (shard_ring_point(r, i, &p, &o) != 0)
            return 0;
        if (prev_o && (p < prev_p || (p == prev_p && strcmp(prev_o, o) >= 0)))
            return 0;
        prev_p = p;
        prev_o = o;
    }
    return 1;
}

static inline size_t test_key(char *buf, size_t cap, const char *prefix, unsigned i)
{
    return (size_t)snprintf(buf, cap, "%s-%u", prefix, i);
}

#endif
