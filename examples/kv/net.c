/* kv_server: network threads: epoll, connections, reading requests and writing replies in order.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The threads share one listening socket, each watching it with EPOLLEXCLUSIVE so that a new
 * connection wakes one of them (SO_REUSEPORT would spread them too, but would also let a second
 * server bind the same port without an error). Each has its own epoll and its own connections:
 * nothing else is shared between threads but the completion stack, which workers push onto.
 *
 * Memory per connection. A client that pipelines without reading must not grow the server without
 * bound, so what a connection holds is counted:
 *   - held: each request in its FIFO is charged its allocation (its arguments included) plus, while
 *     it runs, the most its reply can take (request_reply_bound: a large value is sent by reference,
 *     so that is about 1 KiB per key), then, once done, what is left of its reply (referenced values
 *     counted, though the store holds them anyway);
 *   - out: replies are copied to the output one piece at a time (server.h) only while it holds less
 *     than OUT_LIMIT.
 * A request is parsed and taken only while held + out < OUT_LIMIT (and fewer than --pipeline are in
 * the FIFO), so the last one taken may go over by its own charge, and the output by one piece. A
 * connection thus holds at most about 2 * OUT_LIMIT + one request with its reply + one value in its
 * requests and output, plus its input: one partial request (up to --max-request) and one read of
 * READ_BUDGET. For a client that pipelines GETs of a large value and never reads, that is about
 * OUT_LIMIT + the value. A value overwritten or deleted while a reply still references it stays alive
 * until that reply is out; it is counted in held once its GET is done, so only the GETs in flight
 * when the connection stopped taking requests (at most OUT_LIMIT / the GET reply bound of about 1 KiB)
 * can keep such values beyond the bound. A value counts its length, where its allocation may hold up
 * to twice that (or 1 MiB more) once APPEND or SETRANGE grew it (kvmap.h's kv_entry_write). Commands
 * queued by MULTI are in no FIFO until EXEC: a transaction holds at most --max-request bytes of them
 * (txn.c), as one request. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net_internal.h"

#define READ_CHUNK   16384
#define READ_BUDGET  (256 * 1024) /* per wake-up, so one connection cannot starve the others */
#define OUT_LIMIT    LARGE_REPLY_MAX
/* A round ends after the event that brought its commands to this many or more (one event may bring
 * a connection's whole pipeline, and the completions taken at its end may parse more); the events
 * left wait in nt->ev for the next round, so each is still handled once, in the order epoll gave
 * them. The commands a round takes are submitted, then run once it returns: all 16 connections of a
 * load of 256 pipelined MGETs each in one round were 4,096 requests, with their parts and multi-key
 * jobs several MiB, made at once and run cold (1 worker: 7 % of an MGET's CPU, 9 % of an MSET's, 8 %
 * of a SET's, 13 % of an INCR's). 64 still takes 64 unpipelined clients in one round. */
#define ROUND_COMMANDS 64

static atomic_ullong next_id = 1; /* CLIENT ID; relaxed: only unique, not ordered */

