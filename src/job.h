/* Internal: the job record, for everything that is not a slot of a worker's ring.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A record is one of: a user's job set aside, rerouted or submitted by a worker beyond a full queue;
 * or a control item (fence, drain mark, stop). It is on at most one list at a time through next
 * (a queue's side list, a worker's inbox, its held order, a crash's leftovers) and, while held or
 * owed, in keymaps by key (links[]). Who allocates and frees records: record.c's pool (jobs a
 * worker sets aside), the crash hand-over (blocks), submit and a worker's outbox (a worker's
 * overflow), membership.c (fences, drain marks); every record that was queued is freed through
 * shard__free_record (record.c); fences and marks of a change or drain that failed before queuing
 * them are freed where they were made. */
#ifndef SHARD_SRC_JOB_H
#define SHARD_SRC_JOB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keymap.h"
#include "shard/dispatcher.h"

enum job_kind {
    JOB_RUN,   /* a user's job */
    JOB_FENCE, /* control: everything routed here under older epochs is done */
    JOB_MARK,  /* control: shard_drain's marker */
    JOB_STOP,  /* control: the worker exits once everything before it is done */
    JOB_CLAIM, /* a multi-key job's hold on one of its keys: only ever a crash table entry (multi.c) */
};

/* What a job of kind JOB_RUN (a record or a slot) stands for, which a DROP crash must know: a user's
 * job is reported as itself; shard's own jobs for a timer or a multi-key job stand for the timer's or
 * the multi-key job's (crash_handover.c asks their owners). Set by whoever submits the job. */
enum job_origin {
    ORIGIN_USER,       /* the user's fn */
    ORIGIN_TIMER,      /* a timer's arm or fire job (timer.c) */
    ORIGIN_MULTI_PART, /* a multi-key job's part (multi.c) */
    ORIGIN_MULTI_STEP, /* a multi-key job's step: never dropped (multi.c) */
    ORIGIN_MULTI_WHOLE, /* a multi-key job queued whole, its keys all on one worker: taken as its parts
                         * or run at once, never handed over as itself (multi.c) */
};

struct snap;
struct job_block;
struct crash_record;

/* A job outside the ring: set aside, rerouted, a control item, or a worker's overflow submit. */
struct job {
    shard_job_fn fn;
    void        *arg;
    uint64_t     hash;
    uint64_t     epoch;          /* epoch of the ring snapshot the job was routed with */
    struct shard_worker *routed; /* the worker it was routed to: whose place in line it holds */
    uint64_t     pos;            /* side list: the ring position it goes before; JOB_CLAIM (never
                                  * queued): the last walk of crash.c's key_stuck that saw it */
    uint8_t      kind;
    uint8_t      origin;         /* JOB_RUN: enum job_origin */
    bool         loses_keys;     /* JOB_FENCE: this worker loses keys, run the release hook */
    bool         in_prio;        /* held: in the rerouted (front) segment */
    bool         embedded;       /* part of a larger object (a worker's stop item): never freed */
    bool         in_table;       /* an entry of the crash table now (under its lock, crash.c) */
    /* What an entry of the crash table uses, from here to links[KEYMAP_CRASH] (links[0]), is on the
     * record's first two lines with the above: a multi-key job's claim is made on one worker and
     * paid on another, and each line of it crosses between them. */
    struct crash_record *owed_to; /* a crash owes this job (crash.h): rerouted from its crashed
                                   * worker, or deferred behind a crash; NULL otherwise */
    uint64_t     owe_seq;        /* while owed_to: when it became owed, the crash table's order among
                                  * owed jobs of one key and epoch (crash.c, keymap.c) */
    struct job  *sibling;        /* JOB_CLAIM: the next claim of the same multi-key job, in a circle;
                                  * a multi-key job's step: its part's claim (multi.c) */
    struct keylink links[KEYMAP_USES];  /* keymap.c: crash record by key, held by key */
    /* The one list the record is on, in its life's order: a queue's side list; then its worker's held
     * order (held.c, doubly linked) or a spare list (record.c); or a crash's leftovers, then the list
     * for one new owner, then that worker's inbox, then its held order. A record leaves one list
     * before it joins the next, so one link serves all. */
    struct job  *next, *prev;
    const struct snap *fence_before, *fence_after; /* every JOB_FENCE (fence_before is read only
                                                    * with loses_keys) */
    struct job_block  *block;    /* records made in bulk by a crash: freed with the last of them */
    uint64_t     moved_epoch;    /* moved to another worker (follow.c) while the ring of this epoch
                                  * was in force, 0 if not: it waits for that epoch's owners too */
    /* handoff.c: the older owner this held job was last found waiting for, so that a check while it
     * still waits costs one load, not a walk over the snapshots. NULL: none known. */
    const struct snap *wait_snap; /* of epoch wait_epoch: its owner at wait_member must pass fence
                                   * wait_epoch + 1 (wait_snap is read only while still kept) */
    uint64_t     wait_epoch;
    uint32_t     wait_member;
};

