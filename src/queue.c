/* The per-worker job queue: slot ring and side list. SPDX-License-Identifier: LGPL-2.1-or-later */
#include "queue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int shard__queue_init(struct queue *q, uint32_t capacity)
{
    uint64_t n = 1;
    while (n < capacity)
        n *= 2;
    q->slots = aligned_alloc(SHARD_CACHELINE, (n * sizeof *q->slots + SHARD_CACHELINE - 1) / SHARD_CACHELINE *
                                                  SHARD_CACHELINE);
    if (!q->slots)
        return -ENOMEM;
    for (uint64_t i = 0; i < n; i++)
        atomic_init(&q->slots[i].seq, 0); /* no position + 1 below 2^56 - 1; slot i is written at position i */
    q->mask = n - 1;
    uint64_t batch = n / 8 > 32 ? 32 : n / 8 ? n / 8 : 1;
    q->release_mask = batch - 1;
    atomic_init(&q->tail, 0);
    atomic_init(&q->head_cache, 0);
    q->head = 0;
    atomic_init(&q->head_pub, 0);
    pthread_mutex_init(&q->side_lock, NULL);
    q->side = (struct job_list){ 0 };
    atomic_init(&q->side_next, UINT64_MAX);
    return 0;
}

void shard__queue_destroy(struct queue *q)
{
    free(q->slots);
    q->slots = NULL;
    pthread_mutex_destroy(&q->side_lock);
}

uint64_t shard__queue_capacity(const struct queue *q)
{
    return q->mask + 1;
}

bool shard__queue_has_room(struct queue *q)
{
    uint64_t pos = atomic_load_explicit(&q->tail, memory_order_seq_cst);
    return pos - atomic_load_explicit(&q->head_pub, memory_order_seq_cst) < q->mask + 1;
}

bool shard__queue_push_side_new(struct queue *q, struct shard_worker *routed, shard_job_fn fn, void *arg,
                                uint64_t hash, uint64_t epoch, uint8_t origin)
{
    struct job *j = calloc(1, sizeof *j);
    if (!j)
        return false;
    *j = (struct job){ .fn = fn, .arg = arg, .hash = hash, .epoch = epoch, .routed = routed, .kind = JOB_RUN,
                       .origin = origin };
    shard__queue_push_side(q, j);
    return true;
}

void shard__queue_push_side(struct queue *q, struct job *j)
{
    pthread_mutex_lock(&q->side_lock);
    /* Under the lock, so side positions never go backwards. Every slot claimed before this load
     * comes before j; a submit that claims a slot later may land before or after it. */
    j->pos = atomic_load_explicit(&q->tail, memory_order_seq_cst);
    shard__job_list_append(&q->side, j);
    /* seq_cst: the caller reads the parking flag next, as after a slot's tail CAS. */
    if (q->side.head == j)
        atomic_store_explicit(&q->side_next, j->pos, memory_order_seq_cst);
    pthread_mutex_unlock(&q->side_lock);
}

static struct job *side_pop(struct queue *q)
{
    struct job *j = NULL;
    pthread_mutex_lock(&q->side_lock);
    if (q->side.head && q->side.head->pos <= q->head) {
        j = q->side.head;
        q->side.head = j->next;
        if (!q->side.head)
            q->side.tail = NULL;
        atomic_store_explicit(&q->side_next, q->side.head ? q->side.head->pos : UINT64_MAX, memory_order_relaxed);
        j->next = NULL;
    }
    pthread_mutex_unlock(&q->side_lock);
    return j;
}

void shard__queue_void(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
}

/* Takes the slot at head, freeing it for producers every release_mask + 1 slots. */
static void advance(struct queue *q)
{
    if ((++q->head & q->release_mask) == 0)
        shard__queue_publish_head_sc(q);
}

struct job *shard__queue_pop_sc(struct queue *q, struct job *scratch)
{
    const struct slot *s;
    for (;;) {
        if (shard__queue_side_next(q) <= q->head) {
            struct job *j = side_pop(q);
            if (j)
                return j;
        }
        s = shard__queue_peek_sc(q, q->head);
        if (!s)
            return NULL;
        if (s->fn != shard__queue_void)
            break;
        advance(q); /* consumed here: no caller ever sees it */
    }
    scratch->fn = s->fn;
    scratch->arg = s->arg;
    scratch->hash = s->hash;
    scratch->epoch = s->epoch;
    scratch->kind = JOB_RUN;
    scratch->origin = shard__slot_origin(s);
    scratch->owed_to = NULL;
    scratch->wait_snap = NULL;
    scratch->moved_epoch = 0;
    scratch->embedded = false;
    scratch->loses_keys = false;
    scratch->routed = NULL; /* the caller knows whose queue this is */
    advance(q);
    return scratch;
}

void shard__queue_advance_sc(struct queue *q, uint64_t head)
{
    bool crossed = (head & ~q->release_mask) != (q->head & ~q->release_mask);
    q->head = head;
    if (crossed)
        shard__queue_publish_head_sc(q);
}

void shard__queue_publish_upto_sc(struct queue *q, uint64_t head)
{
    uint64_t cur = atomic_load_explicit(&q->head_pub, memory_order_relaxed);
    /* release: the reads of the slots below head come before a producer reuses them. */
    while (cur < head && !atomic_compare_exchange_weak_explicit(&q->head_pub, &cur, head, memory_order_release,
                                                                memory_order_relaxed))
        ;
}

void shard__queue_publish_head_sc(struct queue *q)
{
    /* release: the reads of the slots below head come before a producer reuses them. */
    atomic_store_explicit(&q->head_pub, q->head, memory_order_release);
}

bool shard__queue_nonempty_sc(struct queue *q)
{
    return atomic_load_explicit(&q->tail, memory_order_seq_cst) != q->head ||
           atomic_load_explicit(&q->side_next, memory_order_seq_cst) != UINT64_MAX;
}

uint64_t shard__queue_length(const struct queue *q)
{
    return atomic_load_explicit(&q->tail, memory_order_relaxed) -
           atomic_load_explicit(&q->head_pub, memory_order_relaxed);
}