static int64_t monotonic_ms(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Relaxed load, add, store: the counter has one writer, its thread; readers sum a snapshot. */
static void count_add(atomic_ullong *c, size_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}


/* Whether the connection may take another request. Not while an admin command of it runs: what
 * follows it (a SET after a FLUSHDB, a KEYS after a SHARD.ADD) must run after it, as in Redis, and
 * it runs on the admin thread, beside the workers. */
static bool conn_may_take(const struct conn *c)
{
    return !c->closing && !c->dead && c->inflight < c->nt->srv->opt.max_pipeline &&
           c->held + c->out.len < OUT_LIMIT && c->parse_holds == 0;
}

static void conn_watch(struct conn *c)
{
    if (c->dead || c->hungup)
        return;
    bool in = conn_may_take(c) && !c->eof;
    bool out = c->out.len > 0;
    if (in == c->want_in && out == c->want_out)
        return;
    struct epoll_event ev = { .events = (in ? EPOLLIN : 0u) | (out ? EPOLLOUT : 0u), .data.ptr = c };
    epoll_ctl(c->nt->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_in = in;
    c->want_out = out;
}

static void conn_close_socket(struct conn *c)
{
    if (c->fd < 0)
        return;
    if (!c->hungup)
        epoll_ctl(c->nt->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
}

/* Closes the socket at once; the struct lives on until its last request is done. */
static void conn_kill(struct conn *c)
{
    if (c->dead)
        return;
    clients_remove(c);
    conn_close_socket(c);
    c->dead = true;
    buf_free(&c->in);
    buf_free(&c->out);
}

/* The peer is gone (a write failed; epoll reports a hang-up or an error): its replies cannot be
 * delivered, but every command it sent is still run, as redis-server runs what it received before a
 * reset. The socket leaves epoll, which would report the hang-up at every wait while requests run;
 * conn_pump reads it from now on, as the connection takes more, and closes it at the end of its data. */
static void conn_hangup(struct conn *c)
{
    if (c->hungup || c->dead)
        return;
    epoll_ctl(c->nt->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    c->hungup = true;
    buf_free(&c->out);
    if (c->eof)
        conn_close_socket(c);
}

/* Unlinks a dead connection. Its memory is freed at the end of the round (bury), whose events may
 * still name it (the handlers skip dead connections); bury takes it out of those kept for the next. */
static void conn_free(struct conn *c)
{
    struct net_thread *nt = c->nt;
    atomic_fetch_sub_explicit(&nt->nconns, 1, memory_order_relaxed);
    if (c->prev)
        c->prev->next = c->next;
    else
        nt->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    for (struct request *r = c->head, *next; r; r = next) {
        next = r->next;
        request_free(r);
    }
    c->head = c->tail = NULL;
    txn_end(c);
    c->next = nt->graveyard;
    nt->graveyard = c;
}

/* The connection an event of nt's epoll is of; NULL for the listening socket's (data.ptr NULL) and
 * for its eventfd's (data.ptr nt). */
static struct conn *conn_of_event(const struct net_thread *nt, const struct epoll_event *e)
{
    return e->data.ptr == (const void *)nt ? NULL : e->data.ptr;
}

static void bury(struct net_thread *nt)
{
    /* The events left for the next round keep none of a connection freed here. */
    if (nt->graveyard) {
        int k = nt->ev_next;
        for (int i = nt->ev_next; i < nt->ev_n; i++) {
            const struct conn *c = conn_of_event(nt, &nt->ev[i]);
            if (!c || !c->dead)
                nt->ev[k++] = nt->ev[i];
        }
        nt->ev_n = k;
    }
    for (struct conn *c = nt->graveyard, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    nt->graveyard = NULL;
}

void conn_append(struct conn *c, struct request *r)
{
    if (c->tail)
        c->tail->next = r;
    else
        c->head = r;
    c->tail = r;
    c->inflight++;
    r->charge = r->mem + (r->done ? request_reply_left(r) : request_reply_bound(r));
    c->held += r->charge;
}

/* A request is done: its charge becomes what its reply actually holds. */
void conn_recharge(struct conn *c, struct request *r)
{
    size_t now = r->mem + request_reply_left(r);
    c->held = c->held - r->charge + now;
    r->charge = now;
}

void conn_close_after_replies(struct conn *c)
{
    c->closing = true;
}

bool conn_reply_text(struct conn *c, bool error, const char *text)
{
    struct request *r = request_new(c, c->nt, c->nt->srv, NULL, NULL, 0);
    if (!r)
        return false;
    if (error)
        resp_error(&r->reply, text);
    else
        resp_simple(&r->reply, text);
    r->done = true;
    conn_append(c, r);
    return true;
}

/* An error reply that is answered in its place in the FIFO, by the network thread. */
static bool conn_reply_error(struct conn *c, const char *msg)
{
    return conn_reply_text(c, true, msg);
}

/* A pure command with nothing ahead of it on its connection: its reply goes straight to the output,
 * which a request on the stack borrows, with no allocation and no copy (the output is bounded by
 * conn_may_take, as the FIFO is). On a hung-up connection it is dropped, as conn_collect drops the
 * FIFO's: the output is gone for good. */
static void reply_now(struct conn *c, const struct command *cmd, struct resp_arg *argv, uint32_t argc)
{
    if (c->hungup)
        return;
    struct request r = { .conn = c, .nt = c->nt, .srv = c->nt->srv, .cmd = cmd, .argc = argc, .argv = argv,
                         .reply = c->out };
    cmd->run(r.srv, &r);
    c->out = r.reply;
}

/* Redis 7.0's error for an unknown command: its name and its first arguments, each cut to what is
 * left of 128 bytes, quoted, CR and LF as spaces (an error is one line), into why (UNKNOWN_MAX): at
 * most 178 bytes with the name, and the arguments stop once past 128, so at most 131 more. */
#define UNKNOWN_MAX 384
static void unknown_command(const struct resp_arg *argv, uint32_t argc, char *why)
{
    int n = snprintf(why, UNKNOWN_MAX, "ERR unknown command '%.*s', with args beginning with: ",
                     (int)(argv[0].len > 128 ? 128 : argv[0].len), argv[0].p);
    for (uint32_t i = 1, args = 0; i < argc && args < 128; i++) {
        size_t room = 128 - args;
        int w = snprintf(why + n, UNKNOWN_MAX - (size_t)n, "'%.*s' ", (int)(argv[i].len > room ? room : argv[i].len),
                         argv[i].p);
        n += w;
        args += (uint32_t)w;
    }
    for (char *ch = why; *ch; ch++)
        if (*ch == '\r' || *ch == '\n')
            *ch = ' ';
}

/* Whether every request before r in c's FIFO is done (its completion taken). */
static bool done_before(const struct conn *c, const struct request *r)
{
    for (const struct request *q = c->head; q != r; q = q->next)
        if (!q->done)
            return false;
    return true;
}

static bool dispatch(struct conn *c, struct resp_arg *argv, uint32_t argc)
{
    struct server *srv = c->nt->srv;
    count_add(&c->nt->commands, 1); /* one writer, as the byte counts */
    const struct command *cmd = command_lookup(&argv[0]);
    char why[UNKNOWN_MAX];
    if (!cmd) {
        unknown_command(argv, argc, why);
        txn_refused(c);
        return conn_reply_error(c, why);
    }
    atomic_store_explicit(&c->last_cmd, cmd, memory_order_relaxed);
    atomic_store_explicit(&c->active_ms, c->nt->now_ms, memory_order_relaxed);
    if (!command_args_ok(cmd, argc, why, sizeof why)) {
        if (strcmp(cmd->name, "EXEC") == 0)
            return txn_exec_refused(c, why); /* and the transaction ends, as in Redis */
        txn_refused(c);
        return conn_reply_error(c, why);
    }
    /* As Redis: an unknown command or a wrong count is answered first, then the password. */
    if (!c->authenticated && auth_required() && !auth_exempt(cmd)) /* the password may be gone since */
        return conn_reply_error(c, "NOAUTH Authentication required.");
    /* QUIT inside MULTI is not queued: it answers and closes, and the transaction goes, as in Redis. */
    if (c->txn && strcmp(cmd->name, "QUIT") == 0)
        txn_end(c);
    if (cmd->kind == CMD_TXN || c->txn)
        return txn_dispatch(c, cmd, argv, argc);
    if (cmd->kind == CMD_PURE && !c->head) {
        reply_now(c, cmd, argv, argc);
        return true;
    }
    struct request *r = request_new(c, c->nt, srv, cmd, argv, argc);
    if (!r)
        return false;
    if (cmd->kind == CMD_LOCAL || cmd->kind == CMD_PURE) {
        cmd->run(srv, r);
        r->done = true;
    }
    conn_append(c, r);
    if (cmd->kind == CMD_ADMIN) {
        request_flush(&c->nt->batch, srv->d); /* the keyed commands before it reach shard first */
        c->parse_holds++;
        /* What the client sent before it runs before it. For single-key commands the queues' order
         * would do (its jobs on each worker come after theirs), but a command of several keys runs
         * its steps once all its keys are held, after its parts were queued: a FLUSHALL pipelined
         * after an MSET over two workers left the MSET's keys (a review's finding, 61-87 rounds of
         * 100; KEYS and SCAN missed them). So it goes once every request before it is done. */
        if (done_before(c, r))
            admin_enqueue(srv, r);
        else
            c->admin_wait = r; /* take_completions sends it */
    } else if (cmd->kind == CMD_KEYED) {
        request_submit(r, &c->nt->batch);
    }
    return true;
}

/* Parses and dispatches what the input holds, while the connection may take more. Return: whether
 * it dispatched anything. */
static bool conn_parse(struct conn *c)
{
    struct server *srv = c->nt->srv;
    size_t off = 0;
    bool progress = false, drained = false; /* drained: what is left is at most part of a request */
    while (conn_may_take(c)) {
        size_t argc;
        const char *why;
        long n = off < c->in.len ? resp_parse(c->in.p + off, c->in.len - off, &srv->opt.limits,
                                              c->nt->argv, &argc, c->nt->inline_args, &why)
                                 : 0;
        if (n == 0) {
            drained = true;
            break;
        }
        if (n < 0) {
            /* Like Redis: answer the error after the replies already owed, then close. */
            atomic_fetch_add_explicit(&srv->protocol_errors, 1, memory_order_relaxed);
            if (!conn_reply_error(c, why))
                conn_kill(c);
            conn_close_after_replies(c);
            progress = true;
            break;
        }
        off += (size_t)n;
        progress = true;
        if (argc && !dispatch(c, c->nt->argv, (uint32_t)argc)) {
            conn_kill(c); /* out of memory: the client sees a closed connection, never a wrong reply */
            break;
        }
    }
    request_flush(&c->nt->batch, srv->d); /* what this read brought, in one call */
    if (!c->dead)
        buf_consume(&c->in, off);
    /* The client has stopped sending: once what it sent has been run, answer it and close. */
    if (c->eof && drained)
        conn_close_after_replies(c);
    return progress;
}

/* Copies the replies of done requests at the head of the FIFO to the output, a piece at a time while
 * it holds less than OUT_LIMIT; a connection that can no longer be written drops them. Return:
 * whether it moved anything. */
static bool conn_collect(struct conn *c)
{
    bool drop = c->dead || c->hungup, moved = false;
    while (c->head && c->head->done && (drop || c->out.len < OUT_LIMIT)) {
        struct request *r = c->head;
        moved = true;
        if (!drop) {
            size_t n = request_put_piece(r, &c->out);
            r->charge -= n;
            c->held -= n;
            if (!request_all_put(r))
                continue;
        }
        if (r->exec_deferred)
            txn_exec_out(c, r);
        c->head = r->next;
        if (!c->head)
            c->tail = NULL;
        c->inflight--;
        c->held -= r->charge;
        request_free(r);
    }
    return moved;
}

/* Return: whether it wrote anything or the connection changed state. */
static bool conn_write(struct conn *c)
{
    if (c->dead || c->hungup)
        return false;
    size_t off = 0;
    while (off < c->out.len) {
        ssize_t n = send(c->fd, c->out.p + off, c->out.len - off, MSG_NOSIGNAL);
        if (n > 0) {
            off += (size_t)n;
            count_add(&c->nt->bytes_out, (size_t)n);
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno == EAGAIN) {
            break;
        } else {
            conn_hangup(c); /* EPIPE, ECONNRESET: what it sent is still run */
            return true;
        }
    }
    buf_consume(&c->out, off);
    if (c->out.failed) {
        conn_kill(c);
        return true;
    }
    return off > 0;
}

/* Reads what the socket has, up to READ_BUDGET. Return: whether it read anything or the connection
 * changed state. */
static bool conn_recv(struct conn *c)
{
    size_t got = 0;
    while (got < READ_BUDGET) {
        if (!buf_reserve(&c->in, READ_CHUNK)) {
            conn_kill(c);
            return true;
        }
        size_t room = c->in.cap - c->in.len;
        ssize_t n = recv(c->fd, c->in.p + c->in.len, room, 0);
        if (n > 0) {
            c->in.len += (size_t)n;
            got += (size_t)n;
            count_add(&c->nt->bytes_in, (size_t)n);
            /* Short: the socket is empty for now, and its level-triggered event says when it is not,
             * so a second call only to hear EAGAIN is saved (as Redis reads once an event). A hung-up
             * connection is not watched: it reads on to its end. */
            if ((size_t)n < room && !c->hungup)
                break;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN && !c->hungup)
            break;
        /* The end of what it sent: its last byte (0), a reset (an error, after every byte received
         * before it), or, on a hung-up connection, nothing more. What it sent is run, as Redis does. */
        if (n < 0 && errno != EAGAIN)
            conn_hangup(c);
        c->eof = true;
        if (c->hungup)
            conn_close_socket(c);
        return true;
    }
    return got > 0;
}

/* Everything a connection can do now: parse, collect replies, write, and on a hung-up connection
 * read; again while any of that moved, since each can lift what stopped another. May free c. */
static void conn_pump(struct conn *c)
{
    for (;;) {
        bool moved = conn_parse(c);
        moved |= conn_collect(c);
        moved |= conn_write(c);
        if (c->hungup && !c->eof && !c->dead && conn_may_take(c))
            moved |= conn_recv(c);
        if (c->closing && !c->dead && !c->head && c->out.len == 0)
            conn_kill(c);
        if (c->dead) {
            if (!c->head)
                conn_free(c);
            return;
        }
        if (!moved)
            break;
    }
    conn_watch(c);
}

/* An epoll event of a connection. May free c. */
static void conn_event(struct conn *c, uint32_t events)
{
    if (events & (EPOLLHUP | EPOLLERR))
        conn_hangup(c);
    else if ((events & EPOLLIN) && c->want_in) /* not an event left from a round before it stopped taking */
        conn_recv(c);
    conn_pump(c);
}

/* "ip:port" of the socket's peer or own end; "?" when unknown. */
static void describe_address(int fd, bool peer, char *out, size_t n)
{
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if ((peer ? getpeername(fd, (struct sockaddr *)&a, &len) : getsockname(fd, (struct sockaddr *)&a, &len)) == 0) {
        if (a.ss_family == AF_INET6) {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&a)->sin6_addr, host, sizeof host);
            port = ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
        } else if (a.ss_family == AF_INET) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)&a)->sin_addr, host, sizeof host);
            port = ntohs(((struct sockaddr_in *)&a)->sin_port);
        }
    }
    snprintf(out, n, "%s:%d", host, port);
}

