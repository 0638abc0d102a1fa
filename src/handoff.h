/* Internal: what a held job waits for, fences and the settled epoch (handoff.c). SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_HANDOFF_H
#define SHARD_SRC_HANDOFF_H

#include <stdbool.h>
#include <stdint.h>

#include "dispatcher_internal.h"

/* Whether j may run now. If not, j notes what it waits for and w (its holder) is registered to be
 * kicked when that happens. Context: w->lock held (by w's thread, or by a crash taking w over). */
bool  shard__job_may_run(shard_dispatcher *d, struct shard_worker *w, struct job *j);
/* Whether a job of hash routed to w under epoch would wait there for an older owner of its key, one
 * that has not passed its fence yet (what a submit asks a full holder: throttle.h). Marks nothing.
 * Context: a read-side section that found w under epoch. */
bool  shard__key_waits_older(shard_dispatcher *d, struct shard_worker *w, uint64_t epoch, uint64_t hash);
/* w, holding jobs, is to be kicked by changes of the crash table too. Context: as above. */
void  shard__wait_on_crashes(struct shard_worker *w);
/* w holds a drain mark: it is to be kicked, while a drain is under way, when a crash table entry is
 * made, which may make a key it holds jobs of stuck through a chain of multi-key jobs (a mark waits
 * for no such job: walk.c). Context: w's walk, before it looks at its held jobs. */
void  shard__wait_on_entries(struct shard_worker *w);
/* The crash table's hook (ctx: the dispatcher): an entry was made. While a drain is under way, kicks
 * the holders noted by shard__wait_on_entries to walk everything again. Context: any thread, no
 * stripe lock held; takes no lock (a read-side section for the workers' view). */
void  shard__entries_made(void *ctx);
/* Advances d->settled over the snapshots whose fences have all been passed. Context: d->lock. */
void  shard__settle(shard_dispatcher *d);
/* w passed its fence of snapshot s. Context: d->lock. */
void  shard__fence_passed(shard_dispatcher *d, struct shard_worker *w, struct snap *s);
/* Kicks the workers whose held jobs wait for w (its fences, its hand-over, its exit). Context:
 * d->lock. */
void  shard__wake_waiters_of(shard_dispatcher *d, struct shard_worker *w);
/* x stops counting by epochs once its queue is handed over and no release hook of it runs.
 * Context: d->lock. */
void  shard__epochless_if_done(shard_dispatcher *d, struct shard_worker *x);
/* j, owed by a crash, has run or was dropped; or x's stuck job returned. Context: w->lock or ctl may
 * be held; takes the crash table's lock (its stripe's), and kicks the holders without a lock. */
void  shard__owed_done(shard_dispatcher *d, struct job *j);
/* As shard__owed_done for each of js[0..n) (a multi-key job's claims), n at most
 * SHARD_OWED_DONE_MAX, kicking each holder once for all of them rather than once a job. Context: as
 * shard__owed_done. */
#define SHARD_OWED_DONE_MAX 32
void  shard__owed_done_all(shard_dispatcher *d, struct job *const *js, size_t n);

#endif
