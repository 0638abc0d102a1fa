/* Internal: the submit path, a job of a key hashed already (submit.c). Everything that routes a job
 * to its key's owner goes through it: the public submits, submit_many, multi-key jobs and timers.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_SUBMIT_H
#define SHARD_SRC_SUBMIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dispatcher_internal.h"

/* One job of a key hashed already, as shard_submit (wait) or shard_try_submit.
 * Context: inside a read-side section, and returns inside one; it leaves the section only while
 * registered as a waiter for room. After -ESHUTDOWN the caller must not touch d again (destroy may
 * have freed it). */
int  shard__submit_hashed(shard_dispatcher *d, uint64_t h, shard_job_fn fn, void *arg, uint8_t origin, bool wait);
/* Waits (wait), as shard__submit_hashed would, until a job of h would go into its
 * owner's ring at once, and pushes nothing (multi.c's submit, before it pushes its parts without
 * waiting); and, as a multi-key job's part, while the owner is full of set-aside jobs, whatever the
 * ring (throttle.h's gate). Not for a worker's thread.
 * Context: as shard__submit_hashed. Return: 0; -EAGAIN (not wait: it would have waited); -ESHUTDOWN. */
int  shard__submit_room(shard_dispatcher *d, uint64_t h, bool wait);
/* Whether a job of h must wait (wait) or be refused for its key's set-aside jobs
 * (throttle.h); never for a job a worker submits with wait, which never waits. Context: any thread. */
bool shard__submit_throttled(shard_dispatcher *d, uint64_t h, bool wait);
/* The rest of shard__submit_full, once the ring in force is found not settled. */
bool shard__submit_full_slow(shard_dispatcher *d, uint64_t epoch, struct shard_worker *w, uint64_t h, bool wait);
/* Whether a job of h routed to w with snapshot s must wait (wait) or be refused because w is full of
 * set-aside jobs while a change is not done (throttle.h's gate); never for a job a worker submits with
 * wait. Context: inside the read-side section that loaded s. Inline: every submit asks, and with no
 * change under way the answer is one comparison, with settled, which sits by snap. */
static inline bool shard__submit_full(shard_dispatcher *d, struct snap *s, struct shard_worker *w, uint64_t h, bool wait)
{
    /* relaxed: settled only grows, so a stale value sends a submit to the slow check, never past it. */
    return s->epoch > atomic_load_explicit(&d->settled, memory_order_relaxed) &&
           shard__submit_full_slow(d, s->epoch, w, h, wait);
}

#endif
