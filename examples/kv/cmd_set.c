/* kv_server: commands of sets (SADD SREM SPOP SMEMBERS SCARD SISMEMBER SMISMEMBER, and SINTER SUNION
 * SDIFF SINTERSTORE SUNIONSTORE SDIFFSTORE).
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A set is a kvmap of members with no values (obj_map.c): O(1) per member named or popped, O(n) for
 * SMEMBERS. Replies and errors are Redis 7.0's; the order of SMEMBERS and which members SPOP picks are
 * as arbitrary as Redis's. SINTER, SUNION and SDIFF read every key's set at once, on one worker
 * (cross.h), so they see one state of all their keys, as in Redis; their *STORE forms write the
 * destination in the same step. */
#include "cross.h"
#include "obj_cmd.h"

/* Out of memory midway leaves the members before it added (but a key it would have made is not made). */
static void sadd(struct kv_store *s, struct request *r, const struct part *p)
{
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_SET, &e) != 0)
        return;
    struct kvmap *m = e ? e->obj : obj_map_new();
    int64_t added = 0;
    bool oom = !m;
    for (uint32_t i = 2; i < r->argc && !oom; i++) {
        const struct resp_arg *a = &r->argv[i];
        uint64_t hash = kv_hash(a->p, a->len);
        if (kvmap_find(m, hash, a->p, a->len))
            continue;
        struct kv_entry *member = obj_member_new(hash, a->p, a->len, NULL, 0);
        if (member)
            kvmap_insert(m, member);
        oom = !member;
        added += !oom;
    }
    if (!e && m && (oom || obj_store(s, r, p, KV_SET, m) != 0)) {
        obj_map_free(m);
        oom = true;
    }
    if (oom)
        resp_error(part_out(r, p), OBJ_ERR_OOM);
    else
        resp_int(part_out(r, p), added);
}

static void srem(struct kv_store *s, struct request *r, const struct part *p)
{
    obj_map_remove(s, r, p, KV_SET);
}

static bool put_member(const struct kv_entry *m, void *ctx)
{
    obj_put_member(ctx, m, false);
    return true;
}

/* Pops one member into the reply. */
static void pop_one(struct kvmap *m, struct buf *out)
{
    struct kv_entry *member = obj_map_take_random(m);
    obj_put_member(out, member, false);
    kv_entry_free(member);
}

/* Without a count one member (nil when there is none); with one an array of up to count. Asked for
 * all, it answers every member and deletes the key without picking them one by one. */
static void spop(struct kv_store *s, struct request *r, const struct part *p)
{
    struct buf *out = part_out(r, p);
    int64_t count;
    if (!obj_pop_count(r, p, false, &count))
        return;
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_SET, &e) != 0)
        return;
    struct kvmap *m = e ? e->obj : NULL;
    bool all = false;
    if (r->argc == 2) {
        if (m)
            pop_one(m, out);
        else
            resp_null(out);
    } else if (!m || (uint64_t)count < m->n) {
        resp_array(out, m ? count : 0);
        for (int64_t i = 0; m && i < count; i++)
            pop_one(m, out);
    } else {
        resp_array(out, (int64_t)m->n);
        kvmap_range(m, 0, UINT64_MAX, put_member, out);
        all = true; /* the members go with the key */
    }
    if (m && (all || m->n == 0))
        obj_drop(s, r, p);
}

static void smembers(struct kv_store *s, struct request *r, const struct part *p)
{
    struct buf *out = part_out(r, p);
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_SET, &e) != 0)
        return;
    struct kvmap *m = e ? e->obj : NULL;
    resp_array(out, m ? (int64_t)m->n : 0);
    if (m)
        kvmap_range(m, 0, UINT64_MAX, put_member, out);
}

static void scard(struct kv_store *s, struct request *r, const struct part *p)
{
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_SET, &e) == 0)
        resp_int(part_out(r, p), e ? (int64_t)((struct kvmap *)e->obj)->n : 0);
}

static void sismember(struct kv_store *s, struct request *r, const struct part *p)
{
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_SET, &e) != 0)
        return;
    const struct resp_arg *a = &r->argv[2];
    resp_int(part_out(r, p), e && kvmap_find(e->obj, kv_hash(a->p, a->len), a->p, a->len));
}

