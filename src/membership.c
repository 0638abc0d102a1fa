/* Membership changes: build the next ring, publish it through RCU, fence the old owners; add, remove,
 * crash (its steps: crash_handover.c), an edit of the ring (its callers: ring_edit.c); create's first
 * workers and destroy's stop. Drain is drain.c's. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Every change is prepared completely (ring, snapshot, fences, memory) before the point where it is
 * published, so a failure returns an error with nothing changed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crash_handover.h"
#include "ctl.h"
#include "dispatcher_internal.h"
#include "handoff.h"
#include "hash.h"
#include "membership.h"
#include "outbox.h"
#include "rcu.h"
#include "registry.h"
#include "space.h"
#include "timer.h"
#include "worker_crash.h"
#include "worker_life.h"

/* A change, prepared in full before it is published. */
struct change {
    struct snap  *snap;
    struct job  **fences;   /* by member index of the current ring; NULL for a worker not fenced */
    size_t        nmembers; /* of the current ring */
    double        moved;
};

struct loser_scan {
    const struct snap *old;
    struct change     *c;
};

static void note_loser(uint64_t first, uint64_t last, const char *owner_a, const char *owner_b, void *ctx)
{
    struct loser_scan *ls = ctx;
    (void)owner_b;
    ls->c->moved += first == last ? SHARD_HASH_SPACE : (double)(last - first);
    if (!owner_a)
        return;
    struct job *f = ls->c->fences[shard__ring_member_index(ls->old->ring, owner_a)];
    if (f)
        f->loses_keys = true;
}

static void change_discard(shard_dispatcher *d, struct change *c)
{
    for (size_t i = 0; c->fences && i < c->nmembers; i++)
        free(c->fences[i]);
    free(c->fences);
    if (c->snap)
        shard__snap_free(d, c->snap);
}

/* Prepares publishing ring (taken over) as the next epoch: its snapshot, a fence for every worker of
 * the current ring except skip, and which of them lose keys. */
static int change_prepare(shard_dispatcher *d, shard_ring *ring, struct shard_worker *extra,
                          struct shard_worker *skip, struct change *c)
{
    struct snap *cur = atomic_load_explicit(&d->snap, memory_order_relaxed);
    memset(c, 0, sizeof *c);
    c->snap = shard__snap_new(d, ring, cur->epoch + 1, extra);
    if (!c->snap) {
        shard_ring_destroy(ring);
        return -ENOMEM;
    }
    size_t n = shard_ring_member_count(cur->ring);
    c->fences = calloc(n, sizeof *c->fences);
    if (!c->fences)
        goto nomem;
    c->nmembers = n;
    for (size_t i = 0; i < n; i++) {
        struct shard_worker *w = cur->by_member[i];
        if (w == skip)
            continue;
        struct job *f = calloc(1, sizeof *f);
        if (!f)
            goto nomem;
        f->kind = JOB_FENCE;
        f->epoch = c->snap->epoch;
        f->routed = w;
        f->fence_before = cur;
        f->fence_after = c->snap;
        c->fences[i] = f;
        c->snap->unpassed++;
    }
    struct loser_scan ls = { cur, c };
    if (shard_ring_diff(cur->ring, ring, note_loser, &ls) != 0)
        goto nomem;
    c->moved /= SHARD_HASH_SPACE;
    return 0;
nomem:
    change_discard(d, c);
    return -ENOMEM;
}

/* Makes the prepared ring the one in force, and waits until no submit routes with an older one. */
static void publish(shard_dispatcher *d, struct change *c)
{
    struct snap *old = atomic_load_explicit(&d->snap, memory_order_relaxed);
    atomic_store_explicit(&c->snap->prev, old, memory_order_relaxed);
    pthread_mutex_lock(&d->lock);
    old->next = c->snap; /* settled cannot pass it yet: its fences are not pushed */
    pthread_mutex_unlock(&d->lock);
    /* release (E8, docs/protocol.md): readers that load the new snapshot see it fully built (pairs
     * with submit's acquire). */
    atomic_store_explicit(&d->snap, c->snap, memory_order_release);
    atomic_store_explicit(&d->epoch, c->snap->epoch, memory_order_relaxed);
    /* Submitters waiting for room in an old owner's queue look the key up again now: one that waits
     * inside the application's read-side section holds up the grace period below, and the old owner
     * (crashed) may never make room. */
    shard__space_send_back(d);
    shard__registry_synchronize(d); /* and frees what the registry retired before (views, workers) */
    c->snap = NULL;
    pthread_mutex_lock(&d->lock);
    d->changes++;
    d->last_moved = c->moved;
    shard__settle(d);
    pthread_mutex_unlock(&d->lock);
    /* And again: one that found the old ring before the store above registered with the new epoch. */
    shard__space_send_back(d);
}

