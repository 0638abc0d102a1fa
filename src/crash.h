/* Internal: what crashes still owe, per key. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A crashed worker x stops counting by epochs (handoff.c); what it still holds up is kept here, as
 * entries of one keymap shared by all crashes, each key's FIFO in epoch order:
 *   - the key of the job x was running when it crashed, as x's `stuck` entry of epoch 0 (below every
 *     job's epoch: no job of that key may run until the stuck job returns);
 *   - each job of x's queue rerouted to a new owner, until it has run;
 *   - a multi-key job's claim on each of its keys (multi.c), from when its part of that key runs until
 *     the job has run or was dropped: an entry of epoch 0, as a stuck job's (but for the key of the
 *     part that runs the job, which its running holds unless it claimed it before it knew it was
 *     last; a crash then makes that key's stuck entry, behind such a claim);
 *   - jobs that a live worker holds behind one of the above when it passes a fence (fences count
 *     epochs; these wait on a crash, so the table holds their key instead: shard__crash_defer_held).
 *     They are charged to their holder's own record, not to the crash they wait behind: a key that
 *     keeps getting jobs would otherwise keep that crash's record, and its worker, alive for ever.
 * Each key's FIFO is in epoch order, and within an epoch in the order the entries were made (owe_seq):
 * the order of submission, as a run of one key's jobs of one epoch, all routed to one worker, becomes
 * owed in order (a crash takes its worker's leftovers in order; a worker defers what it holds in
 * order). A job of key k that no crash owes may run when k's first entry is not of an older epoch than
 * the job; an owed job only when it is k's first entry: the pieces of one such run may be spread over
 * several workers and reach each in any order, and nothing else orders them.
 *
 * Cheap when nothing is owed: a per-bucket bit (`filter_bits`: the bucket's count in `filter` is not
 * 0) is read without the lock, and only a job whose bucket is marked takes the lock to look
 * precisely. The counts and bits change under the lock, before the change is published by a release
 * store that a job checking later has acquired (the snapshot it was routed with, a worker's `passed`,
 * or `epochless`), so a job never misses an entry that concerns it.
 *
 * Locks: a key's entries are under its stripe's lock (its keymap bucket's: bucket % CRASH_STRIPES), so
 * that workers claiming and paying different keys (multi-key jobs do, a key at a time, from every worker)
 * do not all wait on one lock. What spans keys (a crash's rerouted list, a fence's deferral, the
 * walk of shard__crash_stuck_key through multi-key jobs' claims, a record's settling, the keymap's
 * growth and its shrinking back once the table is empty) takes every stripe's lock, in stripe order.
 * A stripe's lock is a leaf: nothing else is taken while it is held (but for malloc's own, by the
 * growth and the shrinking's free). */
#ifndef SHARD_SRC_CRASH_H
#define SHARD_SRC_CRASH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"
#include "keymap.h"

/* The filter: a count of entries a bucket of hashes, and a bit a bucket that says whether its count is
 * not 0, which is all a job's check reads (8 KiB, where the counts are 256 KiB). 65,536 buckets:
 * multi-key jobs in flight keep a claim each in the table, up to a queue's capacity (4,096 by
 * default) of them a worker, and a job whose bucket one of them shares takes the slow path (its
 * stripe's lock, the keymap): with 4,096 buckets over half of all jobs did then, with 65,536 about
 * 6 %. The counts alone, 16,384 of them (64 KiB, read by every job), cost bench_mesh's empty jobs
 * 2 ns a round trip (3 %); the bits cost about 0.6. A bucket's keys are all of one stripe
 * (filter_index, crash.c), so its count and its bit change under that stripe's lock alone. */
#define CRASH_FILTER_BUCKETS 65536u
#define CRASH_STRIPES        16u /* at most 64: a bit each in stripes_used */

/* S: under the lock of the stripe of the entry's key; A: every stripe's lock. */
struct crash_stripe {
    _Alignas(64) pthread_mutex_t lock;
    /* Stamps its keys' entries in the order they are made: S to change (a load and a store under the
     * lock); read lock-free, summed over the stripes, as the count of entries ever made
     * (shard__crash_made). */
    _Atomic uint64_t owe_seq;
    uint32_t entries; /* S: its keys' entries; its bit in the table's `stripes_used` says whether not 0 */
    uint32_t keys;    /* S: its keys that have entries (what the keymap's growth is sized by) */
};

struct crash_table {
    struct crash_stripe stripe[CRASH_STRIPES];
    struct keymap    owed;                           /* S: KEYMAP_CRASH (a key's bucket: its stripe) */
    /* A bit a stripe whose count of entries is not 0: S to change (an atomic RMW), read lock-free.
     * One count of the whole table was one line that every claim and payment wrote, from every
     * worker (kv_server's MSET at 2 workers: 10 % of its CPU); a stripe's count shares its lock's
     * line, and this word changes only when a stripe empties or stops being empty. */
    _Atomic uint64_t stripes_used;
    uint64_t         visit;                          /* A: the last walk of shard__crash_stuck_key (its marks) */
    _Atomic bool     grow;                           /* a stripe's keys outgrew its buckets: the
                                                     * keymap grows under every lock after the insert
                                                     * (crash.c's entry_made); relaxed, a hint */
    _Atomic bool     shrink;                         /* the table emptied with its keymap grown: the
                                                     * keymap goes back to its first buckets under
                                                     * every lock after the payment (crash.c's
                                                     * shrink), if still empty; relaxed, a hint */
    /* I: called after an entry was made and its locks let go (NULL: nothing), with made_ctx: a key
     * that was not stuck may be now, through a chain of multi-key jobs (a drain mark waits on that:
     * handoff.c's shard__entries_made). Set by the dispatcher after init. */
    void           (*made)(void *ctx);
    void            *made_ctx;
    uint32_t         filter[CRASH_FILTER_BUCKETS];   /* S (the bucket's stripe) */
    _Atomic uint64_t filter_bits[CRASH_FILTER_BUCKETS / 64]; /* a bucket's count is not 0: S to
                                                     * change (an atomic RMW: a word spans stripes);
                                                     * read lock-free */
};

