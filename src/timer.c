/* Keyed timers (shard/timer.h): arming, cancelling, firing, and handing timers on with their keys.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A timer is a record (timer_table.h) waiting in a worker's wheel (wheel.h, under its timer_lock),
 * and it enters and leaves wheels as its key's state moves, so that it is always held by the worker
 * that holds that state:
 *   - arming puts the record into the wheel of the key's owner when every fence of the ring in force
 *     has been passed (that owner holds the key's state); during a change it submits a job of the
 *     key (shard__timer_arm) that does so on the worker it runs on, where the key's state is then;
 *   - at a fence where that worker loses keys it hands their timers on, with the release hook's
 *     state, to their owners in the ring in force (shard__timers_release): they hold the keys once
 *     the owners before them are done; a crash gives the crashed worker's to the same owners
 *     (shard__timers_crash), or to on_dropped. A wheel takes a timer placed by a ring only if its
 *     worker has not lost keys under a newer one (wheel_epoch), so a timer never waits with a
 *     worker that has already handed its key on;
 *   - at the deadline the worker submits a job of the key (shard__timer_fire) that runs the user's
 *     job, so every promise about a key's jobs (order, one at a time, handoffs, crashes) holds for it.
 * So a key's timers fire in deadline order: they sit in one wheel, which hands them out by deadline,
 * and the one wheel that holds them changes only at the key's handoff, after which the old holder
 * submits nothing more for the key; the hand-over places them in deadline order, so a new holder that
 * fires while they still arrive fires a prefix of them (place_all).
 *
 * Fire or cancel: the record's state word, changed by CAS (timer_table.h has the states):
 *
 *   FREE --alloc--> PENDING --fire job--> RUNNING --returns, once--> FREE
 *                     |  ^                  |   \--returns, periodic--> PENDING (again)
 *                     |  |                  cancel
 *                  cancel, drop             v
 *                     v                   RUNNING_CANCELLED --returns--> FREE
 *                  CANCELLED --found by its holder--> FREE
 *
 * Whoever holds the record (the wheel's worker, or whoever took it out of a wheel, or the arm or fire
 * job in flight) frees it.
 *
 * Locks: timer_lock is a leaf, taken under w->lock or none; never two at once. */
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
#include "wheel.h"

static inline void *timer_arg(uint32_t idx)
{
    return (void *)(uintptr_t)(idx + 1);
}

static inline uint32_t timer_index(void *arg)
{
    return (uint32_t)((uintptr_t)arg - 1);
}

/* Recomputes w's next wake-up. Context: timer_lock. */
static void update_next(struct shard_worker *w)
{
    atomic_store_explicit(&w->timer_next, shard__wheel_next(&w->wheel), memory_order_relaxed);
}

/* Puts timer idx into w's wheel unless w left the ring, or lost keys at a fence of a ring newer than
 * epoch (then the caller's ring is out of date for it). Return: false when it did not. */
static bool insert_into(struct shard_worker *w, uint32_t idx, uint64_t epoch)
{
    struct timer *t = shard__timer_at(&w->d->timers, idx);
    pthread_mutex_lock(&w->timer_lock);
    if (w->wheel_closed || w->wheel_epoch > epoch) {
        pthread_mutex_unlock(&w->timer_lock);
        return false;
    }
    uint64_t before = atomic_load_explicit(&w->timer_next, memory_order_relaxed);
    uint64_t at = shard__wheel_insert(&w->wheel, idx);
    /* release: a rearm that finds w through home (acquire in rearm_pending) sees w initialised, as
     * this thread does (it found w through a published snapshot, or is w). */
    atomic_store_explicit(&t->home, &w->wheel, memory_order_release);
    bool sooner = at < before;
    if (sooner)
        atomic_store_explicit(&w->timer_next, at, memory_order_relaxed);
    pthread_mutex_unlock(&w->timer_lock);
    /* A worker asleep until a later deadline (or for ever) looks again. It read timer_next under the
     * lock after announcing that it parks, so this wake-up is not lost (park.h). The caller may be w
     * itself, in its idle hook, about to wait with the old deadline: it is woken too (a worker in a
     * job is not parked, and the wake is one load). */
    if (sooner)
        shard__worker_wake(w);
    return true;
}

/* Places timer idx in the wheel of its key's owner in the ring in force: for timers whose key's state
 * is where that ring says (a crash's, after its hand-over) or follows it there. Context: an RCU
 * read-side section. */
static void place(shard_dispatcher *d, uint32_t idx)
{
    uint64_t hash = shard__timer_at(&d->timers, idx)->hash;
    for (;;) {
        /* acquire: pairs with the release that published the snapshot. A worker that left has left
         * that ring (published before it closes its wheel): the next look finds another. */
        struct snap *s = atomic_load_explicit(&d->snap, memory_order_acquire);
        if (insert_into(snap_worker(s, shard__ring_owner_index(s->ring, hash)), idx, s->epoch))
            return;
    }
}

