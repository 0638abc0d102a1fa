/* Keyed timers' public calls (shard/timer.h): arming, cancelling and re-arming. What a timer is and
 * how it moves with its key: timer.c's head. SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "clock.h"
#include "dispatcher_internal.h"
#include "hash.h"
#include "outbox.h"
#include "rcu.h"
#include "shard/timer.h"
#include "submit.h"
#include "timer.h"
#include "timer_place.h"
#include "wheel.h"

static int arm(shard_dispatcher *d, const void *key, size_t len, uint64_t delay, uint64_t period, shard_job_fn fn,
               void *arg, shard_timer *out)
{
    if (out)
        *out = 0;
    if (!d || !fn || (!key && len > 0) || delay > SHARD_TIMER_MAX_NS || period > SHARD_TIMER_MAX_NS)
        return -EINVAL;
    /* As a submit: d is read only inside a read-side section (destroy frees it after one). */
    shard__rcu_read_lock();
    if (atomic_load_explicit(&d->shutdown, memory_order_relaxed)) {
        shard__rcu_read_unlock();
        return -ESHUTDOWN;
    }
    /* A running job's gathered submits go first: the timer may go straight into a wheel and fall
     * due at once, and it runs after its key's jobs submitted before (timer.h). */
    struct shard_worker *me = shard__worker_here(d);
    if (me && !shard__outbox_deliver(me)) {
        shard__rcu_read_unlock();
        return -ENOMEM;
    }
    uint32_t idx;
    uint64_t id;
    struct timer *t = shard__timer_alloc(&d->timers, &idx, &id);
    if (!t) {
        shard__rcu_read_unlock();
        return -ENOMEM;
    }
    t->hash = shard__hash_key_cfg(&d->cfg.ring, key, len);
    t->deadline = shard__now_ns() + delay;
    t->period = period;
    t->fn = fn;
    t->arg = arg;
    if (out)
        *out = id;
    /* Straight into the owner's wheel when every fence of the ring in force has been passed: its
     * owner then holds the key's state (a wheel that has lost keys under a newer ring refuses it).
     * Otherwise a job of the key takes it there, through the key's order; also for a throttled key
     * (throttle.h), whose arm waits as its submits do: its fire job would be set aside beyond the
     * allowance. */
    struct snap *s = atomic_load_explicit(&d->snap, memory_order_acquire);
    if (atomic_load_explicit(&d->settled, memory_order_acquire) >= s->epoch &&
        !shard__submit_throttled(d, t->hash, true) &&
        shard__timer_insert_into(snap_worker(s, shard__ring_owner_index(s->ring, t->hash)), idx, s->epoch)) {
        shard__rcu_read_unlock();
        return 0;
    }
    int rc = shard__submit_hashed(d, t->hash, shard__timer_arm, timer_arg(idx), ORIGIN_TIMER, false);
    if (rc == -EAGAIN) {
        /* Waiting for room is not a cancellation point here: a thread cancelled there would leave
         * the record held by nobody, and after it d may already be gone. */
        int cancel_state;
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
        rc = shard__submit_hashed(d, t->hash, shard__timer_arm, timer_arg(idx), ORIGIN_TIMER, true);
        pthread_setcancelstate(cancel_state, NULL);
    }
    if (rc == -ENOMEM)
        shard__timer_free(&d->timers, idx);
    /* After -ESHUTDOWN d may be gone: the record goes with it. */
    if (rc && out)
        *out = 0;
    shard__rcu_read_unlock();
    return rc;
}

SHARD_API int shard_submit_after(shard_dispatcher *d, const void *key, size_t len, uint64_t delay_ns,
                                 shard_job_fn fn, void *arg, shard_timer *timer)
{
    return arm(d, key, len, delay_ns, 0, fn, arg, timer);
}

SHARD_API int shard_submit_every(shard_dispatcher *d, const void *key, size_t len, uint64_t period_ns,
                                 shard_job_fn fn, void *arg, shard_timer *timer)
{
    if (period_ns == 0)
        return -EINVAL;
    return arm(d, key, len, period_ns, period_ns, fn, arg, timer);
}

/* A cancel on the thread of the worker whose wheel holds idx takes it out at once; elsewhere the
 * record waits in its wheel until its deadline (taking another worker's lock for it would make every
 * cancel contend with that worker's firing). */
static void unlink_if_mine(shard_dispatcher *d, uint32_t idx, uint64_t cancelled)
{
    struct shard_worker *me = shard__worker_here(d);
    struct timer *t = shard__timer_at(&d->timers, idx);
    if (!me || atomic_load_explicit(&t->home, memory_order_relaxed) != &me->timers.wheel)
        return;
    pthread_mutex_lock(&me->timers.lock);
    /* Still the timer cancelled: a crash may have taken it from this wheel meanwhile and freed it,
     * and the record may be a new timer placed here since (a new generation). */
    bool mine = atomic_load_explicit(&t->home, memory_order_relaxed) == &me->timers.wheel &&
                atomic_load_explicit(&t->word, memory_order_relaxed) == cancelled;
    if (mine) {
        shard__wheel_remove(&me->timers.wheel, idx);
        atomic_store_explicit(&t->home, NULL, memory_order_relaxed);
    }
    pthread_mutex_unlock(&me->timers.lock);
    if (mine)
        shard__timer_free(&d->timers, idx);
}

