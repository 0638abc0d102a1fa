/* kv_server: commands of hashes (HSET HMSET HSETNX HGET HMGET HGETALL HKEYS HVALS HDEL HLEN HEXISTS
 * HSTRLEN HINCRBY).
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A hash is a kvmap of fields (obj_map.c): O(1) per field named, O(n) for HGETALL, HKEYS and HVALS.
 * Replies and errors are Redis 7.0's; HGETALL's order is the map's, as arbitrary as Redis's. */
#include <errno.h>

#include "obj_cmd.h"
#include "watch.h"

/* Sets one field. Return: 1 new, 0 replaced, -ENOMEM (unchanged). */
static int set_field(struct kvmap *m, const struct resp_arg *f, const struct resp_arg *v)
{
    uint64_t hash = kv_hash(f->p, f->len);
    struct kv_entry *e = kvmap_find(m, hash, f->p, f->len);
    if (e)
        return kv_entry_set(e, v->p, v->len);
    e = obj_member_new(hash, f->p, f->len, v->p, v->len);
    if (!e)
        return -ENOMEM;
    kvmap_insert(m, e);
    return 1;
}

/* HSET and HMSET. Return: fields added; -1 when an error is the reply. Out of memory midway leaves the
 * pairs before it set (but a key it would have made is not made). */
static int64_t set_pairs(struct kv_store *s, struct request *r, const struct part *p)
{
    struct kv_entry *e;
    if (r->argc % 2 != 0) {
        obj_reply_arity(r, p);
        return -1;
    }
    if (obj_lookup(s, r, p, KV_HASH, &e) != 0)
        return -1;
    struct kvmap *m = e ? e->obj : obj_map_new();
    int64_t added = 0;
    int got = m ? 0 : -ENOMEM;
    for (uint32_t i = 2; i < r->argc && got >= 0; i += 2) {
        got = set_field(m, &r->argv[i], &r->argv[i + 1]);
        added += got > 0;
    }
    if (!e && m && (got < 0 || obj_store(s, r, p, KV_HASH, m) != 0)) {
        obj_map_free(m);
        got = -ENOMEM;
    }
    if (got < 0) {
        resp_error(part_out(r, p), OBJ_ERR_OOM);
        return -1;
    }
    return added;
}

static void hset(struct kv_store *s, struct request *r, const struct part *p)
{
    int64_t added = set_pairs(s, r, p);
    if (added >= 0)
        resp_int(part_out(r, p), added);
}

static void hmset(struct kv_store *s, struct request *r, const struct part *p)
{
    if (set_pairs(s, r, p) >= 0)
        resp_simple(part_out(r, p), "OK");
}

static struct kv_entry *field_of(const struct kv_entry *e, const struct resp_arg *f)
{
    return kvmap_find(e->obj, kv_hash(f->p, f->len), f->p, f->len);
}

static void hget(struct kv_store *s, struct request *r, const struct part *p)
{
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_HASH, &e) != 0)
        return;
    struct kv_entry *f = e ? field_of(e, &r->argv[2]) : NULL;
    if (f)
        obj_reply_value(r, p, f->val, false);
    else
        resp_null(part_out(r, p));
}

/* HMGET: each field's value, nil where there is none; copied, so bounded as a range. */
static void hmget(struct kv_store *s, struct request *r, const struct part *p)
{
    struct buf *out = part_out(r, p);
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_HASH, &e) != 0)
        return;
    resp_array(out, (int64_t)r->argc - 2);
    for (uint32_t i = 2; i < r->argc; i++) {
        struct kv_entry *f = e ? field_of(e, &r->argv[i]) : NULL;
        if (f)
            obj_put_bulk(out, f->val->data, f->val->len);
        else
            resp_null(out);
    }
}

static bool put_pair(const struct kv_entry *f, void *ctx)
{
    obj_put_member(ctx, f, true);
    return true;
}

static bool put_field(const struct kv_entry *f, void *ctx)
{
    obj_put_member(ctx, f, false);
    return true;
}

static bool put_value(const struct kv_entry *f, void *ctx)
{
    obj_put_bulk(ctx, f->val->data, f->val->len);
    return true;
}

/* HGETALL, HKEYS, HVALS: each field as put writes it (each: the reply's elements a field), in the
 * map's order. */
static void put_all(struct kv_store *s, struct request *r, const struct part *p, int64_t each,
                    bool (*put)(const struct kv_entry *f, void *out))
{
    struct buf *out = part_out(r, p);
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_HASH, &e) != 0)
        return;
    struct kvmap *m = e ? e->obj : NULL;
    resp_array(out, m ? each * (int64_t)m->n : 0);
    if (m)
        kvmap_range(m, 0, UINT64_MAX, put, out);
}

