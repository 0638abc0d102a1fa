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
 * as Redis does. EXEC answers an array of the queued commands' replies; with watched keys (watch.h),
 * its job holds those too and its first step decides: the array, or a null one with nothing run.
 *
 * Each key's parts run in that key's one step, in the order the commands gave them; commands of
 * different keys are not ordered among each other, which only a command whose keys meet can tell
 * (cross.h): such a command may share no key with another command of its transaction. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expire.h"
#include "net_internal.h"
#include "server.h"
#include "watch.h"

/* An EXEC of a connection that watches keys (watch.h): its array header, which the job's first step
 * writes, and how many commands the array holds. */
struct txn_exec {
    struct request   *head;
    struct watch_set *watches;
    uint32_t          nreq;
};

/* One multi-key job: its parts in order, and the shard hash of each one's key (which part a step
 * runs: shard hands a step the index of its key's first part, and keys of one hash share a step),
 * then an EXEC's watched keys, held with the others but with no part of their own. A group (an
 * MGET's or EXISTS's keys of one worker, txn_submit_group) holds parts of one request, all
 * counted done at once when its last step has run: one atomic decrement of the request's count, not
 * one a key (an MGET of 10 keys on one worker: 3 % of its CPU). The others count each part as it
 * runs: a command whose keys meet (cross.c) learns from the count which of its parts is the last.
 * Steps run one after another (on whatever workers): exec and aborted need no lock. */
struct txn_job {
    uint32_t         n;
    bool             group;
    bool             aborted; /* an EXEC's watched key was written: its parts do not run */
    struct txn_exec *exec;    /* an EXEC with watches, until its first step has answered it */
    struct part     *parts[];
    /* followed by uint64_t hash[]: the parts' keys', then the watched ones */
};

static uint64_t *job_hashes(struct txn_job *x)
{
    return (uint64_t *)&x->parts[x->n];
}

/* An EXEC with watches is decided: its header answers the array, a null one (aborted: nothing of it
 * runs), or EXECABORT with why (err: its job was refused, nothing ran); its watches end. Before the
 * header is completed: the network thread runs the transaction's commands of no key once it has sent
 * the header, and only if it did not abort (txn_exec_out). */
static void exec_answer(struct txn_exec *e, bool aborted, int err)
{
    struct request *h = e->head;
    watch_release(e->watches);
    h->exec_aborted = aborted || err;
    if (err) {
        char msg[160];
        snprintf(msg, sizeof msg, "EXECABORT Transaction discarded: %s", shard_strerror(err));
        resp_error(&h->reply, msg);
    } else {
        resp_array(&h->reply, aborted ? -1 : (int64_t)e->nreq);
    }
    request_complete(h);
    free(e);
}

