/* Internal: the balancer's thread (balance.c), started by create and stopped by destroy.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_BALANCE_H
#define SHARD_SRC_BALANCE_H

#include "shard/dispatcher.h"

/* Return: 0; -EINVAL (a threshold below 1.0). */
int  shard__balance_check(const struct shard_config *cfg);
/* Fills the balancer's defaults, and the hot keys it needs, into a copy of the config. */
void shard__balance_defaults(struct shard_config *cfg);
/* Starts the thread when the config asks for one. Return: 0; -ENOMEM; -EAGAIN. */
int  shard__balance_start(shard_dispatcher *d);
/* Stops and joins it (before destroy takes the control lock: it makes changes). */
void shard__balance_stop(shard_dispatcher *d);
void shard__balance_free(shard_dispatcher *d);

#endif
