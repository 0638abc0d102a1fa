/* A worker stopped by a crash: what the crash does to the worker itself (stop it, take its leftovers,
 * mark them handed over), so that shard_worker_crash and the hand-over (crash_handover.c) change
 * none of its fields themselves.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include "worker_crash.h"

#include "ctl.h"
#include "dispatcher_internal.h"
#include "handoff.h"
#include "multi.h"
#include "run.h"
#include "worker.h"

void shard__worker_crash_stop(shard_dispatcher *d, struct shard_worker *x)
{
    SHARD_CHECK(shard__ctl_held(d));
    atomic_store_explicit(&x->life.crash_pending, true, memory_order_relaxed);
    /* E5 (docs/protocol.md): every job x returned from happens before this: x unlocked w->lock after
     * it, before its next job, parking or yielding. */
    pthread_mutex_lock(&x->lock);
    atomic_store_explicit(&x->life.crash_pending, false, memory_order_release);
    shard__worker_set_state(x, SHARD_WORKER_CRASHED);
    uint64_t hash = x->own.running_hash;
    void *whole = x->own.in_fn ? x->own.running_whole : NULL;
    if ((x->own.in_fn && x->own.running_job) || shard__run_batch_interrupt(x, &hash, &whole)) {
        /* A multi-key job queued whole holds its keys by running: from now on by claims, which its
         * end pays (run.c), the stuck entry behind its first key's claim (crash.c's
         * claim_job_stuck_in_run finds it there). */
        if (whole)
            shard__multi_whole_crashed(whole);
        /* Before the publication of the next ring: a job routed with it sees the entry. */
        shard__crash_stick(&d->crash, &x->crash, hash);
        x->own.crash_stuck = true;
    }
    pthread_mutex_lock(&d->lock);
    x->leaving.hook_at_crash = x->own.in_fn && !x->own.running_job; /* its release hook: the keys it moves wait */
    pthread_mutex_unlock(&d->lock);
    pthread_mutex_unlock(&x->lock);
    shard__worker_wake(x);
}

void shard__worker_crash_handed(shard_dispatcher *d, struct shard_worker *x)
{
    SHARD_CHECK(shard__ctl_held(d));
    pthread_mutex_lock(&d->lock);
    x->leaving.queue_handed = true;
    shard__epochless_if_done(d, x);
    pthread_mutex_unlock(&d->lock);
}

struct job *shard__worker_take_leftovers(struct shard_worker *x, struct job_block *block)
{
    SHARD_CHECK(shard__ctl_held(x->d));
    pthread_mutex_lock(&x->lock);
    struct job_list all = { 0 };
    struct job *held = shard__held_take_all(&x->own.held);
    shard__worker_sync_holding(x);
    shard__job_list_append_chain(&all, held);
    shard__job_list_append_chain(&all, shard__inbox_take(x, true));
    struct job scratch = { 0 }, *j;
    while ((j = shard__queue_pop_sc(&x->q, &scratch))) {
        if (j == &scratch) {
            struct job *r = &block->recs[block->used++]; /* as many as the ring has slots */
            *r = scratch;
            r->routed = x;
            r->block = block;
            atomic_fetch_add_explicit(&block->refs, 1, memory_order_relaxed);
            j = r;
        }
        shard__job_list_append(&all, j);
    }
    pthread_mutex_unlock(&x->lock);
    return all.head;
}
