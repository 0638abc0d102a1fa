/* Internal: the control lock and who may take it (ctl.c). SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_CTL_H
#define SHARD_SRC_CTL_H

#include <stdbool.h>
#include <stdint.h>

#include "dispatcher_internal.h"

/* Whether this thread may not take d's ctl: a worker, a hook of d's control thread, or inside an RCU
 * read-side section. */
bool shard__ctl_forbidden(shard_dispatcher *d);
/* Whether this thread holds d's ctl (a membership call, or a hook it runs: on_dropped, the ring's). */
bool shard__ctl_held(shard_dispatcher *d);
void shard__ctl_lock(shard_dispatcher *d);
void shard__ctl_unlock(shard_dispatcher *d);
/* A membership call's (and drain's) way in: takes ctl unless destroy has begun. Return: 0 with ctl
 * held; -ESHUTDOWN (not held). A call racing destroy never touches freed memory: it reads d inside a
 * read-side section until it has counted itself (ctl_callers), and destroy waits for the count.
 * Context: shard__ctl_forbidden is false. */
int  shard__ctl_enter(shard_dispatcher *d);
/* Destroy, once it has let ctl go: waits until no call counted by shard__ctl_enter is left (each
 * found shutdown and went), after which no call touches d. */
void shard__ctl_wait_callers(shard_dispatcher *d);

#endif
