/* kv_server: random members of collections (SRANDMEMBER HRANDFIELD ZRANDMEMBER).
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Replies and errors are Redis 7.0's (tests/kv/cmds_client.py compares them with redis-server's where
 * the reply does not depend on the draw, and checks the rest by its properties). A pick is one member:
 * a set's or hash's a random member of a random bucket that holds some (obj_map_random: as Redis's
 * pick, not quite uniform), a sorted set's that of a random rank (uniform, O(log n)).
 *   - Without a count, or a count of 1: one member (nil or an empty array when there is no key).
 *   - A count of n or more: every member, once each: a set's or hash's in its map's order, a sorted
 *     set's from the highest score down, as Redis gives them.
 *   - A smaller positive count: that many distinct members. Up to a quarter of the collection, picks
 *     with the members already chosen kept in a table (O(count) expected); beyond, or when the picks
 *     keep finding chosen members, one pass over the collection keeping each member with the odds
 *     that leave exactly count (Knuth's selection sampling: O(n)).
 *   - A negative count: that many picks, repeats allowed. Its reply is made of picks, not of what the
 *     collection holds, so nothing else bounds it: once it holds more than one pick and passes
 *     RANDOM_REPLY_MAX bytes it is refused with an error (Redis 7.0.15 builds it, and ZRANDMEMBER key
 *     -9223372036854775807 ends redis-server).
 * WITHVALUES and WITHSCORES add each member's value or score after it, and then a count must lie
 * within +-(2^63 - 1) / 2, as in Redis. Each reply is bounded as a range's (OBJ_MANY_REPLY_MAX), even
 * of one pick: a member is copied into it whatever its size, where a string's value is sent by
 * reference. */
#include <errno.h>
#include <stdlib.h>
#include <strings.h>

#include "obj_cmd.h"

/* The most bytes a reply of repeated picks may take (see above). */
#define RANDOM_REPLY_MAX (64u << 20)
#define ERR_TOO_LARGE "ERR the reply would exceed 64 MiB: kv_server bounds a reply of repeated picks"
#define ERR_RANGE "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
#define ERR_RANGE_WITH "ERR value is out of range"

/* One kind of collection: how to pick a member, walk them all, and put one into a reply. */
struct kind {
    enum kv_type type;
    size_t (*len)(const void *obj);
    const void *(*pick)(const void *obj);
    /* Calls fn for every member while it returns true, in the order a count of n or more answers. */
    void (*walk)(const void *obj, bool (*fn)(const void *m, void *ctx), void *ctx);
    /* The member, and its value or score when with. */
    void (*put)(struct buf *out, const void *m, bool with);
};

/* What a command was asked: counted (a count was given), the count's size and sign, with. */
struct ask {
    bool     counted, repeats, with;
    uint64_t count;
};

/* Sets and hashes: a kvmap of members (obj_map.c). */
static size_t map_len(const void *obj)
{
    return ((const struct kvmap *)obj)->n;
}

static const void *map_pick(const void *obj)
{
    return obj_map_random(obj);
}

struct map_walk {
    bool (*fn)(const void *m, void *ctx);
    void *ctx;
};

static bool map_step(const struct kv_entry *e, void *ctx)
{
    struct map_walk *w = ctx;
    return w->fn(e, w->ctx);
}

static void map_walk(const void *obj, bool (*fn)(const void *m, void *ctx), void *ctx)
{
    struct map_walk w = { fn, ctx };
    kvmap_range(obj, 0, UINT64_MAX, map_step, &w);
}

static void map_put(struct buf *out, const void *m, bool with)
{
    obj_put_member(out, m, with); /* with: a hash's WITHVALUES (a set has no option) */
}

/* Sorted sets: a skip list with ranks (obj_zset.c). */
static size_t zset_len(const void *obj)
{
    return obj_zset_len(obj);
}

static const void *zset_pick(const void *obj)
{
    return obj_zset_at(obj, (size_t)(obj_random() % obj_zset_len(obj)));
}

/* From the highest score down: the order Redis answers a count of n or more in. */
static void zset_walk(const void *obj, bool (*fn)(const void *m, void *ctx), void *ctx)
{
    size_t n = obj_zset_len(obj);
    const struct obj_znode *node = n ? obj_zset_at(obj, n - 1) : NULL;
    while (node && fn(node, ctx))
        node = obj_znode_prev(node);
}

static void zset_put(struct buf *out, const void *m, bool with)
{
    obj_put_znode(out, m, with);
}

static const struct kind set_kind = { KV_SET, map_len, map_pick, map_walk, map_put };
static const struct kind hash_kind = { KV_HASH, map_len, map_pick, map_walk, map_put };
static const struct kind zset_kind = { KV_ZSET, zset_len, zset_pick, zset_walk, zset_put };

/* The arguments after the key, in Redis's order of checks: SRANDMEMBER refuses more than a count
 * before it reads it; HRANDFIELD and ZRANDMEMBER read the count, then the option (with: its name).
 * Return: true; false with the error reply written. */
static bool parse_ask(struct request *r, const struct part *p, const char *with, struct ask *a)
{
    *a = (struct ask){ .counted = r->argc >= 3 };
    if (!with && r->argc > 3) {
        resp_error(part_out(r, p), OBJ_ERR_SYNTAX);
        return false;
    }
    if (!a->counted)
        return true;
    int64_t count;
    if (!obj_parse_index(r, p, &r->argv[2], &count))
        return false;
    if (count == INT64_MIN) {
        resp_error(part_out(r, p), ERR_RANGE);
        return false;
    }
    if (with && (r->argc > 4 || (r->argc == 4 && strcasecmp(r->argv[3].p, with) != 0))) {
        resp_error(part_out(r, p), OBJ_ERR_SYNTAX);
        return false;
    }
    a->with = r->argc == 4;
    if (a->with && (count < -(INT64_MAX / 2) || count > INT64_MAX / 2)) {
        resp_error(part_out(r, p), ERR_RANGE_WITH);
        return false;
    }
    a->repeats = count < 0;
    a->count = a->repeats ? (uint64_t)-count : (uint64_t)count;
    return true;
}

