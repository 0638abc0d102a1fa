/* kv_server: a collection's members a cursor's slice at a time (HSCAN SSCAN ZSCAN).
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The cursor is SCAN's (scan.c): a position in the space of the members' hashes (kv_hash). A hash's
 * or set's map and a sorted set's index both keep their chains in hash order at every size, so a call
 * covers the members of [cursor, end], a slice about COUNT members wide (2^64 * COUNT / members), and
 * answers end + 1, or 0 when end is the top of the space. A
 * member there for the whole iteration comes exactly once (Redis: at least once), however the
 * collection grows or shrinks between calls while it has more than WHOLE members; a member added or
 * removed meanwhile comes at most once. A collection of at most WHOLE members comes whole with the
 * cursor 0, whatever the cursor, as Redis answers its small encodings (a listpack holds up to 128
 * entries by default): one that shrank to that size during an iteration then gives again what it gave
 * before, as Redis's does. MATCH filters the slice after
 * it is taken, so a call may answer fewer than COUNT members, or none, with a cursor to go on from, as
 * Redis's do. Replies and errors in Redis 7.0's order: the cursor, then the key (missing: an empty scan,
 * whatever the options; another type: WRONGTYPE), then the options. A reply is bounded as HGETALL's
 * (OBJ_MANY_REPLY_MAX): COUNT may ask for the whole collection. */
#include <inttypes.h>
#include <stdio.h>
#include <strings.h>

#include "obj_cmd.h"

#define WHOLE 128

/* The members of a slice that match, written into a buffer of their own: the reply's array header
 * needs their count first. */
struct collect {
    struct buf             items;
    int64_t                n;       /* elements written: a member, and its value or score */
    const struct resp_arg *pattern; /* NULL: every member */
    bool                   values;  /* a hash's: each field's value after it */
};

static bool wanted(const struct collect *c, const char *member, size_t len)
{
    return !c->pattern || glob_match(c->pattern->p, c->pattern->len, member, len, false);
}

static bool put_map_member(const struct kv_entry *m, void *ctx)
{
    struct collect *c = ctx;
    if (wanted(c, m->key, m->klen)) {
        obj_put_member(&c->items, m, c->values);
        c->n += c->values ? 2 : 1;
    }
    return true;
}

static void put_znode(const struct obj_znode *node, void *ctx)
{
    struct collect *c = ctx;
    size_t len;
    const char *member = obj_znode_member(node, &len);
    if (wanted(c, member, len)) {
        obj_put_znode(&c->items, node, true);
        c->n += 2;
    }
}

/* The options after the cursor: MATCH pattern (a pattern of "*" is none), COUNT count (at least 1),
 * in any order, each as often as given (the last counts). Return: false, the error replied. */
static bool parse_options(struct request *r, const struct part *p, int64_t *count,
                          const struct resp_arg **pattern)
{
    *count = 10;
    *pattern = NULL;
    for (uint32_t i = 3; i < r->argc; i += 2) {
        const struct resp_arg *opt = &r->argv[i], *val = i + 1 < r->argc ? &r->argv[i + 1] : NULL;
        if (val && resp_arg_is(opt, "COUNT")) {
            if (!parse_int64(val->p, val->len, count)) {
                resp_error(part_out(r, p), OBJ_ERR_INTEGER);
                return false;
            }
            if (*count < 1) {
                resp_error(part_out(r, p), OBJ_ERR_SYNTAX);
                return false;
            }
        } else if (val && resp_arg_is(opt, "MATCH")) {
            *pattern = val->len == 1 && val->p[0] == '*' ? NULL : val;
        } else {
            resp_error(part_out(r, p), OBJ_ERR_SYNTAX);
            return false;
        }
    }
    return true;
}

/* key cursor [MATCH pattern] [COUNT count], over a collection of type. */
static void scan_members(struct kv_store *s, struct request *r, const struct part *p, enum kv_type type)
{
    struct buf *out = part_out(r, p);
    uint64_t from;
    if (!scan_parse_cursor(&r->argv[2], &from)) {
        resp_error(out, "ERR invalid cursor");
        return;
    }
    struct kv_entry *e;
    if (obj_lookup(s, r, p, type, &e) != 0)
        return;
    if (!e) {
        resp_array(out, 2);
        resp_bulk(out, "0", 1);
        resp_array(out, 0);
        return;
    }
    int64_t count;
    struct collect c = { .values = type == KV_HASH };
    if (!parse_options(r, p, &count, &c.pattern))
        return;
    size_t n = type == KV_ZSET ? obj_zset_len(e->obj) : ((const struct kvmap *)e->obj)->n;
    if (n <= WHOLE)
        from = 0;
    uint64_t to = n <= WHOLE ? UINT64_MAX : scan_slice_end(from, (uint64_t)count, n);
    if (type == KV_ZSET)
        obj_zset_range(e->obj, from, to, put_znode, &c);
    else
        kvmap_range(e->obj, from, to, put_map_member, &c);
    char next[24];
    int len = snprintf(next, sizeof next, "%" PRIu64, to == UINT64_MAX ? 0 : to + 1);
    resp_array(out, 2);
    resp_bulk(out, next, (size_t)len);
    resp_array_of(out, c.n, &c.items);
}

static void hscan(struct kv_store *s, struct request *r, const struct part *p)
{
    scan_members(s, r, p, KV_HASH);
}

static void sscan(struct kv_store *s, struct request *r, const struct part *p)
{
    scan_members(s, r, p, KV_SET);
}

static void zscan(struct kv_store *s, struct request *r, const struct part *p)
{
    scan_members(s, r, p, KV_ZSET);
}

static const struct command table[] = {
    { "HSCAN", -3, CMD_KEYED, 0, hscan, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
    { "SSCAN", -3, CMD_KEYED, 0, sscan, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
    { "ZSCAN", -3, CMD_KEYED, 0, zscan, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
};

const struct command_set cmds_scan = { table, sizeof table / sizeof table[0] };
