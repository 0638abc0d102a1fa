/* Internal: ring snapshots, the epoch chain published through RCU (snapshot.c).
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_SNAPSHOT_H
#define SHARD_SRC_SNAPSHOT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ring_layout.h"
#include "shard/dispatcher.h"

/* An immutable ring snapshot, published through RCU. Kept while a handoff may need it: back to the
 * settled epoch (older_owners_done in handoff.c walks that far). */
struct snap {
    uint64_t              epoch;
    shard_ring           *ring;
    struct shard_worker **by_member; /* ring member index -> worker; an entry of a worker that was
                                      * freed while the snapshot was kept reads d->gone (read with
                                      * snap_worker: shard__snap_unname rewrites it) */
    _Atomic(struct snap *) prev;
    /* d->lock: fences of this epoch not yet passed by workers that still count by epochs (not
     * crashed); the next (newer) snapshot, for settling forward. */
    uint32_t              unpassed;
    struct snap          *next;
};

/* The worker of member index i in s. Context: an RCU read-side section, or ctl held. */
static inline struct shard_worker *snap_worker(const struct snap *s, size_t i)
{
    /* The entry is either the worker, alive until a grace period after the rewrite, or d->gone,
     * which is never freed before the dispatcher. acquire (E9, docs/protocol.md): pairs with
     * shard__snap_unname's release, so reading d->gone also sees what made the worker finished (its
     * last jobs, its exit or hand-over). */
    return __atomic_load_n(&s->by_member[i], __ATOMIC_ACQUIRE);
}

/* A snapshot of ring (taken over) at epoch; its workers are found by name in the snapshot in force,
 * but extra (a worker being added) by itself. Counts in each worker's ctl.snap_refs. Return: NULL when
 * out of memory (the ring is not freed then). Context: ctl held. */
struct snap *shard__snap_new(shard_dispatcher *d, shard_ring *ring, uint64_t epoch, struct shard_worker *extra);
/* Frees s and its ring, uncounting its workers. Context: ctl held, s unreachable by readers. */
void shard__snap_free(shard_dispatcher *d, struct snap *s);
/* Frees snapshots older than every epoch a held job may still look back to. Context: ctl held. */
void shard__snap_reap(shard_dispatcher *d);
/* Points w's entries in kept snapshots at d->gone (w is finished with). Context: ctl held; the
 * caller waits a grace period before freeing w. */
void shard__snap_unname(shard_dispatcher *d, struct shard_worker *w);
/* Frees every snapshot (destroy). Context: no reader left. */
void shard__snap_free_all(shard_dispatcher *d);

#endif
