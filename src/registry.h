/* Internal: the worker registry and reaping (registry.c). SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_REGISTRY_H
#define SHARD_SRC_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>

#include "dispatcher_internal.h"

/* The ring member named name, among workers in the ring; NULL if none. Context: ctl held. */
struct shard_worker *shard__registry_member(shard_dispatcher *d, const char *name);
/* Return: 0 or -ENOMEM. Context: ctl held; or create, before the first ring is published (d->snap
 * NULL: no other thread has d yet). */
int  shard__registry_add(shard_dispatcher *d, struct shard_worker *w);
/* Undoes the last shard__registry_add (its worker did not start): the worker is the registry's to
 * free now, after a grace period. Context: ctl held. */
void shard__registry_drop_last(shard_dispatcher *d);
/* Waits a grace period, then frees what the registry retired before it (views of workers[] that
 * the kicks may have been reading, and workers left out of them). Context: ctl held. */
void shard__registry_synchronize(shard_dispatcher *d);
/* Takes the workers that left the ring and can no longer be reached out of the registry; they are
 * freed after a grace period (shard__registry_synchronize). Context: ctl held. */
void shard__registry_reap(shard_dispatcher *d);
/* Frees every worker (destroy, all joined). */
void shard__registry_free_all(shard_dispatcher *d);

#endif
