/* Back-pressure: submitters waiting for room in a full queue, or for a throttled key (throttle.h), and
 * waking them. A waiter for room holds its worker outside any RCU read-side section (q.waiters), so
 * the registry does not free the worker under it. SPDX-License-Identifier: LGPL-2.1-or-later */
#include <pthread.h>

#include "dispatcher_internal.h"
#include "rcu.h"
#include "space.h"

struct space_wait {
    shard_dispatcher    *d;
    struct shard_worker *w;
};

/* Wakes submitters waiting for a throttled key, if any (after a worker released keys). seq_cst: the
 * other half of shard__space_register's increment; the release took the throttle's lock before,
 * which the waiter takes after registering to look at its key. */
static void notify_key_waiters(shard_dispatcher *d)
{
    if (atomic_load_explicit(&d->key_waiters, memory_order_seq_cst)) {
        pthread_mutex_lock(&d->space_lock);
        pthread_cond_broadcast(&d->key_cond);
        pthread_mutex_unlock(&d->space_lock);
    }
}

void shard__space_notify(shard_dispatcher *d)
{
    /* Racy read by design: a worker checks after each job and again after a seq_cst store before it
     * parks, while a waiter registers with a seq_cst increment before it checks for room; so a waiter
     * is at worst woken one job late, never forgotten. */
    if (atomic_load_explicit(&d->space_waiters, memory_order_seq_cst)) {
        pthread_mutex_lock(&d->space_lock);
        pthread_cond_broadcast(&d->space_cond);
        pthread_mutex_unlock(&d->space_lock);
    }
}

/* Leaves the waiters: on return, and when the thread is cancelled inside pthread_cond_wait (which
 * takes space_lock again before the handler runs). */
static void space_leave(void *arg)
{
    struct space_wait *sw = arg;
    shard_dispatcher *d = sw->d;
    /* release: our reads of w's queue come before the reaper sees us gone and frees w. */
    if (sw->w)
        atomic_fetch_sub_explicit(&sw->w->q.waiters, 1, memory_order_release);
    bool shutdown = atomic_load_explicit(&d->shutdown, memory_order_relaxed);
    atomic_fetch_sub_explicit(sw->w ? &d->space_waiters : &d->key_waiters, 1, memory_order_release);
    if (shutdown)
        pthread_cond_broadcast(&d->space_cond); /* destroy waits for the last waiter to leave */
    pthread_mutex_unlock(&d->space_lock);
}

/* What a waiter waits for: room in w's queue; or (w NULL) the key of hash no longer throttled; or, gate,
 * a full holder easing (throttle.h): eased moving on from what it read, if it was still full then. */
struct wait_for {
    struct shard_worker *w;
    uint64_t             hash;
    bool                 gate, full;
    uint64_t             eased;
};

static bool blocked(shard_dispatcher *d, const struct wait_for *f)
{
    if (f->gate)
        /* relaxed, under space_lock: an ease increments eased before it takes the lock to wake. */
        return f->full && atomic_load_explicit(&d->throttle.eased, memory_order_relaxed) == f->eased;
    return f->w ? !shard__queue_has_room(&f->w->q) : shard__throttle_holds(&d->throttle, f->hash);
}

/* Waits while blocked(), the ring of workers does not change (space_epoch moves from epoch, or the
 * ring in force is no longer the one of ring_epoch, with which the caller routed), and destroy does
 * not begin; then leaves the waiters. The caller registered (shard__space_register) inside the
 * read-side section that routed it, and left it. A cancellation point: a cancelled waiter leaves.
 * Return: true if destroy began; the caller must then not touch d again, since destroy frees it as
 * soon as the last waiter has left. false: the caller is inside a read-side section again. */
