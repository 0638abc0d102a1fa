/* Pinned hashes: key hashes whose owner is named, not found on the ring, for keys an operator or the
 * balancer places on a chosen member (dispatcher.h: shard_key_place). SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Kept in a pin trie (pin_trie.h) that clones share: a dispatcher publishes every placement as a
 * clone of the ring in force with one pin more, which then costs one path of the trie, not a copy of
 * every pin. Lookups ask it only in the buckets marked PINNED (ring_layout.h), and there only when
 * the pin filter (pin_filter.h), which clones share too, says the hash may be pinned. Every live pin
 * has its bit set in its ring's filter: a pin sets it, and a filter too full for one more is replaced
 * by one made from the ring's live pins before.
 *
 * Entries carry a number per member (ring_member.pin_no), mapped to the member's index by pin_member.
 * An add renumbers the members: only the map changes. A remove may not allocate, and the entries are
 * shared: its member's number maps to SHARD_PIN_GONE, and the entries with it, dead, are purged from
 * a new trie when there is memory for one (now, or at the next pin or unpin); until then they count
 * in pins_dead and read as absent. A number is given again only while no entry is dead, so no entry,
 * here or in a trie this one shares nodes with, has it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ring_layout.h"

static uint32_t member_of(const shard_ring *r, uint32_t num)
{
    return r->pin_member[num];
}

/* The live entries of a trie, as they are (numbers, not members): what a purge keeps. */
struct live_entries {
    const shard_ring *r;
    uint64_t         *hash;
    uint32_t         *num;
    uint32_t          n;
};

static int keep_live(uint64_t hash, uint32_t num, void *ctx)
{
    struct live_entries *l = ctx;
    if (member_of(l->r, num) != SHARD_PIN_GONE) {
        l->hash[l->n] = hash;
        l->num[l->n++] = num;
    }
    return 0;
}

/* Drops the dead entries into a new trie. Optional: without memory they stay. */
static void purge(shard_ring *r)
{
    size_t n = r->npins ? r->npins : 1;
    struct live_entries l = { r, malloc(n * sizeof *l.hash), malloc(n * sizeof *l.num), 0 };
    uintptr_t t = 0;
    if (l.hash && l.num) {
        shard__pin_each(r->pins, keep_live, &l);
        if (shard__pin_build(&t, l.hash, l.num, l.n) == 0) {
            shard__pin_unref(r->pins);
            r->pins = t;
            r->pins_dead = 0;
        }
    }
    free(l.hash);
    free(l.num);
}

/* The number of member m's pins: its own, else a free one, given to it. Return: 0; -ENOMEM (nothing
 * changed). */
static int number_of(shard_ring *r, uint32_t m, uint32_t *num)
{
    if (r->members[m].pin_no) {
        *num = r->members[m].pin_no;
        return 0;
    }
    uint32_t k = r->npin_numbers ? r->npin_numbers : 1; /* a new one, unless one is free */
    for (uint32_t j = 1; !r->pins_dead && j < r->npin_numbers; j++)
        if (r->pin_member[j] == SHARD_PIN_GONE) {
            k = j; /* a gone member's, free while no entry is dead (file header) */
            break;
        }
    if (k >= r->npin_numbers) {
        if (k + 1 > r->pin_numbers_cap) {
            uint32_t cap = r->pin_numbers_cap ? r->pin_numbers_cap * 2 : 8;
            uint32_t *p = realloc(r->pin_member, cap * sizeof *p);
            if (!p)
                return -ENOMEM;
            p[0] = SHARD_PIN_GONE; /* never a number */
            r->pin_member = p;
            r->pin_numbers_cap = cap;
        }
        r->npin_numbers = k + 1;
    }
    r->pin_member[k] = m;
    r->members[m].pin_no = k;
    *num = k;
    return 0;
}

static int filter_one(uint64_t hash, uint32_t member, void *ctx)
{
    (void)member;
    shard__pin_filter_add(ctx, hash);
    return 0;
}

/* A filter for r's pins with hash's bit among them: r's own (NULL) while hash's bit is set there or
 * one more fits; else a new one of r's live pins, which the caller installs once the pin is made (a
 * pin that fails later leaves r as it was, its filter too). O(pins) then, once in every pins-many new
 * bits at least: O(1) a pin, amortized. Return: 0; -ENOMEM. */
