/* kv_server: commands the network thread answers itself, and the shard administration commands.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include <signal.h>
#include <strings.h>
#include <unistd.h>

#include "net_internal.h"
#include "server.h"

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

static const struct command table[] = {
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

const struct command_set cmds_server = { table, sizeof table / sizeof table[0] };
