/* SPDX-License-Identifier: LGPL-2.1-or-later */
/** @file shard/dispatcher.h
 * Workers, keyed jobs, membership changes, stats.
 *
 * A dispatcher runs jobs on a pool of worker threads. Every job has a key; the ring (ring.h) says which
 * worker owns the key. Jobs of one key submitted by one thread run in submission order, one at a time,
 * on the key's owner; this holds across shard_worker_add, shard_worker_remove and
 * shard_worker_crash(REROUTE): when a key moves, its new owner sets its jobs aside until the old owner
 * has finished every job of that key it was given. Only moved keys wait; the others run on.
 *
 * Memory: the jobs of one key form a happens-before chain wherever they run (across add, remove and
 * crash, REROUTE or DROP, a job still running on a crashed worker included), and the release hook
 * that hands the key over is a link of it: a job may read without a lock the plain state its key's
 * earlier jobs, or that hook, wrote. What a thread did before shard_submit happens before the job;
 * the jobs shard_drain waited for happen before it returns. Nothing orders jobs of different keys
 * (docs/visibility.md).
 *
 * Threads: any thread may submit, including a job running on a worker. Membership calls (add, remove,
 * crash, drain, destroy) are made from threads that are not workers of any dispatcher (-EDEADLK from
 * a worker, from a hook the control thread runs — on_dropped, the ring's hooks — and from inside an
 * RCU read-side section); they are serialised with each other and return once the change is in
 * force. A control-thread hook may call into another dispatcher, but two dispatchers whose hooks call
 * into each other from two threads at once deadlock, as any two locks taken in opposite orders do. No thread needs set-up: the library registers a submitting thread with RCU (liburcu, memb
 * flavour) on its first submit and unregisters it when the thread exits; a submit from a TLS
 * destructor that runs after that registers for the one call only.
 *
 * An application that uses liburcu's memb flavour itself shares the registration: register your
 * threads before their first submit (or leave it to shard), and unregister those you registered.
 * Inside your own read-side section a submit works and may wait for room (membership changes then
 * wait for your section to end), but does not wait for a throttled key nor for a worker full of
 * set-aside jobs (shard_submit): those waits may wait for the end of your section; a membership call
 * there returns -EDEADLK. */
#ifndef SHARD_DISPATCHER_H
#define SHARD_DISPATCHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "ring.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A worker's queue capacity when shard_config.queue_capacity is 0. */
#define SHARD_DEFAULT_QUEUE_CAPACITY 4096u
/** The largest shard_config.queue_capacity accepted. */
#define SHARD_MAX_QUEUE_CAPACITY ((1u << 20) - 1)
/** The most workers a dispatcher has in its ring (create and shard_worker_add refuse more). */
#define SHARD_MAX_WORKERS 4096u

/** A pool of workers and the ring that places keys on them (opaque). */
typedef struct shard_dispatcher shard_dispatcher;
/** One worker thread of a dispatcher (opaque); jobs and hooks are given the one running them. */
typedef struct shard_worker shard_worker;
/** A job: runs on the worker w that owns its key, with the arg given to shard_submit(). */
typedef void (*shard_job_fn)(shard_worker *w, void *arg);

/** What shard_worker_crash() does with the jobs left in the crashed worker's queue. */
enum shard_crash_policy {
    SHARD_CRASH_REROUTE, /**< move them, in order, to their keys' new owners */
    SHARD_CRASH_DROP,    /**< give each to shard_config.on_dropped, once */
};

/** What a release hook is told: the ring before and after the change that moves keys away from the
 * worker. A key moves away when shard_ring_owner(after, key) is no longer this worker's name
 * (shard_handoff_moves() asks that without comparing names). Both rings are valid during the hook
 * only. The library fills the struct; it can grow at its end. */
struct shard_handoff {
    uint64_t          epoch;        /**< the epoch of `after` (shard_stats.epoch) */
    const shard_ring *before;       /**< the ring before the change */
    const shard_ring *after;        /**< the ring after the change */
    long              before_index; /**< the worker's member index in `before` (added in 0.2) */
    long              after_index;  /**< its member index in `after`; -1 when it left the ring (0.2) */
};

/** Whether key moves away from the worker running the release hook h was given to: it owns the key in
 * `before` and not in `after`. One hash and two lookups, no name compared. Context: that release
 * hook. Return: false also for h NULL, or key NULL with len > 0 (added in 0.2). */
SHARD_API bool shard_handoff_moves(const struct shard_handoff *h, const void *key, size_t len);
/** As shard_handoff_moves(), for a key known by its hash (shard_job_key_hash(),
 * shard_dispatcher_key_hash()): two lookups, no hashing. Context: that release hook. Return: false
 * also for h NULL (added in 0.2). */
SHARD_API bool shard_handoff_moves_hash(const struct shard_handoff *h, uint64_t hash);

