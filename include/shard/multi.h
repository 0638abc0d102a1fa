/** @file
 * Jobs of several keys: one atomic step over keys that may live on different workers (added in 0.3).
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A multi-key job runs once, on one worker, with every one of its keys to itself: no other job of any
 * of them runs anywhere while it runs, and for each key it runs in that key's order. A trade between
 * two players whose sessions live on different workers, an atomic MSET, a transfer between accounts.
 *
 * The job runs on one worker and may touch every key's state that any thread can reach (objects of
 * its own, a shared table with its own locking); for state each worker keeps for the keys it owns
 * (a worker-local table that the worker's other jobs change meanwhile), shard_submit_multi_each()
 * runs one step a key on the key's own worker instead, all of them as one atomic step.
 *
 * How it goes: the job enters the order of each of its keys (one "part" a key, queued where a job of
 * that key would be). When a key's part comes up, the key is held: its later jobs wait, set aside as
 * jobs behind a stuck key are (docs/handoff.md), and the worker goes on with its other keys. When the
 * last part comes up, on whatever worker, the job runs there, and then every key is let go. Only its
 * keys ever wait: a worker never stops whole for another's multi-key job. When every key lives on
 * one worker (always, with one worker), the job is queued there as a single job and, when it comes up
 * with none of its keys waiting for anything, runs at once: it costs about one job, not one a key.
 *
 * Why two of them never wait for each other: their parts enter the queues under one lock, so any two
 * multi-key jobs meet every key they share in the same order; each waits only for jobs ahead of it in
 * its keys' orders, and so, through them, only for older multi-key jobs. */
#ifndef SHARD_MULTI_H
#define SHARD_MULTI_H

#include "shard/dispatcher.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The most keys one multi-key job may name (repeats included). */
#define SHARD_MULTI_MAX_KEYS 1024

/** A key, as shard_submit() takes it. */
struct shard_key {
    const void *key; /**< the key's bytes; NULL only with len 0 */
    size_t      len; /**< its length */
};

/** Submits fn(w, arg) as one job of the keys keys[0..n). It runs once, on the worker of one of them
 * (shard_job_key_hash() then gives that one's hash), when, for each key, every job of it submitted
 * before this call by this thread has run; no job of any of the keys that this thread submits after
 * the call starts before it has returned; and while it runs no other job of any of the keys runs
 * anywhere, whoever submitted it. Across threads, as for single-key jobs, what is promised is that
 * order within each thread: two multi-key jobs of other threads that share keys run one after the
 * other, in some order, never overlapping. Keys may repeat (a key counts once; so do two keys of
 * one hash); with one distinct key this is shard_submit().
 *
 * Its keys wait for it from when their part comes up until it has run: a job of one of them
 * submitted later waits, also on another worker, and so does a later multi-key job of one of them.
 * Jobs of other keys never wait for it. shard_dispatcher_stats() counts multi-key jobs under way
 * and those holding keys while a part waits (`multi_open`, `multi_waiting`).
 *
 * Membership changes, placements, the balancer: each part goes where its key goes, as any job.
 * Crashes: REROUTE keeps it whole and in order (a part queued on the crashed worker is rerouted as
 * any job); a crash during the job holds all its keys until it returns, as a stuck job holds its own.
 * DROP: if the crashed worker held one of its parts, the whole job is dropped: on_dropped(fn, arg)
 * is called once, with the fn and arg given here, keys it held are let go as soon as on_dropped has
 * returned (their later jobs run after it, as a dropped job's key's do), and its parts elsewhere do
 * nothing when they come up. A multi-key job one of whose keys is stuck behind a crashed
 * worker's job waits for it as that key's jobs do, and holds its other keys meanwhile; shard_drain()
 * does not wait for it, nor for what waits behind it, as for a stuck key.
 *
 * There is no multi-key timer: arm one on one key (timer.h) whose job submits the multi-key job.
 *
 * Waits for room (and for throttled keys, and workers full of set-aside jobs) before it queues
 * anything, as shard_submit() does, and, unlike it, whether or not a membership change is under way:
 * while a worker that owns one of its keys holds twice queue_capacity set-aside jobs and that key may
 * wait behind a stuck job or another multi-key job (a chain of multi-key jobs behind a stuck key, each
 * over the last one's key and a new one, fills a worker so: docs/sizing.md), and, whatever its keys,
 * while such a worker holds four times queue_capacity (a quick enough submitter reaches a key before
 * the claim it would wait behind is made), until that worker holds fewer than queue_capacity: with a
 * stuck job behind them, until it returns. Not inside the caller's RCU read-side section nor holding
 * the dispatcher's control (as shard_submit()); a cancellation point, as shard_submit()'s waits.
 * Then queues every part without waiting: a queue may hold its
 * capacity plus the parts of the multi-key submits racing for its last slots. A worker's thread never
 * waits. A running job's multi-key submit is not gathered (dispatcher.h): the job's earlier submits
 * are delivered first, then its parts go in at once. Context: any thread, including a running job,
 * on_dropped and the ring's hooks (which do not wait).
 * Return: 0; -EINVAL (d, keys or fn NULL, n 0, or a key NULL with len > 0); -E2BIG (n over
 * SHARD_MULTI_MAX_KEYS); -ENOMEM; -ESHUTDOWN (destroy began). On error nothing was queued. */
