/* kv_server: a request's life: its allocation, its parts as shard jobs, its completion.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdalign.h>
#include <unistd.h>

#include "net_internal.h"
#include "server.h"
#include "watch.h"

static size_t align_up(size_t n)
{
    return (n + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1);
}

static uint32_t count_parts(const struct command *cmd, uint32_t argc)
{
    if (!cmd || cmd->kind != CMD_KEYED)
        return 0;
    if (cmd->key_step <= 0)
        return cmd->key_step == 0 ? 1 : (uint32_t)-cmd->key_step;
    return (argc - 1 + (uint32_t)cmd->key_step - 1) / (uint32_t)cmd->key_step;
}

/* Bytes of reply a request of at most one part keeps in its own allocation: what most replies take
 * (an integer, OK, a short value), so that they need no allocation of their own. */
#define INLINE_REPLY 64
/* And each part of a request of several (an MGET's value, an EXISTS's count): a malloc and a free a
 * key were a fifth of an MGET's CPU, which Redis spends none of. */
#define INLINE_PART_REPLY 48

struct request *request_new(struct conn *c, struct net_thread *nt, struct server *srv,
                            const struct command *cmd, const struct resp_arg *argv, uint32_t argc)
{
    uint32_t nparts = count_parts(cmd, argc);
    size_t bytes = 0;
    for (uint32_t i = 0; i < argc; i++)
        bytes += argv[i].len + 1;
    /* One allocation: the request, its parts, their replies, argv and the argument bytes. */
    size_t off_parts = align_up(sizeof(struct request));
    size_t off_replies = align_up(off_parts + nparts * sizeof(struct part));
    size_t off_argv = align_up(off_replies + nparts * sizeof(struct part_reply));
    size_t off_bytes = off_argv + argc * sizeof(struct resp_arg);
    /* A short reply, a command's own (local, admin) or its one part's, lives here too. */
    size_t off_inline = off_bytes + bytes;
    bool lend = nparts <= 1;
    /* Only for parts that write text (an MGET's; a DEL's or an EXISTS's only count). */
    size_t inline_bytes = lend ? INLINE_REPLY : cmd->part_reply_max ? nparts * INLINE_PART_REPLY : 0;
    char *mem = malloc(off_inline + inline_bytes);
    if (!mem)
        return NULL;
    /* Zeroed up to argv: what follows (argv, its bytes, the inline replies' room) is written before it
     * is read. An MGET of 10 is some 1.3 KB, half of it that room. */
    memset(mem, 0, off_argv);
    struct request *r = (struct request *)mem;
    r->conn = c;
    r->nt = nt;
    r->srv = srv;
    r->cmd = cmd;
    r->argc = argc;
    r->nparts = nparts;
    r->parts = (struct part *)(mem + off_parts);
    r->mem = off_inline + inline_bytes;
    r->part_reply = (struct part_reply *)(mem + off_replies);
    r->argv = (struct resp_arg *)(mem + off_argv);
    char *p = mem + off_bytes;
    for (uint32_t i = 0; i < argc; i++) {
        memcpy(p, argv[i].p, argv[i].len);
        p[argv[i].len] = '\0'; /* so that numbers and names can be read as C strings */
        r->argv[i] = (struct resp_arg){ p, argv[i].len };
        p += argv[i].len + 1;
    }
    if (lend)
        buf_borrow(nparts ? &r->part_reply[0].text : &r->reply, mem + off_inline, INLINE_REPLY);
    else
        for (uint32_t i = 0; inline_bytes && i < nparts; i++)
            buf_borrow(&r->part_reply[i].text, mem + off_inline + i * INLINE_PART_REPLY, INLINE_PART_REPLY);
    uint32_t step = cmd && cmd->key_step > 0 ? (uint32_t)cmd->key_step : 1;
    for (uint32_t i = 0; i < nparts; i++) {
        uint32_t arg = 1 + i * step;
        const struct resp_arg *key = &r->argv[arg];
        r->parts[i] = (struct part){ r, i, arg, kv_hash(key->p, key->len), kv_shard_hash(key->p, key->len), NULL, i };
    }
    atomic_init(&r->parts_left, nparts);
    return r;
}

/* Frees what one segment holds, and the segment itself unless it is the part's own (head). */
static void segment_free(struct part_reply *s, bool head)
{
    buf_free(&s->text);
    kv_value_put(s->value);
    if (!head)
        free(s);
}