static void push_fences(struct change *c)
{
    for (size_t i = 0; i < c->nmembers; i++) {
        struct job *f = c->fences[i];
        if (!f)
            continue;
        struct shard_worker *w = f->routed; /* f is the worker's once pushed, and may be freed */
        w->ctl.fenced_upto = f->epoch;
        shard__queue_push_side(&w->q, f);
        shard__worker_wake(w);
    }
    free(c->fences);
    c->fences = NULL;
    c->nmembers = 0;
}

int shard__membership_enter(shard_dispatcher *d)
{
    if (!d)
        return -EINVAL;
    if (shard__ctl_forbidden(d))
        return -EDEADLK;
    int err = shard__ctl_enter(d);
    if (err)
        return err;
    shard__snap_reap(d);
    shard__registry_reap(d);
    return 0;
}

int shard__membership_init(shard_dispatcher *d)
{
    uint32_t n = d->cfg.workers;
    shard_ring *ring;
    int err = shard_ring_create(&ring, &d->cfg.ring);
    if (err)
        return err;
    struct shard_ring_member *m = calloc(n, sizeof *m);
    struct snap *s = calloc(1, sizeof *s);
    struct shard_worker **by = calloc(n, sizeof *by);
    err = -ENOMEM;
    if (!m || !s || !by)
        goto fail;
    for (uint32_t i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%u", i);
        struct shard_worker *w = shard__worker_new(d, name, 1);
        if (!w || shard__registry_add(d, w) != 0) {
            if (w)
                shard__worker_free(w);
            goto fail;
        }
        m[i] = (struct shard_ring_member){ w->name, 1 };
    }
    if ((err = shard_ring_add_many(ring, m, n)) != 0)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        by[shard__ring_member_index(ring, d->workers[i]->name)] = d->workers[i];
        d->workers[i]->ctl.snap_refs = 1;
    }
    s->epoch = 1;
    s->ring = ring;
    s->by_member = by;
    d->settled_snap = s;
    atomic_store_explicit(&d->snap, s, memory_order_release);
    atomic_store_explicit(&d->epoch, 1, memory_order_relaxed);
    ring = NULL;
    by = NULL;
    s = NULL;
    for (size_t i = 0; i < d->nworkers; i++)
        if ((err = shard__worker_start(d->workers[i])) != 0)
            goto fail;
    free(m);
    return 0;
fail:
    for (size_t i = 0; i < d->nworkers; i++)
        if (d->workers[i]->ctl.started) {
            shard__worker_stop(d->workers[i]);
            shard__worker_join(d->workers[i]);
        }
    free(m);
    free(s);
    free(by);
    shard_ring_destroy(ring);
    return err;
}

SHARD_API int shard_worker_add(shard_dispatcher *d, const char *name, uint32_t weight)
{
    int err = shard__ring_check_name(name);
    if (err || weight == 0)
        return err ? err : -EINVAL;
    if ((err = shard__membership_enter(d)) != 0)
        return err;
    struct snap *cur = atomic_load_explicit(&d->snap, memory_order_relaxed);
    shard_ring *ring = NULL;
    struct shard_worker *w = NULL;
    struct change c;
    if (shard__registry_member(d, name)) {
        err = -EEXIST;
        goto out;
    }
    if (shard_ring_member_count(cur->ring) >= SHARD_MAX_WORKERS) {
        err = -EINVAL;
        goto out;
    }
    if ((err = shard_ring_clone(cur->ring, &ring)) != 0)
        goto out;
    if ((err = shard_ring_add(ring, name, weight)) != 0)
        goto out;
    w = shard__worker_new(d, name, cur->epoch + 1);
    if (!w) {
        err = -ENOMEM;
        goto out;
    }
    if ((err = change_prepare(d, ring, w, NULL, &c)) != 0) {
        ring = NULL; /* taken over */
        goto out;
    }
    ring = NULL;
    if ((err = shard__registry_add(d, w)) != 0) {
        change_discard(d, &c);
        goto out;
    }
    if ((err = shard__worker_start(w)) != 0) {
        shard__registry_drop_last(d);
        w = NULL; /* the registry's to free, after a grace period */
        change_discard(d, &c);
        goto out;
    }
    w = NULL;
    publish(d, &c);
    push_fences(&c);
out:
    if (w)
        shard__worker_free(w);
    shard_ring_destroy(ring);
    shard__ctl_unlock(d);
    return err;
}

/* A change made of one ring edit: every worker fenced, the workers losing keys run their release
 * hooks, moved keys' jobs and timers follow in order, as for add and remove. */
