/* Reading a ring: counts, members, points, lookups, shares and the checksum. Every function here is
 * const and safe to call from many threads at once (ring.h). SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "hash.h"
#include "ring_layout.h"

SHARD_API size_t shard_ring_member_count(const shard_ring *r)
{
    return r ? r->nmembers : 0;
}

SHARD_API size_t shard_ring_point_count(const shard_ring *r)
{
    return r ? r->npoints : 0;
}

SHARD_API uint32_t shard_ring_weight(const shard_ring *r, const char *member)
{
    if (!r || !member)
        return 0;
    long idx = shard__ring_member_index(r, member);
    return idx < 0 ? 0 : r->members[idx].weight;
}

SHARD_API const char *shard_ring_member(const shard_ring *r, size_t i)
{
    return r && i < r->nmembers ? r->members[i].name : NULL;
}

SHARD_API int shard_ring_point(const shard_ring *r, size_t i, uint64_t *point, const char **owner)
{
    if (!r)
        return -EINVAL;
    if (i >= r->npoints)
        return -ERANGE;
    if (point)
        *point = r->points[i];
    if (owner)
        *owner = r->members[r->owners[i]].name;
    return 0;
}

SHARD_API size_t shard_ring_memory(const shard_ring *r)
{
    if (!r)
        return 0;
    return r->npoints * (sizeof *r->points + sizeof *r->owners) + r->nfront * sizeof *r->front +
           r->nblocks * sizeof *r->blocks + shard__pin_memory(r->pins) +
           shard__pin_filter_memory(r->pin_filter) + r->npin_numbers * sizeof *r->pin_member;
}

SHARD_API uint64_t shard_ring_hash(const shard_ring *r, const void *key, size_t len)
{
    if (!r || (!key && len > 0))
        return 0;
    return shard__hash_key_cfg(&r->cfg, key, len);
}

SHARD_API const char *shard_ring_owner_of_hash(const shard_ring *r, uint64_t hash)
{
    if (!r || r->npoints == 0)
        return NULL;
    return r->members[shard__ring_owner_index(r, hash)].name;
}

SHARD_API const char *shard_ring_owner(const shard_ring *r, const void *key, size_t len)
{
    if (!r || r->npoints == 0 || (!key && len > 0))
        return NULL;
    return r->members[shard__ring_owner_index(r, shard__hash_key_cfg(&r->cfg, key, len))].name;
}

SHARD_API size_t shard_ring_owners_of_hash(const shard_ring *r, uint64_t hash, const char **out, size_t n)
{
    if (!r || !out || r->npoints == 0)
        return 0;
    if (n > r->nmembers)
        n = r->nmembers;
    size_t found = 0, pos = shard__ring_find(r, hash);
    /* Members already chosen: a bitmap on the stack for usual rings, else a scan of out[]. */
    enum { SEEN_BITS = 8192 };
    uint64_t seen[SEEN_BITS / 64];
    bool use_bitmap = r->nmembers <= SEEN_BITS;
    if (use_bitmap)
        memset(seen, 0, ((r->nmembers + 63) / 64) * sizeof *seen);
    /* A pinned hash: its pin first, then the ring's order without it. */
    int64_t pinned = r->npins && n > 0 ? shard__ring_pinned(r, hash) : -1;
    if (pinned >= 0) {
        out[found++] = r->members[pinned].name;
        if (use_bitmap)
            seen[pinned / 64] |= 1ull << (pinned % 64);
    }
    for (size_t step = 0; step < r->npoints && found < n; step++, pos = pos + 1 == r->npoints ? 0 : pos + 1) {
        uint32_t o = r->owners[pos];
        bool dup = false;
        if (use_bitmap) {
            dup = seen[o / 64] >> (o % 64) & 1;
            seen[o / 64] |= 1ull << (o % 64);
        } else {
            for (size_t k = 0; k < found && !dup; k++)
                dup = out[k] == r->members[o].name;
        }
        if (!dup)
            out[found++] = r->members[o].name;
    }
    return found;
}

SHARD_API size_t shard_ring_owners(const shard_ring *r, const void *key, size_t len, const char **out, size_t n)
{
    if (!r || (!key && len > 0))
        return 0;
    return shard_ring_owners_of_hash(r, shard_ring_hash(r, key, len), out, n);
}

/* Length of the arc ending at point i, as a double: (points[i-1], points[i]], wrapping for i == 0. */
static double arc_length(const shard_ring *r, size_t i)
{
    if (i > 0)
        return (double)(r->points[i] - r->points[i - 1]);
    /* 2^64 - (max - min): the wrapping arc, the whole space when every point is equal. */
    return SHARD_HASH_SPACE - (double)(r->points[r->npoints - 1] - r->points[0]);
}

void shard__ring_shares(const shard_ring *r, double *out)
{
    for (size_t m = 0; m < r->nmembers; m++)
        out[m] = 0;
    for (size_t i = 0; i < r->npoints; i++)
        out[r->owners[i]] += arc_length(r, i);
    for (size_t m = 0; m < r->nmembers; m++)
        out[m] /= SHARD_HASH_SPACE;
}

SHARD_API double shard_ring_share(const shard_ring *r, const char *member)
{
    if (!r || !member || r->npoints == 0)
        return 0;
    long idx = shard__ring_member_index(r, member);
    if (idx < 0)
        return 0;
    double sum = 0;
    for (size_t i = 0; i < r->npoints; i++)
        if (r->owners[i] == (uint32_t)idx)
            sum += arc_length(r, i);
    return sum / SHARD_HASH_SPACE;
}

/* Hash, then member index, in hash order. */
static int checksum_pin(uint64_t hash, uint32_t member, void *ctx)
{
    XXH3_64bits_update(ctx, &hash, sizeof hash);
    XXH3_64bits_update(ctx, &member, sizeof member);
    return 0;
}

SHARD_API uint64_t shard_ring_checksum(const shard_ring *r)
{
    if (!r)
        return 0;
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    for (size_t i = 0; i < r->nmembers; i++)
        XXH3_64bits_update(&st, r->members[i].name, strlen(r->members[i].name) + 1);
    XXH3_64bits_update(&st, r->points, r->npoints * sizeof *r->points);
    XXH3_64bits_update(&st, r->owners, r->npoints * sizeof *r->owners);
    shard__ring_pins_each(r, checksum_pin, &st);
    return XXH3_64bits_digest(&st);
}
