/* Internal: the per-worker job queue. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The hot path is a bounded multi-producer single-consumer ring of job slots written by value: a
 * submit claims a position with one CAS on the tail, writes the slot and marks it written; the worker
 * reads slots in order and never writes them, publishing how far it got once a batch (head_pub), which
 * producers read only when their cached copy says the ring is full. No record is allocated or recycled,
 * so a job costs about one cache-line transfer from producer to worker, as in a plain SPSC ring.
 * Everything rare enters the same order through a side list of linked records stamped with the tail
 * position at insertion: control items (fences, drain marks, stop) and jobs a worker submits beyond a
 * full queue. The worker takes a side item once it has consumed every slot before its position.
 *
 * Written by hand: liburcu's wfcqueue is unbounded and linked (a record a job) and synchronises
 * through inline assembly that ThreadSanitizer cannot see; this is C11 atomics throughout. */
#ifndef SHARD_SRC_QUEUE_H
#define SHARD_SRC_QUEUE_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keymap.h"
#include "shard/dispatcher.h"

#define SHARD_CACHELINE 64

enum job_kind {
    JOB_RUN,   /* a user's job */
    JOB_FENCE, /* control: everything routed here under older epochs is done */
    JOB_MARK,  /* control: shard_drain's marker */
    JOB_STOP,  /* control: the worker exits once everything before it is done */
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
    uint64_t     pos;            /* side list: the ring position it goes before */
    uint8_t      kind;
    bool         release;        /* JOB_FENCE: this worker loses keys, run the release hook */
    bool         in_prio;        /* held: in the rerouted (front) segment */
    bool         embedded;       /* part of a larger object (a worker's stop item): never freed */
    struct job  *held_next, *held_prev; /* held order list (held.c); also side list and inbox */
    struct keylink links[KEYMAP_USES];  /* keymap.c: held by key, crash record by key */
    const struct snap *fence_before, *fence_after; /* JOB_FENCE with release */
    struct job_block  *block;    /* records made in bulk by a crash: freed with the last of them */
    struct crash_record *owed_to; /* a crash owes this job (crash.h): rerouted from its crashed
                                   * worker, or deferred behind a crash; NULL otherwise */
    /* handoff.c: the older owner this held job was last found waiting for, so that a check while it
     * still waits costs one load, not a walk over the snapshots. NULL: none known. */
    uint64_t     moved_epoch;    /* moved to another worker at a fence of this epoch (worker.c's
                                  * move_to), 0 if not: it waits for that epoch's owners too */
    const struct snap *wait_snap; /* of epoch wait_epoch: its owner at wait_member must pass fence
                                   * wait_epoch + 1 (wait_snap is read only while still kept) */
    uint64_t     wait_epoch;
    uint32_t     wait_member;
};

/* A list of jobs linked through held_next, appended at its tail: a worker's inbox, a crashed worker's
 * leftovers, its jobs for one new owner. */
struct job_list {
    struct job *head, *tail;
};

static inline void shard__job_list_append(struct job_list *l, struct job *j)
{
    j->held_next = NULL;
    if (l->tail)
        l->tail->held_next = j;
    else
        l->head = j;
    l->tail = j;
}

/* Appends the whole of from (not empty) to l. */
static inline void shard__job_list_splice(struct job_list *l, const struct job_list *from)
{
    if (l->tail)
        l->tail->held_next = from->head;
    else
        l->head = from->head;
    l->tail = from->tail;
}

/* Records for a crashed worker's ring, allocated before the crash's point of no return as one block:
 * its pages are touched only for the records used, and it is freed when the last one is. */
struct job_block {
    _Atomic long refs;
    size_t       used, size;
    struct job   recs[];
};

struct slot {
    _Atomic uint64_t seq; /* pos + 1 once the job of pos is written; the worker never writes it */
    shard_job_fn     fn;
    void            *arg;
    uint64_t         hash;
    uint64_t         epoch;
};

/* Each line written by one side only: read-only fields, the producers' line, the consumer's line. */
struct queue {
    alignas(SHARD_CACHELINE) struct slot *slots;
    uint64_t         mask;
    uint64_t         release_mask; /* publish head every release_mask + 1 pops */
    alignas(SHARD_CACHELINE) _Atomic uint64_t tail; /* producers: next position to claim */
    _Atomic uint64_t head_cache;                    /* producers: a recent head_pub */
    alignas(SHARD_CACHELINE) uint64_t head;         /* consumer: next position to take */
    _Atomic uint64_t head_pub;                      /* consumer: positions below are free again */
    alignas(SHARD_CACHELINE) pthread_mutex_t side_lock;
    struct job_list  side;
    _Atomic bool     side_flag;                     /* side list not empty */
};

/* capacity is rounded up to a power of two. Return: 0 or -ENOMEM. */
int  shard__queue_init(struct queue *q, uint32_t capacity);
void shard__queue_destroy(struct queue *q);
uint64_t shard__queue_capacity(const struct queue *q);

/* Producers. Return: false when the ring is full (nothing written). The tail CAS is seq_cst: half of
 * the parking Dekker pair (the caller then reads the worker's parking flag). */
bool shard__queue_push_mp(struct queue *q, shard_job_fn fn, void *arg, uint64_t hash, uint64_t epoch);
/* Whether the ring has a free slot now (for a waiting submitter). */
bool shard__queue_has_room(struct queue *q);
/* Appends a record to the side list, ordered after every slot claimed so far. Never fails. */
void shard__queue_push_side(struct queue *q, struct job *j);

/* Consumer (the worker, or a crash holding the worker's lock). The next item in order: a side record
 * whose position has come (returned as is), or the next ring slot copied into *scratch (returned as
 * scratch). NULL when empty, or while a producer is between claiming and writing its slot. */
struct job *shard__queue_pop_sc(struct queue *q, struct job *scratch);
/* True when the queue may hold an item (seq_cst: the worker's half of the parking Dekker pair). */
bool shard__queue_nonempty_sc(struct queue *q);
/* Publishes the consumer's position, freeing the slots it has taken. pop does it every 1/8 of the
 * capacity (at most 32 slots, every slot for queues under 16), so taken slots wait at most that long
 * to be reused; call it before going idle. */
void shard__queue_release_sc(struct queue *q);
uint64_t shard__queue_length(const struct queue *q);

/* Parking: the worker sleeps on seq while sleeping is set; a waker clears sleeping and bumps seq. */
struct parking {
    alignas(SHARD_CACHELINE) _Atomic uint32_t seq;
    _Atomic uint32_t sleeping;
};

uint32_t shard__park_prepare(struct parking *pk);
void     shard__park_cancel(struct parking *pk);
void     shard__park_wait(struct parking *pk, uint32_t seq);
bool     shard__park_wake(struct parking *pk);

#endif
