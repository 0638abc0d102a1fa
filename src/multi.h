/* Internal: multi-key jobs' parts, as the crash hand-over sees them (multi.c).
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_MULTI_H
#define SHARD_SRC_MULTI_H

#include <stdbool.h>

#include "shard/dispatcher.h"

/* The job a multi-key job queues for each of its keys (arg: its part). */
void shard__multi_part(shard_worker *w, void *arg);
/* The job a multi-key job with steps (shard_submit_multi_each) runs for one of its keys once it
 * holds all of them: never dropped by a crash, rerouted instead (arg: its part). */
void shard__multi_step(shard_worker *w, void *arg);
/* A DROP crash dropped the part arg: the whole job is dropped. Return: whether on_dropped is to
 * hear of it (the first of its parts dropped), with *fn and *user_arg set to the job's own. Its
 * keys stay held until shard__multi_dropped_end, called once on_dropped has returned (the keys'
 * later jobs run after it, as a dropped job's key's do), with what this returned.
 * Context: the crashing thread, holding d's ctl. */
bool shard__multi_dropped(void *arg, shard_job_fn *fn, void **user_arg);
/* After shard__multi_dropped and on_dropped: the part is done with (its keys let go if first);
 * arg may be freed by this. */
void shard__multi_dropped_end(void *arg, bool first);

#endif
