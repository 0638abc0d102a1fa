/* Internal: a worker: its fields and the calls every layer makes on it (worker.c; its life and loop
 * are worker_life.c's), its inbox (inbox.c) and spare job records (record.c).
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_WORKER_H
#define SHARD_SRC_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "check.h"
#include "crash.h"
#include "held.h"
#include "hot.h"
#include "job.h"
#include "outbox.h"
#include "park.h"
#include "queue.h"
#include "wheel.h"
#include "shard/dispatcher.h"

/* Multi-key jobs of up to this many keys keep their blocks for the next (multi.c): spare ones per
 * worker (below), then the dispatcher's pool. */
#define SHARD_MULTI_POOL_KEYS 16

/* Fields: I set before the worker is published and then read-only; W the worker's thread, or the
 * control thread holding w->lock. The rest is grouped by guard, one guard a group, named at its
 * struct: own (W), waits (atomics), inbox (inbox.lock), life (atomics), leaving (d->lock), ctl
 * (d->ctl), batch (its word), counts (atomics written by W), timers (timers.lock).
 *
 * Its life (life.state and the flags that qualify it) is drawn in docs/protocol.md, "A worker's life". */

/* W: the ordering machine as the worker's own thread runs it. */
struct worker_own {
    struct held      held;          /* its set-aside jobs, in order (held.h); but held.jobs, an atomic
                                     * count that submitters and stats read */
    bool             in_fn;         /* running a job or hook */
    uint64_t         running_hash;  /* key hash of the job in_fn runs */
    uint64_t         job_hash;      /* the worker's thread alone: key hash of the job running, in_fn
                                     * or in a batch (shard_job_key_hash) */
    bool             running_job;   /* in_fn for a job, not a hook */
    bool             stopped;       /* processed its STOP */
    bool             held_dirty;    /* held items may be able to go: walk them */
    bool             holding_now;   /* what waits.holding says */
    uint64_t         seen_kick;     /* waits.kick when its held jobs were last walked */
    uint64_t         seen_kick_keys; /* waits.kick_keys when waits.released was last emptied */
    /* Keys of the jobs its inbox brought in since the last look (inbox.c): an arrival changes only
     * what its own key may run, so it looks at those keys alone (walk.c). */
    uint64_t         arrived[32];
    uint32_t         narrived;      /* how many (one more than fits: held_dirty instead) */
    struct job       scratch;       /* the job just taken from the ring */
    struct job      *spare_ready;   /* a record at hand in case that job must wait */
    struct job      *spare;         /* spare records (record.c) */
    uint32_t         nspare;        /* length of spare */
    /* Spare blocks of multi-key jobs (multi.c) by class (keys - 1), linked through next_kept, and
     * their bytes in all (record.c). Its own thread's alone. */
    struct job_block *spare_blocks[SHARD_MULTI_POOL_KEYS];
    size_t           spare_block_bytes;
    bool             crash_stuck;   /* set by the crash: the running job holds a stuck entry */
    void            *running_whole; /* in_fn runs a multi-key job queued whole (multi.h); a crash
                                     * claims all its keys */
};

/* Atomics (ordering at the access): what its held jobs wait for, and the kicks that wake them. */
struct worker_waits {
    _Atomic bool     holding;       /* holds set-aside jobs (counted in d->nholding) */
    _Atomic uint64_t on;            /* wait_bit() of workers, WAIT_CRASH and WAIT_ENTRY (handoff.c); rebuilt on
                                     * every walk */
    _Atomic uint64_t kick;          /* bumped by a waker whose event it waits for */
    /* Keys whose crash table entries were paid while it held jobs behind them (handoff.c): it looks
     * at those keys' first held jobs alone, not at everything it holds (walk.c). */
    _Atomic uint64_t released[8];   /* hashes, 0 for a free slot (a hash of 0 goes to lost) */
    _Atomic bool     released_lost; /* a release found no free slot: walk everything */
    _Atomic uint64_t kick_keys;     /* bumped after each release is put in */
};

/* lock: jobs a crash rerouted to it, and jobs that followed their key to it (inbox.c). */
struct worker_inbox {
    pthread_mutex_t  lock;
    struct job_list  jobs;
    bool             closed;        /* crashed and its inbox handed over, or stopped and exiting:
                                     * deliver elsewhere */
    _Atomic bool     flag;          /* jobs not empty; set under lock with release */
};

/* Atomics: how far it is, as every other thread reads it. */
struct worker_life {
    _Atomic int      state;         /* enum shard_worker_state, changed under w->lock or ctl, or under
                                     * d->lock to EXITED by the exiting worker */
    _Atomic uint64_t passed;        /* every job of an epoch below this is done */
    _Atomic bool     epochless;     /* set under d->lock: crashed, queue handed over, no release hook
                                     * running: counts by epochs no more */
    _Atomic bool     crash_pending; /* a crash waits for w->lock: the worker lets go of it */
};