SHARD_API int shard_submit_multi(shard_dispatcher *d, const struct shard_key *keys, size_t n, shard_job_fn fn,
                                 void *arg);

/** As shard_submit_multi(), but never waits: -EAGAIN (nothing queued) when one of its keys' queues
 * is full, the key is throttled, or its worker is full of set-aside jobs, where shard_submit_multi()
 * would wait. Context: any thread, including a running job. Return: as shard_submit_multi(), and
 * -EAGAIN. */
SHARD_API int shard_try_submit_multi(shard_dispatcher *d, const struct shard_key *keys, size_t n, shard_job_fn fn,
                                     void *arg);

/** One step of a multi-key job with steps (shard_submit_multi_each): the work on its key keys[key]
 * (the index of the key's first occurrence in the keys the job was given). */
typedef void (*shard_multi_step_fn)(shard_worker *w, void *arg, size_t key);

/** As shard_submit_multi(), but for state that lives on each key's own worker (a worker-local table,
 * shard_worker_user()): once the job holds every one of its keys, step(w, arg, i) runs once for each
 * distinct key (keys of one hash are one key here too: one step, i the first's index), on the worker
 * where that key's jobs run (w; after a membership change, once the key's state has been handed over
 * there, as for any job of it), one after another in the order of the keys' first occurrences in keys
 * (each step starts after the one before returned, and sees what it did: a step may depend on an
 * earlier one, a transfer's credit on its debit); then done(w, arg) (may be NULL) runs on the worker of
 * the last step. Every key stays held from before the first step until done has returned: no other job
 * of any of them runs in between, so the steps together are one atomic step, in each key's order, with
 * the promises and errors of shard_submit_multi(). A crash does not drop a job whose steps have begun
 * (DROP drops it only before then, as shard_submit_multi()'s): a step queued on a crashed worker is
 * rerouted, and a step stuck on one holds its job's keys until it returns; dropped before then,
 * on_dropped gets done (NULL if none was given) and arg. While destroy stops the workers, a step whose
 * worker has stopped runs on the worker of the last part. One distinct key (hash) makes one step.
 * Context: as shard_submit_multi(). Return: as shard_submit_multi(); -EINVAL also for step NULL. */
SHARD_API int shard_submit_multi_each(shard_dispatcher *d, const struct shard_key *keys, size_t n,
                                      shard_multi_step_fn step, shard_job_fn done, void *arg);

/** As shard_submit_multi_each(), but never waits, as shard_try_submit_multi(). Return: as
 * shard_submit_multi_each(), and -EAGAIN. */
SHARD_API int shard_try_submit_multi_each(shard_dispatcher *d, const struct shard_key *keys, size_t n,
                                          shard_multi_step_fn step, shard_job_fn done, void *arg);

/** As shard_submit_multi(), for keys known by their hashes (shard_submit_hash(): a hash stands for its
 * key, and for any key of that hash), hashes[0..n): for a caller that has hashed the keys anyway
 * (kv_server groups an MGET's keys by worker with them). A job of these keys submitted by hash and
 * one submitted by their bytes are in one order. Context: as shard_submit_multi(). Return: as
 * shard_submit_multi(); -EINVAL for d, hashes or fn NULL, or n 0 (added in 0.4). */
SHARD_API int shard_submit_multi_hash(shard_dispatcher *d, const uint64_t *hashes, size_t n, shard_job_fn fn,
                                      void *arg);
/** As shard_try_submit_multi(), for keys known by their hashes. Return: as shard_submit_multi_hash(),
 * and -EAGAIN (added in 0.4). */
SHARD_API int shard_try_submit_multi_hash(shard_dispatcher *d, const uint64_t *hashes, size_t n, shard_job_fn fn,
                                          void *arg);
/** As shard_submit_multi_each(), for keys known by their hashes: step's index is that of the hash's
 * first occurrence in hashes. Return: as shard_submit_multi_hash(); -EINVAL also for step NULL
 * (added in 0.4). */
SHARD_API int shard_submit_multi_each_hash(shard_dispatcher *d, const uint64_t *hashes, size_t n,
                                           shard_multi_step_fn step, shard_job_fn done, void *arg);
/** As shard_try_submit_multi_each(), for keys known by their hashes. Return: as
 * shard_submit_multi_each_hash(), and -EAGAIN (added in 0.4). */
SHARD_API int shard_try_submit_multi_each_hash(shard_dispatcher *d, const uint64_t *hashes, size_t n,
                                               shard_multi_step_fn step, shard_job_fn done, void *arg);

#ifdef __cplusplus
}
#endif

#endif
