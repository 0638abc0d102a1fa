/* Internal: back-pressure: submitters waiting for room (space.c). SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_SPACE_H
#define SHARD_SRC_SPACE_H

#include <stdbool.h>
#include <stdint.h>

#include "dispatcher_internal.h"

/* Whether a submitter waits for room in w's queue (a worker's own submits then leave the slots to it,
 * submit.c). Context: inside a read-side section that found w. */
static inline bool shard__space_waited(struct shard_worker *w)
{
    /* relaxed: a waiter that registers a moment later is woken as before, when half the queue is
     * free; this only keeps the worker from refilling it meanwhile. */
    return atomic_load_explicit(&w->q.waiters, memory_order_relaxed) != 0;
}

/* Wakes submitters waiting for room, if any (after a worker freed slots). Context: any thread. */
void     shard__space_notify(shard_dispatcher *d);
/* Registers as a waiter for w, found full, or (w NULL) for a throttled key. Context: inside the
 * read-side section that found w, or the key throttled. Return: the space epoch to wait on. */
uint64_t shard__space_register(shard_dispatcher *d, struct shard_worker *w);
/* Waits for room in w, a change of ring, or destroy; leaves the waiters. Return: true if destroy
 * began (d must not be touched again); false: the caller is inside a read-side section again. */
bool     shard__space_wait(shard_dispatcher *d, struct shard_worker *w, uint64_t epoch, uint64_t ring_epoch);
/* As shard__space_wait, for the key of hash to be throttled no more (registered with w NULL). */
bool     shard__space_wait_key(shard_dispatcher *d, uint64_t hash, uint64_t epoch, uint64_t ring_epoch);
/* Waits while w, found full of set-aside jobs (throttle.h's gate) by the caller's read-side section
 * that routed with ring_epoch, stays full: until it holds fewer than its allowance, the ring settles
 * (unless parts: the wait of a multi-key job's part, which a settle does not end) or changes, or
 * destroy begins. Registers and looks again first (it may have eased meanwhile). Context: inside that
 * section, which it leaves while it waits; a cancellation point, as shard__space_wait. Return: as
 * shard__space_wait. */
bool     shard__space_wait_full(shard_dispatcher *d, struct shard_worker *w, uint64_t ring_epoch, bool parts);
/* The throttle's wake hook (ctx: the dispatcher): shard__space_notify. */
void     shard__space_notify_hook(void *ctx);
/* Sends every waiter back to look its key up again (a new ring, or destroy). Context: ctl may be
 * held; takes only space_lock. */
void     shard__space_send_back(shard_dispatcher *d);
/* Returns once no submitter waits (destroy, after shutdown was set and waiters were sent back). */
void     shard__space_wait_empty(shard_dispatcher *d);

#endif