/** The balancer (shard_config.balance; added in 0.2). Off unless interval_ms is set. Every interval it
 * measures the load of the ring's members in force (the first 128 by name) over the interval: time
 * in jobs (wall time, so time a job blocks counts, and so does time its thread was preempted), or
 * jobs given, run and queued, with by_jobs. When a worker has been over threshold times the mean for
 * `rounds` intervals in a row (the same worker each time), it moves hot keys from the busiest such
 * worker to the least busy, up to max_moves a round: the heaviest whose load is within half the gap,
 * or failing that the lightest that still lowers the maximum; only a key that has been among its
 * worker's hot keys for max(rounds, 2) hot-key windows in a row, weighed by the lesser of its last
 * two windows; never a key heavier than the mean, and never a key the user placed
 * (shard_key_place). A round's moves are one change (one handoff). A key alone heavier than a
 * worker's fair share in each of max(rounds, 2) hot-key windows in a row cannot be split (that is the
 * order promise): it is pinned on its worker, every other member's ring weight is multiplied by 8 so
 * that fewer cold keys share it (not when the ring would pass 4M points), shard_stats names it
 * (unsplittable_hash), and the weights as they were are restored once that worker has held no such
 * key for 20 intervals (quiet ones included), but a weight the user set meanwhile, which stays;
 * meanwhile its other hot keys heavier than max(threshold - 1, 0.25) times a worker's mean load leave
 * it, whatever their load, and once it ends the pin is one of the balancer's own placements (unless
 * the user placed or unplaced any key meanwhile: then it stays the user's). What does not repeat is
 * not acted on: on a machine with more threads than cores, an even load (many keys of equal cost) is
 * left alone by time as by jobs. Intervals in which the workers were busy under 5 % of the time (were
 * given under 100 jobs each, by_jobs) decide nothing else. Its own placements stay until it moves
 * them again, the user places or unplaces the key, their worker leaves, or it has over 1,024 of them
 * (the oldest go back to the ring, but never the key of an isolation in force). It needs hot keys
 * (shard_config.hot_keys; 16 when 0, over windows of interval_ms when hot_window_ms is 0). */
struct shard_balance_config {
    uint32_t interval_ms; /**< how often it looks; 0: no balancer */
    double   threshold;   /**< acts when max / mean load exceeds this; 0: 1.15; else at least 1.0 */
    uint32_t rounds;      /**< intervals in a row a worker is over the threshold before keys leave
                           * it, and hot-key windows in a row (at least 2) a key must show its load
                           * before it is moved or isolated; 0: 3 */
    uint32_t max_moves;   /**< keys it places a round at most; 0: 8 */
    bool     by_jobs;     /**< load is jobs given (run and queued; for jobs of equal cost), not time
                           * in jobs */
};

/** How shard_dispatcher_create() sets a dispatcher up. Zeroed: the defaults. It can grow at its end
 * (docs/using.md: Versions and ABI). */
struct shard_config {
    uint32_t workers;         /**< initial workers, named "w0", "w1", ...; 0: number of online CPUs */
    uint32_t queue_capacity;  /**< jobs a worker may hold; 0: SHARD_DEFAULT_QUEUE_CAPACITY. Rounded up
                               * to a power of two; counts jobs waiting in the queue, not the one
                               * running nor those set aside for a handoff */
    struct shard_ring_config ring; /**< the ring's placement: vnodes, seed, hash hooks */
    /** Jobs dropped by a DROP crash: called once each, in queue order, on the thread calling
     * shard_worker_crash. NULL: dropped silently (still counted in the stats). It may run while the
     * crashed worker still runs a job of the same key: do not touch that key's state here; the key's
     * later jobs run after it. */
    void (*on_dropped)(shard_job_fn fn, void *arg, void *user);
    void *user; /**< passed to every hook of this config */
    /** Run on each worker's own thread when it starts, before its first job. NULL: nothing. */
    void (*on_worker_start)(shard_worker *w, void *user);
    /** Run on each worker's own thread when it stops, after its last job. A crashed worker's stop hook
     * runs when its current job returns (shard_worker_crashed() tells). NULL: nothing. */
    void (*on_worker_stop)(shard_worker *w, void *user);
    /** Run on a worker's thread when a membership change moves keys away from it, after it has run
     * every job of those keys that it was given before the change, and before any new owner may run
     * them: the place to hand worker-local state of moved keys to their new owners. Jobs of those
     * keys that it holds behind a job stuck on a crashed worker are not run here: they follow their
     * key and run, in order, where its state went. Not run on a crashed worker; a crash while it
     * runs lets it finish, and the keys it releases wait for it. */
    void (*on_release)(shard_worker *w, const struct shard_handoff *h, void *user);
    /** CPUs to pin workers to (added in 0.2): the n-th worker started, counting the initial ones
     * ("w0", "w1", ...) and then every added one, runs on cpus[n % ncpus] only. Copied at create.
     * NULL with ncpus 0: see pin_per_core. */
    const int *cpus;
    size_t     ncpus; /**< entries of cpus, at most SHARD_MAX_CPUS */
    /** With cpus NULL: true pins the n-th worker to the n-th CPU this process may run on (round
     * robin), the shard-per-core set-up; false (the default) leaves placement to the scheduler. */
    bool       pin_per_core;
    /** How long an idle worker in the ring polls its queue before it parks on a futex, in
     * microseconds: polling saves the wake-up's system call and latency when jobs keep coming, at
     * the price of a busy core. 0: a short spin (a few hundred pause instructions), the default.
     * While it polls, past its first 64 pause instructions, what other workers' jobs submit to it is
     * delivered at once rather than when their batch ends (shard_submit; since 0.4). */
    uint32_t   poll_us;
    /** Hot keys (added in 0.2): how many of the heaviest keys each worker tracks, by time spent in
     * their jobs (wall time: a job whose thread was preempted counts the time it waited), over
     * windows of hot_window_ms (shard_worker_hot_keys). 0 (the default): none, and
     * nothing is measured; up to SHARD_MAX_HOT_KEYS. When on, a job costs one more clock read and a
     * scan of this many entries. */
    uint32_t   hot_keys;
    uint32_t   hot_window_ms; /**< the window of hot_keys; 0: 1000 */
    struct shard_balance_config balance; /**< the balancer; zeroed: off (added in 0.2) */
    /** Run on an idle worker's thread in place of its sleep (added in 0.2), so that the worker can
     * wait for the caller's events as well as for jobs: a shard-per-core server runs its network loop
     * here, on the thread that runs the jobs of the keys it reads. The hook waits (poll, epoll) on
     * wake_fd, which becomes readable when the worker has work, beside its own descriptors, for at
     * most timeout_ms (its next timer; -1: none), and returns once wake_fd is readable or the time is
     * up; returning sooner is fine (the worker calls it again while it stays idle; one that returns at
     * once makes the worker poll). It must not read wake_fd. It may do what a job may: submit (to this
     * worker too: such jobs run after it returns, and make wake_fd readable like any other), arm
     * timers, shard_worker_crashed(). A crash or a removal wakes it and lets it return before the
     * worker goes. Each time its queue runs dry, a worker in the ring first calls it once with
     * timeout_ms 0 (a round of the hook's events that waits for nothing: they are work too, since
     * 0.4), then polls its queue as poll_us says, then calls it to wait. Each worker then holds an
     * eventfd: creating a worker fails with -ENOMEM when the process has no descriptor left. NULL:
     * the worker sleeps on a futex. */
    void (*on_worker_idle)(shard_worker *w, int wake_fd, int timeout_ms, void *user);
};

