/* kv_server: commands the network thread answers itself (INFO is info.c's; CLIENT, HELLO and AUTH
 * client.c's), and the shard administration commands. SPDX-License-Identifier: LGPL-2.1-or-later */
#include <signal.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "net_internal.h"
#include "server.h"

/* The longest value CONFIG GET shows, and so the longest password CONFIG SET takes, plus one. */
#define PASSWORD_MAX 256

static void ping(struct server *srv, struct request *r)
{
    (void)srv;
    if (r->argc > 2) /* the table's arity lets any count through, as Redis's does: PING checks it */
        resp_error(&r->reply, "ERR wrong number of arguments for 'ping' command");
    else if (r->argc == 2)
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

static void lower_name(char *out, size_t n, const char *name)
{
    size_t i = 0;
    for (; name[i] && i + 1 < n; i++)
        out[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
    out[i] = '\0';
}

static void help_reply(struct request *r, const char *const *lines, size_t n)
{
    resp_array(&r->reply, (int64_t)n);
    for (size_t i = 0; i < n; i++)
        resp_simple(&r->reply, lines[i]);
}

static void sub_error(struct request *r, const char *cmd, const struct resp_arg *sub)
{
    char msg[128];
    snprintf(msg, sizeof msg, "ERR unknown subcommand '%.40s'. Try %s HELP.", sub->p, cmd);
    resp_error(&r->reply, msg);
}

static void sub_count_error(struct request *r, const char *cmd, const char *sub)
{
    char msg[128];
    snprintf(msg, sizeof msg, "ERR wrong number of arguments for '%s|%s' command", cmd, sub);
    resp_error(&r->reply, msg);
}

/* Redis 7's command info: name, arity, flags, first key, last key, step, ACL categories, tips, key
 * specifications, subcommands (the last four empty here). The flags say what a client that sends
 * reads elsewhere than writes asks of them: "readonly" for a keyed command that only reads its keys,
 * "write" for any other keyed command (Redis's flags of the same commands have these among others). */
static void command_info(struct buf *b, const struct command *cmd)
{
    char name[32];
    lower_name(name, sizeof name, cmd->name);
    bool keyed = cmd->kind == CMD_KEYED;
    resp_array(b, 10);
    resp_bulk(b, name, strlen(name));
    resp_int(b, cmd->arity);
    resp_array(b, keyed ? 1 : 0);
    if (keyed)
        resp_simple(b, cmd->access == READS ? "readonly" : "write");
    resp_int(b, keyed ? 1 : 0);
    resp_int(b, !keyed ? 0 : cmd->key_step > 0 ? -1 : cmd->key_step < 0 ? -cmd->key_step : 1);
    resp_int(b, !keyed ? 0 : cmd->key_step > 0 ? cmd->key_step : 1);
    for (int i = 0; i < 4; i++)
        resp_array(b, 0);
}

/* COMMAND [COUNT | DOCS [name...] | INFO [name...] | LIST | HELP]. redis-cli sends COMMAND DOCS when
 * it starts, for its hints: an empty map (RESP2: an empty array) makes it use its own tables. */
static void command_cmd(struct server *srv, struct request *r)
{
    (void)srv;
    size_t n = command_count();
    if (r->argc == 1) {
        resp_array(&r->reply, (int64_t)n);
        for (size_t i = 0; i < n; i++)
            command_info(&r->reply, command_at(i));
        return;
    }
    const struct resp_arg *sub = &r->argv[1];
    if (resp_arg_is(sub, "COUNT") && r->argc == 2) {
        resp_int(&r->reply, (int64_t)n);
    } else if (resp_arg_is(sub, "DOCS")) {
        resp_array(&r->reply, 0);
    } else if (resp_arg_is(sub, "INFO")) {
        if (r->argc == 2) {
            resp_array(&r->reply, (int64_t)n);
            for (size_t i = 0; i < n; i++)
                command_info(&r->reply, command_at(i));
            return;
        }
        resp_array(&r->reply, r->argc - 2);
        for (uint32_t i = 2; i < r->argc; i++) {
            const struct command *cmd = command_lookup(&r->argv[i]);
            if (cmd)
                command_info(&r->reply, cmd);
            else
                resp_null(&r->reply);
        }
    } else if (resp_arg_is(sub, "LIST") && r->argc == 2) {
        resp_array(&r->reply, (int64_t)n);
        for (size_t i = 0; i < n; i++) {
            char name[32];
            lower_name(name, sizeof name, command_at(i)->name);
            resp_bulk(&r->reply, name, strlen(name));
        }
    } else if (resp_arg_is(sub, "HELP") && r->argc == 2) {
        static const char *const help[] = {
            "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "(no subcommand)", "    Return details about all commands.",
            "COUNT", "    Return the total number of commands.",
            "DOCS [<command-name> ...]", "    An empty map: kv_server keeps no documentation of its commands.",
            "INFO [<command-name> ...]", "    Return details about multiple commands.",
            "LIST", "    Return a list of all commands.",
            "HELP", "    Print this help.",
        };
        help_reply(r, help, sizeof help / sizeof help[0]);
    } else if (resp_arg_is(sub, "COUNT") || resp_arg_is(sub, "LIST") || resp_arg_is(sub, "HELP")) {
        char name[16];
        lower_name(name, sizeof name, resp_arg_is(sub, "COUNT") ? "count" : resp_arg_is(sub, "LIST") ? "list" : "help");
        sub_count_error(r, "command", name);
    } else if (resp_arg_is(sub, "GETKEYS") || resp_arg_is(sub, "GETKEYSANDFLAGS")) {
        resp_error(&r->reply, "ERR COMMAND GETKEYS is not supported by kv_server");
    } else {
        sub_error(r, "COMMAND", sub);
    }
}

/* The settings CONFIG GET shows: Redis's that tools ask for (redis-benchmark: save, appendonly;
 * redis-cli --stat and --bigkeys: databases), and kv_server's own options by their names. Of them,
 * CONFIG SET changes requirepass; save and appendonly take only the values they have. */
static const char *const params[] = {
    "bind", "port", "databases", "save", "appendonly", "maxmemory", "maxmemory-policy", "requirepass",
    "timeout", "tcp-keepalive", "maxclients", "proto-max-bulk-len", "cluster-enabled", "workers",
    "net-threads", "queue", "pipeline", "max-request", "max-args", "hot-keys", "balance-ms",
};

static void param_value(struct server *srv, const char *name, char *out, size_t n)
{
    const struct server_options *o = &srv->opt;
    out[0] = '\0';
    if (strcmp(name, "bind") == 0)
        snprintf(out, n, "%s", o->bind);
    else if (strcmp(name, "port") == 0)
        snprintf(out, n, "%d", srv->port);
    else if (strcmp(name, "databases") == 0)
        snprintf(out, n, "1");
    else if (strcmp(name, "appendonly") == 0 || strcmp(name, "cluster-enabled") == 0)
        snprintf(out, n, "no");
    else if (strcmp(name, "maxmemory") == 0 || strcmp(name, "timeout") == 0 || strcmp(name, "tcp-keepalive") == 0)
        snprintf(out, n, "0");
    else if (strcmp(name, "maxmemory-policy") == 0)
        snprintf(out, n, "noeviction");
    else if (strcmp(name, "requirepass") == 0)
        auth_password(out, n);
    else if (strcmp(name, "maxclients") == 0)
        snprintf(out, n, "%llu", (unsigned long long)srv->max_clients);
    else if (strcmp(name, "proto-max-bulk-len") == 0 || strcmp(name, "max-request") == 0)
        snprintf(out, n, "%zu", o->limits.max_request);
    else if (strcmp(name, "workers") == 0)
        snprintf(out, n, "%u", o->workers);
    else if (strcmp(name, "net-threads") == 0)
        snprintf(out, n, "%u", o->net_threads);
    else if (strcmp(name, "queue") == 0)
        snprintf(out, n, "%u", o->queue_capacity);
    else if (strcmp(name, "pipeline") == 0)
        snprintf(out, n, "%u", o->max_pipeline);
    else if (strcmp(name, "max-args") == 0)
        snprintf(out, n, "%zu", o->limits.max_args);
    else if (strcmp(name, "hot-keys") == 0)
        snprintf(out, n, "%u", o->hot_keys);
    else if (strcmp(name, "balance-ms") == 0)
        snprintf(out, n, "%u", o->balance_ms);
}

static const char *param_named(const struct resp_arg *a)
{
    for (size_t k = 0; k < sizeof params / sizeof params[0]; k++)
        if (resp_arg_is(a, params[k]))
            return params[k];
    return NULL;
}

/* CONFIG GET pattern [pattern ...]: name and value pairs, each setting once, in the order of the
 * patterns (Redis's glob, case-insensitive). */
static void config_get(struct server *srv, struct request *r)
{
    bool shown[sizeof params / sizeof params[0]] = { false };
    uint32_t n = 0;
    struct buf pairs = { 0 };
    for (uint32_t i = 2; i < r->argc; i++)
        for (size_t k = 0; k < sizeof params / sizeof params[0]; k++) {
            if (shown[k] || !glob_match(r->argv[i].p, r->argv[i].len, params[k], strlen(params[k]), true))
                continue;
            char value[PASSWORD_MAX];
            param_value(srv, params[k], value, sizeof value);
            resp_bulk(&pairs, params[k], strlen(params[k]));
            resp_bulk(&pairs, value, strlen(value));
            shown[k] = true;
            n += 2;
        }
    resp_array_of(&r->reply, n, &pairs);
}

/* CONFIG SET name value [name value ...]: all or nothing, as in Redis 7. */
static void config_set(struct server *srv, struct request *r)
{
    char msg[256];
    if (r->argc < 4 || r->argc % 2) {
        sub_count_error(r, "config", "set");
        return;
    }
    const struct resp_arg *pass = NULL;
    for (uint32_t i = 2; i < r->argc; i += 2) {
        const struct resp_arg *name = &r->argv[i], *value = &r->argv[i + 1];
        const char *p = param_named(name);
        char now[256];
        if (!p) {
            snprintf(msg, sizeof msg, "ERR Unknown option or number of arguments for CONFIG SET - '%.64s'", name->p);
            resp_error(&r->reply, msg);
            return;
        }
        if (strcmp(p, "requirepass") == 0) {
            /* Kept as a C string, shown by CONFIG GET in its 256-byte buffer: refused rather than
             * cut short (a password cut at a NUL would open to its prefix). */
            if (memchr(value->p, '\0', value->len) || value->len >= PASSWORD_MAX) {
                resp_error(&r->reply, "ERR CONFIG SET failed (possibly related to argument 'requirepass') - "
                                      "kv_server takes a password of at most 255 bytes, without NUL");
                return;
            }
            if (pass) {
                resp_error(&r->reply, "ERR CONFIG SET failed - duplicate parameter 'requirepass'");
                return;
            }
            pass = value;
            continue;
        }
        param_value(srv, p, now, sizeof now);
        if ((strcmp(p, "save") == 0 || strcmp(p, "appendonly") == 0) && value->len == strlen(now) &&
            strncasecmp(value->p, now, value->len) == 0)
            continue; /* already so: kv_server persists nothing */
        snprintf(msg, sizeof msg,
                 "ERR CONFIG SET failed (possibly related to argument '%s') - kv_server cannot change it "
                 "at runtime%s", p, strcmp(p, "save") == 0 || strcmp(p, "appendonly") == 0 ?
                 " (it persists nothing)" : "");
        resp_error(&r->reply, msg);
        return;
    }
    if (pass && auth_set_password(pass->p) != 0) {
        resp_error(&r->reply, "ERR out of memory");
        return;
    }
    resp_simple(&r->reply, "OK");
}

static void config(struct server *srv, struct request *r)
{
    const struct resp_arg *sub = &r->argv[1];
    if (resp_arg_is(sub, "GET")) {
        if (r->argc < 3)
            sub_count_error(r, "config", "get");
        else
            config_get(srv, r);
    } else if (resp_arg_is(sub, "SET")) {
        config_set(srv, r);
    } else if (resp_arg_is(sub, "RESETSTAT") && r->argc == 2) {
        net_reset_commands(srv);
        atomic_store_explicit(&srv->connections, 0, memory_order_relaxed);
        atomic_store_explicit(&srv->protocol_errors, 0, memory_order_relaxed);
        resp_simple(&r->reply, "OK");
    } else if (resp_arg_is(sub, "REWRITE") && r->argc == 2) {
        resp_error(&r->reply, "ERR The server is running without a config file");
    } else if (resp_arg_is(sub, "HELP") && r->argc == 2) {
        static const char *const help[] = {
            "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET <pattern> [<pattern> ...]", "    Return parameters matching the glob-like <pattern>s and their values.",
            "SET <directive> <value> [<directive> <value> ...]", "    Set requirepass (the other parameters are fixed).",
            "RESETSTAT", "    Reset the counters INFO stats shows.",
            "REWRITE", "    Fails: there is no config file.",
            "HELP", "    Print this help.",
        };
        help_reply(r, help, sizeof help / sizeof help[0]);
    } else {
        sub_error(r, "CONFIG", sub);
    }
}

/* TIME: seconds and microseconds of Unix time, as two bulk strings. */
static void time_cmd(struct server *srv, struct request *r)
{
    (void)srv;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char sec[24], usec[24];
    int a = snprintf(sec, sizeof sec, "%lld", (long long)ts.tv_sec);
    int b = snprintf(usec, sizeof usec, "%ld", ts.tv_nsec / 1000);
    resp_array(&r->reply, 2);
    resp_bulk(&r->reply, sec, (size_t)a);
    resp_bulk(&r->reply, usec, (size_t)b);
}

/* SELECT index: 0, the one database; another number is out of range here, and a word or a number
 * beyond an int is refused as Redis refuses it. */
static void select_db(struct server *srv, struct request *r)
{
    (void)srv;
    int64_t db;
    if (!parse_int64(r->argv[1].p, r->argv[1].len, &db))
        resp_error(&r->reply, "ERR value is not an integer or out of range");
    else if (db < INT32_MIN || db > INT32_MAX)
        resp_error(&r->reply, "ERR value is out of range, value must between -2147483648 and 2147483647");
    else if (db == 0)
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

/* UNWATCH as a queued command of a transaction (outside MULTI, txn.c answers it): its EXEC ends the
 * watches anyway, as Redis's does. */
static void unwatch_queued(struct server *srv, struct request *r)
{
    (void)srv;
    resp_simple(&r->reply, "OK");
}

static const struct command table[] = {
    { "PING", -1, CMD_PURE, 0, NULL, NULL, ping, 0, NULL, false, false },
    { "ECHO", 2, CMD_PURE, 0, NULL, NULL, echo, 0, NULL, false, false },
    { "DBSIZE", 1, CMD_LOCAL, 0, NULL, NULL, dbsize, 0, NULL, false, false },
    { "CONFIG", -2, CMD_LOCAL, 0, NULL, NULL, config, 0, NULL, false, false },
    { "COMMAND", -1, CMD_LOCAL, 0, NULL, NULL, command_cmd, 0, NULL, false, false },
    { "INFO", -1, CMD_LOCAL, 0, NULL, NULL, info_run, 0, NULL, false, false },
    { "TIME", 1, CMD_LOCAL, 0, NULL, NULL, time_cmd, 0, NULL, false, false },
    { "CLIENT", -2, CMD_LOCAL, 0, NULL, NULL, client_cmd, 0, NULL, false, false },
    { "HELLO", -1, CMD_LOCAL, 0, NULL, NULL, client_hello, 0, NULL, false, false },
    { "AUTH", -2, CMD_LOCAL, 0, NULL, NULL, client_auth, 0, NULL, false, false },
    { "SELECT", 2, CMD_LOCAL, 0, NULL, NULL, select_db, 0, NULL, false, false },
    { "MULTI", 1, CMD_TXN, 0, NULL, NULL, NULL, 0, NULL, false, false },
    { "EXEC", 1, CMD_TXN, 0, NULL, NULL, NULL, 0, NULL, false, false },
    { "DISCARD", 1, CMD_TXN, 0, NULL, NULL, NULL, 0, NULL, false, false },
    { "WATCH", -2, CMD_TXN, 0, NULL, NULL, NULL, 0, NULL, false, false },
    { "UNWATCH", 1, CMD_TXN, 0, NULL, NULL, unwatch_queued, 0, NULL, false, false },
    { "QUIT", -1, CMD_LOCAL, 0, NULL, NULL, quit, 0, NULL, false, false }, /* arguments ignored, as Redis */
    { "SHUTDOWN", -1, CMD_LOCAL, 0, NULL, NULL, shutdown_server, 0, NULL, false, false },
    { "SHARD.STATS", 1, CMD_LOCAL, 0, NULL, NULL, admin_stats, 0, NULL, false, false },
    { "SHARD.ADD", -2, CMD_ADMIN, 0, NULL, NULL, admin_add, 0, NULL, false, false },
    { "SHARD.REMOVE", 2, CMD_ADMIN, 0, NULL, NULL, admin_remove, 0, NULL, false, false },
    { "SHARD.CRASH", 2, CMD_ADMIN, 0, NULL, NULL, admin_crash, 0, NULL, false, false },
    { "SHARD.PLACE", 3, CMD_ADMIN, 0, NULL, NULL, admin_place, 0, NULL, false, false },
    { "SHARD.UNPLACE", 2, CMD_ADMIN, 0, NULL, NULL, admin_unplace, 0, NULL, false, false },
};

const struct command_set cmds_server = { table, sizeof table / sizeof table[0] };