/* Puts timer idx into the wheel of w, the worker running a job of its key (so holding the key's
 * state); one that left the ring (a crashed worker's job) places it by the ring. */
static void own_insert(struct shard_worker *w, uint32_t idx)
{
    if (insert_into(w, idx, UINT64_MAX))
        return;
    shard__rcu_read_lock();
    place(w->d, idx);
    shard__rcu_read_unlock();
}

/* The record after list's first (index + 1; 0: none). */
static uint32_t next_of(const struct timer_table *tt, uint32_t list)
{
    return shard__timer_at(tt, list - 1)->next;
}

/* Merges two lists sorted by deadline, a's first on a tie (stable). */
static uint32_t merge(const struct timer_table *tt, uint32_t a, uint32_t b)
{
    uint32_t head = 0, *link = &head;
    while (a && b) {
        uint32_t *from = shard__timer_at(tt, b - 1)->deadline < shard__timer_at(tt, a - 1)->deadline ? &b : &a;
        *link = *from;
        link = &shard__timer_at(tt, *from - 1)->next;
        *from = *link;
    }
    *link = a ? a : b;
    return head;
}

/* Sorts a list of n records (through next) by deadline, stably. In place and without memory, so it
 * cannot fail: the order in which a key's timers are handed to a worker is the order they run in. */
static uint32_t sort_by_deadline(const struct timer_table *tt, uint32_t list, size_t n)
{
    if (n < 2)
        return list;
    uint32_t last = list;
    for (size_t i = 1; i < n / 2; i++)
        last = next_of(tt, last);
    uint32_t second = next_of(tt, last);
    shard__timer_at(tt, last - 1)->next = 0;
    return merge(tt, sort_by_deadline(tt, list, n / 2), sort_by_deadline(tt, second, n - n / 2));
}

/* Detaches a list taken out of a wheel from it (home NULL: no cancel unlinks it from there now) and
 * sorts it by deadline. Context: the wheel's timer_lock. */
static uint32_t taken(const struct timer_table *tt, uint32_t list)
{
    size_t n = 0;
    for (uint32_t i = list; i; i = next_of(tt, i), n++)
        atomic_store_explicit(&shard__timer_at(tt, i - 1)->home, NULL, memory_order_relaxed);
    return sort_by_deadline(tt, list, n);
}

/* A list of records taken out of a wheel (through next, by deadline): each is placed again, or freed
 * if it was cancelled meanwhile. In deadline order: a worker that was idle fires the first one as it
 * arrives, so the order of arrival is the order of running (each advance hands out a prefix of it).
 * Context: an RCU read-side section. */
