/* Internal: a worker's held (set-aside) jobs. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Jobs a worker may not run yet. The order list has a front segment of jobs rerouted from a crashed
 * worker, then what the worker set aside itself; control items (fences, marks, stops) that arrived
 * behind held jobs wait in it too. Held user jobs are also in a keymap (per-key FIFO in epoch order),
 * so "is anything of this key held?" and "is this the key's first held job?" cost O(1) and setting a
 * job aside never allocates. Held user jobs count against the holder's allowance (throttle.h): the
 * keys set aside beyond it are throttled until they leave. Single-threaded: the worker that owns it,
 * or the control thread holding that worker's lock. */
#ifndef SHARD_SRC_HELD_H
#define SHARD_SRC_HELD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "job.h"
#include "keymap.h"
#include "throttle.h"

struct held {
    struct job   *head, *tail;
    struct job   *prio_tail; /* last job of the rerouted front segment, or NULL */
    size_t        count;     /* jobs and control items */
    size_t        controls;  /* of those, control items (fences, marks, stops) */
    struct keymap keys;      /* user jobs by key */
    size_t        njobs;     /* of count, user jobs (the ones in keys) */
    size_t        nkeys;     /* their keys (what the keymap's growth is sized by) */
    _Atomic uint64_t jobs;   /* njobs, for stats (written by the owner: its worker, or the control
                              * thread holding that worker's lock; relaxed) */
    /* The oldest epoch of a held user job that no crash owes, kept as jobs come and go so that a fence
     * need not walk the list for it (walk.c): exact while min_known, else found by a walk when asked. */
    uint64_t      min_epoch;  /* while min_known: that epoch (UINT64_MAX: no such job) */
    size_t        at_min;     /* while min_known: how many such jobs are of min_epoch */
    bool          min_known;
    /* What the last deferral behind crash entries saw (shard__held_defer_due): the crash table's
     * entries made and the fence's epoch; and since it (or since the list was made or taken whole), the
     * oldest epoch of a user job set aside that no crash owed (UINT64_MAX: none). */
    uint64_t      deferred_made, deferred_epoch;
    uint64_t      unowed_since;
    struct throttle *throttle;          /* where the keys are throttled (NULL: nowhere) */
    struct throttle_holder throttled;   /* the keys this holder throttles */
};

/* throttle: where the held user jobs are counted against their allowance (throttle.h); NULL: not
 * counted. */
void shard__held_init(struct held *h, struct throttle *throttle);
/* Frees what the held jobs' keymap grew to (the jobs are the caller's). */
void shard__held_destroy(struct held *h);
/* Appends at the back of the order list (jobs and control items). */
void shard__held_push_back(struct held *h, struct job *j);
/* Appends to the rerouted front segment, behind earlier rerouted jobs, ahead of everything else. */
void shard__held_push_prio(struct held *h, struct job *j);
/* Whether any job of this hash is held. */
bool shard__held_has_key(const struct held *h, uint64_t hash);
/* The first held job of hash's key (the one that may run next), or NULL. */
struct job *shard__held_first(const struct held *h, uint64_t hash);
/* Whether j (a held user job) is the first held job of its key: the one that may run next. */
bool shard__held_first_of_key(const struct held *h, const struct job *j);
/* Removes j (a control item, or any held job). */
void shard__held_remove(struct held *h, struct job *j);
/* The oldest epoch of a held user job that no crash owes (UINT64_MAX: none). O(1) but after the last
 * job of the oldest epoch left or held jobs became owed: then O(held), once. */
uint64_t shard__held_min_unowed_epoch(struct held *h);
/* Whether held jobs must be looked at again for deferral behind crash entries (crash.h's
 * shard__crash_defer_held) before a fence of epoch: a deferral defers every job it may, and a payment
 * only ends waits, so only an entry made since the last one (made: the table's count now), a job older
 * than the fence set aside since, or a later fence can give it more to defer. When it says so, it notes
 * the fence; the caller then defers with &h->deferred_made. */
bool shard__held_defer_due(struct held *h, uint64_t made, uint64_t epoch);
/* Held jobs have become owed (a crash table entry made of them: crash.c's shard__crash_defer_held):
 * the oldest epoch is found again when next asked. */
void shard__held_owed_changed(struct held *h);
/* Detaches every held item, in order, as a list linked through next; h becomes empty, and the keys it
 * throttled are released. */
struct job *shard__held_take_all(struct held *h);

#endif
