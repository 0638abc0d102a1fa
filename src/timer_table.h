/* Internal: keyed timers' records, and the table that names them by id (timer_table.c).
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A timer is one 64-byte record, found from its id in O(1): the id is the record's index + 1 in its
 * low 32 bits and the record's generation in the high 32, so an id that outlived its timer (fired,
 * cancelled, dropped; the record reused) is told apart by its generation and never acts on another
 * timer. Records live in chunks that are never moved nor freed before the dispatcher, so a reader
 * holding an index may always look at the record.
 *
 * Whose a record is: the wheel that holds it (wheel.h, under that wheel's lock); once taken out of a
 * wheel, whoever took it out (an expiry, a cancel that unlinked it, a crash's hand-over); the arm or
 * fire job submitted for it (timer.c) while that job is queued or running. The fields below word are
 * written by the owner alone (hash, period, fn and arg only at allocation); next and prev also link
 * the free list, under the table's lock. Only the owner frees it. Any thread
 * may change its state word, with a CAS: that decides between firing and cancelling. */
#ifndef SHARD_SRC_TIMER_TABLE_H
#define SHARD_SRC_TIMER_TABLE_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cacheline.h"
#include "shard/dispatcher.h"

/* A timer's state, the low byte of its word; the generation is the high 32 bits. */
enum timer_state {
    TIMER_FREE,              /* not a timer: on the free list */
    TIMER_PENDING,           /* waiting for its deadline: in a wheel, moving between wheels, or its
                              * fire job queued */
    TIMER_RUNNING,           /* its job is running */
    TIMER_RUNNING_CANCELLED, /* a periodic timer cancelled while its job runs: that run is its last */
    TIMER_CANCELLED,         /* cancelled while pending: its owner frees it where it finds it */
};

struct wheel;

struct timer {
    alignas(SHARD_CACHELINE) _Atomic uint64_t word; /* generation << 32 | enum timer_state */
    uint64_t      hash;     /* the key's */
    uint64_t      deadline; /* CLOCK_MONOTONIC ns at or after which the job runs */
    uint64_t      period;   /* ns between runs; 0: once */
    shard_job_fn  fn;
    void         *arg;
    uint32_t      next, prev; /* index + 1 in the wheel's list (or a list being handed on); 0: none */
    _Atomic(struct wheel *) home; /* the wheel holding it, set and cleared under its lock; NULL: none */
};

#define TIMER_CHUNK_BITS 14
#define TIMER_CHUNKS     4096 /* 2^26 records (64M, 4 GiB) at most */

struct timer_table {
    _Atomic(struct timer *) chunks[TIMER_CHUNKS]; /* A: set once, under lock, read without it */
    pthread_mutex_t lock;
    uint32_t nchunks;   /* lock */
    uint32_t free_head; /* lock: index + 1 of the first free record, 0: none */
    _Atomic uint64_t live; /* A, changed under lock: records not free */
};

static inline uint64_t shard__timer_word(uint32_t gen, enum timer_state st)
{
    return (uint64_t)gen << 32 | st;
}

static inline enum timer_state shard__timer_state(uint64_t word)
{
    return (enum timer_state)(word & 0xff);
}

/* The record of index idx (< nchunks << TIMER_CHUNK_BITS). Context: any thread. */
static inline struct timer *shard__timer_at(const struct timer_table *tt, uint32_t idx)
{
    struct timer *c = atomic_load_explicit(&tt->chunks[idx >> TIMER_CHUNK_BITS], memory_order_acquire);
    return &c[idx & ((1u << TIMER_CHUNK_BITS) - 1)];
}

void shard__timer_table_init(struct timer_table *tt);
void shard__timer_table_destroy(struct timer_table *tt);
/* A record in state PENDING of a new generation: its index in *idx, its id in *id. Return: NULL when
 * out of memory or records. Context: any thread. */
struct timer *shard__timer_alloc(struct timer_table *tt, uint32_t *idx, uint64_t *id);
/* Frees the record of index idx (its owner's call): its id no longer names it. */
void shard__timer_free(struct timer_table *tt, uint32_t idx);
/* The index id names, or -1 when no record ever had it (its generation is not checked here). */
long shard__timer_find(struct timer_table *tt, uint64_t id);

#endif
