/* Taking an item off a worker's queue and acting on it: run a job, set it aside, pass a fence (with
 * the release hook), count a drain mark, stop. SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>

#include "dispatcher_internal.h"
#include "follow.h"
#include "handoff.h"
#include "load.h"
#include "multi.h"
#include "run.h"
#include "timer.h"

struct release_ctx {
    shard_dispatcher     *d;
    struct shard_handoff  h;
};

/* Runs fn with w->lock released, flagged as inside a job so a crash can take over the worker's lists
 * meanwhile. Returns with w->lock held. */
static void run_unlocked(struct shard_worker *w, bool is_job, uint64_t hash, void (*call)(struct shard_worker *, void *),
                         void *ctx)
{
    w->own.in_fn = true;
    w->own.running_job = is_job;
    w->own.running_hash = hash;
    w->own.job_hash = hash;
    w->outbox.gathering = is_job;
    atomic_store_explicit(&w->counts.busy, is_job, memory_order_relaxed);
    pthread_mutex_unlock(&w->lock); /* E5 (docs/protocol.md): what ran before, to a crash */
    uint64_t started = is_job ? shard__load_start(w) : 0, ended = 0;
    call(w, ctx);
    if (is_job) {
        w->outbox.gathering = false;
        shard__outbox_deliver(w); /* what is left (no memory) goes from the loop */
        ended = shard__load_end(w, started);
        if (w->hot)
            shard__hot_record(w->hot, hash, ended - started, ended);
    }
    pthread_mutex_lock(&w->lock);
    if (is_job)
        shard__load_taken(w, ended); /* under the lock: a crash meanwhile moves the queue's head */
    atomic_store_explicit(&w->counts.busy, false, memory_order_relaxed);
    w->own.in_fn = false;
}

static void call_job(struct shard_worker *w, void *ctx)
{
    struct job *j = ctx;
    j->fn(w, j->arg);
}

/* A job taken from the ring lives in w->own.scratch until it runs; one that must wait gets a record. */
static struct job *to_record(struct shard_worker *w, struct job *j)
{
    if (j != &w->own.scratch)
        return j;
    struct job *r = w->own.spare_ready;
    w->own.spare_ready = NULL;
    *r = *j;
    return r;
}

/* Before taking from the ring, make sure a record is at hand for the job if it must wait: a slot,
 * once taken, cannot be put back. Return: false only when memory is exhausted. */
bool shard__run_record_ready(struct shard_worker *w)
{
    if (!w->own.spare_ready)
        w->own.spare_ready = shard__record_alloc(w);
    return w->own.spare_ready != NULL;
}

/* After a job returned, with w->lock held again. */
static void job_returned(struct shard_worker *w)
{
    if (w->own.crash_stuck) {
        /* Crashed while this job ran: its key may move on now that it has returned. */
        w->own.crash_stuck = false;
        shard__owed_done(w->d, &w->crash.stuck);
    }
}

void shard__run_job(struct shard_worker *w, struct job *j)
{
    run_unlocked(w, true, j->hash, call_job, j);
    shard__count(&w->counts.executed);
    job_returned(w);
    if (j->owed_to)
        shard__owed_done(w->d, j);
    if (j != &w->own.scratch)
        shard__free_record(w, j);
}

/* A batch is at most this many jobs: the space waiters and the idle check wait for its end. */
#define BATCH_MAX 32

/* Whether no crash table entry may stand for any key of the multi-key job queued whole m. */
static bool whole_unclaimed(shard_dispatcher *d, const void *m)
{
    if (!shard__crash_any(&d->crash))
        return true; /* the common case: one read, not one a key */
    for (uint32_t i = 0, n = shard__multi_whole_count(m); i < n; i++)
        if (shard__crash_may_block(&d->crash, shard__multi_whole_hash(m, i)))
            return false;
    return true;
}

/* Whether the ring job at pos, of epoch, may run with no more checks: every owner its key had before
 * is done (the epoch is settled), no crash table entry may stand for its key (for each of its keys,
 * a multi-key job queued whole), and nothing delivered to w or queued on its side list comes before
 * it. Otherwise shard__run_take decides. (A batch begins only when w holds no job.) */
static bool batch_may_run(shard_dispatcher *d, struct shard_worker *w, uint64_t pos, const struct slot *s,
                          bool locked)
{
    if (s->epoch > atomic_load_explicit(&d->settled, memory_order_acquire) || shard__inbox_pending(w) ||
        pos >= shard__queue_side_next(&w->q))
        return false;
    /* Without w->lock (a batch's later items) a crash may have handed the job at pos over, and it may
     * have ended and its block gone: a whole job's keys are read only under the lock (the batch's
     * first item), or after its position is taken. Beyond the first, it runs in the batch only while
     * the crash table is empty. */
    if (shard__slot_origin(s) == ORIGIN_MULTI_WHOLE)
        return locked ? whole_unclaimed(d, s->arg) : !shard__crash_any(&d->crash);
    return !shard__crash_may_block(&d->crash, s->hash);
}