/** The most entries shard_config.cpus may have, and one more than the highest CPU number accepted. */
#define SHARD_MAX_CPUS 1024
/** The most hot keys a worker tracks (shard_config.hot_keys). */
#define SHARD_MAX_HOT_KEYS 64

/** Creates the dispatcher and starts its workers. cfg NULL or zeroed: the defaults.
 * Every worker's thread is named after the worker (its first 15 bytes: what top -H and perf show).
 * Context: any thread that is not a worker. Return: 0; -EINVAL (out NULL, queue_capacity over
 * SHARD_MAX_QUEUE_CAPACITY, workers over SHARD_MAX_WORKERS, ncpus over SHARD_MAX_CPUS, hot_keys over
 * SHARD_MAX_HOT_KEYS, a balance threshold below 1.0 with interval_ms set, cpus NULL
 * with ncpus > 0, a CPU number negative or from SHARD_MAX_CPUS up, or a worker's CPU that this
 * process may not run on); -EDEADLK (from a worker); -ENOMEM; -EAGAIN (no thread could be started).
 * Pair with shard_dispatcher_destroy(). */
SHARD_API int shard_dispatcher_create(shard_dispatcher **out, const struct shard_config *cfg);

/** Stops accepting jobs, runs every job already accepted, joins the workers and frees everything. NULL
 * is fine. Waits for a job still running on a crashed worker.
 * Submits racing destroy: a submit already inside shard when destroy is called, or entering while it
 * runs, returns 0 (its job runs before destroy returns) or -ESHUTDOWN, and never touches freed
 * memory: a submit reads the dispatcher only inside an RCU read-side section or as a registered
 * waiter, and destroy frees it after a grace period that follows both. So do membership calls racing
 * destroy (shard_drain, shard_worker_add, _remove, _crash, _set_weight, shard_key_place and the
 * others that answer -ESHUTDOWN): one that waits for destroy's changes to end then answers -ESHUTDOWN,
 * and destroy frees nothing before it has (since 0.4). A call that starts after destroy has returned
 * uses freed memory, as with any freed object.
 * Context: a thread that is not a worker, once. Called from a worker, from a control-thread hook of
 * this same dispatcher or inside an RCU read-side section it would deadlock: it is ignored there
 * (nothing is freed). A worker is one of any dispatcher: called from a job or a worker hook
 * (on_worker_start, _idle, _stop, on_release) of another dispatcher it is ignored too; from another
 * dispatcher's control-thread hook (on_dropped, a ring hook) it goes ahead (docs/contexts.md). */
SHARD_API void shard_dispatcher_destroy(shard_dispatcher *d);

