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

#include "cacheline.h"
#include "job.h"
#include "shard/dispatcher.h"

/* A cache line a slot: a producer writing the next slot never touches the line the worker is reading,
 * nor another producer's (40-byte slots straddled lines; a line each measured 1->1 empty jobs 40 ->
 * 50 M/s and 2->2 with a real job 7.0 -> 7.5 M/s). Memory: 64 bytes a unit of queue capacity. */
struct slot {
    alignas(SHARD_CACHELINE) _Atomic uint64_t seq; /* pos + 1 once the job of pos is written, in the low 56
                                                    * bits, and the job's origin above; the worker never writes it */
    shard_job_fn     fn;
    void            *arg;
    uint64_t         hash;
    uint64_t         epoch;
};

/* The origin rides in seq's top byte, not in a field of its own: a producer that outruns its worker
 * writes slots whose lines the worker holds, and only as many slots are in flight as its store buffer
 * holds their stores while those lines come over. A byte of its own was a fifth store a slot (hash
 * and epoch go as one): bench_peers 1to1_burst 40.7-41.7 -> 31.6-33.5 M jobs/s (6b72bfa against its
 * parent), a 64-bit field no better; in the epoch's top byte it cost single submits 8 % (1to1_empty),
 * for reasons not found; here neither. Positions are compared modulo 2^56 (wrap-safe; a queue holds
 * far fewer). */
#define SHARD_SLOT_ORIGIN_SHIFT 56
#define SHARD_SLOT_POS_MASK     ((UINT64_C(1) << SHARD_SLOT_ORIGIN_SHIFT) - 1)

/* The origin of the job in a slot that shard__queue_peek_sc returned, while the slot is still the
 * caller's: a batch's later slot, read without w->lock, may have been taken back by a crash and
 * written again; its answer counts only if the batch's CAS then takes the position (run.c). */
static inline uint8_t shard__slot_origin(const struct slot *s)
{
    return (uint8_t)(atomic_load_explicit(&s->seq, memory_order_relaxed) >> SHARD_SLOT_ORIGIN_SHIFT);
}

/* Each line written by one side only: read-only fields, the producers' line, the consumer's line. */
struct queue {
    alignas(SHARD_CACHELINE) struct slot *slots;
    uint64_t         mask;
    uint64_t         release_mask; /* publish head every release_mask + 1 pops */
    alignas(SHARD_CACHELINE) _Atomic uint64_t tail; /* producers: next position to claim */
    _Atomic uint64_t head_cache;                    /* producers: a recent head_pub */
    /* Submitters waiting for room (space.c), on the line a producer reads anyway: a worker's submit
     * checks it (submit.c), and a waiter holds the worker alive by it (registry.c). */
    _Atomic uint32_t waiters;
    alignas(SHARD_CACHELINE) uint64_t head;         /* consumer: next position to take */
    _Atomic uint64_t head_pub;                      /* consumer: positions below are free again */
    alignas(SHARD_CACHELINE) pthread_mutex_t side_lock;
    struct job_list  side;
    _Atomic uint64_t side_next;  /* the first side item's position, UINT64_MAX when none: written
                                  * under side_lock, read without it by the consumer */
};

/* capacity is rounded up to a power of two. Return: 0 or -ENOMEM. */
int  shard__queue_init(struct queue *q, uint32_t capacity);
void shard__queue_destroy(struct queue *q);
uint64_t shard__queue_capacity(const struct queue *q);

/* Producers (inline: every submit runs them). */
/* Claims up to n consecutive positions from the tail with one CAS: as many as are free, from *first.
 * The producers' cached head is refreshed only when it says fewer than n are free. The CAS is
 * seq_cst: half of the parking Dekker pair (the caller then reads the worker's parking flag).
 * Return: how many were claimed, 0 when the ring is full. */
static inline uint64_t shard__queue_claim_mp(struct queue *q, uint64_t n, uint64_t *first)
{
    uint64_t cap = q->mask + 1, pos = atomic_load_explicit(&q->tail, memory_order_relaxed), k;
    if (n > cap)
        n = cap;
    do {
        /* acquire, pairing with the release below: whoever refreshed the cache acquired head_pub
         * from the consumer first, so the consumer's reads of a slot's previous job happen before
         * our writes to it, whichever producer refreshed. A stale cache only says "full" too early. */
        uint64_t head = atomic_load_explicit(&q->head_cache, memory_order_acquire);
        if (pos - head > cap - n) {
            /* acquire: pairs with the release of shard__queue_publish_head_sc / _upto_sc. */
            head = atomic_load_explicit(&q->head_pub, memory_order_acquire);
            atomic_store_explicit(&q->head_cache, head, memory_order_release);
        }
        if (head > pos) { /* pos was read before others claimed and the worker took past it */
            pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
            k = 0;
            continue;
        }
        if (pos - head >= cap)
            return 0;
        k = cap - (pos - head) < n ? cap - (pos - head) : n;
    } while (!k || !atomic_compare_exchange_weak_explicit(&q->tail, &pos, pos + k, memory_order_seq_cst,
                                                          memory_order_relaxed));
    *first = pos;
    return k;
}

