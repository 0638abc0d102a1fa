/* Internal: keys whose submitters must wait because their set-aside jobs fill a worker's allowance.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A worker sets jobs aside (held.h) while a key's older jobs are elsewhere: behind a fence, a crash's
 * stuck job, a drain. Those jobs left its queue, so they no longer hold producers back, and a key
 * whose job is stuck for good would take every job its producer sends. The bound: once a holder has
 * `limit` user jobs set aside, each key it then sets a job aside for is throttled; a submit from a
 * thread that is not a worker waits for a throttled key (shard_submit) or is refused with -EAGAIN
 * (try), as for a full queue. A key stays throttled until its holder holds none of its jobs, or
 * holds fewer than limit / 2 jobs in all (then all its keys go at once). Only keys with jobs set aside
 * are throttled, so a stuck key holds up its own submitters and those of keys waiting anyway.
 * What a holder can then hold of one key: limit, plus what was already queued for it when it was
 * throttled (at most the queue's capacity), plus what a crash or a handoff brings it (bounded the
 * same way where it comes from), plus what workers submit (a worker never waits: dispatcher.h).
 * Across keys the throttle alone does not bound it: a key is throttled at its first job set aside
 * past the allowance, so each distinct key set aside during a slow handoff would add its one job.
 *
 * The holder's gate bounds that. While the ring in force is not settled (a change is not done: an old
 * owner has not passed its fence, say stuck in a long job), a holder that holds 2 * limit user jobs is
 * full: a submit that is not a worker's, routed to it, of a key whose job would be set aside there for
 * an older owner (handoff.c's shard__key_waits_older), waits (shard_submit) or is refused (try), as
 * for a full queue, until the holder holds fewer than limit, or the ring settles, changes, or destroy
 * begins. Keys that would run at once are not held back, nor are keys of other workers. `eased`
 * counts the events that end such a wait (a holder falling below limit, a settle): a waiter reads it
 * before it looks, and sleeps while it has not moved. So a holder holds, during a change, at most
 * 2 * limit, plus what its queue held for such keys when it became full (the queue's capacity), plus
 * one job or batch chunk a submitting thread that checked just before, plus what workers submit and
 * what a crash or a handoff brings. Once the ring is settled a key's job is set aside only behind an
 * earlier job of its own (one stuck on a crashed worker, say), which the throttle bounds; but that job
 * may be a multi-key job's claim, and a chain of multi-key jobs behind a stuck key sets one part aside
 * on each fresh key it reaches, which nobody need submit to again. So the gate holds back a
 * multi-key job's parts (a submit that is not a worker's) at any time, ring settled or not: at 2 *
 * limit those of keys that may wait behind a crash table entry, and at 4 * limit every one, since a
 * quick submitter can reach a key before the claim it will wait behind is made (submit.c's
 * part_full). So a holder holds, from such parts, at most 4 * limit, plus what its queue held (its
 * capacity) and one job a submitting thread; and while it holds more than 4 * limit, a multi-key job
 * with a key it owns waits until it holds fewer than limit, whatever its keys: with a stuck job
 * behind it all, until the stuck job returns. Single-key jobs are never held back by it.
 * What neither bounds: each due timer of a stuck key not yet throttled sets its fire job aside (a
 * worker's submit), at most one a timer (a periodic timer's next fire job follows the last's run).
 *
 * Cheap when nothing is throttled: submit reads `keys` (its own line, written only as keys come and
 * go) and only a hash whose filter bucket is counted takes the lock to look precisely. A submit that
 * misses a throttle set a moment ago only queues one more job, which the bound above counts. The
 * gate costs a single-key submit nothing more while no change is under way than comparing its
 * snapshot's epoch with settled (submit.h's shard__submit_full); a multi-key submit from a thread that
 * is not a worker also reads each key's owner's count of set-aside jobs.
 *
 * Lock order: `lock` is a leaf. The wake hook is called without it (its callers may hold theirs: the
 * hook takes only d->space_lock, which is innermost). */
#ifndef SHARD_SRC_THROTTLE_H
#define SHARD_SRC_THROTTLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cacheline.h"

