/* kv_server: the pieces of the server and how a command travels through them.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A network thread (net.c) reads a connection, parses requests (resp.c) and turns each into a request
 * appended to the connection's FIFO. A data command becomes one shard job per key, each on the worker
 * owning that key (request.c); a command of several keys (MGET, MSET, DEL, EXISTS) is split into one
 * part per key and the last part to finish assembles the reply. Admin commands that change membership
 * go to the admin thread (admin.c), which is not a worker, as shard requires. A finished request is
 * pushed onto its network thread's completion stack and the thread is woken through an eventfd; it
 * writes replies from the head of each connection's FIFO while they are done, so replies leave in
 * request order whichever workers answered first.
 *
 * A reply is built in pieces that the network thread copies to the connection's output one at a time
 * while the output has room (net.c says how much, and what that bounds): the request's own text, then
 * for GET, GETRANGE and MGET each part's text, followed by the value itself (or GETRANGE's range of
 * it) when it is large: such a value is not copied into the reply but referenced (kvmap.h), so a reply
 * waiting for a slow client costs no memory beyond the value the store holds anyway. */
#ifndef KV_SERVER_H
#define KV_SERVER_H

#include <pthread.h>
#include <shard.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "resp.h"
#include "store.h"

struct server;
struct net_thread;
struct conn;
struct request;
struct watch_set;

struct server_options {
    const char *bind;           /* address to listen on; 127.0.0.1 unless told otherwise */
    int         port;           /* 0: any free port (printed at start) */
    uint32_t    workers;        /* initial shard workers */
    uint32_t    net_threads;    /* network threads, each with its own epoll; 0: the workers run one
                                 * network loop each (of the initial ones) in their idle hooks */
    uint32_t    queue_capacity; /* shard queue capacity per worker */
    uint32_t    max_pipeline;   /* requests in flight per connection before it is read no further */
    uint32_t    hot_keys;       /* heaviest keys each worker tracks (SHARD.STATS) */
    uint32_t    balance_ms;     /* the balancer's interval; 0: off */
    struct resp_limits limits;
};

struct admin {
    pthread_mutex_t lock;
    pthread_cond_t  cond;
    struct request *head, *tail;
    bool            stop;
    bool            started;
    pthread_t       thread;
};

struct server {
    struct server_options opt;
    shard_dispatcher     *d;
    struct net_thread    *net;         /* nnet loops */
    uint32_t              nnet;
    atomic_bool           net_live;    /* --net-threads 0: the workers may run the loops */
    atomic_uint           net_waiters; /* --net-threads 0: workers waiting on the loops (net_workers.c) */
    atomic_uint           net_orphans; /* --net-threads 0: bumped when a worker gives its loops up */
    atomic_uint           net_handed;  /* sockets one loop handed another, not opened yet (net.c) */
    struct admin          admin;
    uint32_t              net_ready;   /* network threads set up (sockets, epoll) */
    uint32_t              net_running; /* of those, started */
    int                   listen_fd; /* shared by the network threads */
    int                   port;      /* the one bound */
    atomic_bool           stopping;
    atomic_ullong         connections, protocol_errors;
    /* Commands are counted by each network loop (net_thread.commands: a line every request wrote
     * from both workers' cores cost 2 workers a cache miss a request); CONFIG RESETSTAT keeps the sum
     * it reset from here, which net_totals takes off. */
    atomic_ullong         commands_reset;
    atomic_ullong         refused; /* connections closed at once for want of a descriptor */
    uint64_t              max_clients; /* connections it holds at most: its descriptors less its own */
};

enum cmd_kind {
    CMD_KEYED, /* one shard job per key */
    CMD_LOCAL, /* answered by the network thread */
    CMD_PURE,  /* answered by the network thread from its arguments alone, read by pointer and length:
                * with nothing ahead of it on its connection, they point into the input (net.c) */
    CMD_ADMIN, /* run by the admin thread */
    CMD_TXN,   /* MULTI, EXEC, DISCARD, WATCH: the connection's transaction (txn.c) */
};

/* One key of a request: a shard job. */
struct part {
    struct request  *r;
    uint32_t         index; /* which part: its reply is r->part_reply[index] */
    uint32_t         arg;   /* argv index of its key */
    uint64_t         hash;  /* kv_hash of its key (its store's), taken once by request_new */
    uint64_t         shard_hash; /* its key's shard hash (kv_shard_hash) */
    /* A command whose keys meet (cross.h): the key's entry, taken out of its store by the part, for
     * the request's last part; and the first part of the request with the same key (set by the last
     * part). Written by the part's step, read by the later steps of its multi-key job. */
    struct kv_entry *held;
    uint32_t         same;
};

