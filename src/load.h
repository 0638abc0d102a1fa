/* Internal: a worker's load figures (shard_worker_stats' busy_ns, queued_avg, head_wait_ns), kept by
 * the worker itself with a clock read at the start and end of each batch or job it runs, so a job
 * costs nothing more when batches are full. SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_LOAD_H
#define SHARD_SRC_LOAD_H

#include <stdint.h>
#include <string.h>

#include "clock.h"
#include "worker.h"

/* The smoothed queue length follows the length with a time constant of a second, sampled at most
 * once a millisecond (reading the length touches the producers' cache line). */
#define LOAD_TAU_NS    1000000000.0
#define LOAD_SAMPLE_NS 1000000u

/* W starts running a batch or a job: what waits behind it waits from now. Return: now. */
static inline uint64_t shard__load_start(struct shard_worker *w)
{
    uint64_t now = shard__now_ns();
    atomic_store_explicit(&w->counts.head_since, now, memory_order_relaxed);
    return now;
}

void shard__load_sample(struct shard_worker *w, uint64_t now);

/* W ran work from start to now. Return: now. */
static inline uint64_t shard__load_end(struct shard_worker *w, uint64_t start)
{
    uint64_t now = shard__now_ns();
    _Atomic uint64_t *busy = &w->counts.busy_ns;
    atomic_store_explicit(busy, atomic_load_explicit(busy, memory_order_relaxed) + (now - start), memory_order_relaxed);
    return now;
}

/* W has taken what it ran off its queue (its head is past it), at now: the length, sampled. */
static inline void shard__load_taken(struct shard_worker *w, uint64_t now)
{
    if (now - __atomic_load_n(&w->counts.sampled_at, __ATOMIC_RELAXED) >= LOAD_SAMPLE_NS)
        shard__load_sample(w, now);
}

/* W parks: its queue is empty, whatever arrives next has not waited for it. */
static inline void shard__load_idle(struct shard_worker *w)
{
    atomic_store_explicit(&w->counts.head_since, 0, memory_order_relaxed);
}

#endif