/* One crashed worker's part, embedded in the worker: its stuck entry and how many entries it owes
 * (the worker is not freed while it owes any: the entries point at it). Every worker has one: a live
 * worker's owes the jobs it deferred. The stuck entry under its key's stripe's lock. */
struct crash_record {
    _Atomic uint32_t owed;  /* entries owed by this record, the stuck one included (changed under the
                             * entry's stripe's lock: its entries may be of several stripes); first,
                             * so that a multi-key job's (multi_layout.h) shares its state's line */
    struct job       stuck; /* the stuck entry: epoch 0, hash of the running job's key */
};

void shard__crash_table_init(struct crash_table *t);
void shard__crash_table_destroy(struct crash_table *t);
void shard__crash_record_init(struct crash_record *c);
/* A record that only ever owes claims (a multi-key job's owner): its count alone is made. Its stuck
 * entry is a crashed worker's and never made for it; the table only compares an entry's address
 * with it (crash.c's is_stuck_entry), so its lines are never touched. */
void shard__crash_owner_init(struct crash_record *c);

/* Whether an older entry of j's key stands before j. Context: any thread; lock-free when j's bucket
 * holds no entry. */
bool shard__crash_blocks(struct crash_table *t, const struct job *j);
/* Whether the key's first entry is a stuck job, or a multi-key job's claim that waits for one, through
 * any chain of multi-key jobs, or whose job runs on a crashed worker (drain does not wait for what
 * follows one). O(claims reached). */
bool shard__crash_stuck_key(struct crash_table *t, uint64_t hash);
/* Whether an entry of hash's bucket may stand: false means no job of that key is held up by the
 * table (the batch fast path's check, run.c). Context: any thread, lock-free. */
bool shard__crash_may_block(struct crash_table *t, uint64_t hash);
/* Whether the table may hold any entry: false means no job is held up by it. One word, written only
 * when a stripe empties or stops being empty: for a check of several keys at once (run.c's whole
 * jobs) before their buckets, and for the walks (walk.c). Context: any thread, lock-free. */
bool shard__crash_any(struct crash_table *t);

/* A multi-key job holds the key of claim (its hash set; claim->sibling its other claims, in a
 * circle): an entry of epoch 0, ahead of every job of the key not yet run, as a stuck job's, until
 * shard__crash_paid (through shard__owed_done). Charged to owner. Context: the worker that runs the
 * job's part of that key, inside it (every job of the key before it has run). */
void shard__crash_claim(struct crash_table *t, struct crash_record *owner, struct job *claim);
/* The claim becomes step, a job of its key that the table owes (owner's), as first as the claim was:
 * the key stays held, and step runs as the key's first entry (a multi-key job's step, multi.c). */
void shard__crash_swap(struct crash_table *t, struct crash_record *owner, struct job *claim, struct job *step);

/* x crashed while running a job of hash: no job of that key may run until the job returns and its
 * stuck entry is paid (shard__owed_done with x's stuck record, run.c). */
void shard__crash_stick(struct crash_table *t, struct crash_record *x, uint64_t hash);
/* Rerouted jobs of x (a list through next; only JOB_RUN jobs not yet owed are taken): x owes
 * each until it has run. */
void shard__crash_owe_list(struct crash_table *t, struct crash_record *x, struct job *list);
/* How many entries were ever made (the stripes' owe_seq, summed): a change count. An entry made after a look that found none to
 * wait behind is what can make a job wait behind one (a payment only ends waits). Read without a
 * lock: a change count compared with one read under every lock (shard__crash_defer_held); an entry
 * being made meanwhile may be missed, as by a look that took the locks just before it, and the event
 * that makes it matter to a holder wakes that holder to look again (handoff.c). */
uint64_t shard__crash_made(struct crash_table *t);
/* Each job of the held list (through next) that runs, is not owed, is of an epoch below epoch, and
 * has an older entry of its key before it becomes an entry too, charged to its holder's record, and
 * stops counting for the holder's fences. Under one lock: a key's jobs of one epoch all become owed,
 * in list order, or none does. *made: shard__crash_made as of the look (exact: under every lock), the
 * entries made just now included. Return: how many became entries. */
size_t shard__crash_defer_held(struct crash_table *t, struct crash_record *holder, struct job *held,
                               uint64_t epoch, uint64_t *made);

/* Starts loading, for writing, the lines a payment of entry j writes outside the keymap's bucket
 * chain (its stripe's lock and counts, its filter count and bit, its own link), so that payments of
 * several entries wait for them together, not one after another behind each lock. Context: any
 * thread; reads nothing of the table. */
void shard__crash_prefetch(struct crash_table *t, const struct job *j);
/* Remove an entry: j has run or was dropped; or x's stuck job returned. Return: whether the key's
 * first entry changed (some held job may run now). */
bool shard__crash_paid(struct crash_table *t, struct job *j);

/* Whether x's record owes nothing any more. */
bool shard__crash_settled(struct crash_table *t, struct crash_record *x);

#endif
