/* The per-worker job queue: record pool, MPSC FIFO, parking. SPDX-License-Identifier: LGPL-2.1-or-later */
#include "queue.h"

#include <errno.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define IDX_BITS 20u
#define IDX_MASK ((UINT64_C(1) << IDX_BITS) - 1)
#define CNT_SHIFT IDX_BITS
#define TAG_SHIFT (2 * IDX_BITS)

static uint64_t top_word(uint64_t tag, uint64_t count, uint64_t idx1)
{
    return tag << TAG_SHIFT | (count & IDX_MASK) << CNT_SHIFT | idx1;
}

int pool_init(struct job_pool *p, uint32_t capacity)
{
    p->recs = calloc(capacity, sizeof *p->recs);
    if (!p->recs)
        return -ENOMEM;
    p->capacity = capacity;
    for (uint32_t i = 0; i < capacity; i++) {
        p->recs[i].home = p;
        atomic_init(&p->recs[i].free_next, i + 1 < capacity ? i + 2 : 0);
    }
    atomic_init(&p->top, top_word(0, capacity, capacity ? 1 : 0));
    return 0;
}

void pool_destroy(struct job_pool *p)
{
    free(p->recs);
    p->recs = NULL;
}

struct job *pool_pop_mp(struct job_pool *p)
{
    /* acquire: pairs with the release of pool_push_chain_mp, so the previous user's last reads of
     * the record happen before the caller overwrites it. */
    uint64_t old = atomic_load_explicit(&p->top, memory_order_acquire);
    for (;;) {
        uint64_t idx1 = old & IDX_MASK;
        if (!idx1)
            return NULL;
        struct job *rec = &p->recs[idx1 - 1];
        /* May read a link that a concurrent pop-and-push changes: the tag makes that CAS fail. */
        uint64_t next = atomic_load_explicit(&rec->free_next, memory_order_relaxed);
        uint64_t nw = top_word((old >> TAG_SHIFT) + 1, ((old >> CNT_SHIFT) & IDX_MASK) - 1, next);
        if (atomic_compare_exchange_weak_explicit(&p->top, &old, nw, memory_order_acquire,
                                                  memory_order_acquire))
            return rec;
    }
}

void pool_link(struct job_pool *p, struct job *rec, struct job *next)
{
    atomic_store_explicit(&rec->free_next, next ? (uint32_t)(next - p->recs) + 1 : 0, memory_order_relaxed);
}

void pool_push_chain_mp(struct job_pool *p, struct job *first, struct job *last, uint32_t n)
{
    uint64_t old = atomic_load_explicit(&p->top, memory_order_relaxed);
    uint64_t first1 = (uint64_t)(first - p->recs) + 1;
    for (;;) {
        atomic_store_explicit(&last->free_next, (uint32_t)(old & IDX_MASK), memory_order_relaxed);
        uint64_t nw = top_word((old >> TAG_SHIFT) + 1, ((old >> CNT_SHIFT) & IDX_MASK) + n, first1);
        /* release: the records' links and everything the worker did with them precede the push.
         * seq_cst (no dearer than release for a CAS on x86): half of the space wake-up Dekker pair
         * (shard__space_notify). */
        if (atomic_compare_exchange_weak_explicit(&p->top, &old, nw, memory_order_seq_cst,
                                                  memory_order_relaxed))
            return;
    }
}

uint32_t pool_free_count(const struct job_pool *p)
{
    /* seq_cst: read after the waiter's count increment (wait_for_space). */
    return (uint32_t)((atomic_load_explicit(&p->top, memory_order_seq_cst) >> CNT_SHIFT) & IDX_MASK);
}

void queue_init(struct queue *q)
{
    memset(&q->stub, 0, sizeof q->stub);
    atomic_init(&q->stub.next, NULL);
    atomic_init(&q->tail, &q->stub);
    q->head = &q->stub;
}

void queue_push_mp(struct queue *q, struct job *j)
{
    atomic_store_explicit(&j->next, NULL, memory_order_relaxed);
    /* seq_cst: the producer then reads the parking flag; with the worker's seq_cst flag store and
     * queue check this is the Dekker pair that makes a lost wake-up impossible. acq_rel is
     * contained in it: acquire of the previous tail, release of this job's fields. */
    struct job *prev = atomic_exchange_explicit(&q->tail, j, memory_order_seq_cst);
    /* release: the consumer that follows this link sees the job's fields. */
    atomic_store_explicit(&prev->next, j, memory_order_release);
}

struct job *queue_pop_sc(struct queue *q)
{
    struct job *head = q->head;
    struct job *next = atomic_load_explicit(&head->next, memory_order_acquire);
    if (head == &q->stub) {
        if (!next)
            return NULL;
        q->head = next;
        head = next;
        next = atomic_load_explicit(&next->next, memory_order_acquire);
    }
    if (next) {
        q->head = next;
        return head;
    }
    /* head is the last linked node: hand it out only once the stub is behind it. */
    if (atomic_load_explicit(&q->tail, memory_order_acquire) != head)
        return NULL; /* a producer swapped the tail but has not linked yet */
    queue_push_mp(q, &q->stub);
    next = atomic_load_explicit(&head->next, memory_order_acquire);
    if (next) {
        q->head = next;
        return head;
    }
    return NULL;
}

bool queue_nonempty_sc(struct queue *q)
{
    /* seq_cst: the worker's half of the Dekker pair (see queue_push_mp). */
    struct job *tail = atomic_load_explicit(&q->tail, memory_order_seq_cst);
    return tail != q->head || atomic_load_explicit(&q->head->next, memory_order_acquire) != NULL;
}

static long futex(_Atomic uint32_t *addr, int op, uint32_t val)
{
    return syscall(SYS_futex, (uint32_t *)addr, op, val, NULL, NULL, 0);
}

uint32_t park_prepare(struct parking *pk)
{
    uint32_t seq = atomic_load_explicit(&pk->seq, memory_order_acquire);
    /* seq_cst: ordered before the caller's has_work check, against the waker's seq_cst change and
     * flag read. */
    atomic_store_explicit(&pk->sleeping, 1, memory_order_seq_cst);
    return seq;
}

void park_cancel(struct parking *pk)
{
    atomic_store_explicit(&pk->sleeping, 0, memory_order_relaxed);
}

void park_wait(struct parking *pk, uint32_t seq)
{
    /* Returns at once if a waker bumped seq since park_prepare; spurious returns are fine. */
    futex(&pk->seq, FUTEX_WAIT_PRIVATE, seq);
    atomic_store_explicit(&pk->sleeping, 0, memory_order_relaxed);
}

bool park_wake(struct parking *pk)
{
    if (!atomic_load_explicit(&pk->sleeping, memory_order_seq_cst))
        return false;
    /* Only one waker pays for the syscall. */
    if (!atomic_exchange_explicit(&pk->sleeping, 0, memory_order_seq_cst))
        return false;
    /* release: pairs with the acquire in park_prepare of the next round. */
    atomic_fetch_add_explicit(&pk->seq, 1, memory_order_release);
    futex(&pk->seq, FUTEX_WAKE_PRIVATE, 1);
    return true;
}
