/* A worker's outbox: its jobs' submits, delivered a destination at a time (outbox.h).
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include "outbox.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>

#include "dispatcher_internal.h"
#include "rcu.h"
#include "space.h"
#include "ctl.h"

/* Adds a submit; owner is its key's member index in the snapshot of epoch (what a delivery under the
 * same snapshot uses instead of a second lookup). */
static int outbox_add(struct shard_worker *w, const struct outbox_entry *e)
{
    SHARD_CHECK_ON(w);
    struct outbox *ob = &w->outbox;
    if (ob->n == OUTBOX_MAX)
        shard__outbox_deliver(w);
    if (ob->n == OUTBOX_MAX)
        return -ENOMEM;
    ob->e[ob->n++] = *e;
    /* seq_cst: inside the section that read shutdown == 0, so destroy, which sets shutdown and then
     * waits out every such section, sees it open; and a drain called after this submit returned. */
    if (ob->n == 1)
        atomic_store_explicit(&ob->open, true, memory_order_seq_cst);
    return 0;
}

static bool outbox_deliver(struct shard_worker *w, bool others_only);

int shard__outbox_gather(struct shard_worker *w, uint64_t hash, shard_job_fn fn, void *arg, uint8_t origin)
{
    /* acquire: pairs with the release store that published the snapshot (membership.c's publish). */
    struct snap *s = atomic_load_explicit(&w->d->snap, memory_order_acquire);
    uint32_t owner = (uint32_t)shard__ring_owner_index(s->ring, hash);
    int rc = outbox_add(w, &(struct outbox_entry){ .fn = fn, .arg = arg, .hash = hash, .epoch = s->epoch,
                                                    .owner = owner, .origin = origin });
    /* An owner parked, or polling for work, would wait idle until the batch's end: latency, where
     * batching saves nothing (its claim is not contended while it has no work). relaxed: hints
     * (park.h); the delivery's wake-up check is the Dekker half. */
    struct shard_worker *to = snap_worker(s, owner);
    if (!rc && to != w &&
        (atomic_load_explicit(&to->park.sleeping, memory_order_relaxed) ||
         atomic_load_explicit(&to->park.polling, memory_order_relaxed)))
        outbox_deliver(w, true);
    return rc;
}

/* Delivers the entries of ob in [i, end) bound for to[i] (to[] is cleared for each entry dealt with):
 * one claim of as many slots as there are such entries, the rest beyond; an entry that found no
 * memory stays (keep), and so do those after it, in order. */
static void deliver_to(struct outbox *ob, struct shard_worker **to, bool *keep, uint32_t i, uint32_t end,
                       uint64_t epoch)
{
    struct shard_worker *x = to[i];
    uint64_t want = 0, first = 0, used = 0;
    for (uint32_t k = i; k < end; k++)
        want += to[k] == x;
    /* No prefetch of the claimed slots for writing: they are the lines x has just read, and asking for
     * them all at once made bench_mesh's 2-worker round trips with empty jobs 20 % slower (as it made
     * shard_submit_many's bursts 2x slower, submit_many.c). */
    uint64_t got = shard__space_waited(x) ? 0 : shard__queue_claim_mp(&x->q, want, &first);
    uint64_t delivered = 0;
    bool stuck = false;
    for (uint32_t k = i; k < end; k++) {
        if (to[k] != x)
            continue;
        to[k] = NULL;
        const struct outbox_entry *e = &ob->e[k];
        if (used < got)
            shard__queue_write(&x->q, first + used++, e->fn, e->arg, e->hash, epoch, e->origin);
        /* Beyond the room in x's ring, or while threads wait for that room (a worker leaves the free
         * slots to them, as shard__submit_hashed says), after the ring's contents on the side list. */
        else if ((stuck = stuck || !shard__queue_push_side_new(&x->q, x, e->fn, e->arg, e->hash, epoch, e->origin)))
            keep[k] = true;
        delivered += !keep[k];
    }
    if (delivered)
        shard__worker_wake(x);
}

/* Delivers ob's entries in [from, end) under the ring in force, but those a rescue delivered already
 * (fn NULL), marking in keep[] those that stay. Context: busy held. */
