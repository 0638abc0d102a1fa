/* The submit path: one job of a hashed key, from admission (shutdown, a throttled key, a worker full
 * of set-aside jobs) to its slot in its owner's ring, or its worker's outbox (submit.h); and the
 * owner a job of a key would go to now (shard_key_owner).
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>

#include "ctl.h"
#include "dispatcher_internal.h"
#include "handoff.h"
#include "hash.h"
#include "outbox.h"
#include "rcu.h"
#include "space.h"
#include "submit.h"

bool shard__submit_throttled(shard_dispatcher *d, uint64_t h, bool wait)
{
    if (!shard__throttle_any(&d->throttle) || (wait && shard__current_worker) || !shard__throttle_holds(&d->throttle, h))
        return false;
    /* Nor a submit that may not wait for a key: a key's set-aside jobs may wait for a fence, which is
     * pushed after a grace period (that a section of the application's holds up) and, on a crash,
     * after its on_dropped calls (made holding d's ctl, as the ring's hooks are). Such a submit goes
     * ahead, as a worker's does. */
    return !(wait && (shard__rcu_in_outer_section() || shard__ctl_held(d)));
}

bool shard__submit_full_slow(shard_dispatcher *d, uint64_t epoch, struct shard_worker *w, uint64_t h, bool wait)
{
    /* relaxed: the count is the holder's (its thread's stores); one a moment old lets at most the jobs
     * in flight past, which the bound counts (throttle.h). */
    if (!shard__throttle_full(&d->throttle, atomic_load_explicit(&w->own.held.jobs, memory_order_relaxed), false))
        return false;
    /* Why such a wait ends: it waits for w's held jobs, which wait for older owners of their keys, or
     * for the fences of epochs up to the one it routed with, of which only older work is ahead: no
     * wait points to a later submit. The submitters excepted are those that work it waits for could
     * wait for: a worker (the old owner, or w, that must run it; it never waits, as for a full
     * queue), a submit inside the application's read-side section (the change's fences are pushed
     * after a grace period, which waits for that section) and one holding d's ctl (on_dropped, the
     * ring's hooks: the change, or the crash that would end the wait, is made holding it). Their
     * jobs go in and count on top, as a worker's do. */
    if (wait && (shard__current_worker || shard__rcu_in_outer_section() || shard__ctl_held(d)))
        return false;
    /* Only keys whose job would be set aside there: the others run at once and are not held back. */
    return shard__key_waits_older(d, w, epoch, h);
}

/* Whether a multi-key job's part of h must wait (wait) or be refused because w, its key's owner, is
 * full of set-aside jobs, whatever the ring: throttle.h's gate for multi-key jobs. Each multi-key job
 * queued behind another's claim adds one set-aside part of a key that need never be submitted again,
 * so the throttle, per key, does not bound a chain of them behind a stuck key (M1 over the stuck key
 * and F1, M2 over F1 and F2, ...). A part waits once w holds 2 * limit if its key may wait behind a
 * crash table entry (a claim, a stuck job: the filter's bucket); a part of a key that runs at once is
 * not held back. That alone is no bound: the claim a chain's next part would wait behind is made
 * only when the part before it comes up, which a quick submitter outruns, so past 4 * limit every
 * part on w waits (throttle.h says what that costs). The submitters excepted are
 * shard__submit_full_slow's. Context: inside the read-side section that found w. */
static bool part_full(shard_dispatcher *d, struct shard_worker *w, uint64_t h, bool wait)
{
    uint64_t held = atomic_load_explicit(&w->own.held.jobs, memory_order_relaxed);
    bool full = shard__throttle_full(&d->throttle, held, false);          /* 2 * limit */
    bool past_cap = shard__throttle_full(&d->throttle, held / 2, false);  /* 4 * limit */
    if (!full || (!past_cap && !shard__crash_may_block(&d->crash, h)))
        return false;
    return !(wait && (shard__current_worker || shard__rcu_in_outer_section() || shard__ctl_held(d)));
}

/* Waits for room in w, found full by the caller's read-side section that loaded s. Return: as
 * shard__space_wait (true: destroy began, and the caller is back in a section that touches nothing
 * of d; false: look again). */