#define THROTTLE_FILTER 4096u  /* lock-free counts, by hash */
#define THROTTLE_BUCKETS 1024u /* the table's first size; it doubles past two keys a bucket */

/* One throttled key of one holder. Allocated when the key is throttled; freed when it is released. */
struct throttle_key {
    uint64_t             hash;
    const void          *holder;
    struct throttle_key *bucket_next;            /* lock: the table's chain */
    struct throttle_key *holder_next, *holder_prev; /* the holder's list (throttle_holder) */
};

/* A holder's throttled keys. Its owner's (a worker's held jobs: the worker's thread, or its lock). */
struct throttle_holder {
    struct throttle_key *head;
    size_t               n;
};

struct throttle {
    _Alignas(SHARD_CACHELINE) _Atomic uint32_t keys; /* throttled keys; lock to change, read lock-free */
    /* The gate's (head comment), on a line of their own: bumped when a holder falls below limit and
     * at every settle, full or not (rare next to submits). */
    _Alignas(SHARD_CACHELINE) _Atomic uint64_t eased; /* holders fallen below limit, and settles */
    _Atomic uint64_t     full_waits;             /* submits a full holder held back (stats) */
    _Alignas(SHARD_CACHELINE) pthread_mutex_t lock;
    size_t               limit;                  /* I: a holder's allowance of set-aside jobs */
    void               (*wake)(void *ctx);       /* I: wakes waiting submitters after a release */
    void                *wake_ctx;               /* I */
    _Atomic uint32_t     filter[THROTTLE_FILTER]; /* lock to change; read lock-free */
    struct throttle_key **bucket;                /* lock: nbuckets chains (NULL: none yet) */
    size_t               nbuckets, nkeys;        /* lock */
};

/* limit 0: nothing is ever throttled. wake: called (no lock held) after keys were released. */
void shard__throttle_init(struct throttle *t, size_t limit, void (*wake)(void *ctx), void *ctx);
/* Frees what is left (no holder may use it any more). */
void shard__throttle_destroy(struct throttle *t);

/* Whether any key is throttled. Context: any thread, lock-free; relaxed: see the head comment. */
static inline bool shard__throttle_any(struct throttle *t)
{
    return atomic_load_explicit(&t->keys, memory_order_relaxed) != 0;
}
/* Whether hash is throttled by some holder. Context: any thread; lock-free unless its bucket is
 * counted. */
bool shard__throttle_holds(struct throttle *t, uint64_t hash);

/* The gate (head comment). Whether a holder holding held jobs is full, for a submitter that finds it:
 * 2 * limit; for one that waits for it: limit (so a holder lets waiters in once it has room for many).
 * Context: any thread. */
static inline bool shard__throttle_full(const struct throttle *t, uint64_t held, bool waiting)
{
    return t->limit && held >= (waiting ? t->limit : 2 * t->limit);
}
/* What a full holder's waiter reads before it looks (seq_cst: the other half of shard__throttle_ease's
 * increment, with the waiter's registration). */
static inline uint64_t shard__throttle_eased(struct throttle *t)
{
    return atomic_load_explicit(&t->eased, memory_order_seq_cst);
}
/* A holder fell below limit, or the ring settled: wakes the waiters of full holders. Context: any
 * thread, after the store of the holder's count or of settled; no lock needed (the wake hook takes
 * its own). */
void shard__throttle_ease(struct throttle *t);

/* The holder's side, called by held.c as its counts change. Context: the holder's owner. */
/* A job of hash was set aside, leaving held jobs in all: throttles hash if that is at the limit.
 * Out of memory it throttles nothing (the bound is then lost, not the job). */
void shard__throttle_note_held(struct throttle *t, struct throttle_holder *h, uint64_t hash, size_t held);
/* A job of hash left the holder, which now holds none of hash if key_gone, and held jobs in all. */
void shard__throttle_note_left(struct throttle *t, struct throttle_holder *h, uint64_t hash, bool key_gone,
                               size_t held);
/* The holder holds nothing any more: every key it throttled is released. */
void shard__throttle_release_all(struct throttle *t, struct throttle_holder *h);

#endif