/* Out of descriptors: accepts one waiting connection with the spare descriptor and closes it, so that
 * the client learns at once (a closed connection) and the listening socket does not stay readable,
 * which would make every round find it so and its thread spin. Return: whether it took one. */
static bool refuse_one(struct net_thread *nt)
{
    if (nt->spare_fd < 0)
        return false;
    close(nt->spare_fd);
    int fd = accept4(nt->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0)
        close(fd);
    nt->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0)
        atomic_fetch_add_explicit(&nt->srv->refused, 1, memory_order_relaxed);
    return fd >= 0;
}

/* Opens an accepted socket as a connection of nt, counted in nt->nconns already. Context: nt's loop. */
static void conn_open(struct net_thread *nt, int fd)
{
    struct conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        atomic_fetch_sub_explicit(&nt->nconns, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&nt->srv->refused, 1, memory_order_relaxed);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    *c = (struct conn){ .fd = fd, .nt = nt, .want_in = true, .next = nt->conns,
                        .id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed),
                        .authenticated = !auth_required(), .created_ms = nt->now_ms };
    atomic_init(&c->active_ms, nt->now_ms);
    atomic_init(&c->last_cmd, NULL);
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
    if (epoll_ctl(nt->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        close(fd);
        free(c);
        atomic_fetch_sub_explicit(&nt->nconns, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&nt->srv->refused, 1, memory_order_relaxed);
        return;
    }
    describe_address(fd, true, c->addr, sizeof c->addr);
    describe_address(fd, false, c->laddr, sizeof c->laddr);
    clients_add(c);
    if (nt->conns)
        nt->conns->prev = c;
    nt->conns = c;
    atomic_fetch_add_explicit(&nt->srv->connections, 1, memory_order_relaxed);
}