void request_free(struct request *r)
{
    for (uint32_t i = 0; i < r->nparts; i++) {
        struct part_reply *s = &r->part_reply[i], *more;
        for (bool head = true; s; s = more, head = false) {
            more = s->more;
            segment_free(s, head);
        }
    }
    buf_free(&r->reply);
    if (r->cmd == &watch_cmd)
        watch_set_put(r->watch); /* the command tells the union's members apart */
    free(r);
}

bool part_reply_add_value(struct part_reply *head, struct part_reply **seg, struct kv_value *v)
{
    struct part_reply *next = calloc(1, sizeof *next);
    if (!next) {
        kv_value_put(v);
        head->text.failed = true;
        return false;
    }
    (*seg)->value = v;
    (*seg)->more = next;
    *seg = next;
    return true;
}

/* Whether any segment of the part's reply ran out of memory. */
static bool part_failed(const struct part_reply *s)
{
    for (; s; s = s->more)
        if (s->text.failed)
            return true;
    return false;
}

static void finish(struct request *r)
{
    int err = atomic_load_explicit(&r->error, memory_order_relaxed);
    if (r->silent) {
        /* nothing: the EXEC's header is its whole answer (txn.c) */
    } else if (err == -E2BIG) {
        /* An atomic command of more keys than one multi-key job holds (its parts were refused). */
        resp_error(&r->reply, "ERR a command holds at most 1024 keys on kv_server");
    } else if (err) {
        char msg[160];
        snprintf(msg, sizeof msg, "ERR %s", shard_strerror(err));
        resp_error(&r->reply, msg);
    } else if (r->cmd->finish) {
        r->cmd->finish(r);
    } else {
        r->reply_parts = true; /* the one part's reply is the reply */
    }
    request_complete(r);
}

/* acq_rel: each part's writes (its reply, sum, error) are released by its decrement; the last one
 * acquires them all before it assembles the reply. */
void request_parts_done(struct request *r, uint32_t k)
{
    if (atomic_fetch_sub_explicit(&r->parts_left, k, memory_order_acq_rel) == k)
        finish(r);
}

static void part_error(struct request *r, int err)
{
    int none = 0;
    atomic_compare_exchange_strong_explicit(&r->error, &none, err, memory_order_relaxed,
                                            memory_order_relaxed);
}

void request_run_part_uncounted(shard_worker *w, struct part *p)
{
    struct request *r = p->r;
    struct kv_store *s = store_of(w);
    watch_part_unchanged = false;
    if (s)
        r->cmd->part(s, r, p);
    else
        part_error(r, -ENOMEM);
    /* A part that writes its key (server.h's access), unless it said it changed nothing (watch.h). */
    if ((r->cmd->access == WRITES || (r->cmd->access == WRITES_FIRST && p->arg == 1)) && !watch_part_unchanged)
        watch_touch(p->hash);
    if (part_failed(&r->part_reply[p->index]))
        part_error(r, -ENOMEM);
}

void request_run_part(shard_worker *w, struct part *p)
{
    request_run_part_uncounted(w, p);
    request_parts_done(p->r, 1);
}

static void run_part(shard_worker *w, void *arg)
{
    request_run_part(w, arg);
}

static void part_refused(struct request *r, int err)
{
    part_error(r, err);
    request_parts_done(r, 1);
}

void request_refuse_part(struct part *p, int err)
{
    part_refused(p->r, err);
}

/* What the parts of a batch about to run on this worker will read past their key's entry, loaded a
 * stage at a time over the whole batch, so that each stage's misses overlap (their entries were asked
 * for just before): a collection's object; for a hash or a set, the bucket of the field or member
 * after the key (HSET, HGET, HINCRBY, SADD, SISMEMBER... name it there), then its entry. A part of
 * another command with an argument there (SMOVE's destination) loads a bucket for nothing; an argument
 * longer than FIELD_MAX is not hashed for it (a SET of a large value over a hash's key). Without
 * these, a part of HSET waited for three dependent misses after its key's entry, one after another:
 * 42 % of kv_server's CPU for HSET went to looking up the field. Only on a worker (the network on the
 * workers, kv_server's default), and only for the keys of its own store. */