static bool wait_while_blocked(shard_dispatcher *d, const struct wait_for *f, uint64_t epoch, uint64_t ring_epoch)
{
    struct space_wait sw = { d, f->w };
    bool shutdown;
    pthread_mutex_lock(&d->space_lock);
    pthread_cleanup_push(space_leave, &sw);
    /* d->epoch too: a change stores it before it takes space_lock to send waiters back, so a waiter
     * that found w in the old ring but registered after that (and read its new space_epoch) still
     * sees the change, and is not left waiting on a crashed worker while the change's grace period
     * waits for it (when it waits inside the application's read-side section). */
    while (blocked(d, f) && !atomic_load_explicit(&d->shutdown, memory_order_relaxed) &&
           atomic_load_explicit(&d->space_epoch, memory_order_relaxed) == epoch &&
           atomic_load_explicit(&d->epoch, memory_order_relaxed) == ring_epoch)
        pthread_cond_wait(f->w ? &d->space_cond : &d->key_cond, &d->space_lock);
    shutdown = atomic_load_explicit(&d->shutdown, memory_order_relaxed);
    /* Back inside a read-side section before leaving the waiters: destroy frees d after the last
     * waiter has left and a grace period, so d stays valid for the retry. */
    if (!shutdown)
        shard__rcu_read_lock();
    pthread_cleanup_pop(1);
    return shutdown;
}

bool shard__space_wait(shard_dispatcher *d, struct shard_worker *w, uint64_t epoch, uint64_t ring_epoch)
{
    return wait_while_blocked(d, &(struct wait_for){ .w = w }, epoch, ring_epoch);
}

bool shard__space_wait_key(shard_dispatcher *d, uint64_t hash, uint64_t epoch, uint64_t ring_epoch)
{
    return wait_while_blocked(d, &(struct wait_for){ .hash = hash }, epoch, ring_epoch);
}

bool shard__space_wait_full(shard_dispatcher *d, struct shard_worker *w, uint64_t ring_epoch, bool parts)
{
    uint64_t epoch = shard__space_register(d, NULL);
    struct wait_for f = { .gate = true, .eased = shard__throttle_eased(&d->throttle) };
    /* Looked at again after eased was read (and inside the section, where w is alive): an ease this
     * look misses comes after that read, so the wait below sees eased move. One it does not miss was
     * read with eased (acquire), and with it the count or settled stored before the ease: relaxed. */
    f.full = (parts || atomic_load_explicit(&d->settled, memory_order_relaxed) < ring_epoch) &&
             shard__throttle_full(&d->throttle, atomic_load_explicit(&w->own.held.jobs, memory_order_relaxed), true);
    if (f.full)
        atomic_fetch_add_explicit(&d->throttle.full_waits, 1, memory_order_relaxed);
    shard__rcu_read_unlock();
    return wait_while_blocked(d, &f, epoch, ring_epoch);
}

/* Context: inside the read-side section that found w full. Return: the space epoch to wait on. */
uint64_t shard__space_register(shard_dispatcher *d, struct shard_worker *w)
{
    /* A worker is freed only after a grace period that follows its last appearance in a snapshot,
     * so the reaper sees this count. */
    if (w)
        atomic_fetch_add_explicit(&w->q.waiters, 1, memory_order_relaxed);
    /* seq_cst, then seq_cst reads of the ring: the other half of shard__space_notify's pair. Inside
     * the section: destroy's grace period after setting shutdown sees every waiter counted. For a
     * throttled key, then the throttle's lock: a release takes it before it notifies. */
    atomic_fetch_add_explicit(w ? &d->space_waiters : &d->key_waiters, 1, memory_order_seq_cst);
    /* Read before leaving the section: a change that published a new ring bumps space_epoch again
     * after its grace period, so a change this submit has not seen is seen as a new epoch. */
    return atomic_load_explicit(&d->space_epoch, memory_order_acquire);
}

void shard__space_send_back(shard_dispatcher *d)
{
    pthread_mutex_lock(&d->space_lock);
    atomic_fetch_add_explicit(&d->space_epoch, 1, memory_order_relaxed);
    pthread_cond_broadcast(&d->space_cond);
    pthread_cond_broadcast(&d->key_cond);
    pthread_mutex_unlock(&d->space_lock);
}

void shard__space_wait_empty(shard_dispatcher *d)
{
    pthread_mutex_lock(&d->space_lock);
    /* acquire: pairs with space_leave's release; the waiters' reads of d come first. */
    while (atomic_load_explicit(&d->space_waiters, memory_order_acquire) ||
           atomic_load_explicit(&d->key_waiters, memory_order_acquire))
        pthread_cond_wait(&d->space_cond, &d->space_lock);
    pthread_mutex_unlock(&d->space_lock);
}

void shard__space_notify_hook(void *ctx)
{
    notify_key_waiters(ctx);
}