static bool wait_for_room(shard_dispatcher *d, struct shard_worker *w, const struct snap *s)
{
    uint64_t epoch = shard__space_register(d, w), ring_epoch = s->epoch; /* s is not ours past unlock */
    shard__rcu_read_unlock();
    if (shard__space_wait(d, w, epoch, ring_epoch)) {
        /* d may be freed: back in a section (which touches nothing of d) as the caller expects. */
        shard__rcu_read_lock();
        return true;
    }
    return false;
}

/* One look at the owner of h for a submit: 0 with *sp and *wp set when a job may go in now but for
 * room in the ring; 1 when the caller waited (for a throttled key or a worker full of set-aside jobs)
 * and must look again; -EAGAIN (not wait) or -ESHUTDOWN. part: a multi-key job's (part_full).
 * Context: as shard__submit_hashed. */
static int admit(shard_dispatcher *d, uint64_t h, bool wait, bool part, struct snap **sp, struct shard_worker **wp)
{
    if (atomic_load_explicit(&d->shutdown, memory_order_relaxed))
        return -ESHUTDOWN;
    if (shard__submit_throttled(d, h, wait)) {
        if (!wait)
            return -EAGAIN;
        uint64_t epoch = shard__space_register(d, NULL);
        uint64_t ring_epoch = atomic_load_explicit(&d->epoch, memory_order_relaxed);
        shard__rcu_read_unlock();
        if (shard__space_wait_key(d, h, epoch, ring_epoch)) {
            shard__rcu_read_lock(); /* as in wait_for_room */
            return -ESHUTDOWN;
        }
        return 1;
    }
    /* acquire (E8, docs/protocol.md): pairs with the release store that published the snapshot
     * (membership.c's publish). */
    struct snap *s = atomic_load_explicit(&d->snap, memory_order_acquire);
    struct shard_worker *w = snap_worker(s, shard__ring_owner_index(s->ring, h));
    bool parts = false;
    if (shard__submit_full(d, s, w, h, wait) || (parts = part && part_full(d, w, h, wait))) {
        /* w is full of set-aside jobs during a change, or, for a multi-key job's part, at all: wait as
         * for a full queue (throttle.h). */
        if (!wait) {
            atomic_fetch_add_explicit(&d->throttle.full_waits, 1, memory_order_relaxed);
            return -EAGAIN;
        }
        if (shard__space_wait_full(d, w, s->epoch, parts)) {
            shard__rcu_read_lock(); /* as in wait_for_room */
            return -ESHUTDOWN;
        }
        return 1;
    }
    *sp = s;
    *wp = w;
    return 0;
}

int shard__submit_hashed(shard_dispatcher *d, uint64_t h, shard_job_fn fn, void *arg, uint8_t origin, bool wait)
{
    struct shard_worker *me = shard__worker_here(d);
    if (me && !atomic_load_explicit(&d->shutdown, memory_order_relaxed)) {
        /* A running job's submit waits in its worker's outbox for the batch's end (outbox.h); any
         * other submit of the worker's thread goes after what it holds. */
        if (wait && me->outbox.gathering)
            return shard__outbox_gather(me, h, fn, arg, origin);
        if (!shard__outbox_deliver(me)) {
            return -ENOMEM;
        }
    }
    for (;;) {
        struct snap *s;
        struct shard_worker *w;
        int rc = admit(d, h, wait, false, &s, &w);
        if (rc < 0)
            return rc;
        if (rc > 0)
            continue;
        /* A worker's submit takes no slot that a waiting thread is owed: the worker's own jobs
         * (a job's fan-out, timers falling due) would otherwise refill every slot it frees, and the
         * waiters, woken once the queue is half free, would never get in. */
        bool yield = shard__current_worker && shard__space_waited(w);
        if (yield && !wait)
            return -EAGAIN;
        bool ok = !yield && shard__queue_push_mp(&w->q, fn, arg, h, s->epoch, origin);
        if (!ok && wait && shard__current_worker) {
            /* A worker never waits: it could be the very worker that must make room. The job goes
             * after the ring's current contents, through the side list. */
            if (!shard__queue_push_side_new(&w->q, w, fn, arg, h, s->epoch, origin))
                return -ENOMEM;
            ok = true;
        }
        if (ok) {
            shard__worker_wake(w);
            return 0;
        }
        if (!wait)
            return -EAGAIN;
        if (wait_for_room(d, w, s))
            return -ESHUTDOWN;
    }
}