#define FIELD_MAX 256
static void prefetch_members(struct part *const *parts, uint32_t n)
{
    const struct kvmap *map[SUBMIT_BATCH];
    uint64_t            field[SUBMIT_BATCH];
    for (uint32_t k = 0; k < n; k++) {
        const struct part     *p = parts[k];
        const struct kv_entry *e = store_own_guess(p->hash);
        map[k] = NULL;
        if (!e || e->type == KV_STRING)
            continue;
        kvmap_prefetch_line(e->obj);
        if ((e->type == KV_HASH || e->type == KV_SET) && p->arg + 1 < p->r->argc &&
            p->r->argv[p->arg + 1].len <= FIELD_MAX)
            map[k] = e->obj;
    }
    for (uint32_t k = 0; k < n; k++)
        if (map[k]) {
            const struct resp_arg *f = &parts[k]->r->argv[parts[k]->arg + 1];
            field[k] = kv_hash(f->p, f->len);
            kvmap_prefetch(map[k], field[k]);
        }
    for (uint32_t k = 0; k < n; k++)
        if (map[k])
            kvmap_prefetch_entry(map[k], field[k]);
}

void request_flush(struct submit_batch *b, shard_dispatcher *d)
{
    uint32_t n = b->n, i = 0;
    b->n = 0;
    /* Each part's bucket was asked for when it was queued here (request_submit), and has arrived:
     * its entry starts loading now, while the jobs are submitted and the earlier ones run. */
    for (uint32_t k = 0; k < n; k++)
        store_prefetch_entry(b->parts[k]->hash);
    prefetch_members(b->parts, n);
    while (i < n) {
        int got = shard_submit_many_hash(d, b->jobs + i, n - i);
        if (got < 0) {
            for (; i < n; i++)
                part_refused(b->parts[i]->r, got);
            break;
        }
        i += (uint32_t)got;
        if (i < n) {
            /* Refused midway (destroy, or memory): one submit of the next part says why. */
            const struct shard_hashed_job *j = &b->jobs[i];
            int err = shard_submit_hash(d, j->hash, j->fn, j->arg);
            if (err)
                part_refused(b->parts[i]->r, err);
            i++;
        }
    }
}

/* Parts of a command of several keys that is not one step (MGET, EXISTS) are grouped by the worker
 * that owns their keys now, up to this many parts; beyond, a job a part. */
#define GROUP_MAX 64

/* Such a command's parts, grouped by their keys' owners now (shard_key_owners_hash): a group of two or more
 * as one multi-key job with steps, which shard runs on that worker as a single job (its keys all
 * live there), a lone part into b as one job: a job a worker, not one a key. A group is one step, the
 * command as a whole is not (as before: each key's part in its key's order). Return: false (nothing
 * submitted) when an owner could not be had. Context: the network thread. */
static bool submit_grouped(struct request *r, struct submit_batch *b)
{
    shard_dispatcher *d = r->srv->d;
    uint64_t h[GROUP_MAX], gh[GROUP_MAX];
    uint32_t owner[GROUP_MAX], order[GROUP_MAX];
    for (uint32_t i = 0; i < r->nparts; i++)
        h[i] = r->parts[i].shard_hash;
    if (shard_key_owners_hash(d, h, r->nparts, owner) != 0)
        return false;
    parts_by_owner(owner, r->nparts, order);
    request_flush(b, d); /* a group goes in now: the commands before it first */
    for (uint32_t i = 0, k; i < r->nparts; i += k) {
        struct part *group[GROUP_MAX];
        for (k = 0; i + k < r->nparts && owner[order[i + k]] == owner[order[i]]; k++) {
            group[k] = &r->parts[order[i + k]];
            gh[k] = h[order[i + k]];
        }
        if (k > 1) {
            txn_submit_group(r->srv, group, k, gh);
            continue;
        }
        if (b->n == SUBMIT_BATCH)
            request_flush(b, d);
        b->jobs[b->n] = (struct shard_hashed_job){ group[0]->shard_hash, run_part, group[0] };
        b->parts[b->n++] = group[0];
    }
    return true;
}

void request_submit(struct request *r, struct submit_batch *b)
{
    if (r->cmd->atomic && r->nparts > 1) {
        request_flush(b, r->srv->d); /* the commands before it reach shard first */
        if (r->nparts > TXN_MAX_PARTS) {
            for (uint32_t i = 0; i < r->nparts; i++)
                request_refuse_part(&r->parts[i], -E2BIG); /* more keys than one job may hold: none */
            return;
        }
        struct part *parts[TXN_MAX_PARTS];
        for (uint32_t i = 0; i < r->nparts; i++)
            parts[i] = &r->parts[i];
        txn_submit(r->srv, parts, r->nparts);
        return;
    }
    if (r->nparts > 1 && r->nparts <= GROUP_MAX && submit_grouped(r, b))
        return;
    for (uint32_t i = 0; i < r->nparts; i++) {
        if (b->n == SUBMIT_BATCH)
            request_flush(b, r->srv->d);
        b->jobs[b->n] = (struct shard_hashed_job){ r->parts[i].shard_hash, run_part, &r->parts[i] };
        b->parts[b->n++] = &r->parts[i];
        store_prefetch(r->parts[i].hash);
    }
}

