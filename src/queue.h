/* Internal: the per-worker job queue. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Three parts, each with its concurrency contract in its names:
 * - job records, taken from the owner worker's fixed pool (pool_pop_mp: many producers) and returned
 *   by whichever worker ran them (pool_push_chain_mp): the pool's size is the queue's capacity, and
 *   submit allocates nothing;
 * - an intrusive multi-producer single-consumer FIFO of records (queue_push_mp / queue_pop_sc);
 * - parking: a futex word the worker sleeps on and producers bump only when it sleeps.
 *
 * Written by hand rather than with liburcu's wfcqueue because wfcqueue synchronises through inline
 * assembly that ThreadSanitizer cannot see: every hand-off of a job record would need suppressing,
 * hiding real races. These are C11 atomics throughout, so TSan checks the whole path. */
#ifndef SHARD_SRC_QUEUE_H
#define SHARD_SRC_QUEUE_H

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
    JOB_FENCE, /* control: everything before it under older epochs is done */
    JOB_MARK,  /* control: shard_drain's marker */
    JOB_STOP,  /* control: the worker exits once everything before it is done */
};

struct job_pool;
struct snap;

struct job {
    _Atomic(struct job *) next;  /* queue link */
    shard_job_fn fn;
    void        *arg;
    uint64_t     hash;
    uint64_t     epoch;          /* epoch of the ring snapshot the job was routed with */
    struct shard_worker *routed; /* the worker it was routed to: whose place in line it holds */
    struct job_pool     *home;   /* pool to return the record to; NULL: heap record */
    _Atomic uint32_t     free_next; /* pool link: index + 1 of the next free record */
    uint8_t      kind;
    bool         release;        /* JOB_FENCE: this worker loses keys, run the release hook */
    bool         in_prio;        /* held: in the rerouted (front) segment */
    bool         rerouted;       /* moved here from the queue of `routed`, which crashed */
    struct job  *held_next, *held_prev; /* held order list (held.c); also the inbox list */
    struct keylink links[KEYMAP_USES];  /* keymap.c: held by key, crash record by key */
    const struct snap *fence_before, *fence_after; /* JOB_FENCE with release */
};

/* The pool: a fixed array of records and a lock-free stack of the free ones. The stack's top word
 * packs (tag:24 | count:20 | top index + 1:20); the tag defeats ABA between concurrent poppers. */
struct job_pool {
    alignas(SHARD_CACHELINE) _Atomic uint64_t top;
    struct job *recs;
    uint32_t    capacity;
};

int  pool_init(struct job_pool *p, uint32_t capacity);
void pool_destroy(struct job_pool *p);
struct job *pool_pop_mp(struct job_pool *p);
/* Returns the chain first..last (linked through free_next by pool_link) of n records. */
void pool_push_chain_mp(struct job_pool *p, struct job *first, struct job *last, uint32_t n);
void pool_link(struct job_pool *p, struct job *rec, struct job *next);
uint32_t pool_free_count(const struct job_pool *p);

/* Vyukov's intrusive MPSC queue: producers swap the tail, then link the previous tail to the node;
 * the single consumer follows the links from its private head, through a stub node. */
struct queue {
    alignas(SHARD_CACHELINE) _Atomic(struct job *) tail;
    alignas(SHARD_CACHELINE) struct job *head; /* consumer only */
    struct job stub;
};

void queue_init(struct queue *q);
void queue_push_mp(struct queue *q, struct job *j);
/* The oldest job, or NULL when empty or while a producer is between its two steps (that producer
 * is inside a submit and finishes at once: the caller retries). */
struct job *queue_pop_sc(struct queue *q);
/* True when the queue may hold a job; the consumer's view, safe to call from it only. */
bool queue_nonempty_sc(struct queue *q);

/* Parking: the worker sleeps on seq while sleeping is set; a waker clears sleeping and bumps seq. */
struct parking {
    alignas(SHARD_CACHELINE) _Atomic uint32_t seq;
    _Atomic uint32_t sleeping;
};

/* Worker side: returns the sequence to wait on, after announcing sleep. Call has_work after it; if
 * there is none, park_wait(seq). */
uint32_t park_prepare(struct parking *pk);
void     park_cancel(struct parking *pk);
void     park_wait(struct parking *pk, uint32_t seq);
/* Waker side: wakes the worker if it sleeps or is about to. Return: true if a wake-up was sent. The
 * caller's preceding change (a queue push) must be ordered before this by a seq_cst operation. */
bool     park_wake(struct parking *pk);

#endif
