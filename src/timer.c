/* Keyed timers (shard/timer.h) on a worker: their arm and fire jobs, firing what is due, and handing
 * timers on with their keys (the public calls: timer_arm.c; placing records: timer_place.c).
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A timer is a record (timer_table.h) waiting in a worker's wheel (wheel.h, under its timers.lock),
 * and it enters and leaves wheels as its key's state moves, so that it is always held by the worker
 * that holds that state:
 *   - arming puts the record into the wheel of the key's owner when every fence of the ring in force
 *     has been passed (that owner holds the key's state); during a change it submits a job of the
 *     key (shard__timer_arm) that does so on the worker it runs on, where the key's state is then;
 *   - at a fence where that worker loses keys it hands their timers on, with the release hook's
 *     state, to their owners in the ring in force (shard__timers_release): they hold the keys once
 *     the owners before them are done; a crash gives the crashed worker's to the same owners
 *     (shard__timers_crash), or to on_dropped. A wheel takes a timer placed by a ring only if its
 *     worker has not lost keys under a newer one (timers.epoch), so a timer never waits with a
 *     worker that has already handed its key on;
 *   - at the deadline the worker submits a job of the key (shard__timer_fire) that runs the user's
 *     job, so every promise about a key's jobs (order, one at a time, handoffs, crashes) holds for it.
 * So a key's timers fire in deadline order: they sit in one wheel, which hands them out by deadline,
 * and the one wheel that holds them changes only at the key's handoff, after which the old holder
 * submits nothing more for the key; handing them on places them in deadline order, so a new holder that
 * fires while they still arrive fires a prefix of them (place_all).
 *
 * Fire or cancel: the record's state word, changed by CAS (timer_table.h has the states), is drawn in
 * docs/protocol.md ("A timer's word"), with who frees the record.
 *
 * Locks: timers.lock is a leaf, taken under w->lock or none; never two at once. */
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

void shard__timer_arm(shard_worker *w, void *arg)
{
    uint32_t idx = timer_index(arg);
    struct timer *t = shard__timer_at(&w->d->timers, idx);
    if (shard__timer_state(atomic_load_explicit(&t->word, memory_order_acquire)) == TIMER_CANCELLED)
        shard__timer_free(&w->d->timers, idx);
    else
        shard__timer_own_insert(w, idx);
}

/* The next deadline of a periodic timer after a run ending at now: the first point of its grid after
 * now. */
static uint64_t next_deadline(const struct timer *t, uint64_t now)
{
    if (t->deadline + t->period > now)
        return t->deadline + t->period;
    return t->deadline + ((now - t->deadline) / t->period + 1) * t->period;
}

void shard__timer_fire(shard_worker *w, void *arg)
{
    shard_dispatcher *d = w->d;
    uint32_t idx = timer_index(arg);
    struct timer *t = shard__timer_at(&d->timers, idx);
    uint64_t word = atomic_load_explicit(&t->word, memory_order_acquire);
    uint32_t gen = (uint32_t)(word >> 32);
    if (shard__timer_state(word) != TIMER_PENDING ||
        !atomic_compare_exchange_strong_explicit(&t->word, &word, shard__timer_word(gen, TIMER_RUNNING),
                                                 memory_order_acq_rel, memory_order_acquire)) {
        shard__timer_free(&d->timers, idx); /* cancelled before it ran */
        return;
    }
    t->fn(w, t->arg);
    uint64_t running = shard__timer_word(gen, TIMER_RUNNING);
    if (!t->period || atomic_load_explicit(&d->shutdown, memory_order_relaxed)) {
        shard__timer_free(&d->timers, idx);
        return;
    }
    t->deadline = next_deadline(t, shard__now_ns());
    /* release: a cancel that sees PENDING again finds the record as it will be placed. */
    if (!atomic_compare_exchange_strong_explicit(&t->word, &running, shard__timer_word(gen, TIMER_PENDING),
                                                 memory_order_acq_rel, memory_order_relaxed)) {
        shard__timer_free(&d->timers, idx); /* cancelled while it ran: that was its last run */
        return;
    }
    shard__timer_own_insert(w, idx);
}

bool shard__timer_dropped(shard_dispatcher *d, void *arg, shard_job_fn *fn, void **user_arg)
{
    uint32_t idx = timer_index(arg);
    struct timer *t = shard__timer_at(&d->timers, idx);
    uint64_t word = atomic_load_explicit(&t->word, memory_order_acquire);
    /* PENDING -> CANCELLED: a cancel from now on says it is not pending (-ENOENT), as for a timer
     * that ran; one that got there first has it, and on_dropped does not hear of it. */
    bool report = shard__timer_state(word) == TIMER_PENDING &&
                  atomic_compare_exchange_strong_explicit(&t->word, &word,
                                                          shard__timer_word((uint32_t)(word >> 32), TIMER_CANCELLED),
                                                          memory_order_acq_rel, memory_order_relaxed);
    *fn = t->fn;
    *user_arg = t->arg;
    shard__timer_free(&d->timers, idx);
    return report;
}

void shard__timers_worker_init(struct shard_worker *w)
{
    pthread_mutex_init(&w->timers.lock, NULL);
    shard__wheel_init(&w->timers.wheel, &w->d->timers, shard__now_ns());
    atomic_init(&w->timers.next, UINT64_MAX);
}

