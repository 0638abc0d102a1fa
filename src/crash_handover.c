/* A crash of one worker: what it held (its leftovers, worker_crash.c) handed over to its keys' new
 * owners (REROUTE) or to on_dropped (DROP). What crashes owe afterwards is the crash table's (crash.c).
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>

#include "crash_handover.h"
#include "ctl.h"
#include "dispatcher_internal.h"
#include "handoff.h"
#include "multi.h"
#include "timer.h"
#include "worker.h"
#include "worker_crash.h"

/* Records for the jobs in a worker's ring, allocated before a crash reaches its point of no return. */
static struct job_block *block_new(size_t n)
{
    struct job_block *b = calloc(1, sizeof *b + n * sizeof *b->recs);
    if (b) {
        atomic_init(&b->refs, 1); /* the crash's own, dropped when it is done with the block */
        b->size = n;
        b->recs = (struct job *)(b + 1);
    }
    return b;
}

/* Jobs for one new owner, gathered so that each inbox is locked and woken once. */
static void deliver(struct shard_worker *dest, struct job_list *list)
{
    if (!list->head)
        return;
    shard__inbox_put(dest, list);
    shard__worker_wake(dest);
}

/* Appends j to w's inbox. Context: d->lock held (w cannot pass a fence meanwhile: run.c pulls the
 * inbox in, and lets what it finds follow the keys it lost, right after a fence that loses keys). */
static void deliver_one(struct shard_worker *w, struct job *j)
{
    SHARD_CHECK_HELD(&w->d->lock);
    struct job_list one = { 0 };
    shard__job_list_append(&one, j);
    shard__inbox_put(w, &one);
}

/* The worker that owns j's key in s. */
static struct shard_worker *owner_in(const struct snap *s, const struct job *j)
{
    return snap_worker(s, shard__ring_owner_index(s->ring, j->hash));
}

/* The last answer of reroute_target, for the next job of the same key and epoch (a crashed queue
 * holds runs of them): the walk is not repeated, only the check of the worker's progress. */
struct reroute_memo {
    uint64_t             hash, epoch;
    struct shard_worker *w;    /* NULL: the owner now */
    uint64_t             lost; /* the epoch at which w lost the key */
    bool                 valid;
};

/* Where x's job j goes: where its key's state goes next. x owned the key at j's epoch, and its state
 * there is lost. The key's jobs of the next epochs whose owner was not x are held by that owner,
 * which hands the state on at the fence where it loses the key: j runs there, before them, unless
 * that owner has passed that fence already (then the one after it, and so on). Routing j to the
 * owner in the ring now instead would leave the key's state split: j's on that owner, the next
 * epoch's jobs (which wait for j) run where they were routed. Returns the worker, or NULL for the
 * key's owner in the ring now, when that is where the state goes. Walks back from the ring now to j's
 * epoch, then forward along `next`: O(changes since j's epoch). The kept snapshots may not reach back
 * to j's epoch (j was deferred behind a crash entry, and x passed later fences): every fence of the
 * snapshots dropped was passed, so the owners in them have handed the key on, and the walk starts
 * at the oldest kept. Context: ctl and d->lock held (`next` and a worker's `passed` move under
 * d->lock, so the worker cannot pass that fence before j is in its inbox). */
static struct shard_worker *reroute_target(shard_dispatcher *d, struct shard_worker *x, const struct job *j,
                                           const struct snap *now, struct reroute_memo *m)
{
    SHARD_CHECK(shard__ctl_held(d));
    SHARD_CHECK_HELD(&d->lock);
    if (m->valid && m->hash == j->hash && m->epoch == j->epoch &&
        (!m->w || shard__worker_passed(m->w) < m->lost))
        return m->w;
    *m = (struct reroute_memo){ .hash = j->hash, .epoch = j->epoch, .valid = true };
    const struct snap *s = now, *after = NULL; /* after: the oldest snapshot after j's epoch kept */
    for (; s && s->epoch > j->epoch; s = atomic_load_explicit(&s->prev, memory_order_relaxed))
        after = s;
    if (!after)
        return NULL; /* j is of the ring now */
    for (const struct snap *t = after; t && t != now;) {
        struct shard_worker *w = owner_in(t, j);
        int st = shard__worker_state(w);
        if (w == x || w == d->gone || st == SHARD_WORKER_CRASHED || st == SHARD_WORKER_EXITED) {
            t = t->next;
            continue;
        }
        const struct snap *lost = t->next; /* the first ring in which w no longer owns the key */
        while (lost && owner_in(lost, j) == w)
            lost = lost->next;
        if (!lost)
            return NULL; /* w owns the key now */
        if (shard__worker_passed(w) < lost->epoch) {
            m->w = w;
            m->lost = lost->epoch;
            return w; /* it has not handed the key on yet */
        }
        t = lost;
    }
    return NULL;
}

/* Whether j's origin is the one its function says. The origin is what the hand-over goes by; this
 * check (debug and sanitizer builds) catches a path that lost or mixed it up, on every job a crash
 * hands over. */
