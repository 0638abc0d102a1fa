/* The dispatcher: create/destroy, submit, RCU publication of the ring, drain, stats.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dispatcher_internal.h"
#include "hash.h"
#include "rcu.h"

SHARD_API const char *shard_worker_name(const shard_worker *w)
{
    return w ? w->name : NULL;
}

SHARD_API void *shard_worker_user(const shard_worker *w)
{
    return w ? w->user : NULL;
}

SHARD_API void shard_worker_set_user(shard_worker *w, void *user)
{
    if (w)
        w->user = user;
}

SHARD_API bool shard_worker_crashed(const shard_worker *w)
{
    return w && atomic_load_explicit(&w->state, memory_order_relaxed) == SHARD_WORKER_CRASHED;
}

SHARD_API shard_dispatcher *shard_worker_dispatcher(const shard_worker *w)
{
    return w ? w->d : NULL;
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

/* ---- workers ---- */

struct shard_worker *shard__worker_new(shard_dispatcher *d, const char *name, uint32_t weight, uint64_t epoch)
{
    struct shard_worker *w = aligned_alloc(SHARD_CACHELINE, (sizeof *w + SHARD_CACHELINE - 1) / SHARD_CACHELINE * SHARD_CACHELINE);
    if (!w)
        return NULL;
    memset(w, 0, sizeof *w);
    if (shard__queue_init(&w->q, d->capacity) != 0) {
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_mutex_init(&w->inbox_lock, NULL);
    shard__held_init(&w->held);
    shard__crash_record_init(&w->crash);
    atomic_init(&w->passed, epoch);
    w->fenced_upto = epoch;
    atomic_init(&w->state, SHARD_WORKER_RUNNING);
    w->d = d;
    snprintf(w->name, sizeof w->name, "%s", name);
    w->weight = weight;
    w->id = d->next_id++;
    w->stop_item.kind = JOB_STOP;
    w->stop_item.embedded = true;
    return w;
}

int shard__worker_start(struct shard_worker *w)
{
    if (pthread_create(&w->thread, NULL, shard__worker_main, w) != 0)
        return -EAGAIN;
    w->started = true;
    return 0;
}

void shard__worker_free(struct shard_worker *w)
{
    shard__worker_drop_spares(w);
    shard__queue_destroy(&w->q);
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->inbox_lock);
    free(w);
}

/* ---- create / destroy ---- */

static uint32_t default_workers(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > (long)SHARD_MAX_WORKERS ? SHARD_MAX_WORKERS : (uint32_t)n;
}

SHARD_API int shard_dispatcher_create(shard_dispatcher **out, const struct shard_config *cfg)
{
    if (!out)
        return -EINVAL;
    if (shard__current_worker)
        return -EDEADLK;
    struct shard_config c = cfg ? *cfg : (struct shard_config){ 0 };
    if (c.queue_capacity > SHARD_MAX_QUEUE_CAPACITY || c.workers > SHARD_MAX_WORKERS)
        return -EINVAL;
    if (c.workers == 0)
        c.workers = default_workers();
    if (c.ring.vnodes == 0)
        c.ring.vnodes = SHARD_DEFAULT_VNODES;
    shard_dispatcher *d = calloc(1, sizeof *d);
    if (!d)
        return -ENOMEM;
    d->cfg = c;
    d->capacity = c.queue_capacity ? c.queue_capacity : SHARD_DEFAULT_QUEUE_CAPACITY;
    pthread_mutex_init(&d->ctl, NULL);
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->cond, NULL);
    pthread_mutex_init(&d->space_lock, NULL);
    pthread_cond_init(&d->space_cond, NULL);
    shard__crash_table_init(&d->crash);
    atomic_init(&d->settled, 1);

    d->gone = shard__worker_new(d, "", 1, UINT64_MAX);
    if (!d->gone) {
        shard__dispatcher_free(d);
        return -ENOMEM;
    }
    atomic_store_explicit(&d->gone->handed, true, memory_order_relaxed);
    atomic_store_explicit(&d->gone->state, SHARD_WORKER_EXITED, memory_order_relaxed);
    int err = shard__membership_init(d);
    if (err) {
        shard__dispatcher_free(d);
        return err;
    }
    *out = d;
    return 0;
}