/* Reply text a keyed or admin request writes in r->reply: a count, an OK, an array header, an error. */
#define REPLY_TEXT_MAX 256

struct command {
    const char   *name;
    int           arity;     /* Redis convention: n arguments exactly (name included), -n at least n */
    enum cmd_kind kind;
    int           key_step;  /* keyed: keys at argv[1], argv[1 + step], ...; 0 for argv[1] alone; -n
                              * for argv[1..n] alone, the arguments after them no keys (SMOVE, LMOVE) */
    /* keyed: runs one part on the key's worker, writing r->part_reply[p->index] */
    void (*part)(struct kv_store *s, struct request *r, const struct part *p);
    /* keyed, several parts: builds r->reply once every part is done; NULL: the one part's reply */
    void (*finish)(struct request *r);
    /* local and admin: writes r->reply */
    void (*run)(struct server *srv, struct request *r);
    /* keyed: bytes one part's reply text can take (a value sent by reference not counted) */
    size_t part_reply_max;
    /* keyed, optional: the bound for this request's parts, when its arguments make it smaller than
     * part_reply_max (a pop without a count: one element); NULL: nparts * part_reply_max */
    size_t (*reply_bound)(const struct request *r);
    /* keyed, several parts: run as one multi-key job (txn.c), all keys at once, as Redis does (true);
     * ATOMIC_CROSS: and decided in its last part, with every key's entry in hand (cross.h) */
    uint8_t atomic;
    /* keyed: READS when its parts only read their keys (as far as a client sees: a read that finds a
     * key expired deletes it, and says so itself, watch.h); WRITES_FIRST when only its first key is
     * written, its others read (the destination of a *STORE, as Redis counts them for WATCH); WRITES
     * for a write of each of its keys. A write aborts the EXEC of a connection that watches the key
     * (watch.h). */
    uint8_t access;
};

#define ATOMIC_CROSS 2
#define WRITES       0
#define READS        1
#define WRITES_FIRST 2

/* One family's table of commands (a cmd_*.c file); commands.c lists every set. */
struct command_set {
    const struct command *cmds;
    size_t                n;
};

extern const struct command_set cmds_string, cmds_server, cmds_list, cmds_hash, cmds_set, cmds_zset,
    cmds_keyspace, cmds_expire, cmds_move, cmds_float, cmds_random, cmds_scan;

/* A part's reply: its text, then, if value is set, the value's bytes and "\r\n" (a bulk string whose
 * header is the text), sent from the value itself: all of them, or, when slice_len is set, slice_len
 * of them from slice_off (GETRANGE: a range of a stored value, not copied). A reply holding a value
 * holds all of it, so the connection's count of what it holds counts all of it (request_reply_left). */
struct part_reply {
    struct buf         text;
    struct kv_value   *value; /* a reference, or NULL */
    uint32_t           slice_off, slice_len; /* a string is at most 512 MiB */
    struct part_reply *more;  /* the reply goes on with this segment (allocated apart), or NULL: a
                               * range sends each large element by reference (part_reply_add_value) */
};

/* Ends the segment *seg of head's reply with v (a reference the caller hands over; its bulk header is
 * already in the segment's text) and starts the next segment, where *seg then points. Return: true;
 * false without memory (v dropped, the reply marked failed). Context: the part's job. */
bool part_reply_add_value(struct part_reply *head, struct part_reply **seg, struct kv_value *v);

/* Who touches what. I: set by request_new, read-only after. R: the threads running it (its parts'
 * workers, or the admin thread) until request_complete hands it back; the network thread after.
 * N: the network thread only. */
