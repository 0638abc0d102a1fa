/* Internal: putting timer records into wheels and handing lists of them on (timer_place.c), what the
 * public calls (timer_arm.c) and the worker's side (timer.c) share. The protocol: timer.c's head.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_TIMER_PLACE_H
#define SHARD_SRC_TIMER_PLACE_H

#include <stdbool.h>
#include <stdint.h>

#include "shard/dispatcher.h"

struct shard_worker;
struct timer_table;

/* A timer's record index as the arg of its arm and fire jobs (index + 1: never NULL), and back. */
static inline void *timer_arg(uint32_t idx)
{
    return (void *)(uintptr_t)(idx + 1);
}

static inline uint32_t timer_index(void *arg)
{
    return (uint32_t)((uintptr_t)arg - 1);
}

/* Recomputes w's next wake-up. Context: timers.lock. */
void shard__timer_update_next(struct shard_worker *w);
/* Puts timer idx into w's wheel unless w left the ring, or lost keys at a fence of a ring newer than
 * epoch (then the caller's ring is out of date for it). Return: false when it did not. */
bool shard__timer_insert_into(struct shard_worker *w, uint32_t idx, uint64_t epoch);
/* Puts timer idx into the wheel of w, the worker running a job of its key (so holding the key's
 * state); one that left the ring (a crashed worker's job) places it by the ring. */
void shard__timer_own_insert(struct shard_worker *w, uint32_t idx);
/* Detaches a list taken out of a wheel from it (home NULL: no cancel unlinks it from there now) and
 * sorts it by deadline. Context: the worker's timers.lock. */
uint32_t shard__timer_taken(const struct timer_table *tt, uint32_t list);
/* A list of records taken out of a wheel (through next, by deadline): each is placed again, or freed
 * if it was cancelled meanwhile. In deadline order: a worker that was idle fires the first one as it
 * arrives, so the order of arrival is the order of running (each advance hands out a prefix of it).
 * Context: an RCU read-side section. */
void shard__timer_place_all(shard_dispatcher *d, uint32_t list);

#endif