SHARD_API void shard_dispatcher_destroy(shard_dispatcher *d)
{
    if (!d || shard__ctl_forbidden(d))
        return; /* documented: ignored where it could only deadlock */
    shard__ctl_lock(d);
    atomic_store_explicit(&d->shutdown, 1, memory_order_seq_cst);
    /* Every submit that read shutdown == 0 is inside a read-side section, or registered as a waiter
     * before leaving it: after this, none pushes, and every waiter is counted. */
    shard_rcu_synchronize();
    pthread_mutex_lock(&d->space_lock);
    pthread_cond_broadcast(&d->space_cond);
    pthread_mutex_unlock(&d->space_lock);
    shard__membership_stop_all(d);
    shard__ctl_unlock(d);
    /* Submitters sent back by the broadcast leave before the memory goes. */
    pthread_mutex_lock(&d->space_lock);
    while (atomic_load_explicit(&d->space_waiters, memory_order_acquire))
        pthread_cond_wait(&d->space_cond, &d->space_lock);
    pthread_mutex_unlock(&d->space_lock);
    /* And so do submits that entered after shutdown was set: each reads d only inside its section. */
    shard_rcu_synchronize();
    shard__dispatcher_free(d);
}

void shard__dispatcher_free(shard_dispatcher *d)
{
    shard__membership_free(d);
    if (d->gone)
        shard__worker_free(d->gone);
    pthread_mutex_destroy(&d->ctl);
    pthread_mutex_destroy(&d->lock);
    pthread_cond_destroy(&d->cond);
    pthread_mutex_destroy(&d->space_lock);
    pthread_cond_destroy(&d->space_cond);
    shard__crash_table_destroy(&d->crash);
    free(d);
}

/* ---- submit ---- */

struct space_wait {
    shard_dispatcher    *d;
    struct shard_worker *w;
};

/* Leaves the waiters: on return, and when the thread is cancelled inside pthread_cond_wait (which
 * takes space_lock again before the handler runs). */
static void space_leave(void *arg)
{
    struct space_wait *sw = arg;
    shard_dispatcher *d = sw->d;
    /* release: our reads of w's queue come before the reaper sees us gone and frees w. */
    atomic_fetch_sub_explicit(&sw->w->space_refs, 1, memory_order_release);
    bool shutdown = atomic_load_explicit(&d->shutdown, memory_order_relaxed);
    atomic_fetch_sub_explicit(&d->space_waiters, 1, memory_order_release);
    if (shutdown)
        pthread_cond_broadcast(&d->space_cond); /* destroy waits for the last waiter to leave */
    pthread_mutex_unlock(&d->space_lock);
}

/* Waits until w's ring has a free slot, the ring of workers changes (space_epoch moves from epoch, or
 * the ring in force is no longer the one of ring_epoch, with which w was found), or destroy begins. The caller registered as a waiter (space_waiters, w->space_refs) inside the
 * read-side section that found w, and left it. A cancellation point: a cancelled waiter leaves.
 * Return: true if destroy began; the caller must then not touch d again, since destroy frees it as
 * soon as the last waiter has left. false: the caller is inside a read-side section again. */
