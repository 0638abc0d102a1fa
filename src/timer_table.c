/* Keyed timers' records and their ids (timer_table.h). SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * One lock for allocation and freeing: a record is taken and given back once a timer, next to a
 * futex wake-up and a queue slot each, and a free list per thread would keep records away from the
 * threads that free them (workers) for the threads that take them (submitters). */
#include <stdlib.h>
#include <string.h>

#include "timer_table.h"

#define CHUNK_SIZE (1u << TIMER_CHUNK_BITS)

void shard__timer_table_init(struct timer_table *tt)
{
    memset(tt, 0, sizeof *tt);
    pthread_mutex_init(&tt->lock, NULL);
}

void shard__timer_table_destroy(struct timer_table *tt)
{
    for (uint32_t c = 0; c < tt->nchunks; c++)
        free(atomic_load_explicit(&tt->chunks[c], memory_order_relaxed));
    pthread_mutex_destroy(&tt->lock);
}

/* A new chunk's records onto the free list, in index order. Context: tt->lock. */
static int grow(struct timer_table *tt)
{
    if (tt->nchunks == TIMER_CHUNKS)
        return -1;
    struct timer *c = aligned_alloc(SHARD_CACHELINE, CHUNK_SIZE * sizeof *c);
    if (!c)
        return -1;
    memset(c, 0, CHUNK_SIZE * sizeof *c);
    uint32_t base = tt->nchunks << TIMER_CHUNK_BITS;
    for (uint32_t i = 0; i < CHUNK_SIZE; i++)
        c[i].next = i + 1 < CHUNK_SIZE ? base + i + 2 : tt->free_head;
    tt->free_head = base + 1;
    /* release: a reader that finds the chunk sees it zeroed (shard__timer_at). */
    atomic_store_explicit(&tt->chunks[tt->nchunks++], c, memory_order_release);
    return 0;
}

struct timer *shard__timer_alloc(struct timer_table *tt, uint32_t *idx, uint64_t *id)
{
    pthread_mutex_lock(&tt->lock);
    if (!tt->free_head && grow(tt) != 0) {
        pthread_mutex_unlock(&tt->lock);
        return NULL;
    }
    uint32_t i = tt->free_head - 1;
    struct timer *t = shard__timer_at(tt, i);
    tt->free_head = t->next;
    atomic_store_explicit(&tt->live, atomic_load_explicit(&tt->live, memory_order_relaxed) + 1, memory_order_relaxed);
    pthread_mutex_unlock(&tt->lock);
    uint32_t gen = (uint32_t)(atomic_load_explicit(&t->word, memory_order_relaxed) >> 32);
    t->next = t->prev = 0;
    atomic_store_explicit(&t->home, NULL, memory_order_relaxed);
    /* release: a cancel that reads this word (through the id, published after) sees the fields the
     * caller writes before publishing the id only through the home wheel's lock or the fire job;
     * the word itself needs no more. */
    atomic_store_explicit(&t->word, shard__timer_word(gen, TIMER_PENDING), memory_order_release);
    *idx = i;
    *id = (uint64_t)gen << 32 | (i + 1);
    return t;
}

void shard__timer_free(struct timer_table *tt, uint32_t idx)
{
    struct timer *t = shard__timer_at(tt, idx);
    uint32_t gen = (uint32_t)(atomic_load_explicit(&t->word, memory_order_relaxed) >> 32);
    /* A new generation first: an id of the old one no longer matches once the record is free. */
    atomic_store_explicit(&t->word, shard__timer_word(gen + 1, TIMER_FREE), memory_order_release);
    pthread_mutex_lock(&tt->lock);
    t->next = tt->free_head;
    tt->free_head = idx + 1;
    atomic_store_explicit(&tt->live, atomic_load_explicit(&tt->live, memory_order_relaxed) - 1, memory_order_relaxed);
    pthread_mutex_unlock(&tt->lock);
}

long shard__timer_find(struct timer_table *tt, uint64_t id)
{
    uint32_t low = (uint32_t)id;
    if (low == 0)
        return -1;
    uint32_t idx = low - 1;
    if ((idx >> TIMER_CHUNK_BITS) >= TIMER_CHUNKS ||
        !atomic_load_explicit(&tt->chunks[idx >> TIMER_CHUNK_BITS], memory_order_acquire))
        return -1;
    return (long)idx;
}
