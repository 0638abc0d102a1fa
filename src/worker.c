/* The worker thread: take jobs in order, set aside what must wait, run the rest, park when idle.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher_internal.h"
#include "follow.h"
#include "handoff.h"
#include "rcu.h"
#include "space.h"

#define SPIN_BEFORE_PARK 256

_Thread_local struct shard_worker *shard__current_worker;

struct shard_worker *shard__worker_new(shard_dispatcher *d, const char *name, uint32_t weight, uint64_t epoch)
{
    struct shard_worker *w = aligned_alloc(SHARD_CACHELINE, (sizeof *w + SHARD_CACHELINE - 1) / SHARD_CACHELINE * SHARD_CACHELINE);
    if (!w)
        return NULL;
    memset(w, 0, sizeof *w);
    if (shard__queue_init(&w->q, d->capacity) != 0) {
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_mutex_init(&w->inbox_lock, NULL);
    shard__held_init(&w->held);
    shard__crash_record_init(&w->crash);
    atomic_init(&w->passed, epoch);
    w->fenced_upto = epoch;
    atomic_init(&w->state, SHARD_WORKER_RUNNING);
    w->d = d;
    snprintf(w->name, sizeof w->name, "%s", name);
    w->weight = weight;
    w->id = d->next_id++;
    w->stop_item.kind = JOB_STOP;
    w->stop_item.embedded = true;
    return w;
}

int shard__worker_start(struct shard_worker *w)
{
    if (pthread_create(&w->thread, NULL, shard__worker_main, w) != 0)
        return -EAGAIN;
    w->started = true;
    return 0;
}

void shard__worker_free(struct shard_worker *w)
{
    shard__worker_drop_spares(w);
    shard__queue_destroy(&w->q);
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->inbox_lock);
    free(w);
}

SHARD_API const char *shard_worker_name(const shard_worker *w)
{
    return w ? w->name : NULL;
}

SHARD_API void *shard_worker_user(const shard_worker *w)
{
    return w ? w->user : NULL;
}

SHARD_API void shard_worker_set_user(shard_worker *w, void *user)
{
    if (w)
        w->user = user;
}

SHARD_API bool shard_worker_crashed(const shard_worker *w)
{
    return w && atomic_load_explicit(&w->state, memory_order_relaxed) == SHARD_WORKER_CRASHED;
}

SHARD_API shard_dispatcher *shard_worker_dispatcher(const shard_worker *w)
{
    return w ? w->d : NULL;
}

/* Counters written by the worker alone: a plain increment, read relaxed by stats. */
static void bump(_Atomic uint64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

void shard__worker_wake(struct shard_worker *w)
{
    if (shard__park_wake(&w->park))
        bump(&w->woken);
}

static bool crashed(const struct shard_worker *w)
{
    return atomic_load_explicit(&w->state, memory_order_relaxed) == SHARD_WORKER_CRASHED;
}

static bool inbox_pending(struct shard_worker *w)
{
    /* acquire: pairs with the crash hand-over's store; take() reads it after the check of what the job waits for, and says why. */
    return atomic_load_explicit(&w->inbox_flag, memory_order_acquire);
}

struct job *shard__inbox_take(struct shard_worker *w, bool close)
{
    pthread_mutex_lock(&w->inbox_lock);
    struct job *j = w->inbox.head;
    w->inbox = (struct job_list){ 0 };
    w->inbox_closed |= close;
    atomic_store_explicit(&w->inbox_flag, false, memory_order_relaxed);
    pthread_mutex_unlock(&w->inbox_lock);
    return j;
}

/* Moves jobs rerouted to this worker into the front of its held list. */
static void pull_inbox(struct shard_worker *w)
{
    struct job *j = shard__inbox_take(w, false);
    while (j) {
        struct job *next = j->held_next;
        shard__held_push_prio(&w->held, j);
        if (j->kind == JOB_RUN)
            bump(&w->handed_over);
        j = next;
    }
    w->held_dirty = true;
}

/* Runs fn with w->lock released, marked as inside a job so a crash can take over the worker's lists
 * meanwhile. Returns with w->lock held. */
static void run_unlocked(struct shard_worker *w, bool is_job, uint64_t hash, void (*call)(struct shard_worker *, void *),
                         void *ctx)
{
    w->in_fn = true;
    w->running_job = is_job;
    w->running_hash = hash;
    atomic_store_explicit(&w->busy, is_job, memory_order_relaxed);
    pthread_mutex_unlock(&w->lock);
    call(w, ctx);
    pthread_mutex_lock(&w->lock);
    atomic_store_explicit(&w->busy, false, memory_order_relaxed);
    w->in_fn = false;
}

static void call_job(struct shard_worker *w, void *ctx)
{
    struct job *j = ctx;
    j->fn(w, j->arg);
}

/* A crash is waiting for this worker's lock: let it have it (a mutex is not fair, and a worker running
 * back-to-back jobs would otherwise win it again and again). Called only between items, holding no
 * job outside the lists a crash collects. */
static void yield_to_crash(struct shard_worker *w)
{
    if (!atomic_load_explicit(&w->crash_pending, memory_order_relaxed))
        return;
    pthread_mutex_unlock(&w->lock);
    while (atomic_load_explicit(&w->crash_pending, memory_order_acquire))
        sched_yield();
    pthread_mutex_lock(&w->lock);
}

/* A job taken from the ring lives in w->scratch until it runs; one that must wait gets a record. */
static struct job *to_record(struct shard_worker *w, struct job *j)
{
    if (j != &w->scratch)
        return j;
    struct job *r = w->spare_ready;
    w->spare_ready = NULL;
    *r = *j;
    return r;
}

/* Before taking from the ring, make sure a record is at hand for the job if it must wait: a slot,
 * once taken, cannot be put back. Return: false only when memory is exhausted. */
static bool record_ready(struct shard_worker *w)
{
    if (!w->spare_ready)
        w->spare_ready = shard__record_alloc(w);
    return w->spare_ready != NULL;
}

static void run_job(struct shard_worker *w, struct job *j)
{
    run_unlocked(w, true, j->hash, call_job, j);
    bump(&w->executed);
    if (w->crash_stuck) {
        /* Crashed while this job ran: its key may move on now that it has returned. */
        w->crash_stuck = false;
        shard__owed_done(w->d, &w->crash.stuck);
    }
    if (j->owed_to)
        shard__owed_done(w->d, j);
    if (j != &w->scratch)
        shard__free_record(w, j);
}

struct release_ctx {
    shard_dispatcher     *d;
    struct shard_handoff  h;
};

SHARD_API bool shard_handoff_moves(const struct shard_handoff *h, const void *key, size_t len)
{
    if (!h || (!key && len > 0))
        return false;
    uint64_t hash = shard_ring_hash(h->before, key, len);
    return (long)shard__ring_owner_index(h->before, hash) == h->before_index &&
           (long)shard__ring_owner_index(h->after, hash) != h->after_index;
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
    /* release: every job this worker ran under older epochs happens before a reader of `passed`;
     * seq_cst: before the waiters' marks are read (handoff.c). */
    atomic_store_explicit(&w->passed, fence->epoch, memory_order_seq_cst);
    /* The fence's snapshot is kept: settled cannot pass it before this. */
    shard__fence_passed(d, w, (struct snap *)fence->fence_after);
    pthread_mutex_unlock(&d->lock);
}

/* The crash that interrupted this worker's release hook waited for the hook to return. */
static void hook_returned_after_crash(struct shard_worker *w)
{
    shard_dispatcher *d = w->d;
    pthread_mutex_lock(&d->lock);
    w->hook_at_crash = false;
    shard__handed_if_done(d, w);
    pthread_mutex_unlock(&d->lock);
}

/* A stopped worker exits once it holds nothing and its inbox is empty, closing the inbox then. A job
 * moved to it while it was leaving the ring (the mover read the ring before the removal) follows its
 * key on, since this worker's release hook has already handed the key's state away; at destroy, which
 * changes no ring, it runs here. */
static bool may_exit(struct shard_worker *w)
{
    if (inbox_pending(w)) {
        pull_inbox(w);
        shard__follow_key(w, UINT64_MAX);
    }
    if (w->held.count)
        return false;
    pthread_mutex_lock(&w->inbox_lock);
    bool empty = !w->inbox.head;
    w->inbox_closed |= empty;
    pthread_mutex_unlock(&w->inbox_lock);
    return empty;
}

/* Acts on a control item that has reached its turn. */
static void control(struct shard_worker *w, struct job *j)
{
    shard_dispatcher *d = w->d;
    switch (j->kind) {
    case JOB_FENCE:
        if (j->release && d->cfg.on_release) {
            const shard_ring *before = j->fence_before->ring, *after = j->fence_after->ring;
            long bi = shard__ring_member_index(before, w->name), ai = shard__ring_member_index(after, w->name);
            struct release_ctx rc = { d, { j->epoch, before, after, bi, ai < 0 ? -1 : ai } };
            run_unlocked(w, false, 0, call_release, &rc);
            if (crashed(w)) {
                hook_returned_after_crash(w);
                shard__free_record(w, j);
                return;
            }
        }
        if (j->release && w->held.count)
            shard__follow_key(w, j->epoch);
        pass_fence(w, j);
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
        w->stopped = true;
        break;
    default:
        abort(); /* unreachable: JOB_RUN is never a control item */
    }
}

static void set_aside(struct shard_worker *w, struct job *j)
{
    j = to_record(w, j);
    shard__held_push_back(&w->held, j);
    bump(&w->set_aside);
    w->held_dirty = true;
}

/* A job or control item just taken from the queue. */
static void take(struct shard_worker *w, struct job *j)
{
    if (j->kind != JOB_RUN) {
        /* Jobs rerouted by a crash were delivered before any later fence was queued: let them in
         * first, so a fence is never passed over them. */
        if (inbox_pending(w))
            pull_inbox(w);
        if (w->held.count) {
            shard__held_push_back(&w->held, to_record(w, j));
            w->held_dirty = true;
        } else {
            control(w, j);
        }
        return;
    }
    if ((w->held.count && shard__held_has_key(&w->held, j->hash)) || !shard__job_may_run(w->d, w, j)) {
        set_aside(w, j);
        return;
    }
    /* The check above may have seen a crashed worker's hand-over; its rerouted jobs, delivered before
     * that hand-over was published, may be older jobs of this key: they go first. */
    if (inbox_pending(w)) {
        set_aside(w, j);
        pull_inbox(w);
        return;
    }
    run_job(w, j);
}

/* The oldest epoch among held jobs that no crash owes. Owed ones do not count: what a fence promises
 * is about the jobs routed here, and the keys of owed jobs stay blocked by their crash's entries
 * until they have run (so a fence never waits for a job stuck behind a crash). */
static uint64_t held_min_epoch(const struct held *h)
{
    uint64_t min = UINT64_MAX;
    for (const struct job *j = h->head; j; j = j->held_next)
        if (j->kind == JOB_RUN && !j->owed_to && j->epoch < min)
            min = j->epoch;
    return min;
}

/* A fence of epoch is held up by jobs of older epochs: those that wait behind a crash's entry become
 * entries of the crash table themselves (shard__crash_defer), which then holds their key instead of
 * this worker's fence. Return: the oldest epoch left. Only called while some crash owes something. */
static uint64_t defer_crash_blocked(struct shard_worker *w, uint64_t epoch)
{
    for (struct job *j = w->held.head; j; j = j->held_next)
        if (j->kind == JOB_RUN && !j->owed_to && j->epoch < epoch)
            (void)shard__crash_defer(&w->d->crash, &w->crash, j);
    return held_min_epoch(&w->held);
}

/* One walk over the held items in order, running or acting on whatever may go now. A job may go when
 * it is its key's first held job and what it waits for is done; a fence when no held job is of an
 * older epoch and no older fence is ahead of it (a fence must not wait for a mark: a mark waits for
 * the jobs ahead of it, and those may wait for this fence); a stop when nothing is ahead; a drain mark
 * when nothing is ahead but jobs of keys whose job is still running on a crashed worker (drain does
 * not wait for a stuck job, so not for what must follow it either). */
static void held_pass(struct shard_worker *w)
{
    shard_dispatcher *d = w->d;
    w->held_dirty = false;
    w->seen_kick = atomic_load_explicit(&w->kick, memory_order_acquire);
    /* Rebuilt by this walk: each blocked job marks what it waits for. Fences and marks may wait on
     * crash entries (deferral, stuck keys). */
    atomic_store_explicit(&w->waits_on, 0, memory_order_relaxed);
    if (atomic_load_explicit(&d->crash.entries, memory_order_acquire))
        shard__wait_on_crashes(w);
    uint64_t min_epoch = held_min_epoch(&w->held);
    bool blocked_before = false, unstuck_before = false, fence_before = false, progress = false;
    for (struct job *j = w->held.head, *next; j; j = next) {
        next = j->held_next;
        bool go;
        if (j->kind == JOB_RUN)
            go = shard__held_first_of_key(&w->held, j) && shard__job_may_run(d, w, j);
        else if (j->kind == JOB_FENCE) {
            if (!fence_before && min_epoch < j->epoch &&
                atomic_load_explicit(&d->crash.entries, memory_order_acquire))
                min_epoch = defer_crash_blocked(w, j->epoch);
            go = !fence_before && min_epoch >= j->epoch;
        }
        else if (j->kind == JOB_MARK)
            go = !unstuck_before;
        else
            go = !blocked_before;
        if (!go) {
            blocked_before = true;
            unstuck_before |= j->kind != JOB_RUN || !shard__crash_stuck_key(&d->crash, j->hash);
            fence_before |= j->kind == JOB_FENCE;
            continue;
        }
        if (j->kind == JOB_RUN && inbox_pending(w)) {
            pull_inbox(w);
            return;
        }
        shard__held_remove(&w->held, j);
        progress = true;
        if (j->kind == JOB_RUN)
            run_job(w, j);
        else
            control(w, j);
        if (crashed(w) || w->stopped)
            return;
    }
    /* What ran may have unblocked items earlier in the list: walk again. */
    if (progress)
        w->held_dirty = true;
}

void shard__worker_sync_holding(struct shard_worker *w)
{
    bool now = w->held.count > 0;
    if (now == w->holding_now)
        return;
    w->holding_now = now;
    atomic_store_explicit(&w->holding, now, memory_order_relaxed);
    /* seq_cst: before this worker walks its held jobs again, and so before it marks what they wait
     * for (handoff.c's kick_holders reads nholding, seq_cst, after its event's seq_cst store). */
    if (now)
        atomic_fetch_add_explicit(&w->d->nholding, 1, memory_order_seq_cst);
    else
        atomic_fetch_sub_explicit(&w->d->nholding, 1, memory_order_seq_cst);
}

static bool held_needs_pass(struct shard_worker *w)
{
    return w->held.count &&
           (w->held_dirty || atomic_load_explicit(&w->kick, memory_order_seq_cst) != w->seen_kick);
}

static bool has_work(struct shard_worker *w)
{
    return crashed(w) || inbox_pending(w) || shard__queue_nonempty_sc(&w->q) || held_needs_pass(w);
}

static void idle(struct shard_worker *w)
{
    shard__queue_release_sc(&w->q); /* the slots taken so far are free for producers again */
    /* Spinning saves a futex round trip when jobs keep coming; a worker that left the ring gets no
     * new jobs, so it parks at once and leaves the cores to workers that have work. */
    int spins = atomic_load_explicit(&w->state, memory_order_relaxed) == SHARD_WORKER_RUNNING ? SPIN_BEFORE_PARK : 0;
    for (int i = 0; i < spins; i++) {
        if (has_work(w))
            return;
        caa_cpu_relax();
    }
    uint32_t seq = shard__park_prepare(&w->park);
    /* After shard__park_prepare's seq_cst store: a submitter that found the queue full and registered is
     * seen here even if the per-job check missed it (shard__space_notify). */
    shard__space_notify(w->d);
    if (has_work(w)) {
        shard__park_cancel(&w->park);
        return;
    }
    bump(&w->parked);
    pthread_mutex_unlock(&w->lock);
    shard__park_wait(&w->park, seq);
    pthread_mutex_lock(&w->lock);
}

static void loop(struct shard_worker *w)
{
    while (!crashed(w) && !(w->stopped && may_exit(w))) {
        yield_to_crash(w);
        if (crashed(w))
            break;
        if (inbox_pending(w))
            pull_inbox(w);
        shard__worker_sync_holding(w);
        if (held_needs_pass(w)) {
            held_pass(w);
            continue;
        }
        if (!record_ready(w)) {
            /* Out of memory: take nothing from the ring until a record can be had. */
            pthread_mutex_unlock(&w->lock);
            sched_yield();
            pthread_mutex_lock(&w->lock);
            continue;
        }
        struct job *j = shard__queue_pop_sc(&w->q, &w->scratch);
        if (!j) {
            idle(w);
            continue;
        }
        if (j == &w->scratch) {
            j->routed = w;
            /* Waiting submitters are woken once half the ring is free, not after every job: one
             * wake-up then refills half a ring instead of paying a syscall a job. */
            if (atomic_load_explicit(&w->d->space_waiters, memory_order_relaxed) &&
                shard__queue_length(&w->q) <= shard__queue_capacity(&w->q) / 2) {
                shard__queue_release_sc(&w->q);
                shard__space_notify(w->d);
            }
        }
        take(w, j);
    }
}

void *shard__worker_main(void *arg)
{
    struct shard_worker *w = arg;
    shard_dispatcher *d = w->d;
    shard__current_worker = w;
    if (d->cfg.on_worker_start)
        d->cfg.on_worker_start(w, d->cfg.user);
    pthread_mutex_lock(&w->lock);
    loop(w);
    bool was_crashed = crashed(w);
    shard__worker_sync_holding(w); /* a crash may have taken its held jobs */
    /* A worker that left may be kept a while (a crash's entries, snapshots): not its spares. */
    shard__worker_drop_spares(w);
    pthread_mutex_unlock(&w->lock);
    if (d->cfg.on_worker_stop)
        d->cfg.on_worker_stop(w, d->cfg.user);

    pthread_mutex_lock(&d->lock);
    if (!was_crashed) {
        if (atomic_load_explicit(&w->state, memory_order_relaxed) == SHARD_WORKER_RETIRING && --d->nretiring == 0)
            pthread_cond_broadcast(&d->cond);
        atomic_store_explicit(&w->passed, UINT64_MAX, memory_order_seq_cst); /* as in pass_fence */
        atomic_store_explicit(&w->state, SHARD_WORKER_EXITED, memory_order_release);
        shard__wake_waiters_of(d, w);
    }
    w->finished = true;
    pthread_mutex_unlock(&d->lock);
    shard__current_worker = NULL;
    return NULL;
}