/* The loop that holds the fewest connections, nt on a tie. relaxed: a count a moment old only makes
 * the spread a connection less even. */
static struct net_thread *fewest_connections(struct net_thread *nt)
{
    struct server *srv = nt->srv;
    struct net_thread *best = nt;
    uint32_t least = atomic_load_explicit(&nt->nconns, memory_order_relaxed);
    for (uint32_t i = 0; i < srv->net_ready; i++) {
        uint32_t n = atomic_load_explicit(&srv->net[i].nconns, memory_order_relaxed);
        if (n < least) {
            least = n;
            best = &srv->net[i];
        }
    }
    return best;
}

/* Hands socket fd to loop to, counted there, and signals it. Return: false when its hand-off list is
 * full (the caller keeps the connection). Context: any loop. */
static bool hand_off(struct net_thread *to, int fd)
{
    pthread_mutex_lock(&to->handoff_lock);
    uint32_t n = atomic_load_explicit(&to->nhandoff, memory_order_relaxed);
    bool room = n < sizeof to->handoff / sizeof to->handoff[0];
    if (room) {
        to->handoff[n] = fd;
        atomic_store_explicit(&to->nhandoff, n + 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&to->nconns, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&to->srv->net_handed, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&to->handoff_lock);
    if (room) {
        uint64_t one = 1;
        ssize_t w = write(to->event_fd, &one, sizeof one);
        (void)w; /* EAGAIN: the counter is full, so it is signalled already */
    }
    return room;
}

/* Opens the sockets other loops handed to nt. Context: nt's loop, after reading its eventfd. */
static void take_handoffs(struct net_thread *nt)
{
    /* Every eventfd event of a loop runs this, completions' too: no lock while nothing was handed.
     * A hand-off stores the count under the lock before it writes the eventfd that this loop has
     * read (the kernel's eventfd lock orders the two), so that hand-off is seen here. */
    if (!atomic_load_explicit(&nt->nhandoff, memory_order_relaxed))
        return;
    int fds[sizeof nt->handoff / sizeof nt->handoff[0]];
    pthread_mutex_lock(&nt->handoff_lock);
    uint32_t n = atomic_load_explicit(&nt->nhandoff, memory_order_relaxed);
    memcpy(fds, nt->handoff, n * sizeof *fds);
    atomic_store_explicit(&nt->nhandoff, 0, memory_order_relaxed);
    pthread_mutex_unlock(&nt->handoff_lock);
    for (uint32_t i = 0; i < n; i++) {
        conn_open(nt, fds[i]);
        atomic_fetch_sub_explicit(&nt->srv->net_handed, 1, memory_order_relaxed); /* counted as a client now */
    }
}

static void accept_all(struct net_thread *nt)
{
    for (;;) {
        int fd = accept4(nt->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE) && refuse_one(nt))
            continue;
        if (fd < 0)
            return; /* EAGAIN (or out of descriptors with none spare: the backlog keeps the rest) */
        /* Those handed to another loop and not opened yet hold descriptors too. */
        if (clients_count() + atomic_load_explicit(&nt->srv->net_handed, memory_order_relaxed) >= nt->srv->max_clients) {
            /* As Redis's maxclients: closed at once, while descriptors remain to do so. */
            close(fd);
            atomic_fetch_add_explicit(&nt->srv->refused, 1, memory_order_relaxed);
            continue;
        }
        struct net_thread *to = fewest_connections(nt);
        if (to != nt && hand_off(to, fd))
            continue;
        atomic_fetch_add_explicit(&nt->nconns, 1, memory_order_relaxed);
        conn_open(nt, fd);
    }
}

