/* Internal: the dispatcher's and workers' state, shared by dispatcher.c, worker.c, handoff.c.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Locks, outermost first (never taken in another order):
 *   d->ctl     serialises membership changes, drain and destroy (held across grace periods);
 *   w->lock    a worker's consumer side: its queue's consumer end, its held jobs, whether it is inside
 *              a job. The worker holds it except while running a job or hook and while parked, so
 *              shard_worker_crash can take over a worker stuck in a job;
 *   d->lock    the worker registry, the settled epoch and fence counts, crash hand-over flags,
 *              drain marks;
 *   w->inbox_lock  jobs rerouted to the worker by a crash;
 *   d->crash.lock  what crashes still owe (crash.h), a leaf.
 * d->space_lock (submitters waiting for queue space) is never held with any of them. */
#ifndef SHARD_SRC_DISPATCHER_INTERNAL_H
#define SHARD_SRC_DISPATCHER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "crash.h"
#include "held.h"
#include "park.h"
#include "queue.h"
#include "ring_internal.h"
#include "shard/dispatcher.h"

/* An immutable ring snapshot, published through RCU. Kept while a handoff may need it: back to the
 * settled epoch (older_owners_done in handoff.c walks that far). */
struct snap {
    uint64_t              epoch;
    shard_ring           *ring;
    struct shard_worker **by_member; /* ring member index -> worker; an entry of a worker that was
                                      * freed while the snapshot was kept reads d->gone (read with
                                      * snap_worker: reap_workers rewrites it) */
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
     * which is never freed before the dispatcher. acquire: pairs with unname's release, so reading
     * d->gone also sees what made the worker finished (its last jobs, its exit or hand-over). */
    return __atomic_load_n(&s->by_member[i], __ATOMIC_ACQUIRE);
}

/* Fields: I set before the worker is published and then read-only; C under d->ctl; L under d->lock;
 * W the worker's thread, or the control thread holding w->lock; A atomic (ordering at the access).
 *
 * Lifecycle (state, with the flags that qualify it):
 *
 *   RUNNING --remove--> RETIRING --passes its last fence, runs STOP--> EXITED (finished) --> freed
 *      |
 *      +--crash--> CRASHED --queue handed over, release hook (if one ran) returned--> handed
 *                     --last job returned--> finished --crash record owes nothing--> freed
 *
 * A worker is freed (registry.c's reap) once it is finished with and no snapshot or waiting
 * submitter can reach it. */
struct shard_worker {
    struct queue     q;
    struct parking   park;

    pthread_mutex_t  lock;
    struct held      held;          /* W */
    bool             in_fn;         /* W: running a job or hook */
    uint64_t         running_hash;  /* W */
    bool             running_job;   /* W: in_fn for a job, not a hook */
    bool             stopped;       /* W: processed its STOP */
    bool             held_dirty;    /* W */
    bool             holding_now;   /* W: what `holding` says */
    uint64_t         seen_kick;     /* W: kick when its held jobs were last walked */
    struct job       scratch;       /* W: the job just taken from the ring */
    struct job      *spare_ready;   /* W: a record at hand in case that job must wait */
    struct job      *spare;         /* W: spare records (worker.c) */
    uint32_t         nspare;        /* W */
    bool             crash_stuck;   /* W: set by the crash: the running job holds a stuck entry */

    pthread_mutex_t  inbox_lock;
    struct job_list  inbox;         /* inbox_lock */
    bool             inbox_closed;  /* inbox_lock: crashed, its inbox handed over: deliver elsewhere */
    _Atomic bool     inbox_flag;

    _Atomic uint64_t passed;        /* A: every job of an epoch below this is done */
    _Atomic int      state;         /* A: enum shard_worker_state, changed under w->lock or ctl */
    _Atomic bool     handed;        /* A, set under L: crashed, queue handed over, no release hook
                                     * running: counts by epochs no more */
    _Atomic bool     crash_pending; /* A: a crash waits for lock: the worker lets go of it */
    _Atomic bool     holding;       /* A: holds set-aside jobs (counted in d->nholding) */
    _Atomic uint64_t waits_on;      /* A: what its held jobs wait for: wait_bit() of workers, and
                                     * WAIT_CRASH (handoff.c); rebuilt on every walk */
    _Atomic uint64_t kick;          /* A: bumped by a waker whose event it waits for */
    uint32_t         id;            /* I: which bit of waits_on stands for it */
    bool             queue_handed;  /* L: the crash has handed its queue over */
    bool             hook_at_crash; /* L: crashed while running its release hook, not returned */
    struct crash_record crash;      /* the crash table's lock */
    uint64_t         fenced_upto;   /* C: epoch of the last fence pushed to it */
    uint32_t         snap_refs;     /* C: snapshots that name it */

    shard_dispatcher *d;            /* I */
    char             name[SHARD_NAME_MAX + 1]; /* I */
    uint32_t         weight;        /* I */
    pthread_t        thread;        /* C */
    bool             started, joined; /* C */
    bool             finished;      /* L: its thread is returning and touches it no more */
    void            *user;
    struct job       stop_item;

    /* Submitters waiting for room in its queue: they hold this worker outside any RCU section, so
     * a removed worker is not freed while this is non-zero (reap_workers in membership.c). */
    _Atomic uint32_t space_refs;

