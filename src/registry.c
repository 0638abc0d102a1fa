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

/* The view of workers[] (n of them), to publish; NULL: no memory. */
static struct worker_view *view_of(const shard_dispatcher *d)
{
    struct worker_view *v = malloc(sizeof *v + d->nworkers * sizeof v->w[0]);
    if (v) {
        v->retired_next = NULL;
        v->n = d->nworkers;
        memcpy(v->w, d->workers, d->nworkers * sizeof v->w[0]);
    }
    return v;
}

static void view_retire(shard_dispatcher *d, struct worker_view *v)
{
    if (v) {
        v->retired_next = d->retired_views;
        d->retired_views = v;
    }
}

/* Makes v the view the kicks read (handoff.c's kick_crash_holders). The one it replaces is retired:
 * freed after the next grace period that shard__registry_synchronize waits (a kick may be reading
 * it now), unless it is kept (view_undo) for shard__registry_drop_last to put back without
 * allocating. Nothing here waits for a grace period: a change must not wait for one before it
 * publishes its ring, for an application's read-side section may be waiting for that ring
 * (tests/stress_throttle_waits's section). */
static void view_publish(shard_dispatcher *d, struct worker_view *v, bool keep_old)
{
    struct worker_view *old = atomic_load_explicit(&d->view, memory_order_relaxed);
    /* release: pairs with the kicks' acquire load; the array was written before. */
    atomic_store_explicit(&d->view, v, memory_order_release);
    view_retire(d, d->view_undo);
    d->view_undo = NULL;
    if (keep_old)
        d->view_undo = old;
    else
        view_retire(d, old);
}

void shard__registry_synchronize(shard_dispatcher *d)
{
    SHARD_CHECK(shard__ctl_held(d));
    view_retire(d, d->view_undo); /* the add it could undo is done */
    d->view_undo = NULL;
    struct worker_view *views = d->retired_views;
    struct shard_worker *workers = d->retired_workers;
    d->retired_views = NULL;
    d->retired_workers = NULL;
    shard__rcu_synchronize();
    while (views) {
        struct worker_view *next = views->retired_next;
        free(views);
        views = next;
    }
    while (workers) {
        struct shard_worker *next = workers->ctl.retired_next;
        shard__worker_free(workers);
        workers = next;
    }
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
    struct worker_view *view = view_of(d);
    if (!view)
        d->nworkers--;
    pthread_mutex_unlock(&d->lock);
    if (!view)
        return -ENOMEM;
    view_publish(d, view, true);
    return 0;
}

void shard__registry_drop_last(shard_dispatcher *d)
{
    SHARD_CHECK(shard__ctl_held(d));
    pthread_mutex_lock(&d->lock);
    struct shard_worker *w = d->workers[--d->nworkers];
    pthread_mutex_unlock(&d->lock);
    /* The view from before the add, kept for this: no allocation, which could fail and leave w in
     * the view in force while it is freed. A kick may be reading the add's view: w is freed after a
     * grace period. */
    struct worker_view *added = atomic_load_explicit(&d->view, memory_order_relaxed), *before = d->view_undo;
    SHARD_CHECK(before || !d->nworkers);
    d->view_undo = NULL;
    atomic_store_explicit(&d->view, before, memory_order_release);
    view_retire(d, added);
    w->ctl.retired_next = d->retired_workers;
    d->retired_workers = w;
}

/* Whether w, which left the ring, is finished with and no submitter waits for room in its queue. */
static bool reapable(struct shard_worker *w)
{
    /* acquire: pairs with the waiters' release decrement; their reads of w come first. */
    return shard__worker_finished_with(w) && !atomic_load_explicit(&w->q.waiters, memory_order_acquire);
}

/* Takes the workers that left the ring (removed, or crashed) out of the registry once they are
 * finished with and nothing can reach them any more, and frees them after a grace period. A worker
 * is reached through the registry (d->lock, and its published view: a crash table payment's kick, in
 * a read-side section), through snapshots (RCU readers: submitters and the handoff walk in
 * handoff.c), by submitters waiting for room in its queue (q.waiters) and, crashed, by the jobs it
 * rerouted (finished_with). Its entries in kept snapshots are rewritten to d->gone
 * (shard__snap_unname) and snapshots that named it may have been cut off by shard__snap_reap; either
 * way a grace period has passed since; submitters that found it did so before the grace period of
 * its leaving and counted themselves in q.waiters then.
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
    /* The reapable ones leave the registry, and the view, now, and are freed after the grace period
     * below (readers that found one through a snapshot entry, or a kick through the view, are done). */
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
        struct worker_view *view = view_of(d);
        if (!view) { /* no memory for the view without it: it stays, to be reaped at a later change */
            memmove(&d->workers[i + 1], &d->workers[i], (d->nworkers - i) * sizeof *d->workers);
            d->workers[i++] = w;
            d->nworkers++;
        }
        pthread_mutex_unlock(&d->lock);
        if (!view)
            continue;
        view_publish(d, view, false);
        w->ctl.retired_next = d->retired_workers;
        d->retired_workers = w;
    }
    /* Only when a snapshot entry was rewritten, as before the view: the workers retired here are
     * freed after this grace period, or after the one the change itself waits once it has published
     * its ring (publish), or at destroy. A grace period waited here for them alone would come before
     * the change publishes its ring, which an application's read-side section may be waiting for. */
    if (unnamed)
        shard__registry_synchronize(d);
}

void shard__registry_free_all(shard_dispatcher *d)
{
    for (size_t i = 0; i < d->nworkers; i++)
        shard__worker_free(d->workers[i]);
    free(d->workers);
    free(atomic_load_explicit(&d->view, memory_order_relaxed));
    free(d->view_undo);
    for (struct worker_view *v = d->retired_views, *next; v; v = next) {
        next = v->retired_next;
        free(v);
    }
    for (struct shard_worker *w = d->retired_workers, *next; w; w = next) {
        next = w->ctl.retired_next;
        shard__worker_free(w);
    }
}
