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
/* A multi-key job whose keys all had one owner when it was queued, queued there whole as one job of
 * its first key (arg: the multi itself; origin ORIGIN_MULTI_WHOLE). Taken (run.c) when every key may
 * run at once there, it runs as this job: the user's fn, or every step then done, with no key
 * claimed, since no other job of any of them can run meanwhile (the worker runs one job at a time,
 * and every key is its own and free). Otherwise it is split into its parts first
 * (shard__multi_whole_split), as is one a crash hands over: so it is, in every key's order, what its
 * parts queued one after another would be. */
void shard__multi_whole(shard_worker *w, void *arg);
/* Runs the whole job arg on w: the user's fn, or every step then done. If w is crashed between two
 * steps (shard__multi_whole_crashed claimed every key), the remaining steps go on where their keys'
 * jobs run, as steps of their own, and the last of them ends the job. Return: whether they did (the
 * job is no longer w's to end: it may be gone). Context: w's thread, in the job, w->lock not held. */
bool shard__multi_whole_run(shard_worker *w, void *arg);
/* Its keys: how many, and the hash of the i-th (i < count). */
uint32_t shard__multi_whole_count(const void *arg);
uint64_t shard__multi_whole_hash(const void *arg, uint32_t i);
/* j, a record of a whole job, becomes its first part, followed on j's list (next) by a record for
 * each other part, in order. Return: the last part's record. Context: none of its parts has been
 * taken (the job's block is the caller's alone). */
struct job *shard__multi_whole_split(struct job *j);
/* A crash stopped the worker while it ran the whole job arg: every key is claimed, as its parts
 * would have claimed them, so that the keys stay held until it returns (the crash's stuck entry
 * then goes behind its first key's claim). Context: the crashing thread, holding the worker's lock. */
void shard__multi_whole_crashed(void *arg);
/* The whole job arg has returned, all of it run there (shard__multi_whole_run returned false): the
 * claims a crash made go, and the job ends (it may be freed). Context: its worker, after any crash's
 * claims of its keys (run.c: holding its lock again, or in a batch after taking batch.whole back). */
void shard__multi_whole_end(void *arg);
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
