/* kv_server: string commands and the commands that work on any key (DEL, EXISTS): what each does
 * with a key's data on its worker. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A keyed command's part runs on the worker owning its key, with that worker's store: no lock. A
 * command of several keys is not atomic across them (Redis's MSET is): each key is applied on its
 * own worker, in order with that key's other commands. */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>

#include "server.h"

static void get_part(struct kv_store *s, struct request *r, const struct part *p)
{
    struct part_reply *out = &r->part_reply[p->index];
    struct kv_entry *e = store_find(s, HASHED_KEY(r, p));
    if (e && e->type != KV_STRING && r->nparts == 1 && !r->cmd->finish) {
        resp_error(&out->text, WRONGTYPE); /* GET; MGET answers nil for it, as Redis does */
    } else if (!e || e->type != KV_STRING) {
        resp_null(&out->text);
    } else if (e->val->len < COPY_MAX) {
        resp_bulk(&out->text, e->val->data, e->val->len);
    } else {
        resp_bulk_header(&out->text, e->val->len);
        out->value = kv_value_get(e->val);
    }
}

static void set_part(struct kv_store *s, struct request *r, const struct part *p)
{
    struct buf *out = &r->part_reply[p->index].text;
    if (r->argc != 3) {
        resp_error(out, "ERR syntax error (SET takes no options here)");
        return;
    }
    if (store_set(s, HASHED_KEY(r, p), r->argv[2].p, r->argv[2].len) != 0)
        resp_error(out, "ERR out of memory");
    else
        resp_simple(out, "OK");
}

/* One pair of MSET: the key and the value after it. */
static void mset_part(struct kv_store *s, struct request *r, const struct part *p)
{
    const struct resp_arg *v = &r->argv[p->arg + 1];
    if (store_set(s, HASHED_KEY(r, p), v->p, v->len) != 0)
        r->part_reply[p->index].text.failed = true;
}

static void mset_finish(struct request *r)
{
    resp_simple(&r->reply, "OK");
}

/* The parts' replies are not assembled into one: the network thread copies them out one by one as
 * the client reads (server.h). */
static void mget_finish(struct request *r)
{
    resp_array(&r->reply, r->nparts);
    r->reply_parts = true;
}

static void del_part(struct kv_store *s, struct request *r, const struct part *p)
{
    if (store_del(s, HASHED_KEY(r, p)))
        atomic_fetch_add_explicit(&r->sum, 1, memory_order_relaxed);
}

static void exists_part(struct kv_store *s, struct request *r, const struct part *p)
{
    if (store_find(s, HASHED_KEY(r, p)))
        atomic_fetch_add_explicit(&r->sum, 1, memory_order_relaxed);
}

static void sum_finish(struct request *r)
{
    resp_int(&r->reply, atomic_load_explicit(&r->sum, memory_order_relaxed));
}

static void add_to(struct kv_store *s, struct request *r, const struct part *p, int64_t by)
{
    struct buf *out = &r->part_reply[p->index].text;
    struct kv_entry *e = store_find(s, HASHED_KEY(r, p));
    int64_t v = 0;
    if (e && e->type != KV_STRING) {
        resp_error(out, WRONGTYPE);
        return;
    }
    if (e && !parse_int64(e->val->data, e->val->len, &v)) {
        resp_error(out, "ERR value is not an integer or out of range");
        return;
    }
    if ((by > 0 && v > INT64_MAX - by) || (by < 0 && v < INT64_MIN - by)) {
        resp_error(out, "ERR increment or decrement would overflow");
        return;
    }
    v += by;
    char text[24];
    int n = snprintf(text, sizeof text, "%" PRId64, v);
    if (store_set(s, HASHED_KEY(r, p), text, (size_t)n) != 0)
        resp_error(out, "ERR out of memory");
    else
        resp_int(out, v);
}

static void incr_part(struct kv_store *s, struct request *r, const struct part *p)
{
    add_to(s, r, p, 1);
}

static void decr_part(struct kv_store *s, struct request *r, const struct part *p)
{
    add_to(s, r, p, -1);
}

static void incrby_part(struct kv_store *s, struct request *r, const struct part *p, bool negate)
{
    int64_t by;
    if (!parse_int64(r->argv[2].p, r->argv[2].len, &by) || (negate && by == INT64_MIN)) {
        resp_error(&r->part_reply[p->index].text, "ERR value is not an integer or out of range");
        return;
    }
    add_to(s, r, p, negate ? -by : by);
}

static void incrby(struct kv_store *s, struct request *r, const struct part *p)
{
    incrby_part(s, r, p, false);
}

static void decrby(struct kv_store *s, struct request *r, const struct part *p)
{
    incrby_part(s, r, p, true);
}

/* Which worker holds the key: the one running this part. */
static void owner_part(struct kv_store *s, struct request *r, const struct part *p)
{
    const char *name = store_name(s);
    resp_bulk(&r->part_reply[p->index].text, name, strlen(name));
}

static const struct command table[] = {
    { "GET", 2, CMD_KEYED, 0, get_part, NULL, NULL, GET_REPLY_MAX },
    { "SET", -3, CMD_KEYED, 0, set_part, NULL, NULL, SMALL_REPLY_MAX },
    { "DEL", -2, CMD_KEYED, 1, del_part, sum_finish, NULL, 0 },
    { "EXISTS", -2, CMD_KEYED, 1, exists_part, sum_finish, NULL, 0 },
    { "INCR", 2, CMD_KEYED, 0, incr_part, NULL, NULL, SMALL_REPLY_MAX },
    { "DECR", 2, CMD_KEYED, 0, decr_part, NULL, NULL, SMALL_REPLY_MAX },
    { "INCRBY", 3, CMD_KEYED, 0, incrby, NULL, NULL, SMALL_REPLY_MAX },
    { "DECRBY", 3, CMD_KEYED, 0, decrby, NULL, NULL, SMALL_REPLY_MAX },
    { "MGET", -2, CMD_KEYED, 1, get_part, mget_finish, NULL, GET_REPLY_MAX },
    { "MSET", -3, CMD_KEYED, 2, mset_part, mset_finish, NULL, 0 },
    { "SHARD.OWNER", 2, CMD_KEYED, 0, owner_part, NULL, NULL, OWNER_REPLY_MAX },
};

const struct command_set cmds_string = { table, sizeof table / sizeof table[0] };
