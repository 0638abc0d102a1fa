/* Internal: the dispatcher's and workers' state, shared by dispatcher.c, worker.c, handoff.c.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Locks, outermost first (never taken in another order):
 *   d->ctl     serialises membership changes, drain and destroy (held across grace periods);
 *   w->lock    a worker's consumer side: its queue's consumer end, its held jobs, whether it is inside
 *              a job. The worker holds it except while running a job or hook and while parked, so
 *              shard_worker_crash can take over a worker stuck in a job;
 *   d->lock    the worker registry, settled epoch, crash records, drain marks;
 *   w->inbox_lock  jobs rerouted to the worker by a crash.
 * d->space_lock (submitters waiting for queue space) is never held with any of them. */
#ifndef SHARD_SRC_DISPATCHER_INTERNAL_H
#define SHARD_SRC_DISPATCHER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "held.h"
#include "queue.h"
#include "ring_internal.h"
#include "shard/dispatcher.h"

/* An immutable ring snapshot, published through RCU. Kept while a handoff may need it: back to the
 * settled epoch (see deps in worker.c). */
struct snap {
    uint64_t              epoch;
    shard_ring           *ring;
    struct shard_worker **by_member; /* ring member index -> worker */
    _Atomic(struct snap *) prev;
};

/* What a crashed worker still holds up: its running job's key until the job returns, and the keys of
 * its rerouted jobs until each has run. Guarded by d->lock. */
struct crash_record {
    bool          active;     /* counted in d->ncrash_blocks */
    bool          stuck;      /* its job is still running */
    uint64_t      stuck_hash;
    struct keymap owed;       /* its rerouted jobs not yet run (never allocates) */
};

struct shard_worker {
    struct queue     q;
    struct parking   park;

    pthread_mutex_t  lock;
    struct held      held;
    bool             in_fn;       /* running a job or hook (under lock) */
    uint64_t         running_hash;
    bool             running_job; /* in_fn for a job, not a hook */
    bool             stopped;     /* processed its STOP */
    bool             held_dirty;
    uint64_t         seen_gen;
    struct job       scratch;     /* the job just taken from the ring */
    struct job      *spare_ready; /* a record at hand in case that job must wait */
    struct job      *spare;       /* spare records (worker.c) */
    uint32_t         nspare;

    pthread_mutex_t  inbox_lock;
    struct job      *inbox_head, *inbox_tail;
    _Atomic bool     inbox_flag;

    _Atomic uint64_t passed;      /* every job of an epoch below this is done */
    _Atomic int      state;       /* enum shard_worker_state */
    _Atomic bool     handed;      /* crashed, and its queue handed over */
    _Atomic bool     crash_pending; /* a crash waits for lock: the worker lets go of it */
    struct crash_record crash;    /* under d->lock */

    shard_dispatcher *d;
    char             name[SHARD_NAME_MAX + 1];
    uint32_t         weight;
    pthread_t        thread;
    bool             started, joined;
    bool             finished;    /* its thread is returning and touches it no more (d->lock) */
    void            *user;
    struct job       stop_item;

    /* Submitters waiting for room in its queue: they hold this worker outside any RCU section, so
     * a removed worker is not freed while this is non-zero (reap_workers in membership.c). */
    _Atomic uint32_t space_refs;

    _Atomic bool     busy;        /* for stats: a job is running */
    _Atomic uint64_t executed, set_aside, handed_over, parked, woken;
};

struct shard_dispatcher {
    struct shard_config cfg;
    uint32_t         capacity;
    _Atomic(struct snap *) snap;
    _Atomic uint64_t epoch;     /* of snap; written under ctl, read under d->lock */
    _Atomic uint64_t settled;   /* min passed over workers that are neither crashed nor exited */
    _Atomic uint64_t gen;       /* bumped when something a held job waits for may have happened */
    _Atomic int      shutdown;
    _Atomic uint32_t ncrash_blocks; /* crashed workers whose crash_record still blocks keys */

    pthread_mutex_t  ctl;
    pthread_mutex_t  lock;
    pthread_cond_t   cond;      /* a mark was processed, or a worker exited */
    struct shard_worker **workers;
    size_t           nworkers, workers_cap;
    size_t           marks_pending;

    pthread_mutex_t  space_lock;
    pthread_cond_t   space_cond;
    _Atomic uint32_t space_waiters;
    _Atomic uint64_t space_epoch; /* bumped to send waiting submitters back to the ring */

    uint64_t         changes;   /* under ctl */
    double           last_moved;
    _Atomic uint64_t dropped;
};

extern _Thread_local struct shard_worker *shard__current_worker;

/* worker.c */
void *shard__worker_main(void *arg);
void  shard__worker_wake(struct shard_worker *w);
/* Detaches the jobs rerouted to w (a list through held_next). Context: w's thread or w->lock held. */
struct job *shard__inbox_take(struct shard_worker *w);

/* handoff.c: what a held job waits for. */
bool  shard__job_may_run(shard_dispatcher *d, const struct job *j);
void  shard__settle(shard_dispatcher *d);                      /* with d->lock held */
void  shard__wake_holders(shard_dispatcher *d);                /* with d->lock held */
void  shard__rerouted_done(shard_dispatcher *d, struct job *j);
bool  shard__crash_blocks(shard_dispatcher *d, const struct job *j);
bool  shard__stuck_key(shard_dispatcher *d, uint64_t hash); /* a crashed worker still runs a job of it */
void  shard__crash_record_update(shard_dispatcher *d, struct shard_worker *x); /* with d->lock */

/* worker.c: frees a record, or keeps it as a spare of w (w may be NULL). Context: w's thread or lock. */
void  shard__free_record(struct shard_worker *w, struct job *j);

/* dispatcher.c */
void  shard__space_notify(shard_dispatcher *d);
struct shard_worker *shard__worker_new(shard_dispatcher *d, const char *name, uint32_t weight, uint64_t epoch);
int   shard__worker_start(struct shard_worker *w);
void  shard__worker_free(struct shard_worker *w);
void  shard__dispatcher_free(shard_dispatcher *d);

/* membership.c */
int   shard__membership_init(shard_dispatcher *d);     /* initial workers and ring, epoch 1 */
void  shard__membership_stop_all(shard_dispatcher *d); /* destroy: stop and join every worker */
void  shard__membership_free(shard_dispatcher *d);

#endif
