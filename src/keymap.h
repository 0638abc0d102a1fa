/* Internal: an intrusive multimap from key hash to a FIFO of jobs. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Every link lives in the job records (struct keylink, one per map a job can be in), so insertion never
 * allocates and cannot fail: this is what lets a worker set jobs aside, and a crash record track the
 * keys still owed, without a failure path. The bucket chains hold one entry per distinct key (its
 * first job), so a lookup costs O(distinct keys / buckets) however many jobs one key has.
 * Each key's FIFO is kept in epoch order: a thread's jobs carry non-decreasing epochs, so this keeps
 * each thread's order. Within one epoch, jobs a crash owes come first, in the order they became owed
 * (job.h's owe_seq, the crash table's order, which is their submission order), then the others in
 * the order they were inserted. Not synchronised: the owner's lock guards it.
 *
 * It starts with KEYMAP_BUCKETS buckets of its own and grows when its owner, which counts its keys by
 * what insert and remove return, asks (shard__keymap_fit):
 * with a fixed table, a crash table holding a million claims (a few hundred multi-key jobs of 1,024
 * keys behind a stuck key) had chains of 250 keys, and each claim and payment walked one: 633 such
 * jobs took 11.6 s to drain, where 4,097 take 1.0 s with it grown. Growing allocates; when it cannot,
 * the map stays as it is (slower, never wrong), so an insert still never fails. */
#ifndef SHARD_SRC_KEYMAP_H
#define SHARD_SRC_KEYMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KEYMAP_BUCKETS 4096u /* its first buckets, and the fewest it has */

struct job;

struct keylink {
    struct job *next;        /* next job of the same key */
    struct job *tail;        /* in a key's first job: its last */
    struct job *bucket_next; /* in a key's first job: the next key's first job in the bucket */
    struct job *hint;        /* in a key's first job: the job last inserted before its tail, while
                              * it is in the FIFO, else NULL: where the next such insert starts */
};

enum keymap_use { KEYMAP_CRASH, KEYMAP_HELD, KEYMAP_USES }; /* a job's links, in this order (job.h) */

/* No count of its jobs: the crash table changes its buckets under one lock a stripe of them. Not to be
 * copied or moved (bucket may point into it). */
struct keymap {
    enum keymap_use use;
    size_t          mask;   /* buckets - 1: a power of two, at least KEYMAP_BUCKETS */
    struct job    **bucket; /* first, or a grown table */
    struct job     *first[KEYMAP_BUCKETS];
};

/* The bits of a hash that choose its key's bucket: the bucket is mix & mask, so that its low bits,
 * mix % KEYMAP_BUCKETS, are the same whatever the map's size (the crash table's stripes and filter
 * are chosen by them: crash.c). */
static inline size_t shard__keymap_mix(uint64_t hash)
{
    return (size_t)(hash ^ hash >> 32);
}

void        shard__keymap_init(struct keymap *m, enum keymap_use use);
/* Frees a grown table: the map is empty and back to its first buckets. */
void        shard__keymap_reset(struct keymap *m);
/* How many buckets keys keys need, at most 2 a bucket, from a map of buckets: buckets, or 4, 16, ...
 * times it. */
size_t      shard__keymap_fit_size(size_t buckets, size_t keys);
/* Moves every key to b, a zeroed table of n buckets (a power of two above the map's; the map frees
 * it). O(buckets + keys): growing by 4 times makes it O(1) a key, amortized. */
void        shard__keymap_grow_into(struct keymap *m, struct job **b, size_t n);
/* Grows the table to shard__keymap_fit_size(m, keys) buckets, if that is more; no memory: unchanged. */
void        shard__keymap_fit(struct keymap *m, size_t keys);
/* Return: whether j's key was not in the map (a key more: what the owner counts for shard__keymap_fit). */
bool        shard__keymap_insert(struct keymap *m, struct job *j);
struct job *shard__keymap_first(const struct keymap *m, uint64_t hash);
/* The job after j in its key's FIFO (j in the map), or NULL. */
struct job *shard__keymap_next(const struct keymap *m, const struct job *j);
/* Removes j wherever it is in its key's FIFO. Return: whether it was its key's first job. *gone (NULL:
 * not asked): whether it was its key's last, which leaves the map. */
bool        shard__keymap_remove(struct keymap *m, struct job *j, bool *gone);

#endif
