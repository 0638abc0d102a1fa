/* The consistent-hash ring: create, add, remove (its points: ring_points.c; its lookup tables:
 * ring_front.c; reading it: ring_query.c; comparing two: ring_diff.c).
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ring_layout.h"
#include "ring_points.h"

SHARD_API int shard_ring_create(shard_ring **out, const struct shard_ring_config *cfg)
{
    if (!out)
        return -EINVAL;
    shard_ring *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    if (cfg)
        r->cfg = *cfg;
    if (r->cfg.vnodes == 0)
        r->cfg.vnodes = SHARD_DEFAULT_VNODES;
    r->points_id = shard__ring_new_points_id();
    *out = r;
    return 0;
}

SHARD_API void shard_ring_destroy(shard_ring *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nmembers; i++)
        free(r->members[i].name);
    free(r->members);
    free(r->points);
    free(r->owners);
    free(r->front);
    free(r->blocks);
    shard__ring_pins_free(r);
    free(r);
}

SHARD_API int shard_ring_clone(const shard_ring *r, shard_ring **out)
{
    if (!r || !out)
        return -EINVAL;
    shard_ring *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->cfg = r->cfg;
    /* Not just the entries in use: a remove may use more (a narrower span, narrower buckets) and must
     * not allocate. Capacities for npoints are enough for every smaller ring (shard__ring_front_build). */
    size_t nf = r->npoints ? shard__ring_front_count(r->npoints) : 1, nb = r->npoints ? shard__ring_blocks_count(nf) : 1;
    c->members = malloc((r->nmembers ? r->nmembers : 1) * sizeof *c->members);
    c->points = malloc((r->npoints ? r->npoints : 1) * sizeof *c->points);
    c->owners = malloc((r->npoints ? r->npoints : 1) * sizeof *c->owners);
    c->front = malloc(nf * sizeof *c->front);
    c->blocks = malloc(nb * sizeof *c->blocks);
    if (!c->members || !c->points || !c->owners || !c->front || !c->blocks)
        goto fail;
    c->members_cap = r->nmembers ? r->nmembers : 1;
    c->points_cap = r->npoints ? r->npoints : 1;
    c->front_cap = nf;
    c->blocks_cap = nb;
    for (; c->nmembers < r->nmembers; c->nmembers++) {
        c->members[c->nmembers].weight = r->members[c->nmembers].weight;
        c->members[c->nmembers].pin_no = r->members[c->nmembers].pin_no;
        c->members[c->nmembers].name = strdup(r->members[c->nmembers].name);
        if (!c->members[c->nmembers].name)
            goto fail;
    }
    if (r->npoints) {
        memcpy(c->points, r->points, r->npoints * sizeof *c->points);
        memcpy(c->owners, r->owners, r->npoints * sizeof *c->owners);
        memcpy(c->front, r->front, r->nfront * sizeof *c->front);
        memcpy(c->blocks, r->blocks, r->nblocks * sizeof *c->blocks);
    }
    c->npoints = r->npoints;
    c->nfront = r->nfront;
    c->front_shift = r->front_shift;
    c->front_plain = r->front_plain;
    c->owner_bits = r->owner_bits;
    c->sub_shift = r->sub_shift;
    c->sub_mask = r->sub_mask;
    c->nblocks = r->nblocks;
    c->min = r->min;
    c->span = r->span;
    c->points_id = r->points_id;
    if (shard__ring_pins_copy(c, r) != 0)
        goto fail;
    *out = c;
    return 0;
fail:
    shard_ring_destroy(c);
    return -ENOMEM;
}

static int reserve_members(shard_ring *r, size_t n)
{
    if (n <= r->members_cap)
        return 0;
    size_t cap = r->members_cap ? r->members_cap : 8;
    while (cap < n)
        cap *= 2;
    struct ring_member *m = realloc(r->members, cap * sizeof *m);
    if (!m)
        return -ENOMEM;
    r->members = m;
    r->members_cap = cap;
    return 0;
}