struct request {
    _Atomic(struct request *) done_next; /* the network thread's completion stack */
    struct request       *next;          /* N: the connection's FIFO */
    union {
        struct request   *next_admin;    /* an admin command: the admin thread's queue, under its lock */
        struct watch_set *watch;         /* a WATCH: its keys (set by the network thread before its
                                          * parts are submitted; they write what they read, watch.h) */
    };
    struct conn          *conn;          /* I */
    struct net_thread    *nt;            /* I */
    struct server        *srv;           /* I */
    const struct command *cmd;           /* I */
    uint32_t              argc, nparts;  /* I */
    struct resp_arg      *argv;          /* I: copies, in the request's own allocation */
    struct part          *parts;         /* I */
    struct part_reply    *part_reply;    /* R: part i writes part_reply[i] */
    struct buf            reply;         /* R */
    bool                  reply_parts;   /* R: the parts' replies follow reply (GET, MGET) */
    atomic_uint           parts_left;
    atomic_llong          sum;    /* DEL and EXISTS count here */
    atomic_int            error;  /* first failure of a part (negative errno), 0 if none */
    size_t                mem;    /* I: bytes of its allocation */
    size_t                charge; /* N: what it counts for in its connection's held bytes (net.c) */
    uint32_t              put;    /* N: pieces of its reply already copied to the output */
    bool                  done;   /* N: its completion has been taken */
    /* In the padding after done (a line more a request cost every command 3 %: SET and GET, kv_load).
     * silent, R: a keyed command of an EXEC that did not run (a watched key was written, or its job
     * was refused): it answers nothing (request.c's finish). exec_deferred, N: an EXEC's header whose
     * transaction has commands of no key, which run once it is out (txn_exec_out); exec_aborted, R
     * until it is completed: that EXEC answered a null array or EXECABORT, and they do not run. */
    bool                  silent, exec_deferred, exec_aborted;
};

/* What a keyed command's part works on: its key, and where its reply goes. */
static inline const struct resp_arg *key_of(const struct request *r, const struct part *p)
{
    return &r->argv[p->arg];
}

static inline struct buf *part_out(struct request *r, const struct part *p)
{
    return &r->part_reply[p->index].text;
}

#define KEY(r, p) key_of(r, p)->p, key_of(r, p)->len
#define HASHED_KEY(r, p) (p)->hash, KEY(r, p)

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

/* A reply nothing in its command bounds (a range, KEYS, SCAN): set to a connection's output limit
 * (net.c's OUT_LIMIT), so that a connection runs one such command at a time, and its reply is the one
 * request net.c lets go over the limit by its own size. */
#define LARGE_REPLY_MAX (1024 * 1024)
/* A reply_bound for commands whose reply is as large as LARGE_REPLY_MAX (admin commands included). */
size_t large_reply_bound(const struct request *r);

#define WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"

/* request.c */
/* A request for argv (copied). cmd NULL: an error reply req, already done. NULL without memory. */
struct request *request_new(struct conn *c, struct net_thread *nt, struct server *srv,
                            const struct command *cmd, const struct resp_arg *argv, uint32_t argc);
/* Accepts a request whose reply is partly put out; drops the references the rest holds. */
void request_free(struct request *r);
/* Parts on their way to shard: a read's commands go in one call (shard_submit_many_hash: one
 * read-side section, and one slot claim and wake-up check per worker reached), not one call a
 * command; by their keys' shard hashes, which request_new took. Owned by a network thread. */
#define SUBMIT_BATCH 64
struct submit_batch {
    struct shard_hashed_job jobs[SUBMIT_BATCH];
    struct part            *parts[SUBMIT_BATCH];
    uint32_t                n;
};
/* Adds every part of a keyed request to b, submitting b whenever it is full. */
void request_submit(struct request *r, struct submit_batch *b);
/* Submits what b holds; a part that cannot be submitted answers with an error. */
void request_flush(struct submit_batch *b, shard_dispatcher *d);
/* Runs part p of its request as its job does (txn.c's steps), then counts it done: the last part of
 * a request completes it. Context: the worker of p's key. */
void request_run_part(shard_worker *w, struct part *p);
/* Runs part p, not yet counted done: for a caller that counts several parts of one request at once
 * (request_parts_done), after every one of them has run. Context: as request_run_part. */
void request_run_part_uncounted(shard_worker *w, struct part *p);
/* k parts of r have run: the last of r's parts completes it, after which r is not to be touched. */
void request_parts_done(struct request *r, uint32_t k);
/* Part p could not be submitted (err): it answers with the error. */
void request_refuse_part(struct part *p, int err);
/* Hands a finished request back to its network thread. The caller must not touch r afterwards.
 * Context: any thread (a worker, the admin thread). */
void request_complete(struct request *r);
/* The most bytes of memory the reply of r, a keyed or admin request, can take, values sent by
 * reference not counted: what its connection sets aside for it while it runs. Context: the network
 * thread. */
size_t request_reply_bound(const struct request *r);
/* Bytes of r's reply not yet put out, values sent by reference counted. Context: the network thread,
 * once r is done. */