    _Atomic bool     busy;          /* for stats: a job is running */
    _Atomic uint64_t executed, set_aside, handed_over, parked, woken;
};

struct shard_dispatcher {
    struct shard_config cfg;        /* I */
    uint32_t         capacity;      /* I */
    _Atomic(struct snap *) snap;    /* A: written under ctl, read in RCU sections */
    _Atomic uint64_t epoch;         /* A: of snap; written under ctl */
    _Atomic uint64_t settled;       /* A, written under L: every fence up to it was passed */
    struct snap     *settled_snap;  /* L: the snapshot of epoch `settled` */
    _Atomic uint32_t nholding;      /* A: workers holding set-aside jobs */
    _Atomic int      shutdown;
    struct crash_table crash;
    shard_dispatcher *ctl_outer;    /* C: the dispatcher whose ctl this thread held before (hooks) */
    /* I: what snapshots kept for older_owners_done name in place of a worker already freed: it has
     * passed every fence and counts by epochs no more, as the worker had before it was freed. */
    struct shard_worker *gone;

    pthread_mutex_t  ctl;
    pthread_mutex_t  lock;
    pthread_cond_t   cond;          /* L: the last drain mark was processed, a removed worker exited,
                                     * or settled moved */
    struct shard_worker **workers;  /* L (changed also under C) */
    size_t           nworkers, workers_cap; /* L */
    size_t           marks_pending; /* L */
    size_t           nretiring;     /* L: removed workers not yet exited */
    uint32_t         next_id;       /* C: id of the next worker */

    pthread_mutex_t  space_lock;
    pthread_cond_t   space_cond;
    _Atomic uint32_t space_waiters;
    _Atomic uint64_t space_epoch;   /* bumped to send waiting submitters back to the ring */

    uint64_t         changes;       /* L */
    double           last_moved;    /* L */
    _Atomic uint64_t dropped;
};

extern _Thread_local struct shard_worker *shard__current_worker;

/* worker.c */
void *shard__worker_main(void *arg);
void  shard__worker_wake(struct shard_worker *w);
/* Keeps `holding` equal to "has held items", so that shard__wake_holders wakes only such workers.
 * Context: w's thread or w->lock held. */
void  shard__worker_sync_holding(struct shard_worker *w);
/* Detaches the jobs rerouted to w (a list through held_next); close: for good (w crashed), later
 * deliveries go to the key's current owner. Context: w's thread or w->lock held. */
struct job *shard__inbox_take(struct shard_worker *w, bool close);

/* handoff.c: what a held job waits for. */
/* Whether j may run now. If not, j notes what it waits for and w (its holder) is registered to be
 * kicked when that happens. Context: w's thread or w->lock held. */
bool  shard__job_may_run(shard_dispatcher *d, struct shard_worker *w, struct job *j);
/* w, holding jobs, is to be kicked by changes of the crash table too. Context: as above. */
void  shard__wait_on_crashes(struct shard_worker *w);
/* Advances d->settled over the snapshots whose fences have all been passed. Context: d->lock. */
void  shard__settle(shard_dispatcher *d);
/* w passed its fence of snapshot s. Context: d->lock. */
void  shard__fence_passed(shard_dispatcher *d, struct shard_worker *w, struct snap *s);
/* Kicks the workers whose held jobs wait for w (its fences, its hand-over, its exit). Context:
 * d->lock. */
void  shard__wake_waiters_of(shard_dispatcher *d, struct shard_worker *w);
/* x stops counting by epochs once its queue is handed over and no release hook of it runs.
 * Context: d->lock. */
void  shard__handed_if_done(shard_dispatcher *d, struct shard_worker *x);
/* j, owed by a crash, has run or was dropped; or x's stuck job returned. Context: no lock. */
void  shard__owed_done(shard_dispatcher *d, struct job *j);

/* worker.c: frees w's spare records. Context: w's thread or lock, or w no longer running. */
void  shard__worker_drop_spares(struct shard_worker *w);
/* worker.c: frees a record, or keeps it as a spare of w (w may be NULL). Context: w's thread or lock. */
void  shard__free_record(struct shard_worker *w, struct job *j);

/* dispatcher.c */
void  shard__space_notify(shard_dispatcher *d);
struct shard_worker *shard__worker_new(shard_dispatcher *d, const char *name, uint32_t weight, uint64_t epoch);
int   shard__worker_start(struct shard_worker *w);
void  shard__worker_free(struct shard_worker *w);
void  shard__dispatcher_free(shard_dispatcher *d);

/* membership.c */
/* Whether this thread may not take d's ctl: a worker, a hook of d's control thread, or inside an RCU
 * read-side section. */
bool  shard__ctl_forbidden(shard_dispatcher *d);
void  shard__ctl_lock(shard_dispatcher *d);
void  shard__ctl_unlock(shard_dispatcher *d);
int   shard__membership_init(shard_dispatcher *d);     /* initial workers and ring, epoch 1 */
void  shard__membership_stop_all(shard_dispatcher *d); /* destroy: stop and join every worker */
void  shard__membership_free(shard_dispatcher *d);

#endif
