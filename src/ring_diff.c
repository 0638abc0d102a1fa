/* shard_ring_diff: the arcs whose owner differs between two rings. SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ring_layout.h"

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

/* A ring's side of the walk: its pins in hash order, and how far the walk has come in them and in its
 * points. */
struct side {
    const shard_ring      *r;
    const struct ring_pin *pins;
    size_t                 pos, pin;
};

/* The owner of the arc ending at boundary x (x increasing from call to call): its pin if x is a
 * pinned hash; else the member of the first point >= x. */
static int32_t owner_at(struct side *s, uint64_t x)
{
    const shard_ring *r = s->r;
    if (r->npoints == 0)
        return -1;
    while (s->pin < r->npins && s->pins[s->pin].hash < x)
        s->pin++;
    if (s->pin < r->npins && s->pins[s->pin].hash == x)
        return (int32_t)s->pins[s->pin].member;
    while (s->pos < r->npoints && r->points[s->pos] < x)
        s->pos++;
    return (int32_t)r->owners[s->pos == r->npoints ? 0 : s->pos];
}

/* Each pinned hash h of a ring is an arc of its own, (h - 1, h]: boundaries h - 1 and h, in order
 * (h = 0's h - 1 last). Return: how many (into out). */
static size_t pin_boundaries(const struct ring_pin *pins, size_t n, uint64_t *out)
{
    size_t k = 0;
    bool zero = n && pins[0].hash == 0;
    for (size_t i = 0; i < n; i++) {
        if (pins[i].hash != 0)
            out[k++] = pins[i].hash - 1;
        out[k++] = pins[i].hash;
    }
    if (zero)
        out[k++] = UINT64_MAX;
    return k;
}

/* Both rings' pin boundaries, merged in order. Return: how many (into out). */
static size_t merge_boundaries(const struct side *a, const struct side *b, uint64_t *tmp, uint64_t *out)
{
    size_t na = pin_boundaries(a->pins, a->r->npins, tmp);
    size_t nb = pin_boundaries(b->pins, b->r->npins, tmp + na);
    size_t i = 0, j = na, k = 0;
    while (i < na || j < na + nb)
        out[k++] = j == na + nb || (i < na && tmp[i] <= tmp[j]) ? tmp[i++] : tmp[j++];
    return k;
}

