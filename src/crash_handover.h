/* Internal: a crash of one worker, in the order shard_worker_crash takes the steps.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_CRASH_HANDOVER_H
#define SHARD_SRC_CRASH_HANDOVER_H

#include <stddef.h>

#include "job.h"
#include "shard/dispatcher.h"

/* Memory for one crash's hand-over, allocated before its point of no return: records for the jobs in
 * the worker's ring (one block) and a list per member of the next ring. */
struct crash_handover {
    struct job_block *block;
    struct job_list  *lists;
};

/* Return: 0, or -1 with nothing allocated. Context: ctl held. */
int  shard__crash_handover_prepare(struct crash_handover *ho, struct shard_worker *x, size_t members);
void shard__crash_handover_discard(struct crash_handover *ho);

/* After the next ring's grace period, so nothing is pushed to x any more: everything x held, in
 * order, goes to its keys' owners in the ring now in force, ahead of what they hold (REROUTE), or to
 * on_dropped (DROP). Frees what prepare allocated. Context: ctl held. */
void shard__crash_handover(shard_dispatcher *d, struct shard_worker *x, enum shard_crash_policy policy,
                           struct crash_handover *ho);

#endif