static int filter_for(const shard_ring *r, uint64_t hash, struct pin_filter **fresh)
{
    *fresh = NULL;
    if (r->pin_filter && (shard__pin_filter_may(r->pin_filter, hash) || !shard__pin_filter_full(r->pin_filter)))
        return 0;
    struct pin_filter *f = shard__pin_filter_new((size_t)r->npins + 1);
    if (!f)
        return -ENOMEM;
    shard__ring_pins_each(r, filter_one, f);
    *fresh = f;
    return 0;
}

SHARD_API int shard_ring_pin(shard_ring *r, uint64_t hash, const char *member)
{
    if (!r || !member)
        return -EINVAL;
    long m = shard__ring_member_index(r, member);
    if (m < 0)
        return -ENOENT;
    int64_t now = shard__ring_pinned(r, hash);
    if (now == m)
        return 0;
    if (now < 0 && r->npins == SHARD_RING_MAX_PINS)
        return -E2BIG;
    if (r->pins_dead)
        purge(r);
    uint32_t num, old;
    struct pin_filter *fresh;
    int err = filter_for(r, hash, &fresh);
    if (!err)
        err = number_of(r, (uint32_t)m, &num);
    if (!err)
        err = shard__pin_set(&r->pins, hash, num, &old);
    if (err) {
        shard__pin_filter_unref(fresh);
        return err; /* a number given and nodes copied change no pin */
    }
    if (fresh) {
        shard__pin_filter_unref(r->pin_filter);
        r->pin_filter = fresh;
    }
    shard__pin_filter_add(r->pin_filter, hash); /* before r, unpublished, can be read with the pin */
    if (now < 0) {
        r->npins++;
        if (old)
            r->pins_dead--; /* hash was pinned to a member gone */
        shard__ring_front_mark(r, hash);
    }
    return 0;
}

/* The sub-buckets of the bucket [lo, hi] that hold a live pin, a bit each: a search from each
 * sub-bucket that holds a pin jumps to the next, so a crowded bucket costs at most 8 searches (and
 * one more for each dead entry on the way). */
static uint32_t live_subs(const shard_ring *r, uint64_t lo, uint64_t hi)
{
    uint64_t h, from = lo;
    uint32_t num, subs = 0;
    while (shard__pin_next(r->pins, from, &h, &num) && h <= hi) {
        uint64_t next = h + 1;
        if (member_of(r, num) != SHARD_PIN_GONE) {
            subs |= 1u << shard__ring_front_sub(r, h);
            next = r->min + ((((h - r->min) >> r->sub_shift) + 1) << r->sub_shift);
        }
        if (next <= h || next > hi)
            break; /* past the end of the space, or of the bucket */
        from = next;
    }
    return subs;
}

SHARD_API int shard_ring_unpin(shard_ring *r, uint64_t hash)
{
    if (!r)
        return -EINVAL;
    if (shard__ring_pinned(r, hash) < 0)
        return -ENOENT;
    if (r->pins_dead)
        purge(r);
    uint32_t old;
    int err = shard__pin_del(&r->pins, hash, &old);
    if (err)
        return err;
    r->npins--;
    uint64_t lo, hi;
    if (shard__ring_front_bucket(r, hash, &lo, &hi))
        shard__ring_front_remark(r, hash, live_subs(r, lo, hi));
    return 0;
}

SHARD_API size_t shard_ring_pin_count(const shard_ring *r)
{
    return r ? r->npins : 0;
}

SHARD_API const char *shard_ring_pin_of(const shard_ring *r, uint64_t hash)
{
    int64_t m = r && r->npins ? shard__ring_pinned(r, hash) : -1;
    return m >= 0 ? r->members[m].name : NULL;
}

struct nth_live {
    const shard_ring *r;
    size_t            i;
    uint64_t          hash;
    uint32_t          num;
};

static int find_nth(uint64_t hash, uint32_t num, void *ctx)
{
    struct nth_live *n = ctx;
    if (member_of(n->r, num) == SHARD_PIN_GONE || n->i-- > 0)
        return 0;
    n->hash = hash;
    n->num = num;
    return 1;
}

