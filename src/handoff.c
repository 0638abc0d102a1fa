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
 * d->settled is tracked per snapshot: each counts the fences of its epoch not yet passed, and settled
 * moves forward over snapshots whose count is zero, so a fence costs O(1) amortised, not O(workers).
 *
 * A crashed worker never passes another fence. Once its queue is handed over and no release hook of it
 * runs (a hook interrupted by the crash still hands state over: the keys it releases wait for it), it
 * is `handed`: its unpassed fences stop counting and what it still holds up is kept in the crash table
 * (crash.h) instead, precisely: the key of its still-running job until that job returns, and the key
 * of each job it rerouted until that job has run (for jobs of later epochs only). A fence counts only
 * the jobs routed to its worker and not owed by a crash: a rerouted job is covered by its crash's
 * entry; and a job that a worker holds behind a crash entry when it reaches a fence (a job of a key
 * whose job is stuck on a crashed worker) is deferred to that crash (shard__crash_defer) rather than
 * holding the fence, so a stuck job holds its own key and nothing else.
 *
 * Why nothing waits forever: every wait points to strictly older work. A job waits for fences of
 * epochs up to its own, and for older-epoch jobs of its key (also through crash entries, which are in
 * epoch order, a stuck job first); a fence waits for older fences and for held jobs of older epochs
 * that no crash owes. Only drain marks and stops wait for everything ahead of them, and nothing waits
 * for those. */
#include <stdlib.h>

#include "dispatcher_internal.h"
#include "rcu.h"

static bool released(struct shard_worker *x, uint64_t fence)
{
    /* acquire: pairs with the release stores of passed (worker.c) and handed (below), so the jobs x
     * ran before them happen before the job about to run. */
    return atomic_load_explicit(&x->passed, memory_order_acquire) >= fence ||
           atomic_load_explicit(&x->handed, memory_order_acquire);
}

/* Whether every job of j's key routed before j elsewhere is done: for each older epoch whose owner x
 * of the key was not j's worker, x has passed the next fence. Remembers the first wait it finds.
 * Context: a read-side section begun before settled was loaded, so that the snapshots from settled
 * on, and the workers they name, outlive it (reap_snapshots and reap_workers wait a grace period). */
static bool older_owners_done(shard_dispatcher *d, struct job *j, uint64_t settled)
{
    /* The wait found last time, if its snapshot is still at or above settled (so it is kept): while
     * it holds, nothing else needs looking at. */
    if (j->wait_snap && j->wait_epoch >= settled &&
        !released(snap_worker(j->wait_snap, j->wait_member), j->wait_epoch + 1))
        return false;
    j->wait_snap = NULL;
    for (struct snap *s = atomic_load_explicit(&d->snap, memory_order_acquire); s && s->epoch >= settled;
         s = atomic_load_explicit(&s->prev, memory_order_acquire)) {
        if (s->epoch >= j->epoch)
            continue;
        size_t i = shard__ring_owner_index(s->ring, j->hash);
        struct shard_worker *x = snap_worker(s, i);
        if (x != j->routed && !released(x, s->epoch + 1)) {
            j->wait_snap = s;
            j->wait_epoch = s->epoch;
            j->wait_member = (uint32_t)i;
            return false;
        }
    }
    return true;
}

bool shard__job_may_run(shard_dispatcher *d, struct job *j)
{
    /* The common case: j's epoch is settled, every older owner is done; no read-side section. */
    if (j->epoch > atomic_load_explicit(&d->settled, memory_order_acquire)) {
        shard_rcu_read_lock();
        uint64_t settled = atomic_load_explicit(&d->settled, memory_order_acquire);
        bool ok = j->epoch <= settled || older_owners_done(d, j, settled);
        shard_rcu_read_unlock();
        if (!ok)
            return false;
    }
    return !shard__crash_blocks(&d->crash, j);
}

void shard__settle(shard_dispatcher *d)
{
    struct snap *s = d->settled_snap;
    while (s->next && s->next->unpassed == 0)
        s = s->next;
    if (s == d->settled_snap)
        return;
    d->settled_snap = s;
    /* release: a reader that sees the new value also sees the passes and hand-overs behind it. */
    atomic_store_explicit(&d->settled, s->epoch, memory_order_release);
}

void shard__fence_passed(shard_dispatcher *d, struct snap *s)
{
    s->unpassed--;
    shard__settle(d);
    shard__wake_holders(d);
}

/* x's fences that it will never pass (it crashed) stop counting. Its passed is final: a crashed
 * worker processes no further item. Snapshots from settled on are kept, and settled is at most
 * x's passed while one of them counts it. */
static void unfence(shard_dispatcher *d, struct shard_worker *x)
{
    uint64_t passed = atomic_load_explicit(&x->passed, memory_order_relaxed);
    for (struct snap *s = d->settled_snap; s && s->epoch <= x->fenced_upto; s = s->next)
        if (s->epoch > passed)
            s->unpassed--;
}

void shard__handed_if_done(shard_dispatcher *d, struct shard_worker *x)
{
    if (!x->queue_handed || x->hook_at_crash || atomic_load_explicit(&x->handed, memory_order_relaxed))
        return;
    unfence(d, x);
    /* release: the deliveries of its queue, and its release hook, happen before anyone who sees x
     * handed over (released() above, and settled). */
    atomic_store_explicit(&x->handed, true, memory_order_release);
    shard__settle(d);
    shard__wake_holders(d);
}

void shard__owed_done(shard_dispatcher *d, struct job *j)
{
    if (!shard__crash_paid(&d->crash, j))
        return;
    pthread_mutex_lock(&d->lock);
    shard__wake_holders(d);
    pthread_mutex_unlock(&d->lock);
}

void shard__wake_holders(shard_dispatcher *d)
{
    /* seq_cst, then seq_cst read of nholding: a worker raises nholding (seq_cst) before it reads gen
     * (seq_cst) to decide whether to walk its held jobs again, so either it sees this bump or we see
     * it holding. */
    atomic_fetch_add_explicit(&d->gen, 1, memory_order_seq_cst);
    if (!atomic_load_explicit(&d->nholding, memory_order_seq_cst))
        return;
    for (size_t i = 0; i < d->nworkers; i++)
        if (atomic_load_explicit(&d->workers[i]->holding, memory_order_relaxed))
            shard__worker_wake(d->workers[i]);
}
