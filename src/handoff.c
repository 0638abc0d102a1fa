/* What a job waits for before it may run: per-key order across membership changes.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The protocol. Every job carries the epoch of the ring it was routed with and the worker it was
 * routed to. After publishing epoch e and waiting a grace period (no submit still routes with an older
 * ring), the control thread puts a fence(e) into every worker's queue; a worker passes fence(e)
 * (w->passed = e) once it holds no job of an epoch below e: it has run everything it was given under
 * older rings. A job j of key k routed to B under epoch e may run once, for every older epoch e' whose
 * owner X of k was not B, X has passed fence(e' + 1): then every job of k routed before j is done.
 * d->settled, the smallest `passed` of live workers, bounds how far back that walk goes: epochs below
 * it are done everywhere, so the common case is one comparison.
 *
 * A crashed worker never passes another fence. Once its queue is handed over, it stops counting for
 * d->settled and its crash record blocks instead, precisely: the key of its still-running job until
 * that job returns, and the key of each job it rerouted until that job has run (for jobs of later
 * epochs only). A fence counts only the jobs routed to its worker: rerouted ones are covered by their
 * crash record instead.
 *
 * Why nothing waits forever: every wait points to strictly older work. A job waits for fences of
 * epochs up to its own, and for older-epoch jobs of its key; a fence waits for older fences and for
 * held jobs of older epochs. Only drain marks and stops wait for everything ahead of them, and
 * nothing waits for those. */
#include <stdlib.h>

#include "dispatcher_internal.h"
#include "rcu.h"

static bool released(struct shard_worker *x, uint64_t fence)
{
    /* acquire: pairs with the release stores of passed (worker.c) and handed (dispatcher.c), so the
     * jobs x ran before them happen before the job about to run. */
    return atomic_load_explicit(&x->passed, memory_order_acquire) >= fence ||
           atomic_load_explicit(&x->handed, memory_order_acquire);
}

static bool older_owners_done(shard_dispatcher *d, const struct job *j, uint64_t settled)
{
    bool ok = true;
    shard_rcu_read_lock();
    for (struct snap *s = atomic_load_explicit(&d->snap, memory_order_acquire); s && s->epoch >= settled;
         s = atomic_load_explicit(&s->prev, memory_order_acquire)) {
        if (s->epoch >= j->epoch)
            continue;
        struct shard_worker *x = s->by_member[shard__ring_owner_index(s->ring, j->hash)];
        if (x != j->routed && !released(x, s->epoch + 1)) {
            ok = false;
            break;
        }
    }
    shard_rcu_read_unlock();
    return ok;
}

bool shard__job_may_run(shard_dispatcher *d, const struct job *j)
{
    uint64_t settled = atomic_load_explicit(&d->settled, memory_order_acquire);
    if (j->epoch > settled && !older_owners_done(d, j, settled))
        return false;
    if (atomic_load_explicit(&d->ncrash_blocks, memory_order_acquire) && shard__crash_blocks(d, j))
        return false;
    return true;
}

bool shard__crash_blocks(shard_dispatcher *d, const struct job *j)
{
    bool blocked = false;
    pthread_mutex_lock(&d->lock);
    for (size_t i = 0; i < d->nworkers && !blocked; i++) {
        struct shard_worker *x = d->workers[i];
        const struct crash_record *c = &x->crash;
        if (!c->active)
            continue;
        /* No job of the stuck job's key may run beside it. A rerouted job precedes the jobs of its
         * key routed after it, under later epochs, elsewhere; the owed FIFO is in epoch order. Jobs
         * of an equal epoch were routed to x too and are ordered by the FIFOs that hold them. */
        const struct job *first = keymap_first(&c->owed, j->hash);
        blocked = (c->stuck && c->stuck_hash == j->hash) || (first && first->epoch < j->epoch);
    }
    pthread_mutex_unlock(&d->lock);
    return blocked;
}

bool shard__stuck_key(shard_dispatcher *d, uint64_t hash)
{
    if (!atomic_load_explicit(&d->ncrash_blocks, memory_order_acquire))
        return false;
    bool stuck = false;
    pthread_mutex_lock(&d->lock);
    for (size_t i = 0; i < d->nworkers && !stuck; i++)
        stuck = d->workers[i]->crash.stuck && d->workers[i]->crash.stuck_hash == hash;
    pthread_mutex_unlock(&d->lock);
    return stuck;
}

void shard__crash_record_update(shard_dispatcher *d, struct shard_worker *x)
{
    struct crash_record *c = &x->crash;
    bool active = c->stuck || c->owed.jobs > 0;
    if (active != c->active) {
        c->active = active;
        if (active)
            atomic_fetch_add_explicit(&d->ncrash_blocks, 1, memory_order_release);
        else
            atomic_fetch_sub_explicit(&d->ncrash_blocks, 1, memory_order_release);
    }
}

void shard__rerouted_done(shard_dispatcher *d, struct job *j)
{
    struct shard_worker *x = j->routed;
    pthread_mutex_lock(&d->lock);
    keymap_remove(&x->crash.owed, j);
    if (!keymap_first(&x->crash.owed, j->hash)) {
        shard__crash_record_update(d, x);
        shard__wake_holders(d);
    }
    pthread_mutex_unlock(&d->lock);
}

void shard__settle(shard_dispatcher *d)
{
    uint64_t min = UINT64_MAX;
    for (size_t i = 0; i < d->nworkers; i++) {
        struct shard_worker *w = d->workers[i];
        int st = atomic_load_explicit(&w->state, memory_order_relaxed);
        if (st == SHARD_WORKER_EXITED || atomic_load_explicit(&w->handed, memory_order_acquire))
            continue;
        uint64_t p = atomic_load_explicit(&w->passed, memory_order_acquire);
        min = p < min ? p : min;
    }
    uint64_t epoch = atomic_load_explicit(&d->epoch, memory_order_relaxed);
    if (min > epoch)
        min = epoch;
    /* release: a reader that sees the new value also sees the passes and hand-overs behind it. */
    atomic_store_explicit(&d->settled, min, memory_order_release);
}

void shard__wake_holders(shard_dispatcher *d)
{
    /* seq_cst: ordered before the workers' parking flags are read (the parking Dekker pair). */
    atomic_fetch_add_explicit(&d->gen, 1, memory_order_seq_cst);
    for (size_t i = 0; i < d->nworkers; i++)
        if (atomic_load_explicit(&d->workers[i]->state, memory_order_relaxed) != SHARD_WORKER_EXITED)
            shard__worker_wake(d->workers[i]);
}