/* A multi-key job queued whole, run at pos in a batch: as run_whole does, but a crash meanwhile finds
 * it in w->batch.whole rather than in running_whole. Whoever takes it back from there, this thread or
 * the crash, decides whether its keys were claimed; the crash claims them under w->lock, which it
 * holds until they are in, so that the end pays them. */
static void batch_whole(struct shard_worker *w, uint64_t pos, void *m)
{
    bool handed_on = shard__multi_whole_run(w, m);
    if (!atomic_exchange_explicit(&w->batch.whole[pos & 1], NULL, memory_order_relaxed)) {
        pthread_mutex_lock(&w->lock);
        pthread_mutex_unlock(&w->lock);
    }
    if (!handed_on)
        shard__multi_whole_end(m);
}

bool shard__run_batch(struct shard_worker *w)
{
    shard_dispatcher *d = w->d;
    struct queue *q = &w->q;
    uint64_t start = q->head, pos = start;
    /* A first item that may not run here (a job that must be checked) is shard__run_take's: no batch
     * is begun for nothing (two clock reads and the lock let go). What lets it run stays so once seen
     * (its epoch settled, no entry for its key: an older one can no longer be made), so the loop does
     * not ask again. */
    const struct slot *s = shard__queue_peek_sc(q, pos);
    if (w->own.held.count || !s || !batch_may_run(d, w, pos, s, true))
        return false;
    /* Under w->lock: a crash reads it under the lock. */
    atomic_store_explicit(&w->batch.word, 2 * pos + 1, memory_order_relaxed);
    atomic_store_explicit(&w->counts.busy, true, memory_order_relaxed);
    pthread_mutex_unlock(&w->lock);
    uint64_t started = shard__load_start(w), job_start = started;
    w->outbox.gathering = true;
    for (int n = 0; n < BATCH_MAX; n++) {
        if (n > 0 && (!(s = shard__queue_peek_sc(q, pos)) || !batch_may_run(d, w, pos, s, false)))
            break;
        shard_job_fn fn = s->fn;
        void *arg = s->arg;
        bool whole = shard__slot_origin(s) == ORIGIN_MULTI_WHOLE;
        w->batch.hash[pos & 1] = s->hash;
        if (whole)
            atomic_store_explicit(&w->batch.whole[pos & 1], arg, memory_order_relaxed);
        w->own.job_hash = s->hash; /* shard_job_key_hash; not running_hash, which a crash reads */
        /* Takes pos unless a crash took the batch back: then the crash hands pos over. release: the
         * crash that ends the batch after this sees that pos was taken, its hash and whole. */
        uint64_t expect = 2 * pos + 1;
        if (!atomic_compare_exchange_strong_explicit(&w->batch.word, &expect, expect + 2, memory_order_release,
                                                     memory_order_relaxed)) {
            atomic_store_explicit(&w->batch.whole[pos & 1], NULL, memory_order_relaxed); /* not taken */
            break;
        }
        /* Its slot is free once taken, as pop frees it: the running job does not count against the
         * queue's capacity. (A crash that ends the batch meanwhile may publish further: never back.) */
        if (((pos + 1) & q->release_mask) == 0)
            shard__queue_publish_upto_sc(q, pos + 1);
        if (fn != shard__queue_void) {
            if (whole)
                batch_whole(w, pos, arg);
            else
                fn(w, arg);
            shard__outbox_seal(&w->outbox); /* a crash may deliver its submits now (outbox.h) */
            shard__count(&w->counts.executed);
            if (w->hot) {
                /* Each job from the end of the one before: one clock read a job. */
                uint64_t ended = shard__now_ns();
                shard__hot_record(w->hot, w->batch.hash[pos & 1], ended - job_start, ended);
                job_start = ended;
            }
        }
        pos++;
    }
    w->outbox.gathering = false;
    shard__outbox_deliver(w); /* what is left (no memory) goes from the loop */
    uint64_t ended = shard__load_end(w, started);
    pthread_mutex_lock(&w->lock);
    atomic_store_explicit(&w->counts.busy, false, memory_order_relaxed);
    if (atomic_exchange_explicit(&w->batch.word, 0, memory_order_relaxed) == 0) {
        /* A crash ended the batch and consumed what it took (shard__run_batch_interrupt). */
        job_returned(w);
        return true;
    }
    shard__queue_advance_sc(q, pos);
    shard__load_taken(w, ended);
    return pos != start;
}

