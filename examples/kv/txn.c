/* kv_server: transactions (MULTI, EXEC, DISCARD) and the commands of several keys that run as one
 * (MSET, DEL, UNLINK). SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Both become one shard multi-key job with steps (shard_submit_multi_each): once it holds every key
 * involved, each key's parts run on the worker that owns it, with that worker's store, in the order
 * the commands gave them, and no other client's command of any of those keys runs in between. Each
 * request then completes as any does (request.c), and the connection writes the replies in order.
 *
 * MULTI queues the commands that follow, answering +QUEUED, until EXEC or DISCARD; a command refused
 * while queued (unknown, wrong arity, an admin command, too many keys) makes EXEC answer EXECABORT,
 * as Redis does. EXEC answers an array of the queued commands' replies. WATCH is refused (kv_server
 * has none); redis-py's default pipeline and redis-cli's MULTI need only the rest.
 *
 * Each key's parts run in that key's one step, in the order the commands gave them; commands of
 * different keys are not ordered among each other, which only a command whose keys meet can tell
 * (cross.h): such a command may share no key with another command of its transaction. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_internal.h"
#include "server.h"

/* One multi-key job: its parts in order, and the shard hash of each one's key (which part a step
 * runs: shard hands a step the index of its key's first part, and keys of one hash share a step). A
 * group (an MGET's or EXISTS's keys of one worker, txn_submit_group) holds parts of one request, all
 * counted done at once when its last step has run: one atomic decrement of the request's count, not
 * one a key (an MGET of 10 keys on one worker: 3 % of its CPU). The others count each part as it
 * runs: a command whose keys meet (cross.c) learns from the count which of its parts is the last. */
struct txn_job {
    uint32_t     n;
    bool         group;
    struct part *parts[];
    /* followed by uint64_t hash[n] */
};

static uint64_t *job_hashes(struct txn_job *x)
{
    return (uint64_t *)&x->parts[x->n];
}

static void step(shard_worker *w, void *arg, size_t first)
{
    struct txn_job *x = arg;
    uint64_t *h = job_hashes(x), key = h[first];
    /* Steps on one worker (an MGET's group, queued whole) come one after another, each a lookup of
     * two dependent misses (the bucket, then the entry): the bucket of the part after next and the
     * entry of the next start loading while this one runs. */
    if (first + 2 < x->n)
        store_prefetch(x->parts[first + 2]->hash);
    if (first + 1 < x->n)
        store_prefetch_entry(x->parts[first + 1]->hash);
    for (uint32_t i = (uint32_t)first; i < x->n; i++) {
        if (h[i] != key)
            continue;
        if (x->group)
            request_run_part_uncounted(w, x->parts[i]);
        else
            request_run_part(w, x->parts[i]);
    }
}

/* Every step has run (on whatever workers: each step, and this, after the one before). */
static void done(shard_worker *w, void *arg)
{
    (void)w;
    struct txn_job *x = arg;
    if (x->group)
        request_parts_done(x->parts[0]->r, x->n);
    free(x);
}

void parts_by_owner(const uint32_t *owner, uint32_t n, uint32_t *order)
{
    bool placed[TXN_MAX_PARTS];
    memset(placed, 0, n * sizeof *placed); /* not all 1,024: an MGET of 10 zeroed them each time */
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (placed[i])
            continue; /* in the run of an earlier part's owner */
        for (uint32_t j = i; j < n; j++)
            if (!placed[j] && owner[j] == owner[i]) {
                placed[j] = true;
                order[k++] = j;
            }
    }
}

/* Submits parts[0..n), whose keys' shard hashes are h, as one multi-key job with steps; group: parts
 * of one request, counted done together (struct txn_job). */
static void submit_steps(struct server *srv, struct part **parts, uint32_t n, const uint64_t *h, bool group)
{
    struct txn_job *x = malloc(sizeof *x + n * (sizeof *x->parts + sizeof(uint64_t)));
    int err = -ENOMEM;
    if (x) {
        x->n = n;
        x->group = group;
        memcpy(job_hashes(x), h, n * sizeof *h);
        memcpy(x->parts, parts, n * sizeof *parts);
        err = shard_submit_multi_each_hash(srv->d, job_hashes(x), n, step, done, x);
    }
    if (err) {
        free(x);
        for (uint32_t i = 0; i < n; i++)
            request_refuse_part(parts[i], err);
    }
}

void txn_submit_group(struct server *srv, struct part **parts, uint32_t n, const uint64_t *h)
{
    submit_steps(srv, parts, n, h, true);
}

void txn_submit(struct server *srv, struct part **parts, uint32_t n)
{
    uint64_t h[TXN_MAX_PARTS], oh[TXN_MAX_PARTS];
    uint32_t owner[TXN_MAX_PARTS], order[TXN_MAX_PARTS];
    struct part *op[TXN_MAX_PARTS];
    for (uint32_t i = 0; i < n; i++)
        h[i] = parts[i]->shard_hash;
    /* Two keys: either order is one hop. Without owners (destroy began), the submit says why. */
    if (n <= 2 || shard_key_owners_hash(srv->d, h, n, owner) != 0) {
        submit_steps(srv, parts, n, h, false);
        return;
    }
    parts_by_owner(owner, n, order);
    for (uint32_t i = 0; i < n; i++) {
        op[i] = parts[order[i]];
        oh[i] = h[order[i]];
    }
    submit_steps(srv, op, n, oh, false);
}

/* A connection's transaction, from MULTI to EXEC or DISCARD. */
struct txn {
    struct request *head, *tail; /* queued, not yet submitted */
    uint32_t        n, parts;
    size_t          bytes;       /* what the queued requests hold (request_new's allocations) */
    bool            dirty;       /* a command was refused while queued: EXEC aborts */
};

