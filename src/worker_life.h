/* Internal: a worker's life, from birth to free, and its thread's loop (worker_life.c).
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Above everything the loop drives (run.c, walk.c, the timers, follow.c, the inbox and outbox); the
 * control side (dispatcher.c, membership.c, registry.c) makes, starts and frees workers through it.
 * The worker's state and the calls every layer makes on a worker (wake, count, state) are worker.h's. */
#ifndef SHARD_SRC_WORKER_LIFE_H
#define SHARD_SRC_WORKER_LIFE_H

#include <stdbool.h>
#include <stdint.h>

#include "shard/dispatcher.h"

struct shard_worker;

/* A worker that is not started yet is freed with shard__worker_free; one started is stopped (its STOP
 * item, or a crash) and joined first. Return: NULL when out of memory (or of descriptors). */
struct shard_worker *shard__worker_new(shard_dispatcher *d, const char *name, uint64_t epoch);
/* Return: 0; -EAGAIN when no thread could be started; -EINVAL for a CPU the process may not run on. */
int   shard__worker_start(struct shard_worker *w);
void  shard__worker_free(struct shard_worker *w);
/* Queues w's STOP item: it exits once everything before it is done. Once only. Context: the control
 * side (ctl held, or create's failure and destroy, which no change can run beside). */
void  shard__worker_stop(struct shard_worker *w);
/* Waits for w's thread to return, if it was started and not joined yet. Context: as shard__worker_stop. */
void  shard__worker_join(struct shard_worker *w);
/* Whether w, which left the ring, is done with: its thread is returning, and, crashed, its queue has
 * been handed over; and its crash record owes nothing (its stuck job returned, every job it rerouted
 * or deferred has run: those entries point at it until shard__owed_done). Context: ctl held. */
bool  shard__worker_finished_with(struct shard_worker *w);
/* The worker's thread. */
void *shard__worker_main(void *arg);

#endif
