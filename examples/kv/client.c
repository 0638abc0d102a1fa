/* kv_server: the connection's own commands: CLIENT, HELLO, AUTH, and the password they check.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * All of them run on the connection's network thread (CMD_LOCAL), so they read and write its struct
 * conn without a lock; only the names CLIENT LIST shows are written under net.c's lock.
 *
 * The password (--requirepass, CONFIG SET requirepass) works as Redis's default user's: with one set,
 * a connection must send AUTH (or HELLO with AUTH) before anything but AUTH, HELLO and QUIT, which
 * are answered "NOAUTH Authentication required."; a connection made while no password was set is
 * authenticated already, and stays so when one is set later. Only RESP2 is spoken: HELLO 3 is
 * answered NOPROTO, as a server without RESP3 would, and clients then stay on RESP2. */
#include <errno.h>
#include <pthread.h>
#include <strings.h>

#include "net_internal.h"
#include "server.h"

static pthread_mutex_t password_lock = PTHREAD_MUTEX_INITIALIZER;
static char           *password; /* under password_lock; NULL: none */
/* Whether a password is set. Relaxed: read at accept to start a connection unauthenticated; a
 * connection accepted while CONFIG SET runs may see either value, as it would a moment sooner or
 * later. */
static atomic_bool required;

int auth_set_password(const char *pass)
{
    char *copy = NULL;
    if (pass && *pass && !(copy = strdup(pass)))
        return -ENOMEM;
    pthread_mutex_lock(&password_lock);
    free(password);
    password = copy;
    atomic_store_explicit(&required, copy != NULL, memory_order_relaxed);
    pthread_mutex_unlock(&password_lock);
    return 0;
}

void auth_password(char *out, size_t n)
{
    pthread_mutex_lock(&password_lock);
    snprintf(out, n, "%s", password ? password : "");
    pthread_mutex_unlock(&password_lock);
}

bool auth_required(void)
{
    return atomic_load_explicit(&required, memory_order_relaxed);
}

void auth_free(void)
{
    auth_set_password(NULL);
}

bool auth_exempt(const struct command *cmd)
{
    return strcasecmp(cmd->name, "AUTH") == 0 || strcasecmp(cmd->name, "HELLO") == 0 ||
           strcasecmp(cmd->name, "QUIT") == 0;
}

/* Whether user and pass open the default user. Compared in time independent of where they differ. */
static bool credentials_ok(const struct resp_arg *user, const struct resp_arg *pass)
{
    if (user && !(user->len == 7 && memcmp(user->p, "default", 7) == 0))
        return false;
    pthread_mutex_lock(&password_lock);
    bool ok = true; /* no password: any password opens the default user, as Redis's nopass */
    if (password) {
        size_t len = strlen(password);
        unsigned char diff = (unsigned char)(len != pass->len);
        for (size_t i = 0; i < pass->len; i++)
            diff |= (unsigned char)(pass->p[i] ^ (len ? password[i % len] : 0));
        ok = diff == 0;
    }
    pthread_mutex_unlock(&password_lock);
    return ok;
}

#define WRONGPASS "WRONGPASS invalid username-password pair or user is disabled."

/* AUTH [username] password */
void client_auth(struct server *srv, struct request *r)
{
    (void)srv;
    if (r->argc > 3) {
        resp_error(&r->reply, "ERR syntax error");
        return;
    }
    if (r->argc == 2 && !auth_required()) {
        resp_error(&r->reply, "ERR AUTH <password> called without any password configured for the default "
                              "user. Are you sure your configuration is correct?");
        return;
    }
    const struct resp_arg *user = r->argc == 3 ? &r->argv[1] : NULL;
    if (!credentials_ok(user, &r->argv[r->argc - 1])) {
        resp_error(&r->reply, WRONGPASS);
        return;
    }
    r->conn->authenticated = true;
    resp_simple(&r->reply, "OK");
}

/* Redis's rule for names: printable ASCII without spaces. */
static bool name_ok(const struct resp_arg *a)
{
    for (size_t i = 0; i < a->len; i++)
        if (a->p[i] < '!' || a->p[i] > '~')
            return false;
    return true;
}

/* Sets one of c's names (empty: none). Return: whether it could (else an error reply is written). */
static bool set_name(struct request *r, char **field, const struct resp_arg *a, const char *what)
{
    char msg[128];
    if (!name_ok(a)) {
        snprintf(msg, sizeof msg, "ERR %s cannot contain spaces, newlines or special characters.", what);
        resp_error(&r->reply, msg);
        return false;
    }
    char *copy = a->len ? strndup(a->p, a->len) : NULL;
    if (a->len && !copy) {
        resp_error(&r->reply, "ERR out of memory");
        return false;
    }
    net_client_set(field, copy);
    return true;
}

static void wrong_count(struct request *r, const char *sub)
{
    char msg[96];
    snprintf(msg, sizeof msg, "ERR wrong number of arguments for 'client|%s' command", sub);
    resp_error(&r->reply, msg);
}

