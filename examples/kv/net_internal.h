/* kv_server: a network thread and its connections. SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef KV_NET_INTERNAL_H
#define KV_NET_INTERNAL_H

#include <sys/epoll.h>

#include "server.h"

#define NET_EVENTS 64 /* the most events a round takes from epoll_wait */

/* A connection belongs to one network thread, and only that thread touches it. Its life:
 *
 *   open --recv 0--------------------> eof: what is left is parsed and run, then closing
 *   open --QUIT, protocol error------> closing: read no more; closed once every reply is written
 *   open --write fails, EPOLLHUP/ERR-> hungup: out of epoll, replies dropped, still read (by conn_pump)
 *                                      and run up to the end of what it sent; then closing
 *   closing, all written; no memory -> dead: socket closed; freed when its last request is done
 *
 * eof, closing and hungup combine (eof then hungup: a client that half-closed, then reset). */
struct conn {
    int                fd; /* -1 once closed */
    struct net_thread *nt;
    struct buf         in, out;
    struct request    *head, *tail; /* requests in arrival order; replies leave from the head */
    uint32_t           inflight;    /* requests in the FIFO */
    uint32_t           parse_holds; /* admin requests not yet done, and EXECs whose commands of no key
                                     * wait for their watches' check (txn.c): nothing after them is parsed */
    struct request    *admin_wait;  /* an admin (keyspace) request waiting for those before it to be
                                     * done before it goes to the admin thread (net.c), or NULL */
    size_t             held;        /* bytes charged to the requests in the FIFO (net.c) */
    bool               closing;
    bool               eof;
    bool               hungup;
    bool               dead;
    bool               want_in, want_out; /* what epoll watches for it */
    bool               touched;     /* in the list of connections with completed requests */
    struct conn       *touched_next;
    struct conn       *prev, *next; /* every connection of the thread; next links the graveyard */
    struct txn        *txn;         /* between MULTI and EXEC or DISCARD (txn.c), else NULL */
    struct watch_set  *watches;     /* its WATCHes since the last EXEC, DISCARD or UNWATCH (watch.c) */
    _Atomic uint32_t   watched;     /* A: the keys they watch (CLIENT LIST) */
    /* What CLIENT, HELLO and AUTH keep (client.c). Only its thread touches these, but for the fields
     * marked L: written by it under clients_lock (net.c), read by CLIENT LIST on any network thread
     * under that lock; and A: relaxed atomics, for a line that is a snapshot anyway. */
    uint64_t           id;            /* CLIENT ID: from 1, in the order connections are opened, over every thread */
    bool               authenticated; /* AUTH done, or no password asked when it connected */
    bool               listed;        /* L: in the list CLIENT LIST walks */
    int                list_fd;       /* L: the socket's number while listed */
    int64_t            created_ms;    /* CLOCK_MONOTONIC */
    _Atomic int64_t    active_ms;     /* A: when it last sent a command (CLOCK_MONOTONIC, coarse) */
    _Atomic(const struct command *) last_cmd; /* A */
    char               addr[56], laddr[56]; /* peer and local "ip:port", set at accept */
    char              *name, *lib_name, *lib_ver; /* L: NULL for none */
    struct conn       *list_prev, *list_next;     /* L */
};

/* A network loop: its epoll, its connections and its completion stack. With --net-threads N each has
 * a thread of its own (net_main); with 0 the workers run them from their idle hooks (net_workers.c),
 * one worker at a time under drive. Either way "the network thread" in these files means the one
 * running its round. */
