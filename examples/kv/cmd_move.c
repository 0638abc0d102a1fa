/* kv_server: commands that move a value from key to key (RENAME, RENAMENX, SMOVE, LMOVE, RPOPLPUSH)
 * or set several keys only if none exists (MSETNX). SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Their keys may live on different workers: each is decided in its last part with every key's entry
 * in hand, and is one step to other clients whatever workers the keys live on (cross.h). Replies,
 * errors and the order they are checked in are Redis 7.0's (t_string.c, db.c, t_set.c, t_list.c). */
#include <strings.h>

#include "cross.h"
#include "expire.h"
#include "obj_cmd.h"

/* The source's value (a copy of a string's bytes, a collection's object itself) under the
 * destination's key, with the source's time to live, as Redis's RENAME keeps it. Return: 0; -ENOMEM
 * (nothing changed). */
static int rename_entry(struct request *r)
{
    struct kv_entry **dst = cross_entry(r, 1), *src = *cross_entry(r, 0), *was = *dst;
    bool string = src->type == KV_STRING;
    *dst = NULL;
    int err = string ? cross_make(r, 1, KV_STRING, src->val->data, src->val->len)
                     : cross_make(r, 1, src->type, src->obj, 0);
    if (!err && expire_at(src))
        err = expire_set(*dst, expire_at(src));
    if (err) {
        if (*dst && !string)
            (*dst)->obj = NULL; /* the object stays the source's */
        kv_entry_free(*dst);
        *dst = was;
        return err;
    }
    if (!string)
        src->obj = NULL; /* now the destination's */
    if (was) {
        expire_clear(was);
        kv_entry_free(was);
    }
    cross_drop(r, 0);
    return 0;
}

/* RENAME and RENAMENX (nx): a missing source is an error, a key renamed to itself stays as it is. */
static void rename_with(struct request *r, const struct part *p, bool nx)
{
    struct buf *out = part_out(r, p);
    if (!*cross_entry(r, 0))
        resp_error(out, "ERR no such key");
    else if (cross_entry(r, 0) == cross_entry(r, 1) || (nx && *cross_entry(r, 1)))
        nx ? resp_int(out, 0) : resp_simple(out, "OK");
    else if (rename_entry(r) != 0)
        resp_error(out, OBJ_ERR_OOM);
    else
        nx ? resp_int(out, 1) : resp_simple(out, "OK");
}

static void rename_decide(struct kv_store *s, struct request *r, const struct part *p)
{
    (void)s;
    rename_with(r, p, false);
}

static void renamenx_decide(struct kv_store *s, struct request *r, const struct part *p)
{
    (void)s;
    rename_with(r, p, true);
}

static void rename_part(struct kv_store *s, struct request *r, const struct part *p)
{
    cross_part(s, r, p, rename_decide);
}

static void renamenx_part(struct kv_store *s, struct request *r, const struct part *p)
{
    cross_part(s, r, p, renamenx_decide);
}

/* MSETNX: nothing when any key exists; else every pair set (a key named twice gets its last value),
 * all or none. */
static void msetnx_decide(struct kv_store *s, struct request *r, const struct part *p)
{
    (void)s;
    for (uint32_t i = 0; i < r->nparts; i++)
        if (*cross_entry(r, i)) {
            resp_int(part_out(r, p), 0);
            return;
        }
    bool oom = false;
    for (uint32_t i = 0; i < r->nparts && !oom; i++) {
        const struct resp_arg *v = &r->argv[r->parts[i].arg + 1];
        struct kv_entry **e = cross_entry(r, i);
        oom = *e ? kv_entry_set(*e, v->p, v->len) != 0 : cross_make(r, i, KV_STRING, v->p, v->len) != 0;
    }
    for (uint32_t i = 0; i < r->nparts && oom; i++)
        if (*cross_entry(r, i))
            cross_drop(r, i); /* none existed before: take back what was made */
    if (oom)
        resp_error(part_out(r, p), OBJ_ERR_OOM);
    else
        resp_int(part_out(r, p), 1);
}

static void msetnx_part(struct kv_store *s, struct request *r, const struct part *p)
{
    cross_part(s, r, p, msetnx_decide);
}

/* Whether part i's key holds type or nothing; WRONGTYPE replied otherwise. */
static bool of_type(struct request *r, const struct part *p, uint32_t i, enum kv_type type)
{
    struct kv_entry *e = *cross_entry(r, i);
    if (e && e->type != type) {
        resp_error(part_out(r, p), WRONGTYPE);
        return false;
    }
    return true;
}

/* The destination's collection, made (an empty one, for the key to hold once it has a member) when
 * the key does not exist. NULL without memory. */
static void *dst_object(struct request *r, enum kv_type type, bool *made)
{
    *made = !*cross_entry(r, 1);
    if (!*made)
        return (*cross_entry(r, 1))->obj;
    void *obj = type == KV_SET ? (void *)obj_map_new() : (void *)obj_list_new();
    if (obj && cross_make(r, 1, type, obj, 0) != 0) {
        kv_obj_free(type, obj);
        obj = NULL;
    }
    return obj;
}