/* SMISMEMBER key member...: for each member, 1 or 0. */
static void smismember(struct kv_store *s, struct request *r, const struct part *p)
{
    struct buf *out = part_out(r, p);
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_SET, &e) != 0)
        return;
    resp_array(out, (int64_t)r->argc - 2);
    for (uint32_t i = 2; i < r->argc; i++) {
        const struct resp_arg *a = &r->argv[i];
        resp_int(out, e && kvmap_find(e->obj, kv_hash(a->p, a->len), a->p, a->len));
    }
}

enum set_op { SET_INTER, SET_UNION, SET_DIFF };

/* One of SINTER, SUNION, SDIFF (or their *STORE) under way: the member walked, from set `from` (a
 * part's index), is kept or not by the other sets; what is kept goes to out, or into a new set. */
struct set_walk {
    struct request *r;
    enum set_op     op;
    uint32_t        first; /* the first part of a set: 0, or 1 after the destination of a *STORE */
    uint32_t        from;
    struct buf      out;   /* the members kept, as a reply's, when into is NULL */
    struct kvmap   *into;  /* else each is copied into it */
    int64_t         n;
    bool            nomem;
};

static bool in_set(struct request *r, uint32_t i, const struct kv_entry *m)
{
    struct kv_entry *e = *cross_entry(r, i);
    return e && kvmap_find(e->obj, m->hash, m->key, m->klen);
}

/* Whether part i is the first of the sets to name its key (a key named twice is one set; the
 * destination of a *STORE, before the sets, does not count). */
static bool first_naming(const struct set_walk *w, uint32_t i)
{
    uint32_t same = w->r->parts[i].same;
    return same == i || same < w->first;
}

/* SINTER: in every other set; SDIFF: in none of the others; SUNION: in no set before this one (each
 * member once). */
static bool keep(struct set_walk *w, const struct kv_entry *m)
{
    for (uint32_t i = w->first; i < w->r->nparts; i++) {
        if (w->op == SET_UNION ? i >= w->from || !first_naming(w, i) : i == w->from)
            continue;
        if (in_set(w->r, i, m) != (w->op == SET_INTER))
            return false;
    }
    return true;
}

static bool walk_member(const struct kv_entry *m, void *ctx)
{
    struct set_walk *w = ctx;
    if (!keep(w, m))
        return true;
    if (!w->into) {
        obj_put_member(&w->out, m, false);
    } else {
        struct kv_entry *copy = obj_member_new(m->hash, m->key, m->klen, NULL, 0);
        if (!copy) {
            w->nomem = true;
            return false;
        }
        kvmap_insert(w->into, copy);
    }
    w->n++;
    return true;
}

static void walk_set(struct set_walk *w, uint32_t from)
{
    struct kv_entry *e = *cross_entry(w->r, from);
    w->from = from;
    if (e && !w->nomem)
        kvmap_range(e->obj, 0, UINT64_MAX, walk_member, w);
}

/* The sets' SINTER, SUNION or SDIFF into w: SINTER walks its smallest set (none when a key does not
 * exist), SDIFF its first, SUNION each. Return: false, WRONGTYPE replied, when a key of the sets holds
 * another type (every key is looked at first, as in Redis). */
static bool set_walk(struct set_walk *w, const struct part *p)
{
    struct request *r = w->r;
    uint32_t smallest = w->first;
    for (uint32_t i = w->first; i < r->nparts; i++) {
        struct kv_entry *e = *cross_entry(r, i);
        if (e && e->type != KV_SET) {
            resp_error(part_out(r, p), WRONGTYPE);
            return false;
        }
        size_t n = e ? ((struct kvmap *)e->obj)->n : 0, least = *cross_entry(r, smallest)
            ? ((struct kvmap *)(*cross_entry(r, smallest))->obj)->n : 0;
        if (n < least)
            smallest = i;
    }
    if (w->op == SET_UNION)
        for (uint32_t i = w->first; i < r->nparts; i++)
            walk_set(w, i);
    else
        walk_set(w, w->op == SET_INTER ? smallest : w->first);
    return true;
}

/* SINTER, SUNION, SDIFF: the members, as an array. */
static void set_op(struct request *r, const struct part *p, enum set_op op)
{
    struct set_walk w = { .r = r, .op = op };
    if (set_walk(&w, p))
        resp_array_of(part_out(r, p), w.n, &w.out);
    else
        buf_free(&w.out);
}

/* SINTERSTORE, SUNIONSTORE, SDIFFSTORE destination key...: the members made the destination's set,
 * whatever it held (an empty result deletes it), and their count. The result is made whole before
 * the destination is touched: out of memory for it leaves the destination as it was (for its entry,
 * made after the old one is gone, the destination is then deleted). */