/** Runs fn(worker, arg) on the worker that owns key. Jobs of one key submitted by one thread run in
 * submission order, one at a time, also across worker add, remove and crash with REROUTE. key is
 * hashed once here; its bytes are not kept. arg is the caller's; shard never touches it.
 * shard_submit waits while the owner's queue is full (never inside an RCU read-side section, so a
 * membership change is never held up by it). It also waits while the key is throttled: a worker that
 * sets jobs aside (waiting for a key's previous owner, or behind a job stuck on a crashed worker)
 * holds at most queue_capacity of them before the keys it then sets jobs aside for are throttled,
 * until it holds none of that key's jobs or fewer than half that in all. And while a membership
 * change is not done (an old owner has not yet run every job of its moved keys, say it is in a long
 * job), a worker holding twice queue_capacity set-aside jobs holds back every further key whose job
 * would be set aside there too (a key that moved to it from an owner not yet done: fresh keys
 * included), until it holds fewer (a waiter looks again each time a worker falls below
 * queue_capacity), the change is done, another is made, or destroy begins (since 0.3; shard_stats.held_full_waits counts them; docs/sizing.md: the memory
 * this bounds). Only keys with jobs set aside, or about to be, are held back: a stuck key holds up
 * its own submitters, a slow handoff those of the keys it moves, not those of keys that run (a
 * multi-key submit is held back further: multi.h). Nor
 * does it wait for either inside the caller's own RCU read-side section, nor from a hook run holding
 * the dispatcher's control (on_dropped, the ring's hooks): those waits could wait for themselves.
 * From a worker thread it never waits: a full queue
 * then takes the job beyond its capacity (one malloc), and a throttled key or a full worker takes it
 * anyway, so jobs that submit to each other cannot deadlock; while threads wait for room in the owner's queue, a worker's submit leaves
 * the free slots to them and goes beyond the capacity too (so a worker's own jobs and timers never
 * shut them out). shard_try_submit returns -EAGAIN instead of waiting, or going beyond. Waiting is a
 * cancellation point: a thread cancelled there leaves cleanly (its job was not accepted).
 * A running job's shard_submit (and shard_submit_many) to its own worker's dispatcher is gathered and
 * delivered when the job returns, or at the end of the worker's batch of up to 32 jobs that run back
 * to back, with the other submits of that batch: one queue claim and one wake-up check a destination
 * instead of one a job (since 0.3); sooner when a key's owner is parked or polling for work (it would be idle
 * meanwhile; polling since 0.4). Order is kept (a key's jobs from one thread in submission order;
 * the thread's other submits go after what it gathered), and so is what happens before: the job
 * runs after what its submitter did before shard_submit. A job that waits for a job it submitted
 * (which it should not: it holds its worker meanwhile) calls shard_flush first. A long job delays the
 * delivery of what the jobs before it in the batch submitted until it returns; when its worker is
 * crashed, those are delivered by the crash, and the job delivers what it submitted itself when it
 * returns (a delivery sooner, for a parked owner, leaves what goes to the job's own worker gathered,
 * since 0.4). What the job delivers itself before it returns (shard_flush; its try-submits, timers
 * and multi-key submits deliver what it gathered first) goes into the queues like any submit: a DROP
 * crash of its own worker drops what went into that worker's queue.
 * Context: any thread, including a running job. Return: 0; -EINVAL (d or fn NULL, or key NULL with
 * len > 0); -ESHUTDOWN (destroy has begun); -EAGAIN (try_submit: queue full, key throttled, or
 * its worker full of set-aside jobs during a change);
 * -ENOMEM (a worker's submit beyond capacity found no memory). A failed submit never runs the job. */
SHARD_API int shard_submit(shard_dispatcher *d, const void *key, size_t len, shard_job_fn fn, void *arg);
/** As shard_submit(), but never waits: a full queue, a throttled key or a worker full of set-aside
 * jobs during a change (for a key whose job would be set aside there) returns -EAGAIN (from a worker
 * too).
 * Context: any thread, including a running job. Return: as shard_submit(). */
SHARD_API int shard_try_submit(shard_dispatcher *d, const void *key, size_t len, shard_job_fn fn, void *arg);

/** As shard_submit(), for a key known by its hash (shard_dispatcher_key_hash() of its bytes, or the
 * same function of them computed by the caller: XXH3_64bits_withSeed with the ring's seed, or the
 * ring's hash hook), for a caller that hashes its keys anyway (its own table, a grouping by worker):
 * shard keeps and routes by nothing but the hash, so a job submitted by hash and one by the key's
 * bytes are jobs of one key, in one order. A hash no key's bytes give is a key of its own. Context:
 * any thread, including a running job. Return: as shard_submit(); -EINVAL only for d or fn NULL
 * (added in 0.4). */
SHARD_API int shard_submit_hash(shard_dispatcher *d, uint64_t hash, shard_job_fn fn, void *arg);
/** As shard_try_submit(), for a key known by its hash (shard_submit_hash()). Return: as
 * shard_submit_hash(), and -EAGAIN (added in 0.4). */
SHARD_API int shard_try_submit_hash(shard_dispatcher *d, uint64_t hash, shard_job_fn fn, void *arg);

