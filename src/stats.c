/* Inspection: the ring in force, dispatcher-wide and per-worker stats. SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher_internal.h"
#include "clock.h"
#include "hash.h"
#include "load.h"
#include "rcu.h"
#include "stats.h"
#include "timer.h"

SHARD_API int shard_dispatcher_ring(shard_dispatcher *d, shard_ring **out)
{
    if (!d || !out)
        return -EINVAL;
    shard__rcu_read_lock();
    if (atomic_load_explicit(&d->shutdown, memory_order_relaxed)) {
        shard__rcu_read_unlock();
        return -ESHUTDOWN;
    }
    int err = shard_ring_clone(atomic_load_explicit(&d->snap, memory_order_acquire)->ring, out);
    shard__rcu_read_unlock();
    return err;
}

SHARD_API int shard_dispatcher_stats(shard_dispatcher *d, struct shard_stats *out)
{
    if (!d || !out)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    shard__rcu_read_lock();
    struct snap *s = atomic_load_explicit(&d->snap, memory_order_acquire);
    out->epoch = s->epoch;
    out->ring_checksum = shard_ring_checksum(s->ring);
    out->workers = shard_ring_member_count(s->ring);
    out->placements = shard_ring_pin_count(s->ring);
    /* The rest inside the section too, so that a call racing destroy never reads freed memory (the
     * locks: no holder of either waits for a grace period). */
    pthread_mutex_lock(&d->lock);
    out->changes = d->changes;
    out->last_moved_share = d->last_moved;
    pthread_mutex_unlock(&d->lock);
    out->dropped = atomic_load_explicit(&d->dropped, memory_order_relaxed);
    out->timers = atomic_load_explicit(&d->timers.live, memory_order_relaxed);
    out->throttled_keys = atomic_load_explicit(&d->throttle.keys, memory_order_relaxed);
    out->held_full_waits = atomic_load_explicit(&d->throttle.full_waits, memory_order_relaxed);
    shard__multi_counts(d, &out->multi_open, &out->multi_waiting);
    struct balance_report *rep = &d->balance_report;
    pthread_mutex_lock(&rep->lock);
    out->balance_rounds = rep->rounds;
    out->balance_moves = rep->moves;
    out->balance_weights = rep->weights;
    out->balance_ratio = rep->ratio;
    out->unsplittable_hash = rep->unsplittable;
    out->unsplittable_share = rep->unsplittable_share;
    pthread_mutex_unlock(&rep->lock);
    shard__rcu_read_unlock();
    return 0;
}

static void fill_stats(const struct shard_worker *w, struct shard_worker_stats *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%s", w->name);
    o->state = (enum shard_worker_state)shard__worker_state(w); /* read once */
    o->running = atomic_load_explicit(&w->counts.busy, memory_order_relaxed);
    /* A crashed worker's queue was handed over: its positions are no longer advanced. */
    o->queued = atomic_load_explicit(&w->life.epochless, memory_order_acquire) ? 0 : shard__queue_length(&w->q);
    o->executed = atomic_load_explicit(&w->counts.executed, memory_order_relaxed);
    o->set_aside = atomic_load_explicit(&w->counts.set_aside, memory_order_relaxed);
    o->held = atomic_load_explicit(&w->own.held.jobs, memory_order_relaxed);
    o->handed_over = atomic_load_explicit(&w->counts.handed_over, memory_order_relaxed);
    o->parked = atomic_load_explicit(&w->counts.parked, memory_order_relaxed);
    o->woken = atomic_load_explicit(&w->counts.woken, memory_order_relaxed);
    o->timers = shard__timers_pending((struct shard_worker *)w);
    o->busy_ns = atomic_load_explicit(&w->counts.busy_ns, memory_order_relaxed);
    uint64_t bits = atomic_load_explicit(&w->counts.queued_avg, memory_order_relaxed), now = shard__now_ns();
    memcpy(&o->queued_avg, &bits, sizeof o->queued_avg);
    /* Brought up to now with the length now, as the worker would at its next sample: a worker stuck in
     * a long job (or parked) samples nothing meanwhile. sampled_at is W's: a stale read only weighs the
     * length a little more or less. */
    uint64_t at = __atomic_load_n(&w->counts.sampled_at, __ATOMIC_RELAXED);
    if (at && now > at) {
        double dt = (double)(now - at);
        o->queued_avg += ((double)o->queued - o->queued_avg) * (dt >= LOAD_TAU_NS ? 1.0 : dt / LOAD_TAU_NS);
    }
    uint64_t since = atomic_load_explicit(&w->counts.head_since, memory_order_relaxed);
    o->head_wait_ns = o->queued && since && now > since ? now - since : 0;
}

