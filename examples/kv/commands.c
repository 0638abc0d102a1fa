/* kv_server: the commands: what each does with a key's data on its worker, and the table.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A keyed command's part runs on the worker owning its key, with that worker's store: no lock. A
 * command of several keys is not atomic across them (Redis's MSET is): each key is applied on its
 * own worker, in order with that key's other commands. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <strings.h>

#include "net_internal.h"
#include "server.h"

bool parse_int64(const char *s, size_t len, int64_t *out)
{
    if (len == 0 || len > 20)
        return false;
    bool neg = s[0] == '-';
    size_t i = neg;
    if (i == len || (s[i] == '0' && len > i + 1) || (neg && s[i] == '0'))
        return false;
    uint64_t v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX)
        return false;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static const struct resp_arg *key_of(const struct request *r, const struct part *p)
{
    return &r->argv[p->arg];
}

#define KEY(r, p) key_of(r, p)->p, key_of(r, p)->len
#define HASHED_KEY(r, p) kv_hash(KEY(r, p)), KEY(r, p)

/* A value at least this long is sent by reference rather than copied into the reply: a client that
 * does not read its replies then holds the server's memory to its output limit (net.c), not to the
 * values of every GET it has in flight. Below it, a copy costs about what sharing does (an atomic
 * increment, and a decrement on another thread). It also sets how many GETs a connection may have in
 * flight: net.c sets aside GET_REPLY_MAX for each, about 700 per MiB. */
#define COPY_MAX 1024

/* The most a part's reply text takes, by command: a GET's copied value and its header; an integer,
 * OK or an error message; a worker's name. */
#define GET_REPLY_MAX   (COPY_MAX + 32)
#define SMALL_REPLY_MAX 64
#define OWNER_REPLY_MAX (SHARD_NAME_MAX + 32)

static void get_part(struct kv_store *s, struct request *r, const struct part *p)
{
    struct part_reply *out = &r->part_reply[p->index];
    struct kv_entry *e = store_find(s, HASHED_KEY(r, p));
    if (!e) {
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

static void ping(struct server *srv, struct request *r)
{
    (void)srv;
    if (r->argc == 2)
        resp_bulk(&r->reply, r->argv[1].p, r->argv[1].len);
    else
        resp_simple(&r->reply, "PONG");
}

static void echo(struct server *srv, struct request *r)
{
    (void)srv;
    resp_bulk(&r->reply, r->argv[1].p, r->argv[1].len);
}

static void dbsize(struct server *srv, struct request *r)
{
    (void)srv;
    resp_int(&r->reply, (int64_t)store_total_keys());
}

/* COMMAND: redis-cli asks for command docs; there are none to give. */
static void empty_array(struct server *srv, struct request *r)
{
    (void)srv;
    resp_array(&r->reply, 0);
}

/* CONFIG GET: redis-benchmark reads "save" and "appendonly"; nothing is persisted here. */
static void config(struct server *srv, struct request *r)
{
    (void)srv;
    static const char *const known[][2] = { { "save", "" }, { "appendonly", "no" } };
    uint32_t n = 0;
    struct buf pairs = { 0 };
    for (uint32_t i = 2; i < r->argc && strcasecmp(r->argv[1].p, "GET") == 0; i++)
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            if (strcasecmp(r->argv[i].p, known[k][0]) == 0) {
                resp_bulk(&pairs, known[k][0], strlen(known[k][0]));
                resp_bulk(&pairs, known[k][1], strlen(known[k][1]));
                n += 2;
            }
    resp_array(&r->reply, n);
    buf_put(&r->reply, pairs.p, pairs.len);
    r->reply.failed |= pairs.failed;
    buf_free(&pairs);
}

static void select_db(struct server *srv, struct request *r)
{
    (void)srv;
    if (r->argv[1].len == 1 && r->argv[1].p[0] == '0')
        resp_simple(&r->reply, "OK");
    else
        resp_error(&r->reply, "ERR DB index is out of range (one database here)");
}

static void quit(struct server *srv, struct request *r)
{
    (void)srv;
    resp_simple(&r->reply, "OK");
    conn_close_after_replies(r->conn);
}

static void shutdown_server(struct server *srv, struct request *r)
{
    (void)srv;
    resp_simple(&r->reply, "OK");
    conn_close_after_replies(r->conn);
    kill(getpid(), SIGTERM); /* main waits for it with sigwait, then stops everything in order */
}

static const struct command commands[] = {
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
    { "PING", -1, CMD_LOCAL, 0, NULL, NULL, ping, 0 },
    { "ECHO", 2, CMD_LOCAL, 0, NULL, NULL, echo, 0 },
    { "DBSIZE", 1, CMD_LOCAL, 0, NULL, NULL, dbsize, 0 },
    { "CONFIG", -2, CMD_LOCAL, 0, NULL, NULL, config, 0 },
    { "COMMAND", -1, CMD_LOCAL, 0, NULL, NULL, empty_array, 0 },
    { "SELECT", 2, CMD_LOCAL, 0, NULL, NULL, select_db, 0 },
    { "QUIT", 1, CMD_LOCAL, 0, NULL, NULL, quit, 0 },
    { "SHUTDOWN", -1, CMD_LOCAL, 0, NULL, NULL, shutdown_server, 0 },
    { "SHARD.STATS", 1, CMD_LOCAL, 0, NULL, NULL, admin_stats, 0 },
    { "SHARD.ADD", -2, CMD_ADMIN, 0, NULL, NULL, admin_add, 0 },
    { "SHARD.REMOVE", 2, CMD_ADMIN, 0, NULL, NULL, admin_remove, 0 },
    { "SHARD.CRASH", 2, CMD_ADMIN, 0, NULL, NULL, admin_crash, 0 },
    { "SHARD.PLACE", 3, CMD_ADMIN, 0, NULL, NULL, admin_place, 0 },
    { "SHARD.UNPLACE", 2, CMD_ADMIN, 0, NULL, NULL, admin_unplace, 0 },
};

const struct command *command_lookup(const struct resp_arg *arg)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strlen(commands[i].name) == arg->len && strncasecmp(commands[i].name, arg->p, arg->len) == 0)
            return &commands[i];
    return NULL;
}

bool command_args_ok(const struct command *cmd, uint32_t argc, char *why, size_t n)
{
    bool ok = cmd->arity >= 0 ? argc == (uint32_t)cmd->arity : argc >= (uint32_t)-cmd->arity;
    if (ok && cmd->key_step > 1)
        ok = (argc - 1) % (uint32_t)cmd->key_step == 0;
    if (!ok)
        snprintf(why, n, "ERR wrong number of arguments for '%s' command", cmd->name);
    return ok;
}