static bool wait_for_space(shard_dispatcher *d, struct shard_worker *w, uint64_t epoch, uint64_t ring_epoch)
{
    struct space_wait sw = { d, w };
    bool shutdown;
    pthread_mutex_lock(&d->space_lock);
    pthread_cleanup_push(space_leave, &sw);
    /* d->epoch too: a change stores it before it takes space_lock to send waiters back, so a waiter
     * that found w in the old ring but registered after that (and read its new space_epoch) still
     * sees the change, and is not left waiting on a crashed worker while the change's grace period
     * waits for it (when it waits inside the application's read-side section). */
    while (!shard__queue_has_room(&w->q) && !atomic_load_explicit(&d->shutdown, memory_order_relaxed) &&
           atomic_load_explicit(&d->space_epoch, memory_order_relaxed) == epoch &&
           atomic_load_explicit(&d->epoch, memory_order_relaxed) == ring_epoch)
        pthread_cond_wait(&d->space_cond, &d->space_lock);
    shutdown = atomic_load_explicit(&d->shutdown, memory_order_relaxed);
    /* Back inside a read-side section before leaving the waiters: destroy frees d after the last
     * waiter has left and a grace period, so d stays valid for the retry. */
    if (!shutdown)
        shard_rcu_read_lock();
    pthread_cleanup_pop(1);
    return shutdown;
}

/* Context: inside the read-side section that found w full. Return: the space epoch to wait on. */
static uint64_t space_register(shard_dispatcher *d, struct shard_worker *w)
{
    /* A worker is freed only after a grace period that follows its last appearance in a snapshot,
     * so the reaper sees this count. */
    atomic_fetch_add_explicit(&w->space_refs, 1, memory_order_relaxed);
    /* seq_cst, then seq_cst reads of the ring: the other half of shard__space_notify's pair. Inside
     * the section: destroy's grace period after setting shutdown sees every waiter counted. */
    atomic_fetch_add_explicit(&d->space_waiters, 1, memory_order_seq_cst);
    /* Read before leaving the section: a change that published a new ring bumps space_epoch again
     * after its grace period, so a change this submit has not seen is seen as a new epoch. */
    return atomic_load_explicit(&d->space_epoch, memory_order_acquire);
}

static int submit(shard_dispatcher *d, const void *key, size_t len, shard_job_fn fn, void *arg, bool wait)
{
    if (!d || !fn || (!key && len > 0))
        return -EINVAL;
    bool from_worker = shard__current_worker != NULL;
    /* From here on d is read only inside a read-side section, or by a registered waiter: destroy
     * frees it after a grace period that follows both (shard_dispatcher_destroy). */
    shard_rcu_read_lock();
    uint64_t h = shard__hash_key_cfg(&d->cfg.ring, key, len);
    for (;;) {
        if (atomic_load_explicit(&d->shutdown, memory_order_relaxed)) {
            shard_rcu_read_unlock();
            return -ESHUTDOWN;
        }
        /* acquire: pairs with the release store that published the snapshot (publish()). */
        struct snap *s = atomic_load_explicit(&d->snap, memory_order_acquire);
        struct shard_worker *w = snap_worker(s, shard__ring_owner_index(s->ring, h));
        bool ok = shard__queue_push_mp(&w->q, fn, arg, h, s->epoch);
        if (!ok && from_worker && wait) {
            /* A worker never waits: it could be the very worker that must make room. The job goes
             * after the ring's current contents, through the side list. */
            struct job *j = calloc(1, sizeof *j);
            if (!j) {
                shard_rcu_read_unlock();
                return -ENOMEM;
            }
            *j = (struct job){ .fn = fn, .arg = arg, .hash = h, .epoch = s->epoch, .routed = w, .kind = JOB_RUN };
            shard__queue_push_side(&w->q, j);
            ok = true;
        }
        if (ok) {
            shard__worker_wake(w);
            shard_rcu_read_unlock();
            return 0;
        }
        if (!wait) {
            shard_rcu_read_unlock();
            return -EAGAIN;
        }
        uint64_t epoch = space_register(d, w), ring_epoch = s->epoch; /* s is not ours past unlock */
        shard_rcu_read_unlock();
        if (wait_for_space(d, w, epoch, ring_epoch))
            return -ESHUTDOWN;
    }
}

SHARD_API int shard_submit(shard_dispatcher *d, const void *key, size_t len, shard_job_fn fn, void *arg)
{
    return submit(d, key, len, fn, arg, true);
}

SHARD_API int shard_try_submit(shard_dispatcher *d, const void *key, size_t len, shard_job_fn fn, void *arg)
{
    return submit(d, key, len, fn, arg, false);
}