/* The union of both rings' points and the pins' boundaries, in order, each with both owners. */
static void collect_boundaries(struct diff *d, struct side *sa, struct side *sb, const uint64_t *pb_x, size_t npb)
{
    const shard_ring *a = d->ra, *b = d->rb;
    size_t i = 0, j = 0, k = 0;
    d->n = 0;
    while (i < a->npoints || j < b->npoints || k < npb) {
        uint64_t x = UINT64_MAX;
        if (i < a->npoints && a->points[i] < x)
            x = a->points[i];
        if (j < b->npoints && b->points[j] < x)
            x = b->points[j];
        if (k < npb && pb_x[k] < x)
            x = pb_x[k];
        while (i < a->npoints && a->points[i] == x)
            i++;
        while (j < b->npoints && b->points[j] == x)
            j++;
        while (k < npb && pb_x[k] == x)
            k++;
        d->bd[d->n++] = (struct boundary){ x, owner_at(sa, x), owner_at(sb, x) };
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

/* Rings with the same points_id differ at most in their pins, and their pin tries share every path
 * that neither changed since they parted: the arcs are the pinned hashes whose owners differ, found
 * under the trie's unshared paths only (pin_trie.h), so a placement's diff costs its own pins. */
struct changed {
    uint64_t hash;
    int32_t  a, b;
};

struct pin_changes {
    const shard_ring *a, *b;
    struct changed   *v;
    size_t            n, cap;
};

static int32_t owner_with(const shard_ring *r, uint64_t hash, uint32_t num)
{
    uint32_t m = num ? r->pin_member[num] : SHARD_PIN_GONE;
    return m != SHARD_PIN_GONE ? (int32_t)m : (int32_t)r->owners[shard__ring_find(r, hash)];
}

static int note_change(uint64_t hash, uint32_t num_a, uint32_t num_b, void *ctx)
{
    struct pin_changes *c = ctx;
    int32_t oa = owner_with(c->a, hash, num_a), ob = owner_with(c->b, hash, num_b);
    if (oa == ob)
        return 0;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        struct changed *v = realloc(c->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        c->v = v;
        c->cap = cap;
    }
    c->v[c->n++] = (struct changed){ hash, oa, ob };
    return 0;
}

static bool joins(const struct changed *x, const struct changed *y)
{
    return y->hash == x->hash + 1 && x->a == y->a && x->b == y->b;
}

/* The end of the run of consecutive hashes with one pair of owners that starts at v[i]. */
static size_t run_end(const struct pin_changes *c, size_t i)
{
    while (i + 1 < c->n && joins(&c->v[i], &c->v[i + 1]))
        i++;
    return i;
}

static void emit_run(const struct pin_changes *c, size_t first, size_t last, shard_diff_fn fn, void *ctx)
{
    const struct changed *e = &c->v[last];
    fn(c->v[first].hash - 1, e->hash, name_of(c->a, e->a), name_of(c->b, e->b), ctx);
}

/* As the walk over boundaries would report them (each changed hash h's arc (h - 1, h], runs of
 * consecutive ones with the same owners as one arc), clockwise from the arc holding hash 0: a run
 * through 2^64 - 1 and 0 comes first, as one. */
static int diff_pins_only(const shard_ring *a, const shard_ring *b, shard_diff_fn fn, void *ctx)
{
    struct pin_changes c = { a, b, NULL, 0, 0 };
    int err = shard__pin_diff(a->pins, b->pins, note_change, &c);
    if (err || c.n == 0) {
        free(c.v);
        return err;
    }
    size_t from = 0, to = c.n;
    const struct changed *v = c.v, *last = &v[c.n - 1];
    if (v[0].hash == 0 && last->hash == UINT64_MAX && last->a == v[0].a && last->b == v[0].b) {
        size_t last_start = c.n - 1, first_end = run_end(&c, 0);
        while (last_start > first_end + 1 && joins(&v[last_start - 1], &v[last_start]))
            last_start--; /* stops above first_end: one run from 0 to 2^64 - 1 would be every hash */
        fn(v[last_start].hash - 1, v[first_end].hash, name_of(a, v[0].a), name_of(b, v[0].b), ctx);
        from = first_end + 1;
        to = last_start;
    }
    for (size_t i = from; i < to; i++) {
        size_t e = run_end(&c, i); /* within [from, to): last_start begins a run */
        emit_run(&c, i, e, fn, ctx);
        i = e;
    }
    free(c.v);
    return 0;
}

SHARD_API int shard_ring_diff(const shard_ring *a, const shard_ring *b, shard_diff_fn fn, void *ctx)
{
    if (!a || !b || !fn)
        return -EINVAL;
    if (a->npoints + b->npoints == 0)
        return 0;
    if (a->points_id == b->points_id)
        return diff_pins_only(a, b, fn, ctx);
    struct diff d = { .ra = a, .rb = b };
    struct side sa = { a, NULL, 0, 0 }, sb = { b, NULL, 0, 0 };
    size_t npins = 2 * ((size_t)a->npins + b->npins);
    d.bd = malloc((a->npoints + b->npoints + npins) * sizeof *d.bd);
    d.a_in_b = malloc((a->nmembers ? a->nmembers : 1) * sizeof *d.a_in_b);
    uint64_t *pin_x = npins ? malloc(2 * npins * sizeof *pin_x) : NULL;
    struct ring_pin *pa = NULL, *pb = NULL;
    int err = -ENOMEM;
    if (!d.bd || !d.a_in_b || (npins && !pin_x) || shard__ring_pins_list(a, &pa) || shard__ring_pins_list(b, &pb))
        goto out;
    sa.pins = pa;
    sb.pins = pb;
    map_members(&d);
    collect_boundaries(&d, &sa, &sb, pin_x, npins ? merge_boundaries(&sa, &sb, pin_x + npins, pin_x) : 0);

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
    err = 0;
out:
    free(d.bd);
    free(d.a_in_b);
    free(pin_x);
    free(pa);
    free(pb);
    return err;
}