/* Takes every finished request and pumps each connection that got one; signalled: its eventfd fired,
 * and is emptied first (a push after that signals it again). */
static bool take_completions(struct net_thread *nt, bool signalled)
{
    uint64_t count;
    if (signalled) {
        ssize_t n = read(nt->event_fd, &count, sizeof count);
        (void)n; /* EAGAIN: another round emptied it */
    }
    /* acquire: pairs with the release push in request_complete, so the replies are visible. */
    struct request *r = atomic_exchange_explicit(&nt->done, NULL, memory_order_acquire);
    struct conn *touched = NULL;
    for (struct request *next; r; r = next) {
        next = atomic_load_explicit(&r->done_next, memory_order_relaxed);
        r->done = true;
        if (r->cmd && r->cmd->kind == CMD_ADMIN)
            r->conn->parse_holds--; /* what follows it may be parsed now */
        conn_recharge(r->conn, r);
        if (!r->conn->touched) {
            r->conn->touched = true;
            r->conn->touched_next = touched;
            touched = r->conn;
        }
    }
    for (struct conn *c = touched, *next; c; c = next) {
        next = c->touched_next;
        c->touched = false;
        if (c->admin_wait && done_before(c, c->admin_wait)) {
            admin_enqueue(nt->srv, c->admin_wait);
            c->admin_wait = NULL;
        }
        conn_pump(c);
    }
    return touched != NULL;
}

