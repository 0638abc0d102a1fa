/* A worker's held (set-aside) jobs: an order list plus a keymap. SPDX-License-Identifier: LGPL-2.1-or-later */
#include "held.h"

void shard__held_init(struct held *h)
{
    h->head = h->tail = h->prio_tail = NULL;
    h->count = 0;
    shard__keymap_init(&h->keys, KEYMAP_HELD);
}

static void order_insert_after(struct held *h, struct job *after, struct job *j)
{
    j->prev = after;
    j->next = after ? after->next : h->head;
    if (j->next)
        j->next->prev = j;
    else
        h->tail = j;
    if (after)
        after->next = j;
    else
        h->head = j;
    h->count++;
}

void shard__held_push_back(struct held *h, struct job *j)
{
    j->in_prio = false;
    order_insert_after(h, h->tail, j);
    if (j->kind == JOB_RUN)
        shard__keymap_insert(&h->keys, j);
}

void shard__held_push_prio(struct held *h, struct job *j)
{
    j->in_prio = true;
    order_insert_after(h, h->prio_tail, j);
    h->prio_tail = j;
    if (j->kind == JOB_RUN)
        shard__keymap_insert(&h->keys, j);
}

bool shard__held_has_key(const struct held *h, uint64_t hash)
{
    return h->keys.jobs && shard__keymap_first(&h->keys, hash) != NULL;
}

bool shard__held_first_of_key(const struct held *h, const struct job *j)
{
    return shard__keymap_first(&h->keys, j->hash) == j;
}

void shard__held_remove(struct held *h, struct job *j)
{
    if (j->prev)
        j->prev->next = j->next;
    else
        h->head = j->next;
    if (j->next)
        j->next->prev = j->prev;
    else
        h->tail = j->prev;
    if (h->prio_tail == j)
        h->prio_tail = j->prev && j->prev->in_prio ? j->prev : NULL;
    h->count--;
    if (j->kind == JOB_RUN)
        shard__keymap_remove(&h->keys, j);
}

struct job *shard__held_take_all(struct held *h)
{
    struct job *all = h->head;
    shard__held_init(h);
    return all;
}