/** Delivers now what the running job submitted so far (shard_submit gathers a job's submits until its
 * batch ends): for a job that must see a job it submitted start before it returns (added in 0.3).
 * Context: a job running on w; elsewhere there is nothing to deliver. Return: 0; -EINVAL (w NULL, or
 * not the calling thread's worker); -ENOMEM (a queue was full and no memory could be had to go beyond
 * it: what is left is delivered when the job returns, or by a later call). */
SHARD_API int shard_flush(shard_worker *w);

/** One job of a batch submit (shard_submit_many): what shard_submit() takes, as a struct (added in 0.2). */
struct shard_job {
    const void  *key; /**< the key's bytes; NULL only with len 0 */
    size_t       len; /**< its length */
    shard_job_fn fn;  /**< the job */
    void        *arg; /**< given to fn */
};

/** Submits jobs[0], jobs[1], ... in that order, each to its key's owner, as that many shard_submit()
 * calls would, for less: one read-side section, and for each worker the batch reaches, one claim of
 * queue slots and one wake-up check, per up to 64 jobs. Each key's jobs keep their order, also against
 * this thread's other submits. Waits for room, and for a throttled key or a worker full of set-aside
 * jobs, as shard_submit() does (a
 * worker thread never waits, and leaves a queue's free slots to threads waiting for room there);
 * waiting is a cancellation point, and a thread cancelled there has had the jobs before the waiting
 * one accepted. The call is one RCU read-side section, left only while it waits: a membership change
 * waits for a long batch as for one submit. Every job is checked before any is submitted.
 * Context: any thread, including a running job.
 * Return: n, or fewer once destroy began or memory ran out midway: exactly jobs[0..k) were accepted and
 * k is returned (0 < k < n), the rest not; or, with none accepted, -EINVAL (d NULL, jobs NULL with n >
 * 0, n > INT_MAX, or a job with fn NULL or key NULL with len > 0), -ESHUTDOWN, -ENOMEM (as
 * shard_submit). n == 0 returns 0. A job not accepted never runs (added in 0.2). */
SHARD_API int shard_submit_many(shard_dispatcher *d, const struct shard_job *jobs, size_t n);
/** As shard_submit_many(), but never waits: accepts the longest prefix jobs[0..k) whose queues have
 * room and whose keys are not throttled nor held back by a worker full of set-aside jobs (for a
 * worker: also whose queues no thread waits for room in),
 * and returns k (0 <= k <= n; the rest were not accepted). Context: any thread, including a running
 * job. Return: k; -EINVAL or -ESHUTDOWN (none accepted) as shard_submit_many() (added in 0.2). */
SHARD_API int shard_try_submit_many(shard_dispatcher *d, const struct shard_job *jobs, size_t n);

/** One job of a batch submit by hash (shard_submit_many_hash) (added in 0.4). */
struct shard_hashed_job {
    uint64_t     hash; /**< the key's hash, as shard_submit_hash() takes it */
    shard_job_fn fn;   /**< the job */
    void        *arg;  /**< given to fn */
};

/** As shard_submit_many(), for keys known by their hashes (shard_submit_hash()). Return: as
 * shard_submit_many(); -EINVAL (none accepted) for d NULL, jobs NULL with n > 0, n > INT_MAX or a
 * job with fn NULL (added in 0.4). */
SHARD_API int shard_submit_many_hash(shard_dispatcher *d, const struct shard_hashed_job *jobs, size_t n);
/** As shard_try_submit_many(), for keys known by their hashes (shard_submit_hash()). Return: as
 * shard_try_submit_many(), with shard_submit_many_hash()'s -EINVAL (added in 0.4). */
SHARD_API int shard_try_submit_many_hash(shard_dispatcher *d, const struct shard_hashed_job *jobs, size_t n);

/** Adds a worker named name with weight ring weight (vnodes * weight ring points); it takes over
 * about weight / total weight of the keys, from every other worker. Costs O(workers + points of the
 * ring), not O(workers^2). Context: not a worker; blocks for one RCU grace period. Return: 0; -EINVAL
 * (d or name NULL, empty name, weight 0, too many points, SHARD_MAX_WORKERS workers already, or
 * the CPU its pinning gives it is one this process may not run on); -ENAMETOOLONG; -EEXIST (a worker
 * of that name is in the ring); -EDEADLK (from a worker);
 * -ESHUTDOWN; -ENOMEM; -EAGAIN (no thread). On error nothing changed. */
SHARD_API int shard_worker_add(shard_dispatcher *d, const char *name, uint32_t weight);

/** Gives the worker named name a new ring weight (added in 0.2): only its own points change
 * (shard_ring_set_weight), so only keys that enter or leave it move (about as many as its share of the
 * total weight changes by), with the same ordered handoff as add and remove: release hook, jobs in
 * order, never on two workers. The same weight changes nothing and spends no epoch. Context: not a worker; blocks for
 * one RCU grace period. Return: 0; -EINVAL (d or name NULL, empty name, weight 0, too many points);
 * -ENOENT (no such worker in the ring); -EDEADLK; -ESHUTDOWN; -ENOMEM. On error nothing changed. */