static void hgetall(struct kv_store *s, struct request *r, const struct part *p)
{
    put_all(s, r, p, 2, put_pair);
}

static void hkeys(struct kv_store *s, struct request *r, const struct part *p)
{
    put_all(s, r, p, 1, put_field);
}

static void hvals(struct kv_store *s, struct request *r, const struct part *p)
{
    put_all(s, r, p, 1, put_value);
}

static void hdel(struct kv_store *s, struct request *r, const struct part *p)
{
    obj_map_remove(s, r, p, KV_HASH);
}

static void hlen(struct kv_store *s, struct request *r, const struct part *p)
{
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_HASH, &e) == 0)
        resp_int(part_out(r, p), e ? (int64_t)((struct kvmap *)e->obj)->n : 0);
}

static void hexists(struct kv_store *s, struct request *r, const struct part *p)
{
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_HASH, &e) == 0)
        resp_int(part_out(r, p), e && field_of(e, &r->argv[2]));
}

static void hstrlen(struct kv_store *s, struct request *r, const struct part *p)
{
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_HASH, &e) != 0)
        return;
    struct kv_entry *f = e ? field_of(e, &r->argv[2]) : NULL;
    resp_int(part_out(r, p), f ? (int64_t)f->val->len : 0);
}

/* HSETNX key field value: 1 and the field set, or 0 and nothing when it is there already. */
static void hsetnx(struct kv_store *s, struct request *r, const struct part *p)
{
    struct buf *out = part_out(r, p);
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_HASH, &e) != 0)
        return;
    if (e && field_of(e, &r->argv[2])) {
        resp_int(out, 0);
        watch_unchanged();
    } else if (obj_hash_set(s, r, p, e, &r->argv[2], r->argv[3].p, r->argv[3].len) != 0)
        resp_error(out, OBJ_ERR_OOM);
    else
        resp_int(out, 1);
}

/* HINCRBY key field increment: the increment first, then the key's type, then the field's value. */
static void hincrby(struct kv_store *s, struct request *r, const struct part *p)
{
    struct buf *out = part_out(r, p);
    int64_t by, v = 0;
    if (!parse_int64(r->argv[3].p, r->argv[3].len, &by)) {
        resp_error(out, OBJ_ERR_INTEGER);
        return;
    }
    struct kv_entry *e, *f;
    if (obj_lookup(s, r, p, KV_HASH, &e) != 0)
        return;
    f = e ? field_of(e, &r->argv[2]) : NULL;
    if (f && !parse_int64(f->val->data, f->val->len, &v)) {
        resp_error(out, "ERR hash value is not an integer");
        return;
    }
    if ((by < 0 && v < 0 && by < INT64_MIN - v) || (by > 0 && v > 0 && by > INT64_MAX - v)) {
        resp_error(out, "ERR increment or decrement would overflow");
        return;
    }
    char text[20];
    size_t n = fmt_int64(text, v + by);
    if (obj_hash_set(s, r, p, e, &r->argv[2], text, n) != 0)
        resp_error(out, OBJ_ERR_OOM);
    else
        resp_int(out, v + by);
}

static const struct command table[] = {
    { "HSET", -4, CMD_KEYED, 0, hset, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
    { "HMSET", -4, CMD_KEYED, 0, hmset, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
    { "HSETNX", 4, CMD_KEYED, 0, hsetnx, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
    { "HGET", 3, CMD_KEYED, 0, hget, NULL, NULL, OBJ_ONE_REPLY_MAX, NULL, false, READS },
    { "HMGET", -3, CMD_KEYED, 0, hmget, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
    { "HGETALL", 2, CMD_KEYED, 0, hgetall, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
    { "HKEYS", 2, CMD_KEYED, 0, hkeys, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
    { "HVALS", 2, CMD_KEYED, 0, hvals, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
    { "HDEL", -3, CMD_KEYED, 0, hdel, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
    { "HLEN", 2, CMD_KEYED, 0, hlen, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, READS },
    { "HEXISTS", 3, CMD_KEYED, 0, hexists, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, READS },
    { "HSTRLEN", 3, CMD_KEYED, 0, hstrlen, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, READS },
    { "HINCRBY", 4, CMD_KEYED, 0, hincrby, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
};

const struct command_set cmds_hash = { table, sizeof table / sizeof table[0] };
