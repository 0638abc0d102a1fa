/* kv_server: commands of sets (SADD SREM SPOP SMEMBERS SCARD SISMEMBER SMISMEMBER, and SINTER SUNION
 * SDIFF).
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A set is a kvmap of members with no values (obj_map.c): O(1) per member named or popped, O(n) for
 * SMEMBERS. Replies and errors are Redis 7.0's; the order of SMEMBERS and which members SPOP picks are
 * as arbitrary as Redis's. SINTER, SUNION and SDIFF read every key's set at once, on one worker
 * (cross.h), so they see one state of all their keys, as in Redis. */
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
        if (kvmap_find(m, kv_hash(a->p, a->len), a->p, a->len))
            continue;
        struct kv_entry *member = obj_member_new(a->p, a->len, NULL, 0);
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

/* One of SINTER, SUNION, SDIFF under way: the member walked, from set `from` (a part's index), is
 * kept or not by the other sets; what is kept goes to out. */
struct set_walk {
    struct request *r;
    enum set_op     op;
    uint32_t        from;
    struct buf      out;
    int64_t         n;
};

static bool in_set(struct request *r, uint32_t i, const struct kv_entry *m)
{
    struct kv_entry *e = *cross_entry(r, i);
    return e && kvmap_find(e->obj, m->hash, m->key, m->klen);
}

/* SINTER: in every other set; SDIFF: in none of the others; SUNION: in no set before this one (each
 * member once). A key named twice is one set. */
static bool keep(struct set_walk *w, const struct kv_entry *m)
{
    for (uint32_t i = 0; i < w->r->nparts; i++) {
        if (w->op == SET_UNION ? i >= w->from || w->r->parts[i].same != i : i == w->from)
            continue;
        if (in_set(w->r, i, m) != (w->op == SET_INTER))
            return false;
    }
    return true;
}

static bool walk_member(const struct kv_entry *m, void *ctx)
{
    struct set_walk *w = ctx;
    if (keep(w, m)) {
        obj_put_member(&w->out, m, false);
        w->n++;
    }
    return true;
}

static void walk_set(struct set_walk *w, uint32_t from)
{
    struct kv_entry *e = *cross_entry(w->r, from);
    w->from = from;
    if (e)
        kvmap_range(e->obj, 0, UINT64_MAX, walk_member, w);
}

/* SINTER walks its smallest set (none when a key does not exist), SDIFF its first, SUNION each. */
static void set_op(struct request *r, const struct part *p, enum set_op op)
{
    struct set_walk w = { r, op, 0, { 0 }, 0 };
    uint32_t smallest = 0;
    for (uint32_t i = 0; i < r->nparts; i++) {
        struct kv_entry *e = *cross_entry(r, i);
        if (e && e->type != KV_SET) {
            resp_error(part_out(r, p), WRONGTYPE);
            return;
        }
        size_t n = e ? ((struct kvmap *)e->obj)->n : 0, least = *cross_entry(r, smallest)
            ? ((struct kvmap *)(*cross_entry(r, smallest))->obj)->n : 0;
        if (n < least)
            smallest = i;
    }
    if (op == SET_UNION)
        for (uint32_t i = 0; i < r->nparts; i++)
            walk_set(&w, i);
    else
        walk_set(&w, op == SET_INTER ? smallest : 0);
    resp_array(part_out(r, p), w.n);
    buf_put(part_out(r, p), w.out.p, w.out.len);
    if (w.out.failed)
        part_out(r, p)->failed = true;
    buf_free(&w.out);
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
};

const struct command_set cmds_set = { table, sizeof table / sizeof table[0] };
