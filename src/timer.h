/* Internal: keyed timers (timer.c) as the rest of the core sees them: a worker's loop fires what is
 * due, a fence hands timers of moved keys on, a crash takes the crashed worker's.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_TIMER_H
#define SHARD_SRC_TIMER_H

#include <stdbool.h>
#include <stdint.h>

#include "shard/dispatcher.h"

struct shard_worker;
struct snap;

/* The jobs a timer is submitted as (arg: its record's index + 1): when armed during a membership
 * change, to enter the wheel of the worker holding its key; at its deadline, to run. */
void shard__timer_arm(shard_worker *w, void *arg);
void shard__timer_fire(shard_worker *w, void *arg);
/* An arm or fire job dropped with a crashed worker's queue: frees its record. Return: true, with the
 * timer's own fn and arg, when on_dropped is to hear of it; false when it was cancelled. */
bool shard__timer_dropped(shard_dispatcher *d, void *arg, shard_job_fn *fn, void **user_arg);

/* Sets up w's wheel (w not started). */
void shard__timers_worker_init(struct shard_worker *w);
void shard__timers_worker_destroy(struct shard_worker *w);
/* Whether w's wheel has something due by now. Context: W. */
bool shard__timers_due(struct shard_worker *w);
/* Submits the jobs of the timers due now. Context: W, w->lock held. */
void shard__timers_fire_due(struct shard_worker *w);
/* When w's wheel next needs it, CLOCK_MONOTONIC ns; UINT64_MAX: never. Context: W, for parking. */
uint64_t shard__timers_next(struct shard_worker *w);
/* At w's fence whose ring is after: hands the timers of keys w does not own there (member index
 * after_index; -1: w left the ring, and then takes no timer again) to their owners in the ring in
 * force. Context: W, w->lock held. */
void shard__timers_release(struct shard_worker *w, const struct snap *after, long after_index);
/* A crash of x, once the ring without it is published and before its queue is handed over (which
 * lets its keys' next jobs run): x's timers go to their keys' owners (REROUTE), whose fire jobs wait
 * for that hand-over as any job of those keys does, or to on_dropped (DROP); x takes no timer again.
 * Context: the control thread. */
void shard__timers_crash(shard_dispatcher *d, struct shard_worker *x, enum shard_crash_policy policy);
/* Timers in w's wheel now. Context: any thread while w lives. */
uint64_t shard__timers_pending(struct shard_worker *w);

#endif