bool net_round(struct net_thread *nt, int timeout_ms)
{
    if (nt->ev_next == nt->ev_n) {
        int n = epoll_wait(nt->epfd, nt->ev, NET_EVENTS, timeout_ms);
        nt->ev_n = n > 0 ? n : 0;
        nt->ev_next = 0;
    }
    nt->now_ms = monotonic_ms(CLOCK_MONOTONIC_COARSE);
    bool any = nt->ev_n > 0;
    uint64_t start = atomic_load_explicit(&nt->commands, memory_order_relaxed);
    while (nt->ev_next < nt->ev_n) {
        const struct epoll_event *e = &nt->ev[nt->ev_next++];
        struct conn *c = conn_of_event(nt, e);
        if (e->data.ptr == NULL)
            accept_all(nt);
        else if (!c) {
            /* After the eventfd is read: a hand-off made after that read signals it again. */
            take_completions(nt, true);
            take_handoffs(nt);
        } else if (c->dead || c->hungup)
            continue; /* out of epoll since its event was taken */
        else
            conn_event(c, e->events);
        if (atomic_load_explicit(&nt->commands, memory_order_relaxed) - start >= ROUND_COMMANDS)
            break;
    }
    bool took = take_completions(nt, false);
    bury(nt);
    return any || took;
}

