/* The worker registry: every worker not yet freed, and reaping those that left the ring once nothing
 * can reach them. SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher_internal.h"
#include "rcu.h"
#include "registry.h"
#include "worker_life.h"
#include "ctl.h"

/* The ring member named name, among workers in the ring. Context: ctl held. */
struct shard_worker *shard__registry_member(shard_dispatcher *d, const char *name)
{
    SHARD_CHECK(shard__ctl_held(d));
    struct snap *s = atomic_load_explicit(&d->snap, memory_order_relaxed);
    long idx = shard__ring_member_index(s->ring, name);
    return idx < 0 ? NULL : s->by_member[idx];
}

int shard__registry_add(shard_dispatcher *d, struct shard_worker *w)
{
    SHARD_CHECK(shard__ctl_held(d) || !atomic_load_explicit(&d->snap, memory_order_relaxed));
    pthread_mutex_lock(&d->lock);
    if (d->nworkers == d->workers_cap) {
        size_t cap = d->workers_cap ? d->workers_cap * 2 : 16;
        struct shard_worker **v = realloc(d->workers, cap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&d->lock);
            return -ENOMEM;
        }
        d->workers = v;
        d->workers_cap = cap;
    }
    d->workers[d->nworkers++] = w;
    pthread_mutex_unlock(&d->lock);
    return 0;
}

void shard__registry_drop_last(shard_dispatcher *d)
{
    SHARD_CHECK(shard__ctl_held(d));
    pthread_mutex_lock(&d->lock);
    d->nworkers--;
    pthread_mutex_unlock(&d->lock);
}

/* Whether w, which left the ring, is finished with and no submitter waits for room in its queue. */
static bool reapable(struct shard_worker *w)
{
    /* acquire: pairs with the waiters' release decrement; their reads of w come first. */
    return shard__worker_finished_with(w) && !atomic_load_explicit(&w->q.waiters, memory_order_acquire);
}

/* Frees workers that left the ring (removed, or crashed) once they are finished with and nothing can
 * reach them any more. A worker is reached through the registry (d->lock), through snapshots (RCU
 * readers: submitters and the handoff walk in handoff.c), by submitters waiting for room in its
 * queue (q.waiters) and, crashed, by the jobs it rerouted (finished_with). Its entries in kept
 * snapshots are rewritten to d->gone (shard__snap_unname) and snapshots that named it may have been cut off by
 * shard__snap_reap; either way a grace period has passed since; submitters that found it did so
 * before the grace period of its leaving and counted themselves in q.waiters then.
 * Context: ctl held, so no change is under way. */
void shard__registry_reap(shard_dispatcher *d)
{
    SHARD_CHECK(shard__ctl_held(d));
    bool unnamed = false;
    for (size_t i = 0; i < d->nworkers; i++) {
        struct shard_worker *w = d->workers[i];
        if (w->ctl.snap_refs && reapable(w)) {
            shard__snap_unname(d, w);
            unnamed = true;
        }
    }
    if (unnamed)
        shard__rcu_synchronize(); /* readers that found one of those entries before are done */
    for (size_t i = 0; i < d->nworkers;) {
        struct shard_worker *w = d->workers[i];
        if (w->ctl.snap_refs || !reapable(w)) {
            i++;
            continue;
        }
        shard__worker_join(w); /* it is returning */
        pthread_mutex_lock(&d->lock);
        memmove(&d->workers[i], &d->workers[i + 1], (d->nworkers - i - 1) * sizeof *d->workers);
        d->nworkers--;
        pthread_mutex_unlock(&d->lock);
        shard__worker_free(w);
    }
}

void shard__registry_free_all(shard_dispatcher *d)
{
    for (size_t i = 0; i < d->nworkers; i++)
        shard__worker_free(d->workers[i]);
    free(d->workers);
}
