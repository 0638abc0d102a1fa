/* Internal: membership changes (membership.c), for their callers (ring_edit.c, drain.c, create and
 * destroy, the balancer). SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_MEMBERSHIP_H
#define SHARD_SRC_MEMBERSHIP_H

#include <stdbool.h>
#include <stdint.h>

#include "dispatcher_internal.h"

/* Takes d's control lock for a change or a drain, after the checks every such call makes, and frees
 * what earlier changes left to reap. On entry, not at a change's end: what a change removes or crashes
 * is not finished when the change returns (its fence and its jobs are still to run), so the end of
 * the change that made it could never reap it; the next entry finds what finished since. Return: 0 with ctl held; -EINVAL (d NULL); -EDEADLK (a thread
 * that may not wait for a change: shard__ctl_forbidden); -ESHUTDOWN. */
int  shard__membership_enter(shard_dispatcher *d);
/* The initial workers and ring, epoch 1. Return: 0 or a negative errno, nothing left running. */
int  shard__membership_init(shard_dispatcher *d);
/* Destroy: lets every fence pass, then stops and joins every worker. Context: ctl held. */
void shard__membership_stop_all(shard_dispatcher *d);
/* An edit of the ring that keeps its members (weights, pins), applied to a clone of the ring in
 * force. Return: 0, with *changed false when the ring stays the same; or an error, the clone then
 * discarded. */
typedef int (*shard__ring_edit)(shard_ring *r, const void *ctx, bool *changed);
/* Publishes one ring edit as one change: fences, release hooks, ordered handoff of the keys it moves
 * (add and remove's guarantees). Context: as shard_worker_add. Return: 0 (also when nothing changed:
 * no epoch spent); the edit's error; -EDEADLK; -ESHUTDOWN; -ENOMEM. */
int  shard__membership_edit(shard_dispatcher *d, shard__ring_edit edit, const void *ctx);

#endif