int shard__membership_edit(shard_dispatcher *d, shard__ring_edit edit, const void *ctx)
{
    int err = shard__membership_enter(d);
    if (err)
        return err;
    struct snap *cur = atomic_load_explicit(&d->snap, memory_order_relaxed);
    shard_ring *ring;
    struct change c;
    bool changed = false;
    if ((err = shard_ring_clone(cur->ring, &ring)) != 0)
        goto out;
    if ((err = edit(ring, ctx, &changed)) != 0 || !changed) {
        shard_ring_destroy(ring); /* nothing moves: no epoch spent */
        goto out;
    }
    if ((err = change_prepare(d, ring, NULL, NULL, &c)) != 0) /* takes the ring over */
        goto out;
    publish(d, &c);
    push_fences(&c);
out:
    shard__ctl_unlock(d);
    return err;
}

/* The common start of remove and crash: checks, then the next ring (without name) prepared as a change,
 * with a fence for every worker of the current ring, x's too when fence_x. On success ctl is held and
 * *x is the worker; on failure nothing changed and ctl is not held. */
static int leave_prepare(shard_dispatcher *d, const char *name, bool fence_x, struct shard_worker **x,
                         struct change *c)
{
    int err = shard__ring_check_name(name);
    if (err)
        return err == -ENAMETOOLONG ? -ENOENT : err;
    if ((err = shard__membership_enter(d)) != 0)
        return err;
    struct snap *cur = atomic_load_explicit(&d->snap, memory_order_relaxed);
    shard_ring *ring = NULL;
    *x = shard__registry_member(d, name);
    if (!*x)
        err = -ENOENT;
    else if (shard_ring_member_count(cur->ring) == 1)
        err = -EBUSY;
    else if ((err = shard_ring_clone(cur->ring, &ring)) == 0 && (err = shard_ring_remove(ring, name)) == 0)
        err = change_prepare(d, ring, NULL, fence_x ? NULL : *x, c); /* takes the ring over */
    else
        shard_ring_destroy(ring);
    if (err)
        shard__ctl_unlock(d);
    return err;
}

SHARD_API int shard_worker_remove(shard_dispatcher *d, const char *name)
{
    struct shard_worker *x;
    struct change c;
    int err = leave_prepare(d, name, true, &x, &c);
    if (err)
        return err;
    publish(d, &c);
    pthread_mutex_lock(&d->lock);
    shard__worker_set_state(x, SHARD_WORKER_RETIRING);
    d->nretiring++;
    pthread_mutex_unlock(&d->lock);
    push_fences(&c); /* x's fence included: it runs x's release hook once x's queue is done */
    shard__worker_stop(x);
    shard__ctl_unlock(d);
    return 0;
}

SHARD_API int shard_worker_crash(shard_dispatcher *d, const char *name, enum shard_crash_policy policy)
{
    if (policy != SHARD_CRASH_REROUTE && policy != SHARD_CRASH_DROP)
        return -EINVAL;
    struct shard_worker *x;
    struct change c;
    int err = leave_prepare(d, name, false, &x, &c);
    if (err)
        return err;
    struct crash_handover ho;
    if (shard__crash_handover_prepare(&ho, x, shard_ring_member_count(c.snap->ring)) != 0) {
        change_discard(d, &c);
        err = -ENOMEM;
        goto out;
    }
    /* From here on it cannot fail. */
    shard__worker_crash_stop(d, x);
    publish(d, &c);
    /* What x's returned jobs submitted goes now, not when a job of its batch stuck after them returns. */
    shard__outbox_rescue(x);
    /* Its timers before its queue: the hand-over ends with x epochless, and from then on its keys'
     * next jobs run (a rerouted one may arm a timer of its key, due before the ones x held are placed). */
    shard__timers_crash(d, x, policy);
    shard__crash_handover(d, x, policy, &ho);
    push_fences(&c);
out:
    shard__ctl_unlock(d);
    return err;
}

void shard__membership_stop_all(shard_dispatcher *d)
{
    /* Every fence passed first: a worker that stops with its inbox closed before another worker's
     * release hook hands it a key would leave the jobs that should follow that key behind (follow.c's
     * move_to_owner). Fences wait only for older jobs no crash owes, so this ends. */
    pthread_mutex_lock(&d->lock);
    while (d->settled_snap != atomic_load_explicit(&d->snap, memory_order_relaxed))
        pthread_cond_wait(&d->cond, &d->lock);
    pthread_mutex_unlock(&d->lock);
    for (size_t i = 0; i < d->nworkers; i++) {
        struct shard_worker *w = d->workers[i];
        if (shard__worker_state(w) == SHARD_WORKER_RUNNING)
            shard__worker_stop(w);
    }
    for (size_t i = 0; i < d->nworkers; i++)
        shard__worker_join(d->workers[i]);
}