static void deliver_range(shard_dispatcher *d, struct outbox *ob, uint32_t from, uint32_t end, bool *keep,
                          const struct shard_worker *skip)
{
    SHARD_CHECK(atomic_load_explicit(&ob->busy, memory_order_relaxed));
    shard__rcu_read_lock();
    /* acquire: pairs with the release store that published the snapshot (membership.c's publish). */
    struct snap *s = atomic_load_explicit(&d->snap, memory_order_acquire);
    struct shard_worker *to[OUTBOX_MAX];
    for (uint32_t i = from; i < end; i++) {
        const struct outbox_entry *e = &ob->e[i];
        /* Snapshots' epochs are never reused: the same epoch is the same ring, so the same owner. */
        size_t owner = e->epoch == s->epoch ? e->owner : shard__ring_owner_index(s->ring, e->hash);
        to[i] = e->fn ? snap_worker(s, owner) : NULL;
        keep[i] = false;
        /* An early delivery (a parked or polling destination) leaves what is bound for the delivering
         * worker itself gathered: its owner is busy (running this job), and delivered into its own
         * queue it would be dropped by a DROP crash of it, where the job's own submits are promised to
         * be delivered when it returns and its batch's earlier ones by the crash. */
        if (skip && to[i] == skip) {
            to[i] = NULL;
            keep[i] = true;
        }
    }
    /* A destination at a time, in the order of its first entry: O(entries x destinations), at most
     * 64 x 64 steps, where a sort would cost as much at these sizes. */
    for (uint32_t i = from; i < end; i++)
        if (to[i])
            deliver_to(ob, to, keep, i, end, s->epoch);
    shard__rcu_read_unlock();
}

/* The outbox's delivery lock: held for one delivery, which never waits for anything else. */
static void busy_lock(struct outbox *ob)
{
    /* acquire: pairs with busy_unlock's release, so the entries the last holder changed are seen. */
    while (atomic_exchange_explicit(&ob->busy, true, memory_order_acquire))
        sched_yield();
}

static void busy_unlock(struct outbox *ob)
{
    atomic_store_explicit(&ob->busy, false, memory_order_release);
}

bool shard__outbox_deliver(struct shard_worker *w)
{
    return outbox_deliver(w, false);
}

static bool outbox_deliver(struct shard_worker *w, bool others_only)
{
    SHARD_CHECK_ON(w);
    struct outbox *ob = &w->outbox;
    if (!ob->n)
        return true;
    shard_dispatcher *d = w->d;
    bool keep[OUTBOX_MAX];
    busy_lock(ob);
    deliver_range(d, ob, 0, ob->n, keep, others_only ? w : NULL);
    uint32_t kept = 0, sealed = atomic_load_explicit(&ob->sealed, memory_order_relaxed), kept_sealed = 0;
    for (uint32_t k = 0; k < ob->n; k++)
        if (keep[k]) {
            /* Kept only for want of memory, what stays is left to this thread; kept by an early
             * delivery, what returned jobs sealed stays sealed (the rescue of a crash delivers it). */
            if (others_only && k < sealed)
                kept_sealed++;
            ob->e[kept++] = ob->e[k];
        }
    ob->n = kept;
    atomic_store_explicit(&ob->sealed, kept_sealed, memory_order_relaxed);
    if (!kept) {
        /* seq_cst, then shutdown read: destroy sets shutdown and then reads `open` (dispatcher.c), so
         * either it sees the outbox closed or this sees shutdown and wakes it. */
        atomic_store_explicit(&ob->open, false, memory_order_seq_cst);
        if (atomic_load_explicit(&d->shutdown, memory_order_seq_cst)) {
            pthread_mutex_lock(&d->lock);
            pthread_cond_broadcast(&d->cond);
            pthread_mutex_unlock(&d->lock);
        }
    }
    busy_unlock(ob);
    return !kept;
}

void shard__outbox_rescue(struct shard_worker *x)
{
    SHARD_CHECK(shard__ctl_held(x->d));
    struct outbox *ob = &x->outbox;
    bool keep[OUTBOX_MAX];
    busy_lock(ob);
    /* acquire: pairs with shard__outbox_seal's release; the entries below are written. */
    uint32_t upto = atomic_load_explicit(&ob->sealed, memory_order_acquire);
    deliver_range(x->d, ob, 0, upto, keep, NULL);
    /* Delivered ones are cleared (fn NULL) for the worker's own delivery to skip; the rest it delivers. */
    for (uint32_t k = 0; k < upto; k++)
        if (!keep[k])
            ob->e[k].fn = NULL;
    busy_unlock(ob);
}

bool shard__outboxes_open(shard_dispatcher *d)
{
    SHARD_CHECK_HELD(&d->lock);
    for (size_t i = 0; i < d->nworkers; i++)
        if (atomic_load_explicit(&d->workers[i]->outbox.open, memory_order_seq_cst))
            return true;
    return false;
}

SHARD_API int shard_flush(shard_worker *w)
{
    if (!w || w != shard__current_worker)
        return -EINVAL;
    return shard__outbox_deliver(w) ? 0 : -ENOMEM;
}