/* A table of the members chosen so far (pointers), open addressing: at most half full. */
struct chosen {
    const void **slot;
    size_t       mask, n;
};

/* Adds m. Return: true when it was not there yet. */
static bool chosen_add(struct chosen *c, const void *m)
{
    size_t i = ((uintptr_t)m * UINT64_C(0x9e3779b97f4a7c15)) >> 17 & c->mask;
    for (; c->slot[i]; i = (i + 1) & c->mask)
        if (c->slot[i] == m)
            return false;
    c->slot[i] = m;
    c->n++;
    return true;
}

/* Selection sampling: keeps each member with probability (wanted left) / (members left). */
struct sample {
    const struct kind *k;
    struct buf        *out;
    bool               with;
    uint64_t           left, wanted;
};

static bool sample_step(const void *m, void *ctx)
{
    struct sample *s = ctx;
    if (obj_random() % s->left < s->wanted) {
        s->k->put(s->out, m, s->with);
        s->wanted--;
    }
    s->left--;
    return s->wanted > 0;
}

/* count of obj's n members (count <= n) in one pass, in walk order, with their array's header: all of
 * them when count is n (each then kept with odds 1). */
static void put_sampled(const struct kind *k, const void *obj, size_t n, uint64_t count, bool with, struct buf *out)
{
    resp_array(out, (int64_t)(count * (with ? 2 : 1)));
    struct sample s = { k, out, with, n, count };
    k->walk(obj, sample_step, &s);
}

/* count distinct members of obj, which has n > count: picks while they find new members, else a
 * pass. Return: 0; -ENOMEM (nothing written). */
static int put_distinct(const struct kind *k, const void *obj, size_t n, const struct ask *a, struct buf *out)
{
    if (a->count <= n / 4) {
        size_t size = 4;
        while (size < 2 * a->count)
            size *= 2;
        struct chosen c = { calloc(size, sizeof *c.slot), size - 1, 0 };
        if (!c.slot)
            return -ENOMEM;
        /* Each pick finds a new member with odds of at least 3/4 if picks were uniform; a set's are not
         * quite, so the picks stop after 4 times the count, and the pass below decides. */
        for (uint64_t tries = 0; c.n < a->count && tries < 4 * a->count + 64; tries++)
            chosen_add(&c, k->pick(obj));
        if (c.n == a->count) {
            resp_array(out, (int64_t)(a->count * (a->with ? 2 : 1)));
            for (size_t i = 0; i <= c.mask; i++)
                if (c.slot[i])
                    k->put(out, c.slot[i], a->with);
        }
        free(c.slot);
        if (c.n == a->count)
            return 0;
    }
    put_sampled(k, obj, n, a->count, a->with, out);
    return 0;
}

/* count picks of obj, repeats allowed, within RANDOM_REPLY_MAX once there are two or more (one pick
 * is no more than the collection holds, whatever its size). */
static void put_repeated(const struct kind *k, const void *obj, const struct ask *a, struct buf *out)
{
    size_t start = out->len;
    resp_array(out, (int64_t)(a->count * (a->with ? 2 : 1)));
    for (uint64_t i = 0; i < a->count; i++) {
        k->put(out, k->pick(obj), a->with);
        if (i > 0 && out->len - start > RANDOM_REPLY_MAX) {
            out->len = start;
            resp_error(out, ERR_TOO_LARGE);
            return;
        }
    }
}

static void random_members(struct kv_store *s, struct request *r, const struct part *p, const struct kind *k,
                           const char *with)
{
    struct buf *out = part_out(r, p);
    struct ask a;
    struct kv_entry *e;
    if (!parse_ask(r, p, with, &a) || obj_lookup(s, r, p, k->type, &e) != 0)
        return;
    if (!a.counted) {
        if (e)
            k->put(out, k->pick(e->obj), false);
        else
            resp_null(out);
        return;
    }
    size_t n = e ? k->len(e->obj) : 0;
    if (n == 0 || a.count == 0) {
        resp_array(out, 0);
    } else if (a.repeats || a.count == 1) {
        put_repeated(k, e->obj, &a, out);
    } else if (a.count >= n) {
        put_sampled(k, e->obj, n, n, a.with, out);
    } else if (put_distinct(k, e->obj, n, &a, out) != 0) {
        resp_error(out, OBJ_ERR_OOM);
    }
}

static void srandmember(struct kv_store *s, struct request *r, const struct part *p)
{
    random_members(s, r, p, &set_kind, NULL);
}

static void hrandfield(struct kv_store *s, struct request *r, const struct part *p)
{
    random_members(s, r, p, &hash_kind, "WITHVALUES");
}

static void zrandmember(struct kv_store *s, struct request *r, const struct part *p)
{
    random_members(s, r, p, &zset_kind, "WITHSCORES");
}

static const struct command table[] = {
    { "SRANDMEMBER", -2, CMD_KEYED, 0, srandmember, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
    { "HRANDFIELD", -2, CMD_KEYED, 0, hrandfield, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
    { "ZRANDMEMBER", -2, CMD_KEYED, 0, zrandmember, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
};

const struct command_set cmds_random = { table, sizeof table / sizeof table[0] };