SHARD_API int shard_ring_pin_at(const shard_ring *r, size_t i, uint64_t *hash, const char **member)
{
    if (!r)
        return -EINVAL;
    if (i >= r->npins)
        return -ERANGE;
    struct nth_live n = { r, i, 0, 0 };
    if (!r->pins_dead)
        shard__pin_at(r->pins, (uint32_t)i, &n.hash, &n.num); /* O(64 * depth) */
    else
        shard__pin_each(r->pins, find_nth, &n); /* O(pins), only until the dead are purged */
    if (hash)
        *hash = n.hash;
    if (member)
        *member = r->members[member_of(r, n.num)].name;
    return 0;
}

int shard__ring_pins_copy(shard_ring *c, const shard_ring *r)
{
    if (r->npin_numbers) {
        c->pin_member = malloc(r->npin_numbers * sizeof *c->pin_member);
        if (!c->pin_member)
            return -ENOMEM;
        memcpy(c->pin_member, r->pin_member, r->npin_numbers * sizeof *c->pin_member);
        c->npin_numbers = c->pin_numbers_cap = r->npin_numbers;
    }
    c->pins = shard__pin_ref(r->pins);
    c->pin_filter = shard__pin_filter_ref(r->pin_filter);
    c->npins = r->npins;
    c->pins_dead = r->pins_dead;
    return 0;
}

void shard__ring_pins_remap(shard_ring *r, const uint32_t *remap)
{
    for (uint32_t k = 1; k < r->npin_numbers; k++)
        if (r->pin_member[k] != SHARD_PIN_GONE)
            r->pin_member[k] = remap[r->pin_member[k]];
}

struct count_num {
    uint32_t num, n;
};

static int count_num(uint64_t hash, uint32_t num, void *ctx)
{
    struct count_num *c = ctx;
    (void)hash;
    c->n += num == c->num;
    return 0;
}

void shard__ring_pins_drop_member(shard_ring *r, uint32_t gone)
{
    for (size_t i = gone + 1; i < r->nmembers; i++)
        if (r->members[i].pin_no)
            r->pin_member[r->members[i].pin_no]--;
    uint32_t num = r->members[gone].pin_no;
    if (!num)
        return;
    struct count_num c = { num, 0 };
    shard__pin_each(r->pins, count_num, &c);
    r->pin_member[num] = SHARD_PIN_GONE;
    r->npins -= c.n;
    r->pins_dead += c.n;
    if (r->pins_dead)
        purge(r);
}

static int mark_one(uint64_t hash, uint32_t member, void *ctx)
{
    (void)member;
    shard__ring_front_mark(ctx, hash);
    return 0;
}

void shard__ring_pins_mark(shard_ring *r)
{
    shard__ring_pins_each(r, mark_one, r);
}

void shard__ring_pins_free(shard_ring *r)
{
    shard__pin_unref(r->pins);
    shard__pin_filter_unref(r->pin_filter);
    free(r->pin_member);
}

struct pin_list {
    struct ring_pin *v;
    uint32_t         n;
};

static int list_one(uint64_t hash, uint32_t member, void *ctx)
{
    struct pin_list *l = ctx;
    l->v[l->n++] = (struct ring_pin){ hash, member };
    return 0;
}

int shard__ring_pins_list(const shard_ring *r, struct ring_pin **out)
{
    *out = NULL;
    if (!r->npins)
        return 0;
    struct pin_list l = { malloc(r->npins * sizeof *l.v), 0 };
    if (!l.v)
        return -ENOMEM;
    shard__ring_pins_each(r, list_one, &l);
    *out = l.v;
    return 0;
}

struct each_live {
    const shard_ring *r;
    int (*fn)(uint64_t hash, uint32_t member, void *ctx);
    void *ctx;
};

static int each_live(uint64_t hash, uint32_t num, void *ctx)
{
    const struct each_live *e = ctx;
    uint32_t m = member_of(e->r, num);
    return m == SHARD_PIN_GONE ? 0 : e->fn(hash, m, e->ctx);
}

int shard__ring_pins_each(const shard_ring *r, int (*fn)(uint64_t hash, uint32_t member, void *ctx), void *ctx)
{
    struct each_live e = { r, fn, ctx };
    return shard__pin_each(r->pins, each_live, &e);
}
