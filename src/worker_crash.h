/* Internal: what a crash does to its worker (worker_crash.c), in the order a crash does it (the stop:
 * shard_worker_crash; the rest: the hand-over, crash_handover.c).
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_WORKER_CRASH_H
#define SHARD_SRC_WORKER_CRASH_H

#include "job.h"
#include "shard/dispatcher.h"

/* x takes no further job; a job it is running keeps its key fenced (a stuck entry), and a release
 * hook it is running makes the keys it releases wait for it. Before the next ring is published.
 * Context: ctl held. */
void shard__worker_crash_stop(shard_dispatcher *d, struct shard_worker *x);

/* Everything x still holds, in order: held items, then its inbox (closed for good), then its queue
 * (ring slots copied into records of block, which has room for them all). Context: ctl held, after
 * the grace period that ended pushes to x; takes x->lock. Return: the chain of them through next
 * (NULL: none), the caller's to hand over. */
struct job *shard__worker_take_leftovers(struct shard_worker *x, struct job_block *block);

/* x's leftovers are handed over: once no release hook of it runs, it counts by epochs no more
 * (epochless). Context: ctl held. */
void shard__worker_crash_handed(shard_dispatcher *d, struct shard_worker *x);

#endif