static void step(shard_worker *w, void *arg, size_t first)
{
    struct txn_job *x = arg;
    uint64_t *h = job_hashes(x), key = h[first];
    if (x->exec) {
        /* The first step: every key is held (watch.h). */
        x->aborted = watch_changed(x->exec->watches, kv_now_ms());
        exec_answer(x->exec, x->aborted, 0);
        x->exec = NULL;
    }
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
        if (x->aborted) {
            x->parts[i]->r->silent = true; /* not run, and its request answers nothing (request.c) */
            request_parts_done(x->parts[i]->r, 1);
        } else if (x->group) {
            request_run_part_uncounted(w, x->parts[i]);
        } else {
            request_run_part(w, x->parts[i]);
        }
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

/* Submits parts[0..n) and then the keys of an EXEC's watches (e: NULL for none), whose shard hashes
 * are h[0..keys), as one multi-key job with steps; group: parts of one request, counted done together
 * (struct txn_job). Refused, each part answers with the error; with e, e's header answers EXECABORT
 * alone instead. */
static void submit_steps(struct server *srv, struct part **parts, uint32_t n, const uint64_t *h, uint32_t keys,
                         bool group, struct txn_exec *e)
{
    struct txn_job *x = malloc(sizeof *x + n * sizeof *x->parts + keys * sizeof(uint64_t));
    int err = -ENOMEM;
    if (x) {
        *x = (struct txn_job){ .n = n, .group = group, .exec = e };
        memcpy(job_hashes(x), h, keys * sizeof *h);
        memcpy(x->parts, parts, n * sizeof *parts);
        err = shard_submit_multi_each_hash(srv->d, job_hashes(x), keys, step, done, x);
    }
    if (err) {
        free(x);
        for (uint32_t i = 0; i < n; i++) {
            parts[i]->r->silent = e != NULL; /* before the header: its EXECABORT is the whole answer */
            request_refuse_part(parts[i], err);
        }
        if (e)
            exec_answer(e, false, err);
    }
}

void txn_submit_group(struct server *srv, struct part **parts, uint32_t n, const uint64_t *h)
{
    submit_steps(srv, parts, n, h, n, true, NULL);
}

/* txn_submit with an EXEC's watched keys (wh[0..nw), e) held too, after the parts' keys. */
static void submit_watched(struct server *srv, struct part **parts, uint32_t n, const uint64_t *wh, uint32_t nw,
                           struct txn_exec *e)
{
    uint64_t h[TXN_MAX_PARTS], oh[TXN_MAX_PARTS]; /* n + nw <= TXN_MAX_PARTS (exec) */
    uint32_t owner[TXN_MAX_PARTS], order[TXN_MAX_PARTS];
    struct part *op[TXN_MAX_PARTS];
    for (uint32_t i = 0; i < n; i++)
        h[i] = parts[i]->shard_hash;
    for (uint32_t i = 0; i < nw; i++)
        h[n + i] = wh[i];
    /* Two keys: either order is one hop. Without owners (destroy began), the submit says why. */
    if (n <= 2 || shard_key_owners_hash(srv->d, h, n, owner) != 0) {
        submit_steps(srv, parts, n, h, n + nw, false, e);
        return;
    }
    parts_by_owner(owner, n, order);
    for (uint32_t i = 0; i < n; i++) {
        op[i] = parts[order[i]];
        oh[i] = h[order[i]];
    }
    memcpy(h, oh, n * sizeof *oh);
    submit_steps(srv, op, n, h, n + nw, false, e);
}

void txn_submit(struct server *srv, struct part **parts, uint32_t n)
{
    submit_watched(srv, parts, n, NULL, 0, NULL);
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

void txn_end(struct conn *c)
{
    txn_free(c);
    watch_clear(c);
}

bool txn_exec_refused(struct conn *c, const char *why)
{
    char msg[256]; /* an arity error: a command name and a sentence */
    snprintf(msg, sizeof msg, "EXECABORT Transaction discarded because of: %s",
             strncmp(why, "ERR ", 4) == 0 ? why + 4 : why);
    txn_end(c);
    return conn_reply_text(c, true, msg);
}

void txn_exec_out(struct conn *c, const struct request *h)
{
    /* Nothing was parsed after h's transaction: its commands are the rest of the FIFO. */
    for (struct request *r = h->next; r && !h->exec_aborted; r = r->next)
        if (r->cmd->kind != CMD_KEYED) {
            r->cmd->run(c->nt->srv, r);
            conn_recharge(c, r);
        }
    c->parse_holds--;
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

/* Whether a command whose keys meet spreads over several steps: its keys are of more than one shard
 * hash (keys of one hash tag are of one: kvmap.h). */
static bool cross_steps(const struct request *r)
{
    if (r->cmd->atomic != ATOMIC_CROSS)
        return false;
    for (uint32_t i = 1; i < r->nparts; i++)
        if (r->parts[i].shard_hash != r->parts[0].shard_hash)
            return true;
    return false;
}

/* Whether r and a queued command share a key, one of them a command whose keys meet over several
 * steps. Such a command takes its keys' entries out of their stores until its last part (cross.h),
 * while a transaction runs each key's parts in that key's step (txn_submit): another command of those
 * keys would run between. One whose keys are all of one step runs there whole, in its place among
 * that step's parts, as Redis runs it (SET {u}a, then RENAME {u}a {u}b). */
static bool meets_queued(const struct txn *t, const struct request *r)
{
    for (const struct request *q = t->head; q; q = q->next)
        if ((cross_steps(q) || cross_steps(r)) && share_key(q, r))
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
    if (strcmp(cmd->name, "SHUTDOWN") == 0) { /* Redis's one command of these not allowed in MULTI */
        t->dirty = true;
        return conn_reply_text(c, true, "ERR Command not allowed inside a transaction");
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
                                        "SUNION, SDIFF and their *STORE forms only on keys no other command of "
                                        "the transaction names");
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

/* EXEC: the array header, then every queued command in its place; the keyed ones' parts as one job.
 * With watched keys, that job holds them too, and its first step writes the header: the array, or
 * a null one if a watched key was written, with nothing run (watch.h). */
static bool exec(struct conn *c)
{
    struct server *srv = c->nt->srv;
    struct txn *t = c->txn;
    if (t->parts + watch_count(c) > TXN_MAX_PARTS) {
        txn_end(c);
        return conn_reply_text(c, true, "EXECABORT a transaction holds at most 1024 keys on kv_server, its watched "
                                        "keys included");
    }
    struct request *h = request_new(c, c->nt, srv, NULL, NULL, 0);
    struct txn_exec *e = h && c->watches ? malloc(sizeof *e) : NULL;
    if (!h || (c->watches && !e)) {
        if (h)
            request_free(h);
        return false;
    }
    struct watch_set *watches = watch_take(c);
    uint64_t wh[WATCH_MAX_KEYS];
    uint32_t nw = watch_hashes(watches, wh);
    if (e)
        *e = (struct txn_exec){ .head = h, .watches = watches, .nreq = t->n };
    else
        resp_array(&h->reply, t->n);
    h->done = !e; /* with watches, completed by the job (exec_answer) */
    conn_append(c, h);
    request_flush(&c->nt->batch, srv->d); /* the commands before MULTI reach shard first */
    struct part *parts[TXN_MAX_PARTS];
    uint32_t n = 0;
    for (struct request *r = t->head, *next; r; r = next) {
        next = r->next;
        r->next = NULL;
        if (r->cmd->kind != CMD_KEYED) {
            /* With watches, run once the header is out, unless the transaction aborted; the
             * connection's later commands are parsed only then, so that they come after it, as Redis
             * runs them (txn_exec_out). */
            if (!e) {
                r->cmd->run(srv, r);
            } else if (!h->exec_deferred) {
                h->exec_deferred = true;
                c->parse_holds++;
            }
            r->done = true;
        }
        conn_append(c, r);
        for (uint32_t i = 0; r->cmd->kind == CMD_KEYED && i < r->nparts; i++)
            parts[n++] = &r->parts[i];
    }
    t->head = t->tail = NULL;
    txn_free(c);
    if (e)
        submit_watched(srv, parts, n, wh, nw, e);
    else if (n)
        txn_submit(srv, parts, n);
    return true;
}

/* WATCH key...: a job of each key reads its stamp (watch.h), then +OK; the connection watches them
 * from now on. Return: false without memory. */
static bool watch(struct conn *c, const struct resp_arg *argv, uint32_t argc)
{
    if (watch_count(c) + (argc - 1) > WATCH_MAX_KEYS)
        return conn_reply_text(c, true, "ERR a connection watches at most 1024 keys on kv_server");
    struct request *r = request_new(c, c->nt, c->nt->srv, &watch_cmd, argv, argc);
    if (!r)
        return false;
    struct watch_set *s = watch_set_new(r);
    if (!s) {
        request_free(r);
        return false;
    }
    watch_add(c, s);
    conn_append(c, r);
    request_submit(r, &c->nt->batch);
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
            txn_end(c);
            return conn_reply_text(c, true, "EXECABORT Transaction discarded because of previous errors.");
        }
        return exec(c);
    }
    if (strcmp(name, "DISCARD") == 0) {
        if (!c->txn)
            return conn_reply_text(c, true, "ERR DISCARD without MULTI");
        txn_end(c);
        return conn_reply_text(c, false, "OK");
    }
    if (strcmp(name, "WATCH") == 0) {
        if (c->txn)
            return conn_reply_text(c, true, "ERR WATCH inside MULTI is not allowed");
        return watch(c, argv, argc);
    }
    if (strcmp(name, "UNWATCH") == 0 && !c->txn) {
        watch_clear(c);
        return conn_reply_text(c, false, "OK");
    }
    return queue(c, cmd, argv, argc); /* UNWATCH inside MULTI: queued, and does nothing (EXEC unwatches) */
}
