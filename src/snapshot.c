/* Snapshots: the chain of published rings, from the one in force back to the settled epoch; which
 * worker each member is; freeing what no reader can reach. SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>
#include <string.h>

#include "dispatcher_internal.h"
#include "rcu.h"
#include "ctl.h"

/* Context: ctl held (ctl.snap_refs). */
void shard__snap_free(shard_dispatcher *d, struct snap *s)
{
    for (size_t i = 0; i < shard_ring_member_count(s->ring); i++)
        if (s->by_member[i] != d->gone)
            s->by_member[i]->ctl.snap_refs--;
    shard_ring_destroy(s->ring);
    free(s->by_member);
    free(s);
}

/* A snapshot of ring (taken over) at epoch; workers are found by name: the running ones, plus extra. */
struct snap *shard__snap_new(shard_dispatcher *d, shard_ring *ring, uint64_t epoch, struct shard_worker *extra)
{
    struct snap *s = calloc(1, sizeof *s);
    size_t n = shard_ring_member_count(ring);
    struct shard_worker **by = calloc(n ? n : 1, sizeof *by);
    if (!s || !by) {
        free(s);
        free(by);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const char *name = shard_ring_member(ring, i);
        if (extra && strcmp(extra->name, name) == 0) {
            by[i] = extra;
            continue;
        }
        struct snap *cur = atomic_load_explicit(&d->snap, memory_order_relaxed);
        long idx = shard__ring_member_index(cur->ring, name);
        by[i] = cur->by_member[idx];
    }
    for (size_t i = 0; i < n; i++)
        by[i]->ctl.snap_refs++;
    s->epoch = epoch;
    s->ring = ring;
    s->by_member = by;
    atomic_init(&s->prev, NULL);
    return s;
}

/* Frees snapshots older than every epoch a held job may still look back to. Context: ctl held. */
void shard__snap_reap(shard_dispatcher *d)
{
    SHARD_CHECK(shard__ctl_held(d));
    pthread_mutex_lock(&d->lock);
    struct snap *s = d->settled_snap;
    pthread_mutex_unlock(&d->lock);
    struct snap *cut = atomic_load_explicit(&s->prev, memory_order_relaxed);
    if (!cut)
        return;
    atomic_store_explicit(&s->prev, NULL, memory_order_release);
    shard__rcu_synchronize(); /* no reader still walks into what was cut off */
    while (cut) {
        struct snap *next = atomic_load_explicit(&cut->prev, memory_order_relaxed);
        shard__snap_free(d, cut);
        cut = next;
    }
}

/* Points the entries of w in the snapshots still kept at d->gone: a worker that is finished with
 * answers every older_owners_done question as d->gone does, so it need not live as long as the
 * snapshots (which are kept back to the settled epoch, however far behind that is). */
void shard__snap_unname(shard_dispatcher *d, struct shard_worker *w)
{
    SHARD_CHECK(shard__ctl_held(d));
    for (struct snap *s = atomic_load_explicit(&d->snap, memory_order_relaxed); s && w->ctl.snap_refs;
         s = atomic_load_explicit(&s->prev, memory_order_relaxed)) {
        long idx = shard__ring_member_index(s->ring, w->name);
        if (idx >= 0 && s->by_member[idx] == w) {
            /* release (E9, docs/protocol.md): pairs with snap_worker's acquire. registry.c's reapable() acquired w's finishing (its
             * d->lock section, its crash record's lock), so a reader of d->gone sees it too. */
            __atomic_store_n(&s->by_member[idx], d->gone, __ATOMIC_RELEASE);
            w->ctl.snap_refs--;
        }
    }
}

void shard__snap_free_all(shard_dispatcher *d)
{
    struct snap *s = atomic_load_explicit(&d->snap, memory_order_relaxed);
    while (s) {
        struct snap *p = atomic_load_explicit(&s->prev, memory_order_relaxed);
        shard__snap_free(d, s);
        s = p;
    }
}