static void reply_text(struct request *r, struct buf *text)
{
    resp_bulk(&r->reply, text->p, text->len);
    r->reply.failed |= text->failed;
    buf_free(text);
}

/* CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id...] */
static void client_list(struct request *r)
{
    uint64_t *ids = r->argc > 2 ? calloc(r->argc, sizeof *ids) : NULL;
    size_t nids = 0;
    bool none = false;
    for (uint32_t i = 2; i < r->argc; i++) {
        if (resp_arg_is(&r->argv[i], "TYPE") && i + 1 < r->argc) {
            const struct resp_arg *t = &r->argv[++i];
            if (!resp_arg_is(t, "normal") && !resp_arg_is(t, "master") && !resp_arg_is(t, "replica") &&
                !resp_arg_is(t, "slave") && !resp_arg_is(t, "pubsub")) {
                char msg[96];
                snprintf(msg, sizeof msg, "ERR Unknown client type '%.40s'", t->p);
                resp_error(&r->reply, msg);
                free(ids);
                return;
            }
            none |= !resp_arg_is(t, "normal"); /* every client here is a normal one */
        } else if (resp_arg_is(&r->argv[i], "ID") && i + 1 < r->argc && ids) {
            for (i++; i < r->argc; i++) {
                int64_t id;
                if (!parse_int64(r->argv[i].p, r->argv[i].len, &id) || id < 1) {
                    resp_error(&r->reply, "ERR Invalid client ID");
                    free(ids);
                    return;
                }
                ids[nids++] = (uint64_t)id;
            }
        } else {
            resp_error(&r->reply, "ERR syntax error");
            free(ids);
            return;
        }
    }
    if (r->argc > 2 && !ids && !none) {
        resp_error(&r->reply, "ERR out of memory");
        return;
    }
    struct buf text = { 0 };
    if (!none)
        net_client_list(&text, ids, nids);
    free(ids);
    reply_text(r, &text);
}

static const char *const client_help[] = {
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GETNAME", "    Return the name of the current connection.",
    "ID", "    Return the ID of the current connection.",
    "INFO", "    Return information about the current client connection.",
    "LIST [TYPE <normal|master|replica|pubsub>] [ID <id> [<id> ...]]", "    Return information about client connections.",
    "NO-EVICT (ON|OFF)", "    Accepted; nothing is evicted here.",
    "NO-TOUCH (ON|OFF)", "    Accepted; no access times are kept here.",
    "REPLY ON", "    Accepted (OFF and SKIP are not supported).",
    "SETINFO <LIB-NAME|LIB-VER> <value>", "    Set client meta attr.",
    "SETNAME <name>", "    Assign the name <name> to the current connection.",
    "HELP", "    Print this help.",
};

