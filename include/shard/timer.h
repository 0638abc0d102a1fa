/* SPDX-License-Identifier: LGPL-2.1-or-later */
/** @file shard/timer.h
 * Keyed timers (added in 0.2): a job that runs at or after a deadline, as a job of its key.
 *
 * A timer's job runs on the key's owner, one at a time and in order with the key's other jobs, never
 * beside one of them: at its deadline it is submitted as a job of the key, so it waits behind the
 * jobs of the key submitted before then, and follows every handoff as they do. A timer waits in the
 * timing wheel of the worker that holds its key: armed while no membership change is in progress, it
 * goes straight there; during one, a job of the key takes it there, through the key's order. A key's
 * timers run in deadline order (the wheel hands them out so), except that a timer runs after those of
 * its key already submitted when it entered the wheel, whatever its deadline: one armed after another
 * fell due, or one armed during a change whose arm job waits in a long queue while a later one armed
 * after the change goes straight in. (When memory runs out, a due timer is tried again a tick later.)
 *
 * Pending timers live with their key: each worker's wheel holds the timers of the keys it owns, and
 * when a key moves (add, remove, a new weight) its worker hands its timers to the new owner with the
 * key's state, at its release; a REROUTE crash moves the crashed worker's timers to their keys'
 * owners; a DROP crash gives each of them to shard_config.on_dropped, once (with the fn and arg of
 * the timer), before the jobs of the crashed worker's queue. A periodic timer whose run is the job
 * still running on the crashed worker is not pending: when that run returns, it goes on at its key's
 * owner, under either policy. A timer never runs twice, is never lost, and never runs after
 * shard_timer_cancel() returned 0 for it.
 *
 * Lateness: a deadline is rounded up to the wheel's tick (2^16 ns, 65.5 us); a worker that is idle
 * sleeps until its next deadline (no polling), and one that is busy fires due timers between jobs, so
 * a timer is late by its key's queue and by the job running when it fell due.
 *
 * Memory: 64 bytes a pending timer, in chunks of 16,384 that are kept until destroy; at most 2^26
 * (64M) timers pending at once. A timer cancelled from a thread other than the worker that holds it
 * keeps its record until its deadline.
 *
 * shard_dispatcher_destroy() discards pending timers without running them (and without on_dropped);
 * timers whose job was already submitted run with the other accepted jobs. */
#ifndef SHARD_TIMER_H
#define SHARD_TIMER_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "dispatcher.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A timer's id: names one timer for its whole life, and no other timer after it (0 never does). */
typedef uint64_t shard_timer;

/** n milliseconds in ns, for delays and periods. */
#define SHARD_MS(n) ((uint64_t)(n) * UINT64_C(1000000))
/** n seconds in ns. */
#define SHARD_SECONDS(n) ((uint64_t)(n) * UINT64_C(1000000000))

/** The longest delay and period accepted, in ns: about 73 years. */
#define SHARD_TIMER_MAX_NS (UINT64_C(1) << 61)

/** Runs fn(worker, arg) once, as a job of key, at or after delay_ns from now (CLOCK_MONOTONIC): on the
 * key's owner at that time, in order with the key's other jobs. key is hashed here, its bytes not
 * kept. *timer (timer may be NULL) receives the id for shard_timer_cancel(), before the job can run.
 * Arming during a membership change, or for a throttled key (shard_submit: a key with many jobs set
 * aside), submits a job of the key: it then waits for room in a full queue, or for the key, as
 * shard_submit() does (never on a worker thread), but is not a cancellation point. From a job, the
 * jobs it submitted before (gathered until it returns: shard_submit) are delivered first, so they run
 * before the timer's job, as jobs of the key submitted before it.
 * Context: any thread, including a running job. Return: 0; -EINVAL (d or fn NULL, key NULL with
 * len > 0, delay_ns over SHARD_TIMER_MAX_NS); -ESHUTDOWN (destroy has begun); -ENOMEM (no memory, or
 * 2^26 timers pending). A failed call arms nothing. */
SHARD_API int shard_submit_after(shard_dispatcher *d, const void *key, size_t len, uint64_t delay_ns,
                                 shard_job_fn fn, void *arg, shard_timer *timer);

/** As shard_submit_after(), but runs fn every period_ns, the first time period_ns from now, until
 * cancelled. Runs keep to the grid of the first deadline: a run that falls due while the previous
 * one is still running or late is skipped, never run twice (the next deadline is the first point of
 * the grid after the run ends). Return: as shard_submit_after(), and -EINVAL for period_ns 0. */
SHARD_API int shard_submit_every(shard_dispatcher *d, const void *key, size_t len, uint64_t period_ns,
                                 shard_job_fn fn, void *arg, shard_timer *timer);

/** Cancels a timer. Context: any thread, including the timer's own job.
 * Return:
 * - 0: it was pending, and its job will not run (again): arg is the caller's once more;
 * - -EBUSY: its job is running now (from another thread, or this is its own job); this run is its
 *   last (a periodic timer is not re-armed);
 * - -ENOENT: it is not pending: it has run (once), was cancelled or dropped by a DROP crash, or the
 *   id was never issued by d;
 * - -EINVAL: d NULL or timer 0; -ESHUTDOWN: destroy has begun (pending timers are discarded). */
SHARD_API int shard_timer_cancel(shard_dispatcher *d, shard_timer timer);

/** Moves a pending timer's deadline to delay_ns from now, keeping its id (libuv's uv_timer_again): an
 * idle timeout pushed back on every packet costs no cancel, no arm and no new id. A periodic timer's
 * grid starts again from the new deadline. In O(1) where the timer waits: from a job of its key, that
 * is usually the wheel of the worker running it (the key's state and its timers are held together),
 * so it takes no lock another worker holds; from another thread, or a job stuck on a crashed worker,
 * it takes the holding worker's timer lock.
 * While its key moves (a membership change hands the key's state and timers on), while the job that
 * arms it (during a change) is queued, or as it falls due, the timer is in no wheel: the deadline is
 * then not moved and -EAGAIN says so. From a job of its key that may not clear while the job runs
 * (the arm or fire job waits behind it): there, on -EAGAIN, cancel it and arm a new one.
 * Context: any thread, including a running job. Return: 0; -ENOENT (not pending: it has run once,
 * was cancelled or dropped, or the id was never issued by d); -EBUSY (its job is running now: this
 * run goes ahead; a periodic timer's next deadline follows its grid); -EAGAIN (moving with its key,
 * or its job queued: call again from another thread, or cancel); -EINVAL (d NULL, timer 0, delay_ns over
 * SHARD_TIMER_MAX_NS); -ESHUTDOWN (destroy has begun); -ENOMEM (from a job: the jobs it submitted
 * before, which go first, found a full queue and no memory to go beyond it). A failed call changes
 * nothing (added in 0.2). */
SHARD_API int shard_timer_rearm(shard_dispatcher *d, shard_timer timer, uint64_t delay_ns);

#ifdef __cplusplus
}
#endif

#endif