static void *net_main(void *arg)
{
    struct net_thread *nt = arg;
    while (!atomic_load_explicit(&nt->srv->stopping, memory_order_acquire))
        net_round(nt, -1);
    return NULL;
}

/* Listens on --bind: an IPv4 or IPv6 address, or a host name such as localhost (its first address
 * that can be bound). Return: the socket, or a negative errno; -EINVAL when the name does not
 * resolve. */
static int listen_on(struct server *srv, int port)
{
    char service[8];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE | AI_NUMERICSERV }, *list;
    if (getaddrinfo(srv->opt.bind, service, &hints, &list) != 0)
        return -EINVAL;
    int err = -EADDRNOTAVAIL;
    for (struct addrinfo *ai = list; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            err = -errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 511) == 0) {
            freeaddrinfo(list);
            return fd;
        }
        err = -errno;
        close(fd);
    }
    freeaddrinfo(list);
    return err;
}

static int bound_port(int fd)
{
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    return ntohs(a.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&a)->sin6_port : ((struct sockaddr_in *)&a)->sin_port);
}

static int net_thread_init(struct server *srv, struct net_thread *nt, int listen_fd)
{
    *nt = (struct net_thread){ .srv = srv, .epfd = -1, .listen_fd = listen_fd, .event_fd = -1, .spare_fd = -1,
                               .now_ms = monotonic_ms(CLOCK_MONOTONIC_COARSE) };
    pthread_mutex_init(&nt->drive, NULL);
    pthread_mutex_init(&nt->handoff_lock, NULL);
    nt->argv = calloc(srv->opt.limits.max_args, sizeof *nt->argv);
    nt->inline_args = malloc(RESP_INLINE_MAX);
    if (!nt->argv || !nt->inline_args)
        return -ENOMEM;
    nt->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    nt->epfd = epoll_create1(EPOLL_CLOEXEC);
    nt->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (nt->epfd < 0 || nt->event_fd < 0)
        return -errno;
    struct epoll_event l = { .events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = NULL };
    struct epoll_event e = { .events = EPOLLIN, .data.ptr = nt };
    if (epoll_ctl(nt->epfd, EPOLL_CTL_ADD, nt->listen_fd, &l) != 0 ||
        epoll_ctl(nt->epfd, EPOLL_CTL_ADD, nt->event_fd, &e) != 0)
        return -errno;
    return 0;
}

int net_init(struct server *srv)
{
    /* On the workers: a loop for each initial worker, at most one a CPU (a loop batches the requests
     * of its connections: more loops than cores would only batch less) and 64. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t most = cpus < 1 ? 1 : cpus > 64 ? 64 : (uint32_t)cpus;
    srv->nnet = srv->opt.net_threads ? srv->opt.net_threads
                                     : srv->opt.workers < most ? srv->opt.workers : most;
    srv->net = calloc(srv->nnet, sizeof *srv->net);
    if (!srv->net)
        return -ENOMEM;
    srv->listen_fd = listen_on(srv, srv->opt.port);
    if (srv->listen_fd < 0) {
        fprintf(stderr, "kv_server: cannot listen on %s:%d: %s\n", srv->opt.bind, srv->opt.port,
                strerror(-srv->listen_fd));
        return srv->listen_fd;
    }
    srv->port = bound_port(srv->listen_fd);
    /* Its own descriptors: 32 in reserve as Redis keeps (files, accepting one to close it), each
     * loop's three, and each worker's two (an eventfd, an epoll) with the network on the workers. */
    struct rlimit files;
    uint64_t own = 32 + 3 * (uint64_t)srv->nnet + (srv->opt.net_threads ? 0 : 2 * (uint64_t)srv->opt.workers);
    if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY)
        files.rlim_cur = 1 << 20;
    srv->max_clients = files.rlim_cur > 2 * own ? files.rlim_cur - own : files.rlim_cur / 2;
    for (uint32_t i = 0; i < srv->nnet; i++) {
        int err = net_thread_init(srv, &srv->net[i], srv->listen_fd);
        srv->net_ready = i + 1;
        if (err) {
            fprintf(stderr, "kv_server: cannot set up a network loop: %s\n", strerror(-err));
            return err;
        }
    }
    return 0;
}