int shard__submit_room(shard_dispatcher *d, uint64_t h, bool wait)
{
    for (;;) {
        struct snap *s;
        struct shard_worker *w;
        int rc = admit(d, h, wait, true, &s, &w);
        if (rc < 0)
            return rc;
        if (rc > 0)
            continue;
        if (shard__queue_has_room(&w->q))
            return 0;
        if (!wait)
            return -EAGAIN;
        if (wait_for_room(d, w, s))
            return -ESHUTDOWN;
    }
}

/* A submit of key[0..len), or, key_hash, of the key whose hash is hash. */
static int submit(shard_dispatcher *d, const void *key, size_t len, bool key_hash, uint64_t hash, shard_job_fn fn,
                  void *arg, bool wait)
{
    if (!d || !fn || (!key_hash && !key && len > 0))
        return -EINVAL;
    /* From here on d is read only inside a read-side section, or by a registered waiter: destroy
     * frees it after a grace period that follows both (shard_dispatcher_destroy). */
    shard__rcu_read_lock();
    if (!key_hash)
        hash = shard__hash_key_cfg(&d->cfg.ring, key, len);
    int rc = shard__submit_hashed(d, hash, fn, arg, ORIGIN_USER, wait);
    shard__rcu_read_unlock();
    return rc;
}

SHARD_API int shard_submit(shard_dispatcher *d, const void *key, size_t len, shard_job_fn fn, void *arg)
{
    return submit(d, key, len, false, 0, fn, arg, true);
}

SHARD_API int shard_try_submit(shard_dispatcher *d, const void *key, size_t len, shard_job_fn fn, void *arg)
{
    return submit(d, key, len, false, 0, fn, arg, false);
}

SHARD_API int shard_submit_hash(shard_dispatcher *d, uint64_t hash, shard_job_fn fn, void *arg)
{
    return submit(d, NULL, 0, true, hash, fn, arg, true);
}

SHARD_API int shard_try_submit_hash(shard_dispatcher *d, uint64_t hash, shard_job_fn fn, void *arg)
{
    return submit(d, NULL, 0, true, hash, fn, arg, false);
}

/* The ids of the owners of hashes[0..n) in the ring in force, one ring for all. Context: inside a
 * read-side section. */
static int owner_ids(shard_dispatcher *d, const uint64_t *hashes, size_t n, uint32_t *ids)
{
    if (atomic_load_explicit(&d->shutdown, memory_order_relaxed))
        return -ESHUTDOWN;
    /* acquire: pairs with the release store that published the snapshot (membership.c's publish). */
    struct snap *s = atomic_load_explicit(&d->snap, memory_order_acquire);
    for (size_t i = 0; i < n; i++)
        ids[i] = snap_worker(s, shard__ring_owner_index(s->ring, hashes[i]))->id;
    return 0;
}

SHARD_API int shard_key_owner(shard_dispatcher *d, const void *key, size_t len, uint32_t *id)
{
    if (!d || !id || (!key && len > 0))
        return -EINVAL;
    shard__rcu_read_lock(); /* as submit: d is read inside a section, the hash included */
    uint64_t hash = shard__hash_key_cfg(&d->cfg.ring, key, len);
    int rc = owner_ids(d, &hash, 1, id);
    shard__rcu_read_unlock();
    return rc;
}

SHARD_API int shard_key_owner_hash(shard_dispatcher *d, uint64_t hash, uint32_t *id)
{
    return id ? shard_key_owners_hash(d, &hash, 1, id) : -EINVAL;
}

SHARD_API int shard_key_owners_hash(shard_dispatcher *d, const uint64_t *hashes, size_t n, uint32_t *ids)
{
    if (!d || ((!hashes || !ids) && n > 0))
        return -EINVAL;
    shard__rcu_read_lock();
    int rc = owner_ids(d, hashes, n, ids);
    shard__rcu_read_unlock();
    return rc;
}