void shard__timers_worker_destroy(struct shard_worker *w)
{
    pthread_mutex_destroy(&w->timers.lock);
}

bool shard__timers_due(struct shard_worker *w)
{
    uint64_t next = atomic_load_explicit(&w->timers.next, memory_order_relaxed);
    return next != UINT64_MAX && next <= shard__now_ns();
}

/* Submits the fire job of the due timer idx, or frees it if it was cancelled. */
static void fire_one(struct shard_worker *w, uint32_t idx, uint64_t now)
{
    shard_dispatcher *d = w->d;
    struct timer *t = shard__timer_at(&d->timers, idx);
    if (shard__timer_state(atomic_load_explicit(&t->word, memory_order_acquire)) == TIMER_CANCELLED) {
        shard__timer_free(&d->timers, idx);
        return;
    }
    /* From a worker a submit never waits; it fails only when destroy has begun (the timer is
     * discarded) or no record for a full queue could be had (it tries again a tick later). */
    int rc = shard__submit_hashed(d, t->hash, shard__timer_fire, timer_arg(idx), ORIGIN_TIMER, true);
    if (rc == -ENOMEM) {
        t->deadline = now + (1u << WHEEL_TICK_SHIFT);
        shard__timer_own_insert(w, idx);
    } else if (rc != 0) {
        shard__timer_free(&d->timers, idx);
    }
}

void shard__timers_fire_due(struct shard_worker *w)
{
    SHARD_CHECK_W(w);
    SHARD_CHECK_HELD(&w->lock);
    shard_dispatcher *d = w->d;
    uint64_t now = shard__now_ns();
    pthread_mutex_lock(&w->timers.lock);
    /* In deadline order: a key's timers are submitted, so run, in the order they fall due. The wheel
     * hands them out in tick order, in no order within a tick. */
    uint32_t list = shard__timer_taken(&d->timers, shard__wheel_advance(&w->timers.wheel, now));
    shard__timer_update_next(w);
    pthread_mutex_unlock(&w->timers.lock);
    shard__rcu_read_lock();
    while (list) {
        uint32_t idx = list - 1;
        list = shard__timer_at(&d->timers, idx)->next;
        fire_one(w, idx, now);
    }
    shard__rcu_read_unlock();
}

uint64_t shard__timers_next(struct shard_worker *w)
{
    pthread_mutex_lock(&w->timers.lock);
    uint64_t next = atomic_load_explicit(&w->timers.next, memory_order_relaxed);
    pthread_mutex_unlock(&w->timers.lock);
    return next;
}

struct keeps {
    const shard_ring *after;
    uint32_t          index;
};

static int still_owned(uint64_t hash, void *ctx)
{
    const struct keeps *k = ctx;
    return shard__ring_owner_index(k->after, hash) == k->index;
}

void shard__timers_release(struct shard_worker *w, const struct snap *after, long after_index)
{
    SHARD_CHECK_W(w);
    SHARD_CHECK_HELD(&w->lock);
    struct keeps k = { after->ring, (uint32_t)after_index };
    pthread_mutex_lock(&w->timers.lock);
    uint32_t list = shard__timer_taken(&w->d->timers, after_index < 0 ? shard__wheel_take_all(&w->timers.wheel)
                                                         : shard__wheel_take_if_not(&w->timers.wheel, still_owned, &k));
    w->timers.closed = after_index < 0;
    w->timers.epoch = after->epoch;
    shard__timer_update_next(w);
    pthread_mutex_unlock(&w->timers.lock);
    if (!list)
        return;
    /* To the owners in the ring in force, not the fence's: the fence's owner of a key may have passed
     * a later fence already (moving the key on), or left and been freed. The owner in force holds
     * the key's state once the owners before it are done, and fires through the key's order. */
    shard__rcu_read_lock();
    shard__timer_place_all(w->d, list);
    shard__rcu_read_unlock();
}

void shard__timers_crash(shard_dispatcher *d, struct shard_worker *x, enum shard_crash_policy policy)
{
    pthread_mutex_lock(&x->timers.lock);
    uint32_t list = shard__timer_taken(&d->timers, shard__wheel_take_all(&x->timers.wheel));
    x->timers.closed = true;
    shard__timer_update_next(x);
    pthread_mutex_unlock(&x->timers.lock);
    if (policy == SHARD_CRASH_REROUTE) {
        shard__rcu_read_lock();
        shard__timer_place_all(d, list);
        shard__rcu_read_unlock();
        return;
    }
    while (list) {
        uint32_t idx = list - 1;
        list = shard__timer_at(&d->timers, idx)->next;
        shard_job_fn fn;
        void *arg;
        if (!shard__timer_dropped(d, timer_arg(idx), &fn, &arg))
            continue;
        if (d->cfg.on_dropped)
            d->cfg.on_dropped(fn, arg, d->cfg.user);
        atomic_fetch_add_explicit(&d->dropped, 1, memory_order_relaxed);
    }
}

uint64_t shard__timers_pending(struct shard_worker *w)
{
    pthread_mutex_lock(&w->timers.lock);
    uint64_t n = w->timers.wheel.count;
    pthread_mutex_unlock(&w->timers.lock);
    return n;
}