/* SMOVE src dst member: 0 when src does not exist, before any type is checked, as Redis. The member's
 * own entry moves from one set to the other. */
static void smove_decide(struct kv_store *s, struct request *r, const struct part *p)
{
    (void)s;
    struct buf *out = part_out(r, p);
    const struct resp_arg *m = &r->argv[3];
    uint64_t hash = kv_hash(m->p, m->len);
    if (!*cross_entry(r, 0)) {
        resp_int(out, 0);
        return;
    }
    if (!of_type(r, p, 0, KV_SET) || !of_type(r, p, 1, KV_SET))
        return;
    struct kvmap *from = (*cross_entry(r, 0))->obj;
    bool has = kvmap_find(from, hash, m->p, m->len) != NULL;
    if (cross_entry(r, 0) == cross_entry(r, 1) || !has) {
        resp_int(out, has);
        return;
    }
    bool made;
    struct kvmap *to = dst_object(r, KV_SET, &made);
    if (!to) {
        resp_error(out, OBJ_ERR_OOM);
        return;
    }
    struct kv_entry *member = obj_map_take(from, hash, m->p, m->len);
    if (kvmap_find(to, hash, m->p, m->len))
        kv_entry_free(member);
    else
        kvmap_insert(to, member);
    if (from->n == 0)
        cross_drop(r, 0);
    resp_int(out, 1);
}

static void smove_part(struct kv_store *s, struct request *r, const struct part *p)
{
    cross_part(s, r, p, smove_decide);
}

/* LEFT or RIGHT (any case): *left. Return: false for anything else. */
static bool parse_end(const struct resp_arg *a, bool *left)
{
    *left = strcasecmp(a->p, "LEFT") == 0;
    return *left || strcasecmp(a->p, "RIGHT") == 0;
}

/* LMOVE and RPOPLPUSH: the ends are checked first, then the source (nil when it does not exist),
 * then both types, as Redis. A list moved onto itself rotates. */
static void lmove_with(struct request *r, const struct part *p, bool from_left, bool to_left)
{
    struct buf *out = part_out(r, p);
    if (!*cross_entry(r, 0)) {
        resp_null(out);
        return;
    }
    if (!of_type(r, p, 0, KV_LIST) || !of_type(r, p, 1, KV_LIST))
        return;
    bool made;
    struct obj_list *to = dst_object(r, KV_LIST, &made);
    if (!to || obj_list_reserve(to, 1) != 0) {
        if (to && made)
            cross_drop(r, 1);
        resp_error(out, OBJ_ERR_OOM);
        return;
    }
    struct obj_list *from = (*cross_entry(r, 0))->obj;
    struct kv_value *v = obj_list_pop(from, from_left);
    obj_list_push(to, to_left, v); /* room reserved; a pop that shrinks the ring leaves room */
    obj_reply_value(r, p, v, false);
    if (obj_list_len(from) == 0)
        cross_drop(r, 0);
}

static void lmove_decide(struct kv_store *s, struct request *r, const struct part *p)
{
    (void)s;
    bool from_left, to_left;
    if (!parse_end(&r->argv[3], &from_left) || !parse_end(&r->argv[4], &to_left))
        resp_error(part_out(r, p), OBJ_ERR_SYNTAX);
    else
        lmove_with(r, p, from_left, to_left);
}

static void rpoplpush_decide(struct kv_store *s, struct request *r, const struct part *p)
{
    (void)s;
    lmove_with(r, p, false, true);
}

static void lmove_part(struct kv_store *s, struct request *r, const struct part *p)
{
    cross_part(s, r, p, lmove_decide);
}

static void rpoplpush_part(struct kv_store *s, struct request *r, const struct part *p)
{
    cross_part(s, r, p, rpoplpush_decide);
}

static const struct command table[] = {
    { "RENAME", 3, CMD_KEYED, 1, rename_part, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, ATOMIC_CROSS, WRITES },
    { "RENAMENX", 3, CMD_KEYED, 1, renamenx_part, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, ATOMIC_CROSS, WRITES },
    { "MSETNX", -3, CMD_KEYED, 2, msetnx_part, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, ATOMIC_CROSS, WRITES },
    { "SMOVE", 4, CMD_KEYED, -2, smove_part, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, ATOMIC_CROSS, WRITES },
    { "LMOVE", 5, CMD_KEYED, -2, lmove_part, NULL, NULL, OBJ_ONE_REPLY_MAX, NULL, ATOMIC_CROSS, WRITES },
    { "RPOPLPUSH", 3, CMD_KEYED, 1, rpoplpush_part, NULL, NULL, OBJ_ONE_REPLY_MAX, NULL, ATOMIC_CROSS, WRITES },
};

const struct command_set cmds_move = { table, sizeof table / sizeof table[0] };