size_t request_reply_left(const struct request *r);
/* Copies the next piece of r's reply to out and frees what that piece held. Return: the bytes it was
 * charged (request_reply_left's share of it: a referenced value counts whole, where GETRANGE writes a
 * range of it).
 * Context: the network thread, once r is done and while !request_all_put(r). */
size_t request_put_piece(struct request *r, struct buf *out);
/* Whether every piece of r's reply is out. Context: as request_put_piece. */
bool request_all_put(const struct request *r);

/* txn.c: MULTI, EXEC, DISCARD, and the commands of several keys run atomically. */
/* The most keys (parts) one transaction or atomic command may have: shard's limit for one job. */
#define TXN_MAX_PARTS SHARD_MULTI_MAX_KEYS
/* Submits parts[0..n) (of one request or of a transaction's, in order) as one multi-key job: each
 * key's parts run on its worker, in order, while every key is held (shard_submit_multi_each). A part
 * that cannot be submitted answers with the error. Context: the network thread, after its batch was
 * flushed (the order of its earlier commands). */
void txn_submit(struct server *srv, struct part **parts, uint32_t n);
/* As txn_submit, for parts of one request whose keys share one owner (a group of submit_grouped,
 * request.c), given their keys' shard hashes h (shard_dispatcher_key_hash): no owners to look up, no
 * order to change, and the parts counted done together once all have run. */
void txn_submit_group(struct server *srv, struct part **parts, uint32_t n, const uint64_t *h);
/* The order that puts parts of one owner together: order[] gets the indices 0..n-1, each owner's
 * from its first part on, each owner's in their order. Keys of different workers are not ordered
 * among each other, so a transaction's steps then hop a worker at a time (shard runs a worker's
 * steps in a row in one job, multi.h); an MGET's parts form a group a worker. */
void parts_by_owner(const uint32_t *owner, uint32_t n, uint32_t *order);

/* commands.c */
/* Indexes every set's commands by name. Return: 0; -ENOMEM. Context: once, before the network threads
 * start (it aborts on a name defined twice: a programming error). */
int command_init(void);
void command_free(void);
/* The command named by arg, case-insensitive; NULL when unknown. */
const struct command *command_lookup(const struct resp_arg *arg);
/* The commands in name order (COMMAND): how many, and the i-th; NULL past the end. */
size_t command_count(void);
const struct command *command_at(size_t i);
/* Redis's integer syntax: optional '-', no leading zeros or '+', no spaces, within int64. */
bool parse_int64(const char *s, size_t len, int64_t *out);
/* Whether argc fits the command; on false an error reply text is written to why[n]. */
bool command_args_ok(const struct command *cmd, uint32_t argc, char *why, size_t n);

/* admin.c */
int  admin_start(struct server *srv);
/* Answers what is still queued with an error and joins the thread. */
void admin_stop(struct server *srv);
void admin_enqueue(struct server *srv, struct request *r);
void admin_add(struct server *srv, struct request *r);
void admin_place(struct server *srv, struct request *r);
void admin_unplace(struct server *srv, struct request *r);
void admin_remove(struct server *srv, struct request *r);
void admin_crash(struct server *srv, struct request *r);
void admin_stats(struct server *srv, struct request *r);

/* net.c */
/* Binds and sets the network loops up. Return: 0; a negative errno (message printed). Context: main,
 * before the dispatcher is created (its workers may run the loops). */
int  net_init(struct server *srv);
/* Starts the network threads, or lets the workers run the loops. Return: 0; a negative errno
 * (message printed). Context: main, once the dispatcher and the admin thread run. */
int  net_start(struct server *srv);
/* Stops the threads (no request is read any more); net_free once the dispatcher is destroyed. */
void net_stop(struct server *srv);
void net_free(struct server *srv);
/* net_workers.c: the network loops on the workers (--net-threads 0). */
/* Makes the calling worker the keeper of its loop, if it is an initial one. Context: on_worker_start. */
void net_worker_start(struct server *srv);
/* shard_config.on_worker_idle, user the server: runs a round of each loop it keeps or that has
 * completions, and waits on the loops it keeps and wake_fd when none had anything. */
void net_on_idle(shard_worker *w, int wake_fd, int timeout_ms, void *user);
/* Gives up the calling worker's loops (another worker adopts them) and frees what net_on_idle keeps
 * for it. Context: on_worker_stop. */