/* d->lock: how its crash or exit went. */
struct worker_leaving {
    bool             queue_handed;  /* the crash has handed its queue over */
    bool             hook_at_crash; /* crashed while running its release hook, not returned */
    bool             finished;      /* its thread is returning and touches it no more */
};

/* d->ctl: what the control side keeps of it. */
struct worker_ctl {
    uint64_t         fenced_upto;   /* epoch of the last fence pushed to it; read under d->lock too
                                     * once it has crashed (no fence is pushed to it after that) */
    uint32_t         snap_refs;     /* snapshots that name it */
    struct shard_worker *retired_next; /* out of the registry, freed after a grace period (registry.c) */
    pthread_t        thread;
    bool             started, joined;
};

/* The batch word: 0, or 2 * p + 1 while W runs ring jobs back to back without w->lock (run.c's
 * batch), having taken every position below p. Set under w->lock; W moves it on with a CAS before
 * each job; a crash takes it back to 0 under w->lock, which ends the batch
 * (shard__run_batch_interrupt). */
struct worker_batch {
    _Atomic uint64_t word;
    /* W writes [p & 1] with the key hash of position p before taking it; the crash that ends the batch
     * reads the entry of the last position taken, which W does not write again (its next write to it
     * would follow a successful CAS). */
    uint64_t         hash[2];
    /* [p & 1]: the multi-key job queued whole (multi.h) at position p while W takes and runs it;
     * else NULL. W sets it before the CAS that takes p, and takes it back with an exchange once the
     * job has returned (or the CAS failed); a crash that ends the batch exchanges the entry of the
     * last position taken too, and claims the job's keys if it got it (worker_crash.c). */
    _Atomic(void *)  whole[2];
};

/* Atomics written by W alone, relaxed (stats and the balancer read them); woken is bumped by wakers. */
struct worker_counts {
    _Atomic bool     busy;          /* a job (or a batch of them) is running */
    _Atomic uint64_t executed, set_aside, handed_over, parked;
    /* Load (load.c): */
    _Atomic uint64_t busy_ns;       /* time in jobs */
    _Atomic uint64_t queued_avg;    /* the smoothed queue length, a double's bits */
    _Atomic uint64_t head_since;    /* when it last began a job or batch (ns); 0: parked since */
    uint64_t         sampled_at;    /* W (stats read it with a relaxed atomic load): when queued_avg was
                                     * last updated */
    _Atomic uint64_t woken;         /* bumped by wakers with a relaxed load and store: stats may miss a
                                     * wake-up that raced another */
};

/* timers.lock, a leaf: keyed timers of the keys it owns (timer.c). */
struct worker_timers {
    pthread_mutex_t  lock;
    struct wheel     wheel;
    bool             closed;        /* it left the ring: timers go elsewhere */
    uint64_t         epoch;         /* epoch of the last fence at which it lost keys */
    _Atomic uint64_t next;          /* atomic, written under lock: when the wheel next needs W (ns);
                                     * UINT64_MAX: never */
};

struct shard_worker {
    struct queue     q;             /* its own discipline: producers any thread, consumer W (queue.h) */
    struct parking   park;          /* atomics: parked by W, woken by anyone (park.h) */
    pthread_mutex_t  lock;          /* held by W except while it runs a job or hook or is parked */
    struct worker_own    own;
    struct worker_waits  waits;
    struct worker_inbox  inbox;
    struct worker_life   life;
    struct worker_leaving leaving;
    struct worker_ctl    ctl;
    struct worker_batch  batch;
    struct worker_counts counts;
    struct worker_timers timers;
    struct crash_record crash;      /* the crash table's lock */
    /* its jobs' submits until their batch ends: W, but for the atomics and what a crash's rescue
     * touches under its busy flag (outbox.h) */
    struct outbox    outbox;

    uint32_t         id;            /* I: shard_worker_id, and which bit of waits.on stands for it
                                     * (d->gone shares 0 with the first worker: no job waits on it) */
    shard_dispatcher *d;            /* I */
    char             name[SHARD_NAME_MAX + 1]; /* I */
    struct job       stop_item;     /* I: its STOP control item, embedded; pushed once (ctl) */
    struct hot      *hot;           /* I: its heaviest keys (hot.h); NULL: not tracked */
    void            *user;          /* the user's (shard_worker_set_user); shard never reads it */
};

extern _Thread_local struct shard_worker *shard__current_worker;

/* The calling thread, if it is one of d's workers, else NULL (another dispatcher's worker, or no
 * worker's thread). */
