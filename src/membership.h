/* Internal: membership changes (membership.c). SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_MEMBERSHIP_H
#define SHARD_SRC_MEMBERSHIP_H

#include <stdbool.h>
#include <stdint.h>

#include "dispatcher_internal.h"

/* The initial workers and ring, epoch 1. Return: 0 or a negative errno, nothing left running. */
int  shard__membership_init(shard_dispatcher *d);
/* Destroy: lets every fence pass, then stops and joins every worker. Context: ctl held. */
void shard__membership_stop_all(shard_dispatcher *d);

#endif
