/* Timer records into wheels, and lists of them handed on in deadline order (timer_place.h; the
 * protocol: timer.c). SPDX-License-Identifier: LGPL-2.1-or-later */
#include "dispatcher_internal.h"
#include "rcu.h"
#include "timer_place.h"
#include "wheel.h"

void shard__timer_update_next(struct shard_worker *w)
{
    atomic_store_explicit(&w->timers.next, shard__wheel_next(&w->timers.wheel), memory_order_relaxed);
}

bool shard__timer_insert_into(struct shard_worker *w, uint32_t idx, uint64_t epoch)
{
    struct timer *t = shard__timer_at(&w->d->timers, idx);
    pthread_mutex_lock(&w->timers.lock);
    if (w->timers.closed || w->timers.epoch > epoch) {
        pthread_mutex_unlock(&w->timers.lock);
        return false;
    }
    uint64_t before = atomic_load_explicit(&w->timers.next, memory_order_relaxed);
    uint64_t at = shard__wheel_insert(&w->timers.wheel, idx);
    /* release: a rearm that finds w through home (acquire in rearm_pending) sees w initialised, as
     * this thread does (it found w through a published snapshot, or is w). */
    atomic_store_explicit(&t->home, &w->timers.wheel, memory_order_release);
    bool sooner = at < before;
    if (sooner)
        atomic_store_explicit(&w->timers.next, at, memory_order_relaxed);
    pthread_mutex_unlock(&w->timers.lock);
    /* A worker asleep until a later deadline (or for ever) looks again. It read timers.next under the
     * lock after announcing that it parks, so this wake-up is not lost (park.h). The caller may be w
     * itself, in its idle hook, about to wait with the old deadline: it is woken too (a worker in a
     * job is not parked, and the wake is one load). */
    if (sooner)
        shard__worker_wake(w);
    return true;
}

/* Places timer idx in the wheel of its key's owner in the ring in force: for timers whose key's state
 * is where that ring says or follows it there (a crash's: before its hand-over, and their fire jobs
 * wait for it). Context: an RCU read-side section. */
static void place(shard_dispatcher *d, uint32_t idx)
{
    uint64_t hash = shard__timer_at(&d->timers, idx)->hash;
    for (;;) {
        /* acquire: pairs with the release that published the snapshot. A worker that left has left
         * that ring (published before it closes its wheel): the next look finds another. */
        struct snap *s = atomic_load_explicit(&d->snap, memory_order_acquire);
        if (shard__timer_insert_into(snap_worker(s, shard__ring_owner_index(s->ring, hash)), idx, s->epoch))
            return;
    }
}

void shard__timer_own_insert(struct shard_worker *w, uint32_t idx)
{
    if (shard__timer_insert_into(w, idx, UINT64_MAX))
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

uint32_t shard__timer_taken(const struct timer_table *tt, uint32_t list)
{
    size_t n = 0;
    for (uint32_t i = list; i; i = next_of(tt, i), n++)
        atomic_store_explicit(&shard__timer_at(tt, i - 1)->home, NULL, memory_order_relaxed);
    return sort_by_deadline(tt, list, n);
}

void shard__timer_place_all(shard_dispatcher *d, uint32_t list)
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