int shard__ring_check_name(const char *name)
{
    if (!name || !name[0])
        return -EINVAL;
    return strnlen(name, SHARD_NAME_MAX + 1) > SHARD_NAME_MAX ? -ENAMETOOLONG : 0;
}

static int check_member(const shard_ring *r, const char *name, uint32_t weight, size_t *len)
{
    int err = shard__ring_check_name(name);
    if (err || weight == 0)
        return err ? err : -EINVAL;
    *len = strlen(name);
    if ((uint64_t)r->cfg.vnodes * weight > SHARD_RING_MAX_POINTS)
        return -EINVAL;
    if (shard__ring_member_index(r, name) >= 0)
        return -EEXIST;
    return 0;
}

static int cmp_name_ptr(const void *a, const void *b)
{
    const struct shard_ring_member *x = *(const struct shard_ring_member *const *)a;
    const struct shard_ring_member *y = *(const struct shard_ring_member *const *)b;
    return strcmp(x->name, y->name);
}

/* Checks every member of a batch, and the ring's total of points with them. Return: 0 with *total,
 * the batch's points; or the error shard_ring_add_many returns. */
static int check_batch(const shard_ring *r, const struct shard_ring_member *members, size_t n, uint64_t *total)
{
    *total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        int err = check_member(r, members[i].name, members[i].weight, &len);
        if (err)
            return err;
        *total += (uint64_t)r->cfg.vnodes * members[i].weight;
    }
    return *total + r->npoints > SHARD_RING_MAX_POINTS ? -EINVAL : 0;
}

/* The batch in name order, with each name copied: names[j] is sorted[j]'s. Return: 0; -EEXIST (a name
 * twice in the batch); -ENOMEM. The caller frees both arrays and the names, on error too. */
static int sort_batch(const struct shard_ring_member *members, size_t n,
                      const struct shard_ring_member **sorted, char **names)
{
    for (size_t i = 0; i < n; i++)
        sorted[i] = &members[i];
    qsort(sorted, n, sizeof *sorted, cmp_name_ptr);
    for (size_t i = 1; i < n; i++)
        if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0)
            return -EEXIST;
    for (size_t i = 0; i < n; i++)
        if (!(names[i] = strdup(sorted[i]->name)))
            return -ENOMEM;
    return 0;
}

/* Where the members go once the batch's (sorted) names are merged with the ring's (sorted) ones:
 * merged[k] is the k-th member by name, remap[old index] its new index, newpos[j] the new index of
 * names[j]. Changes nothing of the ring. */
static void plan_members(const shard_ring *r, const struct shard_ring_member **sorted, char **names, size_t n,
                         struct ring_member *merged, uint32_t *remap, uint32_t *newpos)
{
    size_t old_n = r->nmembers;
    for (size_t i = 0, j = 0, k = 0; k < old_n + n; k++) {
        if (j < n && (i == old_n || strcmp(names[j], r->members[i].name) < 0)) {
            newpos[j] = (uint32_t)k;
            merged[k] = (struct ring_member){ names[j], sorted[j]->weight, 0 };
            j++;
        } else {
            remap[i] = (uint32_t)k;
            merged[k] = r->members[i++];
        }
    }
}