/* The bytes of a record that the crash table reads as an entry (struct job's comment): fn to
 * links[KEYMAP_CRASH]. It also writes next, in a walk, before it reads it (crash.c's claim_visit). A
 * record that is only ever an entry, a multi-key job's claim, needs no more of it made. */
#define JOB_TABLE_BYTES (offsetof(struct job, links) + (KEYMAP_CRASH + 1) * sizeof(struct keylink))
#define JOB_IN_TABLE_BYTES(f) (offsetof(struct job, f) + sizeof(((struct job *)0)->f) <= JOB_TABLE_BYTES)
_Static_assert(JOB_IN_TABLE_BYTES(pos) && JOB_IN_TABLE_BYTES(sibling) && JOB_IN_TABLE_BYTES(in_table) &&
                   JOB_IN_TABLE_BYTES(kind) && JOB_IN_TABLE_BYTES(owed_to) && JOB_IN_TABLE_BYTES(epoch),
               "what a walk reads of a claim that has never been an entry (crash.c: pos, sibling, in_table) "
               "and what an entry's reader reads lie within JOB_TABLE_BYTES");

/* A list of jobs linked through next, appended at its tail: a worker's inbox, a crashed worker's
 * leftovers, its jobs for one new owner. */
struct job_list {
    struct job *head, *tail;
};

static inline void shard__job_list_append(struct job_list *l, struct job *j)
{
    j->next = NULL;
    if (l->tail)
        l->tail->next = j;
    else
        l->head = j;
    l->tail = j;
}

/* Appends a chain of jobs linked through next (may be empty) to l, one by one. */
static inline void shard__job_list_append_chain(struct job_list *l, struct job *chain)
{
    for (struct job *j = chain, *next; j; j = next) {
        next = j->next;
        shard__job_list_append(l, j);
    }
}

/* Appends the whole of from (not empty) to l. */
static inline void shard__job_list_splice(struct job_list *l, const struct job_list *from)
{
    if (l->tail)
        l->tail->next = from->head;
    else
        l->head = from->head;
    l->tail = from->tail;
}

/* Records allocated as one block, freed when the last one is: a crashed worker's ring's, allocated
 * before the crash's point of no return (its pages are touched only for the records used); a
 * multi-key job's (multi.c, whose blocks are kept for reuse). */
struct job_block {
    _Atomic long refs;
    size_t       used, size;
    void       (*release)(struct job_block *b); /* frees it at the last reference; NULL: free() */
    struct job  *recs; /* its size records, in the allocation: after this head (a crash's), or after
                        * what a multi-key job reads and writes first (multi.c) */
    struct job_block *next_kept; /* a block kept for reuse: the next one kept (record.c, multi.c) */
};

/* Drops a reference to b; the last frees it (its release, or free()). acq_rel: every user's writes
 * to its records happen before the block is freed. */
void shard__job_block_put(struct job_block *b);

#endif