static void place_all(shard_dispatcher *d, uint32_t list)
{
    while (list) {
        uint32_t idx = list - 1;
        struct timer *t = shard__timer_at(&d->timers, idx);
        list = t->next;
        if (shard__timer_state(atomic_load_explicit(&t->word, memory_order_acquire)) == TIMER_CANCELLED)
            shard__timer_free(&d->timers, idx);
        else
            place(d, idx);
    }
}

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
    struct shard_worker *me = shard__current_worker;
    if (me && me->d == d && !shard__outbox_deliver(me)) {
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
        insert_into(snap_worker(s, shard__ring_owner_index(s->ring, t->hash)), idx, s->epoch)) {
        shard__rcu_read_unlock();
        return 0;
    }
    int rc = shard__submit_hashed(d, t->hash, shard__timer_arm, timer_arg(idx), false);
    if (rc == -EAGAIN) {
        /* Waiting for room is not a cancellation point here: a thread cancelled there would leave
         * the record held by nobody, and after it d may already be gone. */
        int cancel_state;
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
        rc = shard__submit_hashed(d, t->hash, shard__timer_arm, timer_arg(idx), true);
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
    struct shard_worker *me = shard__current_worker;
    struct timer *t = shard__timer_at(&d->timers, idx);
    if (!me || me->d != d || atomic_load_explicit(&t->home, memory_order_relaxed) != &me->wheel)
        return;
    pthread_mutex_lock(&me->timer_lock);
    /* Still the timer cancelled: a crash may have taken it from this wheel meanwhile and freed it,
     * and the record may be a new timer placed here since (a new generation). */
    bool mine = atomic_load_explicit(&t->home, memory_order_relaxed) == &me->wheel &&
                atomic_load_explicit(&t->word, memory_order_relaxed) == cancelled;
    if (mine) {
        shard__wheel_remove(&me->wheel, idx);
        atomic_store_explicit(&t->home, NULL, memory_order_relaxed);
    }
    pthread_mutex_unlock(&me->timer_lock);
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
    struct shard_worker *w = (struct shard_worker *)((char *)home - offsetof(struct shard_worker, wheel));
    pthread_mutex_lock(&w->timer_lock);
    /* Still there, still pending, still this generation: a cancel, an expiry or a hand-over may have
     * come first (each changes one or the other under this lock, or the word by CAS). */
    if (atomic_load_explicit(&t->home, memory_order_relaxed) != home ||
        atomic_load_explicit(&t->word, memory_order_acquire) != word) {
        pthread_mutex_unlock(&w->timer_lock);
        return -EAGAIN;
    }
    shard__wheel_remove(&w->wheel, idx);
    t->deadline = shard__now_ns() + delay; /* the wheel holding it owns it (timer_table.h) */
    uint64_t before = atomic_load_explicit(&w->timer_next, memory_order_relaxed);
    shard__wheel_insert(&w->wheel, idx);
    update_next(w);
    bool sooner = atomic_load_explicit(&w->timer_next, memory_order_relaxed) < before;
    pthread_mutex_unlock(&w->timer_lock);
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
    struct shard_worker *me = shard__current_worker;
    if (atomic_load_explicit(&d->shutdown, memory_order_relaxed)) {
        rc = -ESHUTDOWN;
    } else if (found >= 0) {
        struct timer *t = shard__timer_at(&d->timers, (uint32_t)found);
        uint64_t word = atomic_load_explicit(&t->word, memory_order_acquire);
        if ((uint32_t)(word >> 32) == (uint32_t)(timer >> 32)) {
            enum timer_state st = shard__timer_state(word);
            if (st == TIMER_PENDING && me && me->d == d && !shard__outbox_deliver(me))
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

void shard__timer_arm(shard_worker *w, void *arg)
{
    uint32_t idx = timer_index(arg);
    struct timer *t = shard__timer_at(&w->d->timers, idx);
    if (shard__timer_state(atomic_load_explicit(&t->word, memory_order_acquire)) == TIMER_CANCELLED)
        shard__timer_free(&w->d->timers, idx);
    else
        own_insert(w, idx);
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
    own_insert(w, idx);
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
    pthread_mutex_init(&w->timer_lock, NULL);
    shard__wheel_init(&w->wheel, &w->d->timers, shard__now_ns());
    atomic_init(&w->timer_next, UINT64_MAX);
}

void shard__timers_worker_destroy(struct shard_worker *w)
{
    pthread_mutex_destroy(&w->timer_lock);
}

bool shard__timers_due(struct shard_worker *w)
{
    uint64_t next = atomic_load_explicit(&w->timer_next, memory_order_relaxed);
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
    int rc = shard__submit_hashed(d, t->hash, shard__timer_fire, timer_arg(idx), true);
    if (rc == -ENOMEM) {
        t->deadline = now + (1u << WHEEL_TICK_SHIFT);
        own_insert(w, idx);
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
    pthread_mutex_lock(&w->timer_lock);
    /* In deadline order: a key's timers are submitted, so run, in the order they fall due. The wheel
     * hands them out in tick order, in no order within a tick. */
    uint32_t list = taken(&d->timers, shard__wheel_advance(&w->wheel, now));
    update_next(w);
    pthread_mutex_unlock(&w->timer_lock);
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
    pthread_mutex_lock(&w->timer_lock);
    uint64_t next = atomic_load_explicit(&w->timer_next, memory_order_relaxed);
    pthread_mutex_unlock(&w->timer_lock);
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
    pthread_mutex_lock(&w->timer_lock);
    uint32_t list = taken(&w->d->timers, after_index < 0 ? shard__wheel_take_all(&w->wheel)
                                                         : shard__wheel_take_if_not(&w->wheel, still_owned, &k));
    w->wheel_closed = after_index < 0;
    w->wheel_epoch = after->epoch;
    update_next(w);
    pthread_mutex_unlock(&w->timer_lock);
    if (!list)
        return;
    /* To the owners in the ring in force, not the fence's: the fence's owner of a key may have passed
     * a later fence already (moving the key on), or left and been freed. The owner in force holds
     * the key's state once the owners before it are done, and fires through the key's order. */
    shard__rcu_read_lock();
    place_all(w->d, list);
    shard__rcu_read_unlock();
}

void shard__timers_crash(shard_dispatcher *d, struct shard_worker *x, enum shard_crash_policy policy)
{
    pthread_mutex_lock(&x->timer_lock);
    uint32_t list = taken(&d->timers, shard__wheel_take_all(&x->wheel));
    x->wheel_closed = true;
    update_next(x);
    pthread_mutex_unlock(&x->timer_lock);
    if (policy == SHARD_CRASH_REROUTE) {
        shard__rcu_read_lock();
        place_all(d, list);
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
    pthread_mutex_lock(&w->timer_lock);
    uint64_t n = w->wheel.count;
    pthread_mutex_unlock(&w->timer_lock);
    return n;
}