SHARD_API int shard_worker_set_weight(shard_dispatcher *d, const char *name, uint32_t weight);

/** Places key on the worker named worker (added in 0.2), whatever the ring says, until
 * shard_key_unplace() or that worker leaves the ring (its placements go with it): for isolating or
 * spreading hot keys. Only that key moves, with the
 * ordered handoff of add and remove (its jobs in order, never on two workers; the release hook is
 * told, shard_handoff_moves() answers for it; its timers follow); the keys that shared its old
 * worker stay. Placing it where it is placed already changes nothing. Placements are the ring's pins
 * (shard_ring_pin; shard_dispatcher_ring() shows them): one costs the same with 10 keys placed as with
 * 65,536 (a copy of the ring's points, one path of its pins). Context: not a worker; blocks for one RCU
 * grace period. Return: 0; -EINVAL (d or worker NULL, empty name, key NULL with len > 0); -ENOENT (no
 * such worker in the ring); -E2BIG (SHARD_RING_MAX_PINS keys placed); -EDEADLK; -ESHUTDOWN; -ENOMEM. */
SHARD_API int shard_key_place(shard_dispatcher *d, const void *key, size_t len, const char *worker);
/** As shard_key_place(), for a key known by its hash (shard_dispatcher_key_hash(), shard_hot_key).
 * Context: as shard_key_place(). Return: as shard_key_place() (added in 0.2). */
SHARD_API int shard_key_place_hash(shard_dispatcher *d, uint64_t hash, const char *worker);
/** Ends a placement: the ring decides the key's owner again, with the same handoff. Context: as
 * shard_key_place(). Return: 0; -EINVAL; -ENOENT (the key is not placed); -EDEADLK; -ESHUTDOWN;
 * -ENOMEM (added in 0.2). */
SHARD_API int shard_key_unplace(shard_dispatcher *d, const void *key, size_t len);
/** As shard_key_unplace(), for a key known by its hash. Context: as shard_key_place(). Return: as
 * shard_key_unplace() (added in 0.2). */
SHARD_API int shard_key_unplace_hash(shard_dispatcher *d, uint64_t hash);

/** The worker that owns key now, by its number (shard_worker_id()): where a job of it submitted now
 * from outside a job goes, a pin followed (a running job's submits are routed when its batch ends). The answer of the ring in force at the call, which a change may make stale
 * at once: for grouping keys by worker (a multi-key job of keys that share one runs as a single job,
 * multi.h), never a promise of where the key's next job runs. Context: any thread (added in 0.4).
 * Return: 0 with *id set; -EINVAL (d or id NULL, or key NULL with len > 0); -ESHUTDOWN (destroy
 * began). */
SHARD_API int shard_key_owner(shard_dispatcher *d, const void *key, size_t len, uint32_t *id);

/** As shard_key_owner(), for a key known by its hash (shard_dispatcher_key_hash()). Context: any
 * thread. Return: 0 with *id set; -EINVAL (d or id NULL); -ESHUTDOWN (added in 0.4). */
SHARD_API int shard_key_owner_hash(shard_dispatcher *d, uint64_t hash, uint32_t *id);
/** As shard_key_owner_hash() for each of hashes[0..n), into ids[0..n), all from one ring (the one in
 * force at the call: a change cannot come between two of the answers), for less than n calls: one
 * read-side section. Context: any thread. Return: 0 with ids set; -EINVAL (d NULL, or hashes or ids
 * NULL with n > 0); -ESHUTDOWN (added in 0.4). */
SHARD_API int shard_key_owners_hash(shard_dispatcher *d, const uint64_t *hashes, size_t n, uint32_t *ids);

/** Graceful removal: the worker leaves the ring, runs every job it was given, runs its release hook,
 * and exits; its keys move to their next owners (and wait for it, in order). Returns once the new
 * ring is in force, without waiting for the worker's queue to empty (shard_drain waits for that).
 * Context: not a worker. Return: 0; -EINVAL; -ENOENT (no such worker in the ring); -EBUSY (the last
 * worker); -EDEADLK; -ESHUTDOWN; -ENOMEM. */
SHARD_API int shard_worker_remove(shard_dispatcher *d, const char *name);

/** Simulates a crash: the worker takes no further job. Its running job, if any, is not waited for (a
 * crashed worker may be stuck), but that job's key stays fenced until the job returns, so it never
 * runs on two workers at once; every other key of the worker moves at once, and a stuck job holds
 * only its own key, also across later adds and removes. A crash while the worker runs its release
 * hook lets the hook finish: the keys that worker held wait for the hook to return.
 * REROUTE: the jobs left in its queue move, in order, to where their keys' state goes next, ahead
 * of anything set aside there: nothing lost, nothing run twice. That is the key's owner now, unless
 * the key moved away from the worker and back while the worker lagged: a job of an epoch before it
 * moved away then goes to the worker that holds the key's next jobs, which hands the state on at its
 * fence, so that the key's state is never split between two workers. DROP: they go to on_dropped,
 * each exactly once.
 * Context: not a worker. Return: as shard_worker_remove, and -EINVAL for an unknown policy. */