bool shard__run_batch_interrupt(struct shard_worker *w, uint64_t *running_hash, void **whole)
{
    /* acquire: pairs with the worker's CAS, so the slot it took is seen as it was written. */
    uint64_t b = atomic_exchange_explicit(&w->batch.word, 0, memory_order_acquire);
    if (!b)
        return false;
    uint64_t taken = b >> 1;
    bool running = taken != w->q.head;
    if (running) {
        *running_hash = w->batch.hash[(taken - 1) & 1];
        *whole = atomic_exchange_explicit(&w->batch.whole[(taken - 1) & 1], NULL, memory_order_relaxed);
    }
    shard__queue_advance_sc(&w->q, taken);
    /* The last job taken may have returned already: its stuck entry is then paid at once, when the
     * worker finds its batch ended. */
    return running;
}

SHARD_API bool shard_handoff_moves_hash(const struct shard_handoff *h, uint64_t hash)
{
    return h && (long)shard__ring_owner_index(h->before, hash) == h->before_index &&
           (long)shard__ring_owner_index(h->after, hash) != h->after_index;
}

SHARD_API bool shard_handoff_moves(const struct shard_handoff *h, const void *key, size_t len)
{
    if (!h || (!key && len > 0))
        return false;
    return shard_handoff_moves_hash(h, shard_ring_hash(h->before, key, len));
}

static void call_release(struct shard_worker *w, void *ctx)
{
    struct release_ctx *rc = ctx;
    rc->d->cfg.on_release(w, &rc->h, rc->d->cfg.user);
}

static void pass_fence(struct shard_worker *w, const struct job *fence)
{
    shard_dispatcher *d = w->d;
    pthread_mutex_lock(&d->lock);
    /* release (E2, docs/protocol.md): every job this worker ran under older epochs happens before a
     * reader of `passed`;
     * seq_cst: before the waiters' notes are read (handoff.c). */
    atomic_store_explicit(&w->life.passed, fence->epoch, memory_order_seq_cst);
    /* The fence's snapshot is kept: settled cannot pass it before this. */
    shard__fence_passed(d, w, (struct snap *)fence->fence_after);
    pthread_mutex_unlock(&d->lock);
}

/* The crash that interrupted this worker's release hook waited for the hook to return. */
static void hook_returned_after_crash(struct shard_worker *w)
{
    shard_dispatcher *d = w->d;
    pthread_mutex_lock(&d->lock);
    w->leaving.hook_at_crash = false;
    shard__epochless_if_done(d, w);
    pthread_mutex_unlock(&d->lock);
}

/* Acts on a control item that has reached its turn. */
void shard__run_control(struct shard_worker *w, struct job *j)
{
    shard_dispatcher *d = w->d;
    switch (j->kind) {
    case JOB_FENCE:
        if (j->loses_keys && d->cfg.on_release) {
            const shard_ring *before = j->fence_before->ring, *after = j->fence_after->ring;
            long bi = shard__ring_member_index(before, w->name), ai = shard__ring_member_index(after, w->name);
            struct release_ctx rc = { d, { j->epoch, before, after, bi, ai < 0 ? -1 : ai } };
            run_unlocked(w, false, 0, call_release, &rc);
            if (shard__worker_is_crashed(w)) {
                hook_returned_after_crash(w);
                shard__free_record(w, j);
                return;
            }
        }
        /* Jobs a crash rerouted here (crash_handover.c's reroute_target) before this fence passed, of
         * keys the hook handed on, follow them too: those delivered while the hook ran now, and those
         * delivered until pass_fence (both under d->lock) once it has. Later ones are not sent here. */
        if (j->loses_keys && shard__inbox_pending(w))
            shard__inbox_pull(w);
        if (j->loses_keys && w->own.held.count)
            shard__follow_key(w, j->epoch);
        /* Its timers of keys it lost go with them (all of them, and for good, when it left). */
        long ai = shard__ring_member_index(j->fence_after->ring, w->name);
        if (j->loses_keys || ai < 0)
            shard__timers_release(w, j->fence_after, ai < 0 ? -1 : ai);
        pass_fence(w, j);
        if (j->loses_keys && shard__inbox_pending(w)) {
            shard__inbox_pull(w);
            shard__follow_key(w, j->epoch);
        }
        shard__free_record(w, j);
        break;
    case JOB_MARK:
        pthread_mutex_lock(&d->lock);
        if (--d->marks_pending == 0)
            pthread_cond_broadcast(&d->cond);
        pthread_mutex_unlock(&d->lock);
        shard__free_record(w, j);
        break;
    case JOB_STOP:
        w->own.stopped = true;
        break;
    default:
        abort(); /* unreachable: JOB_RUN is never a control item */
    }
}

