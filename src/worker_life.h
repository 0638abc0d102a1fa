/* Internal: a worker's life, from birth to free, and its thread's loop (worker_life.c).
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Above everything the loop drives (run.c, walk.c, the timers, follow.c, the inbox and outbox); the
 * control side (dispatcher.c, membership.c, registry.c) makes, starts and frees workers through it.
 * The worker's state and the calls every layer makes on a worker (wake, count, state) are worker.h's. */
#ifndef SHARD_SRC_WORKER_LIFE_H
#define SHARD_SRC_WORKER_LIFE_H

#include <stdint.h>

#include "shard/dispatcher.h"

struct shard_worker;

/* A worker that is not started yet is freed with shard__worker_free; one started is stopped (its STOP
 * item, or a crash) and joined first. Return: NULL when out of memory (or of descriptors). */
struct shard_worker *shard__worker_new(shard_dispatcher *d, const char *name, uint64_t epoch);
/* Return: 0; -EAGAIN when no thread could be started; -EINVAL for a CPU the process may not run on. */
int   shard__worker_start(struct shard_worker *w);
void  shard__worker_free(struct shard_worker *w);
/* The worker's thread. */
void *shard__worker_main(void *arg);

#endif