SHARD_API long shard_worker_hot_keys(shard_dispatcher *d, const char *name, struct shard_hot_key *out, size_t n,
                                     uint64_t *window_busy_ns)
{
    if (!d || !name || (!out && n > 0))
        return -EINVAL;
    return shard__hot_keys_of(d, name, out, n, window_busy_ns, NULL, NULL);
}

long shard__hot_keys_of(shard_dispatcher *d, const char *name, struct shard_hot_key *out, size_t n,
                        uint64_t *window_busy_ns, uint64_t *window_jobs, uint64_t *window_seq)
{
    if (window_busy_ns)
        *window_busy_ns = 0;
    if (window_jobs)
        *window_jobs = 0;
    if (window_seq)
        *window_seq = 0;
    long rc = -ENOENT;
    /* The registry under d->lock: a worker leaves it under that lock (and ctl) and is freed only after.
     * A name may be a ring member and a removed worker still finishing: the member first. */
    shard__rcu_read_lock(); /* as the stats: d->lock inside a section */
    pthread_mutex_lock(&d->lock);
    struct shard_worker *found = NULL;
    for (size_t i = 0; i < d->nworkers; i++) {
        struct shard_worker *w = d->workers[i];
        if (strcmp(w->name, name) != 0 || shard__worker_state(w) == SHARD_WORKER_EXITED)
            continue;
        if (!found || shard__worker_state(w) == SHARD_WORKER_RUNNING)
            found = w;
    }
    if (found)
        rc = found->hot ? shard__hot_read(found->hot, out, n, window_busy_ns, window_jobs, window_seq) : 0;
    pthread_mutex_unlock(&d->lock);
    shard__rcu_read_unlock();
    return rc;
}

SHARD_API uint64_t shard_dispatcher_key_hash(shard_dispatcher *d, const void *key, size_t len)
{
    if (!d || (!key && len > 0))
        return 0;
    shard__rcu_read_lock(); /* as submit: d is read inside a section */
    uint64_t hash = shard__hash_key_cfg(&d->cfg.ring, key, len);
    shard__rcu_read_unlock();
    return hash;
}

SHARD_API long shard_dispatcher_worker_stats(shard_dispatcher *d, struct shard_worker_stats *out, size_t n)
{
    if (!d || (!out && n > 0))
        return -EINVAL;
    size_t k = 0;
    /* Ring members from the snapshot, whose members are in name order; then the registry's others.
     * d->lock inside the read-side section: no holder of d->lock waits for a grace period. */
    shard__rcu_read_lock();
    pthread_mutex_lock(&d->lock);
    const struct snap *s = atomic_load_explicit(&d->snap, memory_order_acquire);
    size_t members = shard_ring_member_count(s->ring);
    double *shares = n ? malloc(members * sizeof *shares) : NULL;
    if (shares)
        shard__ring_shares(s->ring, shares);
    for (size_t i = 0; i < members; i++, k++) {
        if (k < n) {
            fill_stats(s->by_member[i], &out[k]);
            out[k].share = shares ? shares[i] : shard_ring_share(s->ring, s->by_member[i]->name);
        }
    }
    free(shares);
    for (size_t i = 0; i < d->nworkers; i++) {
        const struct shard_worker *w = d->workers[i];
        long idx = shard__ring_member_index(s->ring, w->name);
        if (shard__worker_state(w) == SHARD_WORKER_EXITED || (idx >= 0 && s->by_member[idx] == w))
            continue;
        if (k < n)
            fill_stats(w, &out[k]);
        k++;
    }
    pthread_mutex_unlock(&d->lock);
    shard__rcu_read_unlock();
    return (long)k;
}