SHARD_API int shard_ring_add_many(shard_ring *r, const struct shard_ring_member *members, size_t n)
{
    if (!r || (!members && n > 0))
        return -EINVAL;
    if (n == 0)
        return 0;
    uint64_t total;
    int err = check_batch(r, members, n, &total);
    if (err)
        return err;
    err = -ENOMEM;
    size_t old_n = r->nmembers;
    const struct shard_ring_member **sorted = malloc(n * sizeof *sorted);
    char **names = calloc(n, sizeof *names);
    struct point_rec *recs = malloc(((size_t)total * 2 + 1) * sizeof *recs);
    struct ring_member *merged = malloc((old_n + n) * sizeof *merged);
    uint32_t *remap = malloc((old_n ? old_n : 1) * sizeof *remap);
    uint32_t *newpos = malloc(n * sizeof *newpos);
    if (!sorted || !names || !recs || !merged || !remap || !newpos)
        goto out;
    if ((err = sort_batch(members, n, sorted, names)) != 0)
        goto out;
    err = -ENOMEM;
    if (reserve_members(r, old_n + n) || shard__ring_reserve_points(r, r->npoints + total))
        goto out;
    plan_members(r, sorted, names, n, merged, remap, newpos);
    /* Hook calls happen before anything of the ring changes. Generated in member order, so the stable
     * sort leaves equal points in name order. */
    size_t m = 0;
    for (size_t j = 0; j < n; j++) {
        uint32_t np = r->cfg.vnodes * sorted[j]->weight;
        for (uint32_t p = 0; p < np; p++)
            recs[m++] = (struct point_rec){ shard__ring_member_point(r, names[j], p), newpos[j] };
    }
    shard__ring_points_sort(recs, recs + total, m);
    /* From here on nothing fails. */
    for (size_t i = 0; i < r->npoints; i++)
        r->owners[i] = remap[r->owners[i]];
    shard__ring_pins_remap(r, remap);
    memcpy(r->members, merged, (old_n + n) * sizeof *merged);
    r->nmembers = old_n + n;
    shard__ring_points_merge(r, recs, m);
    shard__ring_tables_build(r);
    free(names); /* the names belong to the ring now */
    names = NULL;
    err = 0;
out:
    for (size_t i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
    free(sorted);
    free(recs);
    free(merged);
    free(remap);
    free(newpos);
    return err;
}

SHARD_API int shard_ring_add(shard_ring *r, const char *member, uint32_t weight)
{
    struct shard_ring_member one = { member, weight };
    return shard_ring_add_many(r, &one, r ? 1 : 0);
}

SHARD_API int shard_ring_set_weight(shard_ring *r, const char *member, uint32_t weight)
{
    if (!r || !member || weight == 0 || (uint64_t)r->cfg.vnodes * weight > SHARD_RING_MAX_POINTS)
        return -EINVAL;
    long found = shard__ring_member_index(r, member);
    if (found < 0)
        return -ENOENT;
    uint32_t idx = (uint32_t)found, old = r->members[idx].weight;
    uint32_t from = r->cfg.vnodes * old, to = r->cfg.vnodes * weight;
    if (to > from && r->npoints + (to - from) > SHARD_RING_MAX_POINTS)
        return -EINVAL;
    if (to == from)
        return 0;
    /* The vnode numbers are the member's: weight w owns numbers [0, vnodes * w), so a change adds or
     * removes only the numbers between the two weights, and the other members' points stay. */
    struct point_rec *recs = shard__ring_member_points(r, idx, to > from ? from : to, to > from ? to : from);
    if (!recs || (to > from && shard__ring_reserve_points(r, r->npoints + (to - from)))) {
        free(recs);
        return -ENOMEM;
    }
    if (to > from)
        shard__ring_points_merge(r, recs, to - from);
    else
        shard__ring_points_drop(r, idx, recs, from - to);
    free(recs);
    r->members[idx].weight = weight;
    shard__ring_tables_build(r); /* room reserved above, or fewer points: cannot fail */
    return 0;
}

SHARD_API int shard_ring_remove(shard_ring *r, const char *member)
{
    if (!r || !member)
        return -EINVAL;
    long idx = shard__ring_member_index(r, member);
    if (idx < 0)
        return -ENOENT;
    uint32_t gone = (uint32_t)idx;
    size_t k = 0;
    for (size_t i = 0; i < r->npoints; i++) {
        uint32_t o = r->owners[i];
        if (o == gone)
            continue;
        r->points[k] = r->points[i];
        r->owners[k++] = o > gone ? o - 1 : o;
    }
    r->npoints = k;
    shard__ring_pins_drop_member(r, gone);
    free(r->members[gone].name);
    memmove(&r->members[gone], &r->members[gone + 1], (r->nmembers - gone - 1) * sizeof *r->members);
    r->nmembers--;
    shard__ring_tables_build(r); /* fewer points never need more front entries or blocks: cannot fail */
    return 0;
}