SHARD_API int shard_worker_crash(shard_dispatcher *d, const char *name, enum shard_crash_policy policy);

/** Returns once every job submitted before the call has ended (run, or dropped), including those of
 * removed workers still emptying their queues. A job still running on a crashed worker is not waited
 * for. Context: not a worker. Return: 0; -EINVAL; -EDEADLK; -ESHUTDOWN; -ENOMEM. */
SHARD_API int shard_drain(shard_dispatcher *d);

/** The worker's name (its ring member name). Valid while the worker lives: always from its own jobs
 * and hooks. A worker that left the ring is freed by a later membership call (add, remove, crash,
 * drain) once it is finished with: removed, when it has exited; crashed, when its last job has
 * returned and every job it rerouted has run. So a process that scales in and out, or simulates
 * crashes, does not grow. Others are freed by destroy. Copy the name to keep it longer. */
SHARD_API const char *shard_worker_name(const shard_worker *w);

/** The pointer last stored by shard_worker_set_user(); NULL until set. Context: best from the worker's
 * own thread (a job or a hook); shard never touches it. */
SHARD_API void *shard_worker_user(const shard_worker *w);
/** Stores a pointer for the user's per-worker state (shard never touches it). Context: best from the
 * worker's own thread (a job or a hook): it is a plain store, not synchronised. */
SHARD_API void  shard_worker_set_user(shard_worker *w, void *user);

/** The hash of the key whose job is running on w (a timer's job included): what the job was submitted
 * with, hashed by the dispatcher's ring (shard_dispatcher_key_hash() gives it for a key's bytes), so a
 * job can name its key without carrying it in arg. Context: a job on w, from its own thread.
 * Return: the hash; 0 for w NULL, or when called on another thread or outside a job (a hook); with a
 * key-hash hook (shard_ring_config) 0 may also be a key's hash (added in 0.2). */
SHARD_API uint64_t shard_job_key_hash(const shard_worker *w);

/** A number that names w among its dispatcher's workers for the dispatcher's life: create's workers
 * are 0, 1, ... in name order (w0, w1, ...), each worker added later takes the next (an add that
 * failed may have used one up), and no number is given twice (so it only grows under churn: map it,
 * don't size an array by it). Context: any thread
 * while w lives. Return: the number; UINT32_MAX for w NULL (added in 0.2). */
SHARD_API uint32_t shard_worker_id(const shard_worker *w);

/** Whether w was crashed (shard_worker_crash): for on_worker_stop, which runs on a crashed worker too,
 * when its last job returns. Context: any thread while w lives (added in 0.2). */
SHARD_API bool shard_worker_crashed(const shard_worker *w);

/** The dispatcher that runs w. Context: any thread while w lives. */
SHARD_API shard_dispatcher *shard_worker_dispatcher(const shard_worker *w);

/** A copy of the ring now in use, for inspection; the caller destroys it.
 * Context: any thread. Return: 0; -EINVAL; -ENOMEM; -ESHUTDOWN. */
SHARD_API int shard_dispatcher_ring(shard_dispatcher *d, shard_ring **out);

/** Where a worker is in its life (shard_worker_stats.state). */
enum shard_worker_state {
    SHARD_WORKER_RUNNING,  /**< in the ring */
    SHARD_WORKER_RETIRING, /**< removed, still running the jobs it was given */
    SHARD_WORKER_CRASHED,  /**< crashed; `running` says whether its last job has still not returned */
    SHARD_WORKER_EXITED,   /**< removed and done */
};

/** One worker's counters, from shard_dispatcher_worker_stats(). */
struct shard_worker_stats {
    char     name[SHARD_NAME_MAX + 1]; /**< its ring member name */
    enum shard_worker_state state;     /**< in the ring, retiring, crashed or exited */
    bool     running;     /**< a job is running now */
    uint64_t queued;      /**< jobs waiting in its queue now; while the worker runs it may lag up to
                           * 32 jobs behind (the worker publishes its position in batches); 0 once
                           * a crash has handed its queue over */
    uint64_t executed;    /**< jobs it has run */
    uint64_t set_aside;   /**< jobs it set aside to wait for a key's previous owner */
    uint64_t handed_over; /**< jobs it received from a crashed worker's queue */
    uint64_t parked;      /**< times it went to sleep for lack of work */
    uint64_t woken;       /**< times a submitter or the control thread woke it (with an idle hook,
                           * also during the round before it waits: so it may exceed parked) */
    uint64_t timers;      /**< keyed timers waiting in its wheel: those of the keys it holds,
                           * and cancelled ones until their deadline (shard/timer.h; added in 0.2) */
    /* Load (added in 0.2). */
    uint64_t busy_ns;     /**< time spent running jobs (timers' included), in ns, since it started */
    double   queued_avg;  /**< queue length smoothed over about a second (an exponential average,
                           * sampled when the worker takes work, at most once a millisecond, and
                           * brought up to now when read) */
    uint64_t head_wait_ns; /**< how long the job at the head of its queue has waited at least: since
                           * the worker last took work while it was there; 0 for an empty queue */
    double   share;       /**< share of the hash space, so of the keys, it owns in the ring in force
                           * (shard_ring_share); 0 out of the ring */
    uint64_t held;        /**< jobs it holds set aside now (shard_submit: counted against its
                           * allowance; added in 0.2) */
};