/* dirty: whether a walk over the held jobs may find something to do now. Not for a job just found
 * blocked while the worker already holds jobs: shard__job_may_run noted what it waits for, and the
 * event kicks this worker (it is counted as holding); one behind a held job of its key goes only after
 * that one, whose going makes the walk go on. A worker that held nothing was not counted when the
 * job noted its wait, so an event in between kicked nobody: it walks once, after publishing that it
 * holds jobs (shard__worker_sync_holding, then the walk notes again). */
static void set_aside(struct shard_worker *w, struct job *j, bool dirty)
{
    j = to_record(w, j);
    shard__held_push_back(&w->own.held, j);
    shard__count(&w->counts.set_aside);
    w->own.held_dirty |= dirty;
}

/* Whether the multi-key job queued whole j may run at once, as a job of each of its keys would with
 * no more checks (batch_may_run): its epoch is settled, no crash table entry may stand for any of its
 * keys, w holds no job of them, and nothing was delivered to w that may come before it. */
static bool whole_may_run(struct shard_worker *w, const struct job *j)
{
    shard_dispatcher *d = w->d;
    if (j->epoch > atomic_load_explicit(&d->settled, memory_order_acquire) || shard__inbox_pending(w) ||
        !whole_unclaimed(d, j->arg))
        return false;
    if (!w->own.held.count)
        return true;
    for (uint32_t i = 0, n = shard__multi_whole_count(j->arg); i < n; i++)
        if (shard__held_has_key(&w->own.held, shard__multi_whole_hash(j->arg, i)))
            return false;
    return true;
}

struct whole_ctx {
    void *whole;
    bool  handed_on; /* its steps went on elsewhere after a crash: not this worker's to end */
};

static void call_whole(struct shard_worker *w, void *ctx)
{
    struct whole_ctx *c = ctx;
    c->handed_on = shard__multi_whole_run(w, c->whole);
}

/* As shard__run_job, for a whole job: a crash while it runs claims all its keys (running_whole),
 * and the job ends here unless its steps went on elsewhere. */
static void run_whole(struct shard_worker *w, struct job *j)
{
    struct whole_ctx c = { j->arg, false };
    w->own.running_whole = c.whole;
    run_unlocked(w, true, j->hash, call_whole, &c);
    w->own.running_whole = NULL;
    shard__count(&w->counts.executed);
    if (!c.handed_on)
        shard__multi_whole_end(c.whole);
    job_returned(w);
    if (j != &w->own.scratch)
        shard__free_record(w, j);
}

/* A multi-key job queued whole (multi.h): run at once when it may, holding its keys by running (a
 * crash meanwhile claims them all: running_whole); else split into its parts, each set aside in
 * order, which the walk then takes as jobs of their keys, one after another, as if queued so. */
static void take_whole(struct shard_worker *w, struct job *j)
{
    if (whole_may_run(w, j)) {
        run_whole(w, j);
        return;
    }
    j = to_record(w, j);
    struct job *last = shard__multi_whole_split(j), *next;
    for (struct job *p = j; p; p = p == last ? NULL : next) {
        next = p->next; /* set_aside links p into the held order */
        set_aside(w, p, true);
    }
}

/* A job or control item just taken from the queue. */
void shard__run_take(struct shard_worker *w, struct job *j)
{
    if (j->kind != JOB_RUN) {
        /* Jobs rerouted by a crash were delivered before any later fence was queued: let them in
         * first, so a fence is never passed over them. */
        if (shard__inbox_pending(w))
            shard__inbox_pull(w);
        if (w->own.held.count) {
            shard__held_push_back(&w->own.held, to_record(w, j));
            w->own.held_dirty = true;
        } else {
            shard__run_control(w, j);
        }
        return;
    }
    if (j->origin == ORIGIN_MULTI_WHOLE) {
        take_whole(w, j);
        return;
    }
    if ((w->own.held.count && shard__held_has_key(&w->own.held, j->hash)) || !shard__job_may_run(w->d, w, j)) {
        set_aside(w, j, !w->own.holding_now);
        return;
    }
    /* The check above may have seen a crashed worker's hand-over; its rerouted jobs, delivered before
     * that hand-over was published, may be older jobs of this key: they go first. */
    if (shard__inbox_pending(w)) {
        set_aside(w, j, true);
        shard__inbox_pull(w);
        return;
    }
    shard__run_job(w, j);
}
