/* Internal: jobs a crash owes follow their key (follow.c). SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_FOLLOW_H
#define SHARD_SRC_FOLLOW_H

#include <stdint.h>

#include "worker.h"

/* At a fence of epoch where w loses keys, after its release hook handed their state over (or, with
 * epoch UINT64_MAX, as w leaves): w's held jobs that a crash owes and that were given to it before
 * that epoch move to their keys' owners in the ring now in force. Context: w's thread. */
void shard__follow_key(struct shard_worker *w, uint64_t epoch);

#endif