/* Writes the job of position pos, which the caller claimed. */
static inline void shard__queue_write(struct queue *q, uint64_t pos, shard_job_fn fn, void *arg, uint64_t hash,
                                      uint64_t epoch, uint8_t origin)
{
    struct slot *s = &q->slots[pos & q->mask];
    s->fn = fn;
    s->arg = arg;
    s->hash = hash;
    s->epoch = epoch;
    /* release (E1, docs/protocol.md): the consumer that sees pos + 1 (mod 2^56, the low bits) sees the job. */
    atomic_store_explicit(&s->seq, ((pos + 1) & SHARD_SLOT_POS_MASK) | (uint64_t)origin << SHARD_SLOT_ORIGIN_SHIFT,
                          memory_order_release);
}

/* One job. Return: false when the ring is full (nothing written). */
static inline bool shard__queue_push_mp(struct queue *q, shard_job_fn fn, void *arg, uint64_t hash, uint64_t epoch,
                                        uint8_t origin)
{
    uint64_t pos;
    if (!shard__queue_claim_mp(q, 1, &pos))
        return false;
    shard__queue_write(q, pos, fn, arg, hash, epoch, origin);
    return true;
}

/* What fills a slot claimed for no job (a batch submit's slot beyond what it accepted, submit_many.c):
 * pop consumes it unseen, so it is never run, counted, set aside, rerouted or dropped; only the batch
 * fast path, which reads slots itself, skips it (run.c). */
void shard__queue_void(shard_worker *w, void *arg);

/* Whether the ring has a free slot now (for a waiting submitter). */
bool shard__queue_has_room(struct queue *q);
/* Appends a record to the side list, ordered after every slot claimed so far. Never fails. */
void shard__queue_push_side(struct queue *q, struct job *j);
/* A new record for a job of hash (routed to routed under epoch), pushed on the side list: the way in
 * when the ring is full and the submitter may not wait (a worker's submit, its outbox's delivery).
 * Return: false when no memory could be had (nothing pushed). */
bool shard__queue_push_side_new(struct queue *q, struct shard_worker *routed, shard_job_fn fn, void *arg,
                                uint64_t hash, uint64_t epoch, uint8_t origin);

/* Consumer (the worker, or a crash holding the worker's lock). The next item in order: a side record
 * whose position has come (returned as is), or the next ring slot copied into *scratch (returned as
 * scratch). NULL when empty, or while a producer is between claiming and writing its slot. */
struct job *shard__queue_pop_sc(struct queue *q, struct job *scratch);
/* True when the queue may hold an item (seq_cst: the worker's half of the parking Dekker pair). */
bool shard__queue_nonempty_sc(struct queue *q);
/* The fast path's view (run.c's batch): the slot at position pos if its job is written, else NULL.
 * acquire (E1): pairs with the producer's release; the job's fields are visible. Taking it is the caller's
 * business: it sets q->head past it under the worker's lock afterwards (shard__queue_advance_sc). */
static inline const struct slot *shard__queue_peek_sc(const struct queue *q, uint64_t pos)
{
    const struct slot *s = &q->slots[pos & q->mask];
    uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
    return (seq & SHARD_SLOT_POS_MASK) == ((pos + 1) & SHARD_SLOT_POS_MASK) ? s : NULL;
}
/* The position of the first side item, UINT64_MAX when none: a slot at a lower position goes first.
 * A side item pushed while a slot was claimed may land on either side of it (push_side). */
static inline uint64_t shard__queue_side_next(const struct queue *q)
{
    return atomic_load_explicit(&q->side_next, memory_order_acquire);
}
/* Whether an item is ready at the consumer's position: the next slot is written, or a side item waits.
 * What an idle worker polls: the next slot's line is the one the producer writes anyway, where the
 * tail's line would bounce between producer and worker on every submit. */
static inline bool shard__queue_ready_sc(const struct queue *q)
{
    return shard__queue_peek_sc(q, q->head) || shard__queue_side_next(q) != UINT64_MAX;
}
/* Moves the consumer's position to head (the slots below were taken by a batch), publishing it when
 * it crossed a publishing boundary, as pop would have. */
void shard__queue_advance_sc(struct queue *q, uint64_t head);
/* Frees the slots below head for producers without moving the consumer's own position (a batch, which
 * moves q->head once it holds the worker's lock again). Never moves the published head backwards: a
 * crash that ended the batch may have published further meanwhile. */
void shard__queue_publish_upto_sc(struct queue *q, uint64_t head);
/* Publishes the consumer's position, freeing the slots it has taken. pop does it every 1/8 of the
 * capacity (at most 32 slots, every slot for queues under 16), so taken slots wait at most that long
 * to be reused; call it before going idle. */
void shard__queue_publish_head_sc(struct queue *q);
uint64_t shard__queue_length(const struct queue *q);

#endif