SHARD_API int shard_timer_cancel(shard_dispatcher *d, shard_timer timer)
{
    if (!d || !timer)
        return -EINVAL;
    shard__rcu_read_lock();
    int rc = -ENOENT;
    long found = shard__timer_find(&d->timers, timer);
    if (atomic_load_explicit(&d->shutdown, memory_order_relaxed)) {
        rc = -ESHUTDOWN;
    } else if (found >= 0) {
        struct timer *t = shard__timer_at(&d->timers, (uint32_t)found);
        uint32_t gen = (uint32_t)(timer >> 32);
        uint64_t word = atomic_load_explicit(&t->word, memory_order_acquire);
        while ((uint32_t)(word >> 32) == gen) {
            enum timer_state st = shard__timer_state(word);
            enum timer_state to = st == TIMER_PENDING ? TIMER_CANCELLED : TIMER_RUNNING_CANCELLED;
            if (st != TIMER_PENDING && st != TIMER_RUNNING) {
                rc = st == TIMER_RUNNING_CANCELLED ? -EBUSY : -ENOENT;
                break;
            }
            /* acq_rel: a fire job that loses sees the cancel; one that won is seen as RUNNING. */
            if (atomic_compare_exchange_weak_explicit(&t->word, &word, shard__timer_word(gen, to),
                                                      memory_order_acq_rel, memory_order_acquire)) {
                rc = st == TIMER_PENDING ? 0 : -EBUSY;
                if (st == TIMER_PENDING)
                    unlink_if_mine(d, (uint32_t)found, shard__timer_word(gen, TIMER_CANCELLED));
                break;
            }
        }
    }
    shard__rcu_read_unlock();
    return rc;
}

/* Moves timer idx (its generation and PENDING in word, as read) to deadline now + delay in the wheel that
 * holds it. The wheel's worker is alive while the record is in its wheel, and the caller's read-side
 * section began before it could be taken out: a worker is freed only after it has emptied its wheel
 * (it left the ring, or crashed and its wheel was handed over) and a grace period has passed since
 * (registry.c). Context: an RCU read-side section. Return: as shard_timer_rearm for a pending timer. */
static int rearm_pending(shard_dispatcher *d, uint32_t idx, uint64_t word, uint64_t delay)
{
    struct timer *t = shard__timer_at(&d->timers, idx);
    struct wheel *home = atomic_load_explicit(&t->home, memory_order_acquire); /* pairs with insert_into */
    if (!home)
        return -EAGAIN; /* handed on with its key, its arm job queued, or taken out to fall due */
    struct shard_worker *w = (struct shard_worker *)((char *)home - offsetof(struct shard_worker, timers.wheel));
    pthread_mutex_lock(&w->timers.lock);
    /* Still there, still pending, still this generation: a cancel, an expiry or a hand-over may have
     * come first (each changes one or the other under this lock, or the word by CAS). */
    if (atomic_load_explicit(&t->home, memory_order_relaxed) != home ||
        atomic_load_explicit(&t->word, memory_order_acquire) != word) {
        pthread_mutex_unlock(&w->timers.lock);
        return -EAGAIN;
    }
    shard__wheel_remove(&w->timers.wheel, idx);
    t->deadline = shard__now_ns() + delay; /* the wheel holding it owns it (timer_table.h) */
    uint64_t before = atomic_load_explicit(&w->timers.next, memory_order_relaxed);
    shard__wheel_insert(&w->timers.wheel, idx);
    shard__timer_update_next(w);
    bool sooner = atomic_load_explicit(&w->timers.next, memory_order_relaxed) < before;
    pthread_mutex_unlock(&w->timers.lock);
    if (sooner)
        shard__worker_wake(w); /* as insert_into says */
    return 0;
}

SHARD_API int shard_timer_rearm(shard_dispatcher *d, shard_timer timer, uint64_t delay_ns)
{
    if (!d || !timer || delay_ns > SHARD_TIMER_MAX_NS)
        return -EINVAL;
    shard__rcu_read_lock();
    int rc = -ENOENT;
    long found = shard__timer_find(&d->timers, timer);
    struct shard_worker *me = shard__worker_here(d);
    if (atomic_load_explicit(&d->shutdown, memory_order_relaxed)) {
        rc = -ESHUTDOWN;
    } else if (found >= 0) {
        struct timer *t = shard__timer_at(&d->timers, (uint32_t)found);
        uint64_t word = atomic_load_explicit(&t->word, memory_order_acquire);
        if ((uint32_t)(word >> 32) == (uint32_t)(timer >> 32)) {
            enum timer_state st = shard__timer_state(word);
            if (st == TIMER_PENDING && me && !shard__outbox_deliver(me))
                rc = -ENOMEM; /* as arm: the new deadline comes after what the job submitted so far */
            else
                rc = st == TIMER_PENDING ? rearm_pending(d, (uint32_t)found, word, delay_ns)
                     : st == TIMER_RUNNING ? -EBUSY
                                           : -ENOENT;
        }
    }
    shard__rcu_read_unlock();
    return rc;
}