void request_complete(struct request *r)
{
    struct net_thread *nt = r->nt;
    /* release: the reply written before the push is visible to the network thread, which takes the
     * stack with an acquire exchange. A hand-written Treiber push (push and take-all only, so no ABA):
     * liburcu's lfstack does the same, but with inline-assembly atomics ThreadSanitizer cannot see. */
    struct request *head = atomic_load_explicit(&nt->done, memory_order_relaxed);
    struct server *srv = r->srv;
    /* seq_cst: before net_completion_wakes' read (its Dekker pair with a worker about to wait). */
    do
        atomic_store_explicit(&r->done_next, head, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&nt->done, &head, r, memory_order_seq_cst,
                                                  memory_order_relaxed));
    /* Only the push onto an empty stack wakes the thread: a non-empty stack has a wake-up pending
     * (the thread takes the whole stack after reading the eventfd). r may be freed from here on. */
    if (!head && net_completion_wakes(srv, nt)) {
        uint64_t one = 1;
        ssize_t n = write(nt->event_fd, &one, sizeof one);
        (void)n; /* fails only when the counter would overflow: a wake-up is pending anyway */
    }
}

size_t large_reply_bound(const struct request *r)
{
    (void)r;
    return LARGE_REPLY_MAX;
}

size_t request_reply_bound(const struct request *r)
{
    if (!r->cmd)
        return REPLY_TEXT_MAX; /* an EXEC's array header, which its job writes (txn.c) */
    if (r->cmd->reply_bound)
        return REPLY_TEXT_MAX + r->cmd->reply_bound(r);
    return REPLY_TEXT_MAX + r->nparts * r->cmd->part_reply_max;
}

#define OUT_OF_MEMORY "-ERR out of memory\r\n"

/* The reply's pieces: 0 is r->reply (or the out-of-memory error that replaces it), i > 0 is part
 * i - 1's reply, a segment at a time: a part's next segment moves into its place once it is put. */
static uint32_t pieces(const struct request *r)
{
    return 1 + (r->reply_parts && !r->reply.failed ? r->nparts : 0);
}

static size_t segment_bytes(const struct part_reply *s)
{
    return s->text.len + (s->value ? s->value->len + 2 : 0);
}

static size_t piece_bytes(const struct request *r, uint32_t i)
{
    if (i == 0)
        return r->reply.failed ? sizeof OUT_OF_MEMORY - 1 : r->reply.len;
    return segment_bytes(&r->part_reply[i - 1]);
}

size_t request_reply_left(const struct request *r)
{
    size_t n = 0;
    for (uint32_t i = r->put; i < pieces(r); i++) {
        n += piece_bytes(r, i);
        for (const struct part_reply *s = i ? r->part_reply[i - 1].more : NULL; s; s = s->more)
            n += segment_bytes(s);
    }
    return n;
}

bool request_all_put(const struct request *r)
{
    return r->put == pieces(r);
}

size_t request_put_piece(struct request *r, struct buf *out)
{
    uint32_t i = r->put;
    size_t n = piece_bytes(r, i);
    if (i == 0) {
        r->put++;
        if (r->reply.failed)
            buf_put(out, OUT_OF_MEMORY, n);
        else
            buf_put(out, r->reply.p, r->reply.len);
        return n;
    }
    struct part_reply *p = &r->part_reply[i - 1];
    buf_put(out, p->text.p, p->text.len);
    if (p->value) {
        if (p->slice_len)
            buf_put(out, p->value->data + p->slice_off, p->slice_len);
        else
            buf_put(out, p->value->data, p->value->len);
        buf_put(out, "\r\n", 2);
    }
    /* Freed now rather than with the request: a large MGET gives its memory back part by part, and a
     * range segment by segment. */
    struct part_reply *next = p->more;
    segment_free(p, true);
    if (next) {
        *p = *next;
        free(next);
    } else {
        *p = (struct part_reply){ 0 };
        r->put++;
    }
    return n;
}