#ifdef SHARD_DEBUG_CHECKS
static bool origin_agrees(const struct job *j)
{
    enum job_origin by_fn = j->fn == shard__timer_arm || j->fn == shard__timer_fire ? ORIGIN_TIMER
                            : j->fn == shard__multi_part                            ? ORIGIN_MULTI_PART
                            : j->fn == shard__multi_step                            ? ORIGIN_MULTI_STEP
                                                                                    : ORIGIN_USER;
    return j->origin == by_fn;
}
#endif

/* Reroutes x's leftovers to where their keys' state goes next (reroute_target), or drops them. */
static void hand_over(shard_dispatcher *d, struct shard_worker *x, struct job *left, enum shard_crash_policy policy,
                      struct job_list *lists)
{
    struct snap *now = atomic_load_explicit(&d->snap, memory_order_relaxed);
    /* A multi-key job queued whole goes on as its parts, each a job of its key (multi.h). */
    for (struct job *j = left; j; j = j->next)
        if (j->kind == JOB_RUN && j->origin == ORIGIN_MULTI_WHOLE)
            j = shard__multi_whole_split(j);
    /* x now owes each of its own jobs: other workers' jobs of those keys wait until it has run.
     * Jobs some other crash owes already stay owed to it. */
    if (policy == SHARD_CRASH_REROUTE)
        shard__crash_owe_list(&d->crash, &x->crash, left);
    struct reroute_memo memo = { 0 };
    for (struct job *j = left, *next; j; j = next) {
        next = j->next;
        if (j->kind != JOB_RUN) {
            shard__free_record(NULL, j); /* x's fences: it will never pass them */
            continue;
        }
        SHARD_CHECK(origin_agrees(j));
        j->wait_snap = NULL; /* what it waited for on x: wherever it goes, it waits for other things */
        /* A multi-key job's step is never dropped: the job has begun, and some of its steps may
         * have run (multi.c). It has no epoch of its own (0: reroute_target finds no ring of it): it
         * goes to its key's owner now and waits there, as when it was delivered (follow.c), for
         * every owner its key has had before this ring (moved_epoch): the key may have moved on
         * from x to a worker that lags, which runs its key's jobs of that ring (after the step)
         * and hands the state on at its fence, and the step must not run before. */
        if (j->origin == ORIGIN_MULTI_STEP) {
            j->moved_epoch = now->epoch;
            shard__job_list_append(&lists[shard__ring_owner_index(now->ring, j->hash)], j);
            continue;
        }
        if (policy == SHARD_CRASH_REROUTE) {
            pthread_mutex_lock(&d->lock);
            struct shard_worker *w = reroute_target(d, x, j, now, &memo);
            if (w)
                deliver_one(w, j);
            pthread_mutex_unlock(&d->lock);
            if (w) {
                shard__worker_wake(w);
            } else {
                shard__job_list_append(&lists[shard__ring_owner_index(now->ring, j->hash)], j);
            }
            continue;
        }
        shard_job_fn fn = j->fn;
        void *arg = j->arg;
        /* A timer's arm or fire job stands for the timer's own job: dropped unless it was cancelled.
         * A multi-key job's part stands for the whole job: reported with its first part dropped. */
        bool report = true, multi = j->origin == ORIGIN_MULTI_PART;
        if (j->origin == ORIGIN_TIMER)
            report = shard__timer_dropped(d, j->arg, &fn, &arg);
        else if (multi)
            report = shard__multi_dropped(j->arg, &fn, &arg);
        if (report && d->cfg.on_dropped)
            d->cfg.on_dropped(fn, arg, d->cfg.user);
        if (report)
            atomic_fetch_add_explicit(&d->dropped, 1, memory_order_relaxed);
        if (multi) /* its keys, held through on_dropped, go free now */
            shard__multi_dropped_end(j->arg, report);
        if (j->owed_to)
            shard__owed_done(d, j);
        shard__free_record(NULL, j);
    }
    for (size_t i = 0; i < shard_ring_member_count(now->ring); i++)
        deliver(now->by_member[i], &lists[i]);
    shard__worker_crash_handed(d, x);
}

int shard__crash_handover_prepare(struct crash_handover *ho, struct shard_worker *x, size_t members)
{
    ho->block = block_new(shard__queue_capacity(&x->q));
    ho->lists = calloc(members ? members : 1, sizeof *ho->lists);
    if (!ho->block || !ho->lists) {
        shard__crash_handover_discard(ho);
        return -1;
    }
    return 0;
}

void shard__crash_handover_discard(struct crash_handover *ho)
{
    free(ho->block);
    free(ho->lists);
    ho->block = NULL;
    ho->lists = NULL;
}

void shard__crash_handover(shard_dispatcher *d, struct shard_worker *x, enum shard_crash_policy policy,
                           struct crash_handover *ho)
{
    SHARD_CHECK(shard__ctl_held(d));
    struct job *left = shard__worker_take_leftovers(x, ho->block);
    shard__job_block_put(ho->block);
    hand_over(d, x, left, policy, ho->lists);
    free(ho->lists);
    ho->block = NULL;
    ho->lists = NULL;
}