static inline struct shard_worker *shard__worker_here(const shard_dispatcher *d)
{
    struct shard_worker *me = shard__current_worker;
    return me && me->d == d ? me : NULL;
}

/* The legends' W, checked (check.h): w's own thread, or a thread holding w->lock. */
#define SHARD_CHECK_W(w)  SHARD_CHECK(shard__current_worker == (w) || shard__mutex_mine(&(w)->lock))
/* w's own thread. */
#define SHARD_CHECK_ON(w) SHARD_CHECK(shard__current_worker == (w))

static inline int shard__worker_state(const struct shard_worker *w)
{
    return atomic_load_explicit(&w->life.state, memory_order_relaxed);
}

/* release: a reader that loads the state with acquire sees what was done to w before. The readers
 * here load it relaxed and get their ordering from the locks they hold. */
static inline void shard__worker_set_state(struct shard_worker *w, int st)
{
    atomic_store_explicit(&w->life.state, st, memory_order_release);
}

/* A counter's plain increment, read relaxed by stats: exact when one thread writes it (the worker's
 * own counters); woken is bumped by many wakers and may miss one that raced another. */
static inline void shard__count(_Atomic uint64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

/* The newest fence w has passed. relaxed: for a caller whose ordering comes from d->lock (the passes
 * are stored under it); the handoff's readers load it with acquire themselves (E2). */
static inline uint64_t shard__worker_passed(const struct shard_worker *w)
{
    return atomic_load_explicit(&w->life.passed, memory_order_relaxed);
}

static inline bool shard__worker_is_crashed(const struct shard_worker *w)
{
    return shard__worker_state(w) == SHARD_WORKER_CRASHED;
}

/* Whether jobs were delivered to w's inbox. acquire (E4, docs/protocol.md): pairs with the delivery's
 * release store, so the jobs are seen. shard__run_take reads it after the check of what a job waits for, and says why. */
static inline bool shard__inbox_pending(struct shard_worker *w)
{
    return atomic_load_explicit(&w->inbox.flag, memory_order_acquire);
}

/* Wakes w if it is parked. Context: any thread. Inline: every submit calls it, and it is one load when
 * the worker is awake. */
static inline void shard__worker_wake(struct shard_worker *w)
{
    /* Also when w is the caller, in its idle hook: the hook may wait on wake_fd after it submits. */
    if (atomic_load_explicit(&w->park.sleeping, memory_order_seq_cst) && shard__park_wake_sleeper(&w->park))
        shard__count(&w->counts.woken);
}
/* inbox.c. Jobs a crash rerouted to w, jobs that followed their key to it (follow.c) and drain
 * marks sent with them arrive in its inbox. */
/* Appends list (not empty) to w's inbox; the caller wakes w. Context: any thread (takes inbox.lock). */
void shard__inbox_put(struct shard_worker *w, const struct job_list *list);
/* Closes w's inbox for good if it is empty (later deliveries go elsewhere). Return: whether it was.
 * Context: w's thread, exiting. */
bool shard__inbox_close_if_empty(struct shard_worker *w);
/* Detaches the jobs rerouted to w (a list through next); close: for good (w crashed), later
 * deliveries go to the key's current owner. Context: w->lock held (by w's thread, or a crash). */
struct job *shard__inbox_take(struct shard_worker *w, bool close);
/* Moves the inbox into the front of w's held jobs. Context: w's thread. */
void shard__inbox_pull(struct shard_worker *w);

/* record.c. Frees w's spare records and blocks. Context: w's thread or lock, or w no longer running. */
void  shard__worker_drop_spares(struct shard_worker *w);
/* Keeps b, of class cls (< SHARD_MULTI_POOL_KEYS) and bytes, as a spare block of w, unless w's spare
 * blocks would be over SPARE_BLOCK_BYTES. Return: whether it was kept. Context: w's thread. */
bool  shard__block_spare_keep(struct shard_worker *w, struct job_block *b, size_t cls, size_t bytes);
/* A spare block of class cls and bytes, or NULL. Context: w's thread. */
struct job_block *shard__block_spare_take(struct shard_worker *w, size_t cls, size_t bytes);
/* Every spare block of class cls, of bytes each, as a list through next_kept (NULL: none).
 * Context: w's thread. */
struct job_block *shard__block_spare_take_all(struct shard_worker *w, size_t cls, size_t bytes);
/* Frees a record, or keeps it as a spare of w (w may be NULL). Context: w's thread or lock. */
void  shard__free_record(struct shard_worker *w, struct job *j);
/* A cleared record, a spare of w if it has one. Return: NULL when out of memory. Context: as above. */
struct job *shard__record_alloc(struct shard_worker *w);

#endif