void client_cmd(struct server *srv, struct request *r)
{
    (void)srv;
    const struct resp_arg *sub = &r->argv[1];
    struct conn *c = r->conn;
    if (resp_arg_is(sub, "ID") && r->argc == 2) {
        resp_int(&r->reply, (int64_t)c->id);
    } else if (resp_arg_is(sub, "GETNAME") && r->argc == 2) {
        if (c->name)
            resp_bulk(&r->reply, c->name, strlen(c->name));
        else
            resp_null(&r->reply);
    } else if (resp_arg_is(sub, "SETNAME") && r->argc == 3) {
        if (set_name(r, &c->name, &r->argv[2], "Client names"))
            resp_simple(&r->reply, "OK");
    } else if (resp_arg_is(sub, "SETINFO") && r->argc == 4) {
        const struct resp_arg *attr = &r->argv[2];
        char msg[96];
        if (resp_arg_is(attr, "LIB-NAME")) {
            if (set_name(r, &c->lib_name, &r->argv[3], "lib-name"))
                resp_simple(&r->reply, "OK");
        } else if (resp_arg_is(attr, "LIB-VER")) {
            if (set_name(r, &c->lib_ver, &r->argv[3], "lib-ver"))
                resp_simple(&r->reply, "OK");
        } else {
            snprintf(msg, sizeof msg, "ERR Unrecognized option '%.40s'", attr->p);
            resp_error(&r->reply, msg);
        }
    } else if (resp_arg_is(sub, "LIST")) {
        client_list(r);
    } else if (resp_arg_is(sub, "INFO") && r->argc == 2) {
        struct buf text = { 0 };
        net_client_line(c, &text);
        reply_text(r, &text);
    } else if ((resp_arg_is(sub, "NO-EVICT") || resp_arg_is(sub, "NO-TOUCH")) && r->argc == 3) {
        if (resp_arg_is(&r->argv[2], "ON") || resp_arg_is(&r->argv[2], "OFF"))
            resp_simple(&r->reply, "OK");
        else
            resp_error(&r->reply, "ERR syntax error");
    } else if (resp_arg_is(sub, "REPLY") && r->argc == 3) {
        if (resp_arg_is(&r->argv[2], "ON"))
            resp_simple(&r->reply, "OK");
        else if (resp_arg_is(&r->argv[2], "OFF") || resp_arg_is(&r->argv[2], "SKIP"))
            resp_error(&r->reply, "ERR CLIENT REPLY OFF and SKIP are not supported by kv_server");
        else
            resp_error(&r->reply, "ERR syntax error");
    } else if (resp_arg_is(sub, "HELP") && r->argc == 2) {
        size_t n = sizeof client_help / sizeof client_help[0];
        resp_array(&r->reply, (int64_t)n);
        for (size_t i = 0; i < n; i++)
            resp_simple(&r->reply, client_help[i]);
    } else if (resp_arg_is(sub, "ID") || resp_arg_is(sub, "GETNAME") || resp_arg_is(sub, "SETNAME") ||
               resp_arg_is(sub, "SETINFO") || resp_arg_is(sub, "INFO") || resp_arg_is(sub, "NO-EVICT") ||
               resp_arg_is(sub, "NO-TOUCH") || resp_arg_is(sub, "REPLY") || resp_arg_is(sub, "HELP")) {
        char lower[16];
        size_t n = sub->len < sizeof lower - 1 ? sub->len : sizeof lower - 1;
        for (size_t i = 0; i < n; i++)
            lower[i] = (char)(sub->p[i] >= 'A' && sub->p[i] <= 'Z' ? sub->p[i] + 32 : sub->p[i]);
        lower[n] = '\0';
        wrong_count(r, lower);
    } else if (resp_arg_is(sub, "KILL") || resp_arg_is(sub, "PAUSE") || resp_arg_is(sub, "UNPAUSE") ||
               resp_arg_is(sub, "TRACKING") || resp_arg_is(sub, "CACHING") || resp_arg_is(sub, "UNBLOCK") ||
               resp_arg_is(sub, "GETREDIR") || resp_arg_is(sub, "TRACKINGINFO")) {
        char msg[96];
        snprintf(msg, sizeof msg, "ERR CLIENT %.20s is not supported by kv_server", sub->p);
        resp_error(&r->reply, msg);
    } else {
        char msg[96];
        snprintf(msg, sizeof msg, "ERR unknown subcommand '%.40s'. Try CLIENT HELP.", sub->p);
        resp_error(&r->reply, msg);
    }
}

/* HELLO [protover [AUTH username password] [SETNAME clientname]]: a RESP2 map (a flat array). */
void client_hello(struct server *srv, struct request *r)
{
    (void)srv;
    char msg[160];
    if (r->argc >= 2) {
        int64_t ver;
        if (!parse_int64(r->argv[1].p, r->argv[1].len, &ver)) {
            resp_error(&r->reply, "ERR Protocol version is not an integer or out of range");
            return;
        }
        if (ver != 2) {
            resp_error(&r->reply, "NOPROTO sorry, this protocol version is not supported (kv_server speaks RESP2)");
            return;
        }
    }
    const struct resp_arg *user = NULL, *pass = NULL, *name = NULL;
    for (uint32_t i = 2; i < r->argc; i++) {
        if (resp_arg_is(&r->argv[i], "AUTH") && i + 2 < r->argc) {
            user = &r->argv[i + 1];
            pass = &r->argv[i + 2];
            i += 2;
        } else if (resp_arg_is(&r->argv[i], "SETNAME") && i + 1 < r->argc) {
            name = &r->argv[++i];
        } else {
            snprintf(msg, sizeof msg, "ERR Syntax error in HELLO option '%.40s'", r->argv[i].p);
            resp_error(&r->reply, msg);
            return;
        }
    }
    if (user && !credentials_ok(user, pass)) {
        resp_error(&r->reply, WRONGPASS);
        return;
    }
    if (!user && !r->conn->authenticated) {
        resp_error(&r->reply, "NOAUTH HELLO must be called with the client already authenticated, otherwise "
                              "the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the "
                              "client and select the RESP protocol version at the same time");
        return;
    }
    if (name && !set_name(r, &r->conn->name, name, "Client names"))
        return;
    if (user)
        r->conn->authenticated = true;
    resp_array(&r->reply, 14);
    resp_bulk(&r->reply, "server", 6);
    resp_bulk(&r->reply, "redis", 5);
    resp_bulk(&r->reply, "version", 7);
    resp_bulk(&r->reply, KV_REDIS_VERSION, strlen(KV_REDIS_VERSION));
    resp_bulk(&r->reply, "proto", 5);
    resp_int(&r->reply, 2);
    resp_bulk(&r->reply, "id", 2);
    resp_int(&r->reply, (int64_t)r->conn->id);
    resp_bulk(&r->reply, "mode", 4);
    resp_bulk(&r->reply, "standalone", 10);
    resp_bulk(&r->reply, "role", 4);
    resp_bulk(&r->reply, "master", 6);
    resp_bulk(&r->reply, "modules", 7);
    resp_array(&r->reply, 0);
}