void net_worker_stop(shard_worker *w, struct server *srv);
/* Whether a request just pushed onto nt's empty completion stack must signal nt's eventfd. Not when
 * the workers run the loops, the caller watches nt, and no worker waits: a watcher runs a round of
 * each loop it watches before it waits, and checks their stacks after it counts itself as waiting.
 * Context: request_complete, after its push. */
bool net_completion_wakes(struct server *srv, const struct net_thread *nt);
/* A connection's reading ends after its pending replies: QUIT, and after a protocol error. */
void conn_close_after_replies(struct conn *c);

/* admin.c, scan.c: keyspace commands */
/* The Redis version kv_server answers to (INFO, HELLO): the commands it has behave as 7.0's. */
#define KV_REDIS_VERSION "7.0.0"
/* The keyspace commands run on the admin thread (CMD_ADMIN): each reads or clears every worker's
 * store through one job per worker of the ring in force (scan.c says why that sees every key). */
/* A cursor of SCAN, HSCAN, SSCAN and ZSCAN, as Redis reads one: a decimal within 64 bits, signed or
 * not (a minus negates modulo 2^64), a position in the space of hashes (scan.c). Return: false when
 * it is not one ("ERR invalid cursor"). */
bool scan_parse_cursor(const struct resp_arg *a, uint64_t *out);
/* The end of a cursor's slice from `from` holding about count of n things: 2^64 * count / n wide
 * (UINT64_MAX, the whole rest, when count >= n). */
uint64_t scan_slice_end(uint64_t from, uint64_t count, uint64_t n);
void scan_scan(struct server *srv, struct request *r);
void scan_keys(struct server *srv, struct request *r);
void scan_flush(struct server *srv, struct request *r);     /* FLUSHDB and FLUSHALL */
void scan_randomkey(struct server *srv, struct request *r);
void scan_memory(struct server *srv, struct request *r);    /* MEMORY USAGE key */
/* How often the keyspace commands drained shard after a ring change, and read a slice again because
 * the membership changed while they read it (INFO shard). Context: any thread. */
void scan_counters(uint64_t *drained, uint64_t *reread);
/* Frees what scan.c caches (the probe keys of the last ring). Context: after admin_stop. */
void scan_free(void);

/* glob.c: Redis's glob (stringmatchlen): * ? [a-z] [^x] and \ escapes, on bytes (a key may hold
 * NUL); nocase folds ASCII letters. */
bool glob_match(const char *pat, size_t plen, const char *s, size_t slen, bool nocase);

/* info.c: INFO, and the counters it reads. */
/* Notes the start time (uptime_in_seconds). Context: main, once, before net_start. */
void info_init(void);
void info_run(struct server *srv, struct request *r);

/* client.c: CLIENT, HELLO, AUTH and the password (--requirepass, CONFIG SET requirepass). */
/* Sets the password; NULL or "": none. Return: 0; -ENOMEM. Context: any thread. */
int  auth_set_password(const char *pass);
/* The password into out[n] (truncated; "" when none). Context: any thread. */
void auth_password(char *out, size_t n);
/* Whether a new connection starts unauthenticated. Context: any thread (a relaxed load). */
bool auth_required(void);
/* Whether cmd may run on a connection that has not authenticated (AUTH, HELLO, QUIT). */
bool auth_exempt(const struct command *cmd);
void auth_free(void);
void client_cmd(struct server *srv, struct request *r);
void client_hello(struct server *srv, struct request *r);
void client_auth(struct server *srv, struct request *r);

/* net.c: what INFO and CLIENT LIST read of the network threads. */
struct net_totals {
    uint64_t clients;        /* connected now */
    uint64_t bytes_in, bytes_out;
    uint64_t commands;       /* since the start, or the last CONFIG RESETSTAT */
};
void net_totals(struct server *srv, struct net_totals *out);
/* net.c: CONFIG RESETSTAT's part: the command count starts again from 0. */
void net_reset_commands(struct server *srv);
/* Appends CLIENT LIST's line of every connection (id_filter: only those ids, n of them; n 0: all) to
 * out. Context: a network thread. */
void net_client_list(struct buf *out, const uint64_t *id_filter, size_t n);
/* CLIENT LIST's line of c. Context: c's network thread. */
void net_client_line(struct conn *c, struct buf *out);
/* Replaces *field, one of a connection's names (name, lib_name, lib_ver), by value (malloc'ed or
 * NULL), under the lock CLIENT LIST reads it with; frees the old one. Context: the connection's
 * network thread. */
void net_client_set(char **field, char *value);

#endif
