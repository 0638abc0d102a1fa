/* Internal: what a crash does to its worker (worker_crash.c), in the order shard_worker_crash calls
 * it. SPDX-License-Identifier: LGPL-2.1-or-later */
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
 * the grace period that ended pushes to x; takes x->lock. */
struct job *shard__worker_take_leftovers(struct shard_worker *x, struct job_block *block);

#endif