struct net_thread {
    struct server  *srv;
    pthread_t       thread;         /* its own thread, with --net-threads N */
    pthread_mutex_t drive;          /* held while a worker runs a round of it (--net-threads 0) */
    _Atomic unsigned keeper, second; /* the workers that wait on it (net_workers.c); 0: none */
    _Atomic uint64_t keeper_round_ns; /* CLOCK_MONOTONIC when its keeper last began a round of it */
    int             epfd, listen_fd, event_fd;
    int             spare_fd;       /* held in reserve for refusing a connection without descriptors */
    /* Completion stack: workers and the admin thread push finished requests, this thread takes them
     * all at once. */
    _Atomic(struct request *) done;
    struct resp_arg *argv; /* parser output, limits.max_args entries */
    char            *inline_args; /* an inline request's arguments, unquoted (RESP_INLINE_MAX bytes) */
    struct submit_batch batch; /* the parts of the read being parsed, submitted at its end */
    struct conn     *conns;
    /* Connections are spread evenly: the loop that accepts one hands it to the loop holding the
     * fewest (EPOLLEXCLUSIVE wakes whichever loop, and one wake-up accepts every connection waiting,
     * so 16 connections made at once could all land on one loop and its worker). nconns: the
     * connections it holds and those handed to it, changed by any loop (atomic adds); handoff: the
     * sockets handed to it and not yet opened, under handoff_lock, taken at its next round after its
     * eventfd is signalled. */
    _Atomic uint32_t nconns;
    pthread_mutex_t  handoff_lock;
    int              handoff[64];
    _Atomic uint32_t nhandoff; /* written under handoff_lock; read without it to skip the lock */
    struct conn     *graveyard; /* unlinked, freed at the end of the round (bury) */
    int64_t          now_ms;    /* CLOCK_MONOTONIC_COARSE, read once a round */
    /* The events of its last epoll_wait; ev_next..ev_n: those a round left for the next (net.c's
     * ROUND_COMMANDS), none of a connection freed since (bury). */
    struct epoll_event ev[NET_EVENTS];
    int              ev_next, ev_n;
    /* Bytes read and written, commands: only this thread writes them (relaxed load, add, store: no read-modify-
     * write on the hot path), INFO sums them on another. */
    atomic_ullong    bytes_in, bytes_out;
    atomic_ullong    commands; /* dispatched (INFO's total_commands_processed), the same way */
};

/* One round of nt's loop: handles the events the last round left (net.c's ROUND_COMMANDS), or else
 * waits up to timeout_ms (0: not at all; -1: no limit) for events and handles them, then the
 * completions and the dead connections. Return: whether it had any event. Context: nt's
 * own thread, or a worker holding nt->drive. */
bool net_round(struct net_thread *nt, int timeout_ms);

/* clients.c: the list CLIENT LIST walks. Context: c's network thread; the count, any thread. */
void     clients_add(struct conn *c);    /* at accept, once c's address and id are set */
void     clients_remove(struct conn *c); /* at the close of its socket; frees its names */
uint64_t clients_count(void);

/* net.c: appends r to c's FIFO (replies leave in its order), charging it to the connection. */
void conn_append(struct conn *c, struct request *r);
/* net.c: a reply of text alone (an error, or a simple string), answered in its place in the FIFO.
 * Return: false without memory. */
bool conn_reply_text(struct conn *c, bool error, const char *text);

/* txn.c: a command while c is in MULTI, or one of MULTI, EXEC, DISCARD, WATCH. Return: false
 * without memory. */
bool txn_dispatch(struct conn *c, const struct command *cmd, struct resp_arg *argv, uint32_t argc);
/* txn.c: a command refused while in MULTI (unknown, wrong arity): EXEC will abort. */
void txn_refused(struct conn *c);
/* txn.c: an EXEC refused (why: its error, "ERR ..."): as Redis, it answers EXECABORT with the reason
 * and ends the transaction, if any, and every watch. Return: false without memory. */
bool txn_exec_refused(struct conn *c, const char *why);
/* txn.c: drops c's transaction, if any, and what it queued. */
void txn_free(struct conn *c);
/* txn.c: ends c's transaction, if any, and its watches (DISCARD, an aborted EXEC, its closing). */
void txn_end(struct conn *c);
/* txn.c: h, an EXEC's header whose transaction has commands of no key (exec_deferred), is out, or
 * dropped: they run now, unless it aborted; then what follows may be parsed. */
void txn_exec_out(struct conn *c, const struct request *h);
/* net.c: r is done: what it counts for in c's held bytes becomes what its reply holds. */
void conn_recharge(struct conn *c, struct request *r);

#endif