int net_start(struct server *srv)
{
    if (!srv->opt.net_threads) { /* the workers' idle hooks run the loops from now on */
        atomic_store_explicit(&srv->net_live, true, memory_order_release);
        return 0;
    }
    for (uint32_t i = 0; i < srv->nnet; i++) {
        int err = pthread_create(&srv->net[i].thread, NULL, net_main, &srv->net[i]);
        if (err) {
            fprintf(stderr, "kv_server: cannot start a network thread: %s\n", strerror(err));
            return -err;
        }
        srv->net_running = i + 1;
    }
    return 0;
}

void net_stop(struct server *srv)
{
    atomic_store_explicit(&srv->stopping, true, memory_order_release);
    for (uint32_t i = 0; i < srv->net_running; i++) {
        uint64_t one = 1;
        ssize_t n = write(srv->net[i].event_fd, &one, sizeof one);
        (void)n;
    }
    for (uint32_t i = 0; i < srv->net_running; i++)
        pthread_join(srv->net[i].thread, NULL);
    srv->net_running = 0;
    /* A worker that began a round before it saw stopping finishes it first; none begins another. */
    for (uint32_t i = 0; i < srv->net_ready; i++) {
        pthread_mutex_lock(&srv->net[i].drive);
        pthread_mutex_unlock(&srv->net[i].drive);
    }
}

void net_free(struct server *srv)
{
    if (!srv->net)
        return;
    for (uint32_t i = 0; i < srv->net_ready; i++) {
        struct net_thread *nt = &srv->net[i];
        /* The dispatcher is gone: every submitted request has been pushed here. */
        struct request *r = atomic_exchange(&nt->done, NULL);
        for (; r; r = atomic_load(&r->done_next))
            r->done = true;
        while (nt->conns) {
            conn_kill(nt->conns);
            conn_free(nt->conns);
        }
        for (uint32_t k = 0; k < atomic_load(&nt->nhandoff); k++) /* handed over, never opened */
            close(nt->handoff[k]);
        pthread_mutex_destroy(&nt->handoff_lock);
        bury(nt);
        free(nt->argv);
        free(nt->inline_args);
        if (nt->epfd >= 0)
            close(nt->epfd);
        if (nt->event_fd >= 0)
            close(nt->event_fd);
        if (nt->spare_fd >= 0)
            close(nt->spare_fd);
        pthread_mutex_destroy(&nt->drive);
    }
    free(srv->net);
    srv->net = NULL;
    if (srv->listen_fd >= 0)
        close(srv->listen_fd);
}

static uint64_t commands_since_start(struct server *srv)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < srv->net_ready; i++)
        n += atomic_load_explicit(&srv->net[i].commands, memory_order_relaxed);
    return n;
}

void net_totals(struct server *srv, struct net_totals *out)
{
    *out = (struct net_totals){ .clients = clients_count() };
    for (uint32_t i = 0; i < srv->net_ready; i++) {
        out->bytes_in += atomic_load_explicit(&srv->net[i].bytes_in, memory_order_relaxed);
        out->bytes_out += atomic_load_explicit(&srv->net[i].bytes_out, memory_order_relaxed);
    }
    uint64_t all = commands_since_start(srv), reset = atomic_load_explicit(&srv->commands_reset, memory_order_relaxed);
    out->commands = all > reset ? all - reset : 0; /* a loop's count read before its last reset: 0 */
}

void net_reset_commands(struct server *srv)
{
    atomic_store_explicit(&srv->commands_reset, commands_since_start(srv), memory_order_relaxed);
}
