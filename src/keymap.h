/* Internal: an intrusive multimap from key hash to a FIFO of jobs. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Every link lives in the job records (struct keylink, one per map a job can be in), so insertion never
 * allocates and cannot fail: this is what lets a worker set jobs aside, and a crash record track the
 * keys still owed, without a failure path. The bucket chains hold one entry per distinct key (its
 * first job), so a lookup costs O(distinct keys / buckets) however many jobs one key has.
 * Each key's FIFO is kept in epoch order: a thread's jobs carry non-decreasing epochs, so this keeps
 * each thread's order. Within one epoch, jobs a crash owes come first, in the order they became owed
 * (job.h's owe_seq, the crash table's order, which is their submission order), then the others in
 * the order they were inserted. Not synchronised: the owner's lock guards it. */
#ifndef SHARD_SRC_KEYMAP_H
#define SHARD_SRC_KEYMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KEYMAP_BUCKETS 4096u

struct job;

struct keylink {
    struct job *next;        /* next job of the same key */
    struct job *tail;        /* in a key's first job: its last */
    struct job *bucket_next; /* in a key's first job: the next key's first job in the bucket */
    struct job *hint;        /* in a key's first job: the job last inserted before its tail, while
                              * it is in the FIFO, else NULL: where the next such insert starts */
};

enum keymap_use { KEYMAP_CRASH, KEYMAP_HELD, KEYMAP_USES }; /* a job's links, in this order (job.h) */

/* No count of its jobs: the crash table changes its buckets under one lock a stripe of them. */
struct keymap {
    enum keymap_use use;
    struct job     *bucket[KEYMAP_BUCKETS];
};

/* The bucket of a hash's key: a change to a key's FIFO writes only there. */
static inline size_t shard__keymap_bucket(uint64_t hash)
{
    return (hash ^ hash >> 32) % KEYMAP_BUCKETS;
}

void        shard__keymap_init(struct keymap *m, enum keymap_use use);
void        shard__keymap_insert(struct keymap *m, struct job *j);
struct job *shard__keymap_first(const struct keymap *m, uint64_t hash);
/* The job after j in its key's FIFO (j in the map), or NULL. */
struct job *shard__keymap_next(const struct keymap *m, const struct job *j);
/* Removes j wherever it is in its key's FIFO. Return: whether it was its key's first job. */
bool        shard__keymap_remove(struct keymap *m, struct job *j);

#endif
