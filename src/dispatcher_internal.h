/* Internal: the dispatcher's state.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The order of the locks is docs/protocol.md's ("Locks"), with the words, the state machines and
 * the synchronising edges (E1...) the comments cite. */
#ifndef SHARD_SRC_DISPATCHER_INTERNAL_H
#define SHARD_SRC_DISPATCHER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crash.h"
#include "placement.h"
#include "shard/dispatcher.h"
#include "snapshot.h"
#include "throttle.h"
#include "timer_table.h"
#include "worker.h"

/* Stripes of the multi-key jobs' counts (below). */
#define MULTI_COUNT_STRIPES 8

/* What the balancer reports in shard_stats (balance_rounds ... unsplittable_share): written by its thread
 * after each round (balance.c), read by shard_dispatcher_stats (stats.c). Kept here, not in the
 * balancer, so that stats reads them without calling into the balancer, which stands above stats (it
 * reads the load through shard_dispatcher_worker_stats). lock is a leaf. */
struct balance_report {
    pthread_mutex_t lock;
    uint64_t        rounds, moves, weights, unsplittable; /* lock */
    double          ratio, unsplittable_share;            /* lock */
};

/* The registry's workers as one array (shard_dispatcher.view). */
struct worker_view {
    struct worker_view *retired_next; /* on d->retired_views, once replaced */
    size_t n;
    struct shard_worker *w[];
};

struct shard_dispatcher {
    struct shard_config cfg;        /* I */
    uint32_t         capacity;      /* I */
    _Atomic(struct snap *) snap;    /* A: written under ctl, read in RCU sections */
    _Atomic uint64_t epoch;         /* A: of snap; written under ctl */
    _Atomic uint64_t settled;       /* A, written under L: every fence up to it was passed */
    struct snap     *settled_snap;  /* L: the snapshot of epoch `settled` */
    _Atomic uint32_t nholding;      /* A: workers holding set-aside jobs */
    _Atomic int      shutdown;      /* A: set once, under ctl, by destroy */
    struct crash_table crash;      /* its own lock (crash.h) */
    shard_dispatcher *ctl_outer;    /* C: the dispatcher whose ctl this thread held before (hooks) */
    /* I: what snapshots kept for older_owners_done name in place of a worker already freed: it has
     * passed every fence and counts by epochs no more, as the worker had before it was freed. */
    struct shard_worker *gone;

    pthread_mutex_t  ctl;
    _Atomic uint32_t ctl_callers;   /* A: membership calls between their look at shutdown and taking
                                     * ctl (ctl.c's shard__ctl_enter): destroy waits for them */
    pthread_cond_t   ctl_cond;      /* with ctl: the last of them went, once shutdown is set */
    pthread_mutex_t  lock;
    pthread_cond_t   cond;          /* L: the last drain mark was processed, a removed worker exited,
                                     * or settled moved */
    struct shard_worker **workers;  /* L (changed also under C) */
    size_t           nworkers, workers_cap; /* L */
    /* The same workers for readers that take no lock (handoff.c's kicks, in RCU read sections):
     * published anew at every change of workers[], under C (registry.c). Views replaced, and workers
     * left out of them, are retired: freed after a later grace period (shard__registry_synchronize). */
    _Atomic(struct worker_view *) view;
    struct worker_view  *view_undo;       /* C: the view before the last add, until it is done */
    struct worker_view  *retired_views;   /* C */
    struct shard_worker *retired_workers; /* C */
    size_t           marks_pending; /* L */
    _Atomic uint32_t draining;      /* A: drains under way (drain.c): an entry made then kicks the
                                     * holders of marks (handoff.c's shard__entries_made) */
    size_t           nretiring;     /* L: removed workers not yet exited */
    uint32_t         next_id;       /* C: id of the next worker */
    struct placement placement;     /* its CPU list is I; its turn C */

    pthread_mutex_t  space_lock;
    pthread_cond_t   space_cond;
    pthread_cond_t   key_cond;      /* space_lock: submitters waiting for a throttled key wait here,
                                     * apart from those waiting for room (woken after every job) */
    _Atomic uint32_t space_waiters; /* A: submitters waiting for room (space.c) */
    _Atomic uint32_t key_waiters;   /* A: submitters waiting for a throttled key (space.c) */
    _Atomic uint64_t space_epoch;   /* A, bumped under space_lock: sends waiters back to the ring */
    struct throttle  throttle;      /* keys whose set-aside jobs fill a worker's allowance (own lock) */

    uint64_t         changes;       /* L */
    double           last_moved;    /* L */
    _Atomic uint64_t dropped;       /* A: jobs DROP crashes dropped (stats) */
    struct timer_table timers;      /* keyed timers' records (its own lock) */
    struct balancer  *balancer;     /* I: NULL when off (balance.c) */
    struct balance_report balance_report; /* the balancer's figures for shard_dispatcher_stats */
    _Atomic uint64_t user_places;  /* shard_key_place and _unplace calls, counted in their edit under ctl:
                                    * the balancer adopts an isolation's pin only if none came since */
    /* Multi-key jobs (multi.c): their parts enter the queues under multi_lock, so that any two meet
     * every key they share in one order. A leaf but for the side locks and allocation it takes. */
    pthread_mutex_t  multi_lock;
    /* Blocks of multi-key jobs of few keys, kept for the next (multi.c): a job's memory then comes
     * without malloc, whose arenas a submitter allocating and a worker freeing take turns to grow
     * and trim (a page fault a job, measured). pool_lock is a leaf. */
    pthread_mutex_t  pool_lock;
    struct job_block *pool[SHARD_MULTI_POOL_KEYS]; /* pool_lock: by keys - 1, linked through next_kept */
    size_t           pooled;        /* pool_lock: bytes of the blocks kept */
    /* Multi-key jobs accepted and not yet ended, and of those the ones holding some of their keys
     * while a part waits (stats): their changes, in stripes a line each (multi.c's counts_here: a
     * worker's in its own, by its id, every other thread's in stripe 0), summed when read. One
     * count of each was a line that the submitter and the workers of a job's parts all wrote: 6 % of
     * a 2-key job's CPU (bench_multi). A. */
    struct multi_counts {
        _Alignas(64) _Atomic int64_t open;
        _Atomic int64_t waiting;
    } multi_counts[MULTI_COUNT_STRIPES];
};

/* multi.c: one more multi-key job open (1), or one fewer (-1), in the calling thread's stripe. */
void shard__multi_count_open(shard_dispatcher *d, int64_t delta);
/* multi.c: the multi-key jobs open and waiting, summed over the stripes (stats). */
void shard__multi_counts(shard_dispatcher *d, uint64_t *open, uint64_t *waiting);
/* multi.c: frees the blocks kept for multi-key jobs. Context: destroy, no job left. */
void shard__multi_pool_free(shard_dispatcher *d);
/* dispatcher.c: frees everything create made (create's failure, destroy). */
void shard__dispatcher_free(shard_dispatcher *d);

#endif