/** Dispatcher-wide counters, from shard_dispatcher_stats(). */
struct shard_stats {
    uint64_t epoch;            /**< number of the ring in force; 1 at create, +1 a membership change */
    uint64_t ring_checksum;    /**< shard_ring_checksum of that ring */
    uint64_t changes;          /**< membership changes made */
    double   last_moved_share; /**< share of the hash space the last change moved */
    uint64_t dropped;          /**< jobs dropped by DROP crashes, keyed timers included */
    size_t   workers;          /**< workers in the ring */
    uint64_t timers;           /**< keyed timers armed and not yet ended: waiting, or whose job is
                                * queued or running; a timer cancelled from a thread other than its
                                * worker counts until its deadline (added in 0.2) */
    size_t   placements;       /**< keys placed (shard_key_place), pins of the ring in force (0.2) */
    /* The balancer's (shard_config.balance; 0.2): */
    uint64_t balance_rounds;   /**< intervals it measured */
    uint64_t balance_moves;    /**< keys it placed */
    uint64_t balance_weights;  /**< isolations it began or ended (each a change of weights) */
    double   balance_ratio;    /**< max / mean load of the ring's workers over its last interval */
    uint64_t unsplittable_hash; /**< a key alone heavier than a worker's fair share in its last
                                * interval and in each of its last max(rounds, 2) hot-key windows
                                * (its hash), which only a faster worker could help; 0: none */
    double   unsplittable_share; /**< that key's share of all the load */
    uint64_t throttled_keys;   /**< keys whose jobs set aside on some worker fill its allowance, so
                                * that their submitters wait (shard_submit): a key throttled on two
                                * workers counts twice (added in 0.2) */
    uint64_t held_full_waits;  /**< times a submit was held back (shard_submit waited, try_submit
                                * refused) because, while a change was not done, the worker it was
                                * routed to held twice its allowance of set-aside jobs and its job
                                * would have been set aside too (added in 0.3) */
    uint64_t multi_open;       /**< multi-key jobs (multi.h) accepted that have not yet run or been
                                * dropped (added in 0.3) */
    uint64_t multi_waiting;    /**< of those, the ones holding some of their keys while another of
                                * their parts has not come up: a number that stays up names a multi-key
                                * job waiting behind a slow or stuck key (added in 0.3). Counted as
                                * parts come up, without a lock: one read while a job's first and last
                                * parts come up at once may be off by one */
};

/** One of a worker's heaviest keys over a window (shard_worker_hot_keys). The key is named by its hash
 * (shard_dispatcher_key_hash() gives a key's): shard keeps no key bytes. Counts are space-saving
 * estimates: a key's true time is between busy_ns - error_ns and busy_ns, and any key whose time
 * was over 1 / hot_keys of the window's total is listed. */
struct shard_hot_key {
    uint64_t hash;     /**< the key's hash */
    uint64_t busy_ns;  /**< time its jobs ran in the window (an overestimate by at most error_ns) */
    uint64_t error_ns; /**< how much of busy_ns may belong to keys it displaced */
    uint64_t jobs;     /**< jobs counted for it (overestimated alike) */
};

/** The heaviest keys of the worker named name over its last whole window (shard_config.hot_keys),
 * heaviest first, up to n into out (out may be NULL with n 0); *window_busy_ns (may be NULL) receives
 * the worker's total busy time in that window. Context: any thread. Return: how many there are (at
 * most hot_keys; 0 before the first window ends, or with hot_keys 0); -EINVAL (d or name NULL, out
 * NULL with n > 0); -ENOENT (no such worker, or it was freed) (added in 0.2). */
SHARD_API long shard_worker_hot_keys(shard_dispatcher *d, const char *name, struct shard_hot_key *out, size_t n,
                                     uint64_t *window_busy_ns);

/** The hash d gives key (its ring's hash: the config's hook, or XXH3 with its seed), to match keys
 * against shard_hot_key.hash. Context: any thread. Return: the hash; 0 for d NULL or key NULL with
 * len > 0 (added in 0.2). */
SHARD_API uint64_t shard_dispatcher_key_hash(shard_dispatcher *d, const void *key, size_t len);

/** Dispatcher-wide stats. Context: any thread. Return: 0; -EINVAL. */
SHARD_API int shard_dispatcher_stats(shard_dispatcher *d, struct shard_stats *out);

/** Per-worker stats of every worker not yet exited (ring members first, in name order; then removed
 * and crashed ones, a crashed one until it is freed: see shard_worker_name), up to n of them into out
 * (out may be NULL with n 0).
 * Context: any thread. Return: how many there are (may be more than n), or -EINVAL. */
SHARD_API long shard_dispatcher_worker_stats(shard_dispatcher *d, struct shard_worker_stats *out, size_t n);

#ifdef __cplusplus
}
#endif

#endif