static void store_op(struct request *r, const struct part *p, enum set_op op)
{
    struct buf *out = part_out(r, p);
    struct set_walk w = { .r = r, .op = op, .first = 1, .into = obj_map_new() };
    if (!w.into) {
        resp_error(out, OBJ_ERR_OOM);
        return;
    }
    if (!set_walk(&w, p) || w.nomem) {
        if (w.nomem)
            resp_error(out, OBJ_ERR_OOM);
        obj_map_free(w.into);
        return;
    }
    if (*cross_entry(r, 0))
        cross_drop(r, 0);
    if (w.n == 0 || cross_make(r, 0, KV_SET, w.into, 0) != 0) {
        obj_map_free(w.into);
        if (w.n) {
            resp_error(out, OBJ_ERR_OOM);
            return;
        }
    }
    resp_int(out, w.n);
}

static void sinter_decide(struct kv_store *s, struct request *r, const struct part *p)
{
    (void)s;
    set_op(r, p, SET_INTER);
}

static void sunion_decide(struct kv_store *s, struct request *r, const struct part *p)
{
    (void)s;
    set_op(r, p, SET_UNION);
}

static void sdiff_decide(struct kv_store *s, struct request *r, const struct part *p)
{
    (void)s;
    set_op(r, p, SET_DIFF);
}

static void sinterstore_decide(struct kv_store *s, struct request *r, const struct part *p)
{
    (void)s;
    store_op(r, p, SET_INTER);
}

static void sunionstore_decide(struct kv_store *s, struct request *r, const struct part *p)
{
    (void)s;
    store_op(r, p, SET_UNION);
}

static void sdiffstore_decide(struct kv_store *s, struct request *r, const struct part *p)
{
    (void)s;
    store_op(r, p, SET_DIFF);
}

static void sinter(struct kv_store *s, struct request *r, const struct part *p)
{
    cross_part(s, r, p, sinter_decide);
}

static void sunion(struct kv_store *s, struct request *r, const struct part *p)
{
    cross_part(s, r, p, sunion_decide);
}

static void sdiff(struct kv_store *s, struct request *r, const struct part *p)
{
    cross_part(s, r, p, sdiff_decide);
}

static void sinterstore(struct kv_store *s, struct request *r, const struct part *p)
{
    cross_part(s, r, p, sinterstore_decide);
}

static void sunionstore(struct kv_store *s, struct request *r, const struct part *p)
{
    cross_part(s, r, p, sunionstore_decide);
}

static void sdiffstore(struct kv_store *s, struct request *r, const struct part *p)
{
    cross_part(s, r, p, sdiffstore_decide);
}

static const struct command table[] = {
    { "SADD", -3, CMD_KEYED, 0, sadd, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
    { "SREM", -3, CMD_KEYED, 0, srem, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
    { "SPOP", -2, CMD_KEYED, 0, spop, NULL, NULL, OBJ_MANY_REPLY_MAX, obj_pop_reply_bound, false, WRITES },
    { "SMEMBERS", 2, CMD_KEYED, 0, smembers, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
    { "SCARD", 2, CMD_KEYED, 0, scard, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, READS },
    { "SISMEMBER", 3, CMD_KEYED, 0, sismember, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, READS },
    { "SMISMEMBER", -3, CMD_KEYED, 0, smismember, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
    { "SINTER", -2, CMD_KEYED, 1, sinter, NULL, NULL, OBJ_MANY_REPLY_MAX, large_reply_bound, ATOMIC_CROSS, READS },
    { "SUNION", -2, CMD_KEYED, 1, sunion, NULL, NULL, OBJ_MANY_REPLY_MAX, large_reply_bound, ATOMIC_CROSS, READS },
    { "SDIFF", -2, CMD_KEYED, 1, sdiff, NULL, NULL, OBJ_MANY_REPLY_MAX, large_reply_bound, ATOMIC_CROSS, READS },
    { "SINTERSTORE", -3, CMD_KEYED, 1, sinterstore, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, ATOMIC_CROSS,
      WRITES_FIRST },
    { "SUNIONSTORE", -3, CMD_KEYED, 1, sunionstore, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, ATOMIC_CROSS,
      WRITES_FIRST },
    { "SDIFFSTORE", -3, CMD_KEYED, 1, sdiffstore, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, ATOMIC_CROSS,
      WRITES_FIRST },
};

const struct command_set cmds_set = { table, sizeof table / sizeof table[0] };
