/* Internal: what a worker does with the items it takes (run.c) and with those it set aside (walk.c).
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_RUN_H
#define SHARD_SRC_RUN_H

#include <stdbool.h>

#include "worker.h"

/* run.c. Context for all: w's thread, holding w->lock. */
/* Makes sure a record is at hand for the next job taken, should it have to wait (a slot, once taken,
 * cannot be put back). Return: false only when memory is exhausted. */
bool shard__run_record_ready(struct shard_worker *w);
/* The common path: runs up to a batch of ring jobs that may run at once (their epoch settled, no crash
 * owing anything, nothing held, delivered or queued on the side before them), letting go of w->lock
 * once for all of them. Return: whether it took any (or w crashed meanwhile); false leaves the next
 * item to shard__queue_pop_sc and shard__run_take. */
bool shard__run_batch(struct shard_worker *w);
/* A crash ends w's batch, if one runs (context: the crash, holding w->lock): every position w took is
 * consumed. Return: whether the last job taken may still be running, and then its key's hash and, if
 * it is a multi-key job queued whole that has not ended, that job (else NULL), whose keys the crash
 * must claim. */
bool shard__run_batch_interrupt(struct shard_worker *w, uint64_t *running_hash, void **whole);
/* A job or control item just taken from the queue: run it, act on it, or set it aside. */
void shard__run_take(struct shard_worker *w, struct job *j);
/* Runs j (the lock is let go meanwhile), then frees its record and pays what a crash owed. */
void shard__run_job(struct shard_worker *w, struct job *j);
/* Acts on a control item that has reached its turn: fence (with the release hook), mark, stop. */
void shard__run_control(struct shard_worker *w, struct job *j);

/* walk.c. One walk over w's held items in order, running whatever may go now. */
void shard__walk_held(struct shard_worker *w);
/* Whether a walk may achieve something: an event w waits for happened, or items changed. */
bool shard__walk_needed(struct shard_worker *w);
/* Keeps `waits.holding` equal to "has held items", so that kicks reach only such workers.
 * Context: w->lock held (by w's thread, or a crash). */
void shard__worker_sync_holding(struct shard_worker *w);

#endif
