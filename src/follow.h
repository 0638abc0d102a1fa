/* Internal: jobs a crash owes follow their key (follow.c). SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_FOLLOW_H
#define SHARD_SRC_FOLLOW_H

#include <stdbool.h>
#include <stdint.h>

#include "worker.h"

/* At a fence of epoch where w loses keys, after its release hook handed their state over (or, with
 * epoch UINT64_MAX, as w leaves): w's held jobs that a crash owes and that were given to it before
 * that epoch move to their keys' owners in the ring now in force. Context: w's thread. */
void shard__follow_key(struct shard_worker *w, uint64_t epoch);

/* Delivers j, a job a crash table entry owes, to its key's owner in the ring now, into its inbox
 * ahead of what that worker holds of the key (with a drain mark behind it if a drain is under way,
 * as for a job that follows its key); there it waits for every owner the key has had since the ring
 * now (moved_epoch), as a job that followed its key. A multi-key job's step (multi.c). Return:
 * false if no owner took it (destroy is stopping every worker). Context: me's thread, a job running. */
bool shard__follow_deliver(struct shard_worker *me, struct job *j);

#endif