void txn_free(struct conn *c)
{
    struct txn *t = c->txn;
    if (!t)
        return;
    for (struct request *r = t->head, *next; r; r = next) {
        next = r->next;
        request_free(r);
    }
    free(t);
    c->txn = NULL;
}

void txn_refused(struct conn *c)
{
    if (c->txn)
        c->txn->dirty = true;
}

static bool share_key(const struct request *a, const struct request *b)
{
    for (uint32_t i = 0; i < a->nparts; i++)
        for (uint32_t j = 0; j < b->nparts; j++) {
            const struct resp_arg *x = key_of(a, &a->parts[i]), *y = key_of(b, &b->parts[j]);
            if (a->parts[i].hash == b->parts[j].hash && x->len == y->len && memcmp(x->p, y->p, x->len) == 0)
                return true;
        }
    return false;
}

/* Whether r and a queued command share a key, one of them a command whose keys meet. Such a command
 * takes its keys' entries out of their stores until its last part (cross.h), while a transaction runs
 * each key's parts in that key's step (txn_submit): another command of those keys would run between. */
static bool meets_queued(const struct txn *t, const struct request *r)
{
    for (const struct request *q = t->head; q; q = q->next)
        if ((q->cmd->atomic == ATOMIC_CROSS || r->cmd->atomic == ATOMIC_CROSS) && share_key(q, r))
            return true;
    return false;
}

/* Queues a command of the transaction. Return: false without memory. */
static bool queue(struct conn *c, const struct command *cmd, struct resp_arg *argv, uint32_t argc)
{
    struct txn *t = c->txn;
    if (cmd->kind == CMD_ADMIN) {
        t->dirty = true;
        return conn_reply_text(c, true, "ERR kv_server runs no admin or keyspace command inside MULTI");
    }
    struct request *r = request_new(c, c->nt, c->nt->srv, cmd, argv, argc);
    if (!r)
        return false;
    if (t->parts + r->nparts > TXN_MAX_PARTS) {
        request_free(r);
        t->dirty = true;
        return conn_reply_text(c, true, "ERR a transaction holds at most 1024 keys on kv_server");
    }
    /* Queued requests are in no FIFO yet, so nothing else bounds them (net.c's memory per
     * connection): a transaction holds at most what one request may, --max-request. */
    size_t max = c->nt->srv->opt.limits.max_request;
    if (t->bytes + r->mem > max) {
        request_free(r);
        t->dirty = true;
        char msg[128];
        snprintf(msg, sizeof msg, "ERR a transaction holds at most %zu bytes of commands on kv_server (--max-request)",
                 max);
        return conn_reply_text(c, true, msg);
    }
    if (meets_queued(t, r)) {
        request_free(r);
        t->dirty = true;
        return conn_reply_text(c, true, "ERR inside MULTI, kv_server runs RENAME, SMOVE, LMOVE, MSETNX, SINTER, "
                                        "SUNION and SDIFF only on keys no other command of the transaction names");
    }
    t->bytes += r->mem;
    if (t->tail)
        t->tail->next = r;
    else
        t->head = r;
    t->tail = r;
    t->n++;
    t->parts += r->nparts;
    return conn_reply_text(c, false, "QUEUED");
}

/* EXEC: the array header, then every queued command in its place; the keyed ones' parts as one job. */
static bool exec(struct conn *c)
{
    struct server *srv = c->nt->srv;
    struct txn *t = c->txn;
    struct request *h = request_new(c, c->nt, srv, NULL, NULL, 0);
    if (!h)
        return false;
    resp_array(&h->reply, t->n);
    h->done = true;
    conn_append(c, h);
    request_flush(&c->nt->batch, srv->d); /* the commands before MULTI reach shard first */
    struct part *parts[TXN_MAX_PARTS];
    uint32_t n = 0;
    for (struct request *r = t->head, *next; r; r = next) {
        next = r->next;
        r->next = NULL;
        if (r->cmd->kind != CMD_KEYED) {
            r->cmd->run(srv, r);
            r->done = true;
        }
        conn_append(c, r);
        for (uint32_t i = 0; r->cmd->kind == CMD_KEYED && i < r->nparts; i++)
            parts[n++] = &r->parts[i];
    }
    t->head = t->tail = NULL;
    txn_free(c);
    if (n)
        txn_submit(srv, parts, n);
    return true;
}

bool txn_dispatch(struct conn *c, const struct command *cmd, struct resp_arg *argv, uint32_t argc)
{
    const char *name = cmd->name;
    if (strcmp(name, "MULTI") == 0) {
        if (c->txn)
            return conn_reply_text(c, true, "ERR MULTI calls can not be nested");
        if (!(c->txn = calloc(1, sizeof *c->txn)))
            return false;
        return conn_reply_text(c, false, "OK");
    }
    if (strcmp(name, "EXEC") == 0) {
        if (!c->txn)
            return conn_reply_text(c, true, "ERR EXEC without MULTI");
        if (c->txn->dirty) {
            txn_free(c);
            return conn_reply_text(c, true, "EXECABORT Transaction discarded because of previous errors.");
        }
        return exec(c);
    }
    if (strcmp(name, "DISCARD") == 0) {
        if (!c->txn)
            return conn_reply_text(c, true, "ERR DISCARD without MULTI");
        txn_free(c);
        return conn_reply_text(c, false, "OK");
    }
    if (strcmp(name, "WATCH") == 0)
        return conn_reply_text(c, true, c->txn ? "ERR WATCH inside MULTI is not allowed"
                                               : "ERR kv_server has no WATCH (MULTI and EXEC it has)");
    return queue(c, cmd, argv, argc);
}
