/* shard_ring_diff: the arcs whose owner differs between two rings. SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ring_internal.h"

/* One boundary of the union of both rings' points, with each ring's owner of the arc ending there
 * (as member indices; -1 for an empty ring). Between two consecutive boundaries both owners are
 * constant, so these arcs, coalesced, are exactly the arcs the caller asks for. */
struct boundary {
    uint64_t x;
    int32_t  a, b;
};

struct diff {
    const shard_ring *ra, *rb;
    struct boundary  *bd;
    size_t            n;
    int32_t          *a_in_b; /* member index in b of each member of a, or -1 */
};

static bool same_pair(const struct diff *d, size_t i, size_t j)
{
    return d->bd[i].a == d->bd[j].a && d->bd[i].b == d->bd[j].b;
}

static bool owners_differ(const struct diff *d, size_t i)
{
    int32_t a = d->bd[i].a, b = d->bd[i].b;
    if (a < 0 || b < 0)
        return a != b;
    return d->a_in_b[a] != b;
}

static size_t prev(const struct diff *d, size_t i)
{
    return i == 0 ? d->n - 1 : i - 1;
}

static size_t next(const struct diff *d, size_t i)
{
    return i + 1 == d->n ? 0 : i + 1;
}

static int32_t owner_at(const shard_ring *r, size_t *pos, uint64_t x)
{
    if (r->npoints == 0)
        return -1;
    while (*pos < r->npoints && r->points[*pos] < x)
        (*pos)++;
    return (int32_t)r->owners[*pos == r->npoints ? 0 : *pos];
}

static void collect_boundaries(struct diff *d)
{
    const shard_ring *a = d->ra, *b = d->rb;
    size_t i = 0, j = 0, pa = 0, pb = 0;
    d->n = 0;
    while (i < a->npoints || j < b->npoints) {
        uint64_t x;
        if (j == b->npoints || (i < a->npoints && a->points[i] <= b->points[j]))
            x = a->points[i];
        else
            x = b->points[j];
        while (i < a->npoints && a->points[i] == x)
            i++;
        while (j < b->npoints && b->points[j] == x)
            j++;
        d->bd[d->n++] = (struct boundary){ x, owner_at(a, &pa, x), owner_at(b, &pb, x) };
    }
}

static void map_members(struct diff *d)
{
    const shard_ring *a = d->ra, *b = d->rb;
    size_t j = 0;
    for (size_t i = 0; i < a->nmembers; i++) {
        while (j < b->nmembers && strcmp(b->members[j].name, a->members[i].name) < 0)
            j++;
        d->a_in_b[i] = j < b->nmembers && strcmp(b->members[j].name, a->members[i].name) == 0 ? (int32_t)j : -1;
    }
}

static const char *name_of(const shard_ring *r, int32_t idx)
{
    return idx < 0 ? NULL : r->members[idx].name;
}

static void emit(const struct diff *d, size_t first_run, size_t last_run, shard_diff_fn fn, void *ctx)
{
    if (!owners_differ(d, first_run))
        return;
    const struct boundary *e = &d->bd[last_run];
    fn(d->bd[prev(d, first_run)].x, e->x, name_of(d->ra, e->a), name_of(d->rb, e->b), ctx);
}

SHARD_API int shard_ring_diff(const shard_ring *a, const shard_ring *b, shard_diff_fn fn, void *ctx)
{
    if (!a || !b || !fn)
        return -EINVAL;
    if (a->npoints + b->npoints == 0)
        return 0;
    struct diff d = { .ra = a, .rb = b };
    d.bd = malloc((a->npoints + b->npoints) * sizeof *d.bd);
    d.a_in_b = malloc((a->nmembers ? a->nmembers : 1) * sizeof *d.a_in_b);
    if (!d.bd || !d.a_in_b) {
        free(d.bd);
        free(d.a_in_b);
        return -ENOMEM;
    }
    map_members(&d);
    collect_boundaries(&d);

    /* Start at the run holding boundary 0 (the arc that holds hash 0), found by walking back over
     * boundaries with the same pair of owners; if every boundary has the same pair, one whole arc. */
    size_t start = 0, steps = 0;
    while (steps < d.n && same_pair(&d, prev(&d, start), start)) {
        start = prev(&d, start);
        steps++;
    }
    if (steps == d.n) {
        emit(&d, 0, prev(&d, 0), fn, ctx);
    } else {
        size_t k = start;
        do {
            size_t e = k;
            while (next(&d, e) != start && same_pair(&d, e, next(&d, e)))
                e = next(&d, e);
            emit(&d, k, e, fn, ctx);
            k = next(&d, e);
        } while (k != start);
    }
    free(d.bd);
    free(d.a_in_b);
    return 0;
}
