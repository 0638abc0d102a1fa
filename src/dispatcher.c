/* The dispatcher: create and destroy. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Submits are submit.c's, membership changes membership.c's, the wait for room in a full queue
 * space.c's, stats stats.c's. */
#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "balance.h"
#include "cacheline.h"
#include "ctl.h"
#include "dispatcher_internal.h"
#include "handoff.h"
#include "membership.h"
#include "mutex.h"
#include "outbox.h"
#include "rcu.h"
#include "registry.h"
#include "worker_life.h"
#include "space.h"

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
    if (c.queue_capacity > SHARD_MAX_QUEUE_CAPACITY || c.workers > SHARD_MAX_WORKERS ||
        c.hot_keys > SHARD_MAX_HOT_KEYS || shard__balance_check(&c))
        return -EINVAL;
    shard__balance_defaults(&c);
    if (c.workers == 0)
        c.workers = default_workers();
    if (c.ring.vnodes == 0)
        c.ring.vnodes = SHARD_DEFAULT_VNODES;
    /* Aligned as its type says: the crash table's stripes and the multi-key counts are a line each. */
    size_t bytes = (sizeof(shard_dispatcher) + SHARD_CACHELINE - 1) / SHARD_CACHELINE * SHARD_CACHELINE;
    shard_dispatcher *d = aligned_alloc(alignof(shard_dispatcher), bytes);
    if (!d)
        return -ENOMEM;
    memset(d, 0, bytes);
    d->cfg = c;
    d->capacity = c.queue_capacity ? c.queue_capacity : SHARD_DEFAULT_QUEUE_CAPACITY;
    pthread_mutex_init(&d->ctl, NULL);
    pthread_cond_init(&d->ctl_cond, NULL);
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->cond, NULL);
    pthread_mutex_init(&d->space_lock, NULL);
    shard__mutex_init_brief(&d->multi_lock);
    shard__mutex_init_brief(&d->pool_lock);
    pthread_mutex_init(&d->balance_report.lock, NULL);
    pthread_cond_init(&d->space_cond, NULL);
    pthread_cond_init(&d->key_cond, NULL);
    /* A worker's allowance of set-aside jobs: its queue's capacity again (throttle.h). */
    shard__throttle_init(&d->throttle, d->capacity, shard__space_notify_hook, d);
    shard__crash_table_init(&d->crash);
    d->crash.made = shard__entries_made;
    d->crash.made_ctx = d;
    shard__timer_table_init(&d->timers);
    atomic_init(&d->settled, 1);
    int err = shard__placement_init(&d->placement, &c);
    if (err) {
        shard__dispatcher_free(d);
        return err;
    }

    d->gone = shard__worker_new(d, "", UINT64_MAX);
    if (!d->gone) {
        shard__dispatcher_free(d);
        return -ENOMEM;
    }
    d->next_id = 0; /* the stand-in takes no number: create's workers are 0, 1, ... (shard_worker_id) */
    atomic_store_explicit(&d->gone->life.epochless, true, memory_order_relaxed);
    atomic_store_explicit(&d->gone->life.state, SHARD_WORKER_EXITED, memory_order_relaxed);
    err = shard__membership_init(d);
    if (err) {
        shard__dispatcher_free(d);
        return err;
    }
    if ((err = shard__balance_start(d)) != 0) {
        shard__membership_stop_all(d);
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
    shard__balance_stop(d); /* it makes changes: before destroy holds the control lock */
    shard__ctl_lock(d);
    atomic_store_explicit(&d->shutdown, 1, memory_order_seq_cst);
    /* Every submit that read shutdown == 0 is inside a read-side section, or registered as a waiter
     * before leaving it: after this, none pushes, and every waiter is counted. */
    shard__rcu_synchronize();
    /* Waiting submitters first (a job may wait for one of them, as before), then the submits that
     * workers' jobs made before are delivered before the workers are told to stop. */
    shard__space_send_back(d);
    pthread_mutex_lock(&d->lock);
    while (shard__outboxes_open(d))
        pthread_cond_wait(&d->cond, &d->lock);
    pthread_mutex_unlock(&d->lock);
    shard__membership_stop_all(d);
    shard__ctl_unlock(d);
    /* Membership calls that waited for ctl meanwhile, and submitters sent back, leave before the
     * memory goes. */
    shard__ctl_wait_callers(d);
    shard__space_wait_empty(d);
    /* And so do submits that entered after shutdown was set: each reads d only inside its section. */
    shard__rcu_synchronize();
    shard__dispatcher_free(d);
}

void shard__dispatcher_free(shard_dispatcher *d)
{
    shard__snap_free_all(d);
    shard__registry_free_all(d);
    if (d->gone)
        shard__worker_free(d->gone);
    pthread_mutex_destroy(&d->ctl);
    pthread_cond_destroy(&d->ctl_cond);
    pthread_mutex_destroy(&d->lock);
    pthread_cond_destroy(&d->cond);
    pthread_mutex_destroy(&d->space_lock);
    shard__multi_pool_free(d);
    pthread_mutex_destroy(&d->multi_lock);
    pthread_mutex_destroy(&d->pool_lock);
    pthread_mutex_destroy(&d->balance_report.lock);
    pthread_cond_destroy(&d->space_cond);
    pthread_cond_destroy(&d->key_cond);
    shard__crash_table_destroy(&d->crash);
    shard__throttle_destroy(&d->throttle);
    shard__timer_table_destroy(&d->timers);
    shard__balance_free(d);
    shard__placement_destroy(&d->placement);
    free(d);
}
