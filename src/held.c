/* A worker's held (set-aside) jobs: an order list plus a keymap. SPDX-License-Identifier: LGPL-2.1-or-later */
#include "held.h"

void shard__held_init(struct held *h, struct throttle *throttle)
{
    h->head = h->tail = h->prio_tail = NULL;
    h->count = 0;
    h->controls = 0;
    h->njobs = 0;
    h->nkeys = 0;
    h->min_epoch = UINT64_MAX;
    h->at_min = 0;
    h->min_known = true;
    h->deferred_made = h->deferred_epoch = 0;
    h->unowed_since = UINT64_MAX;
    shard__keymap_init(&h->keys, KEYMAP_HELD);
    h->throttle = throttle;
    h->throttled = (struct throttle_holder){ 0 };
    atomic_store_explicit(&h->jobs, 0, memory_order_relaxed);
}

void shard__held_destroy(struct held *h)
{
    shard__keymap_reset(&h->keys);
}

static void key_in(struct held *h, struct job *j)
{
    if (!j->owed_to) {
        if (j->epoch < h->unowed_since)
            h->unowed_since = j->epoch;
        if (h->min_known && j->epoch < h->min_epoch) {
            h->min_epoch = j->epoch;
            h->at_min = 1;
        } else if (h->min_known && j->epoch == h->min_epoch) {
            h->at_min++;
        }
    }
    if (shard__keymap_insert(&h->keys, j) && ++h->nkeys > 2 * (h->keys.mask + 1))
        shard__keymap_fit(&h->keys, h->nkeys);
    h->njobs++;
    atomic_store_explicit(&h->jobs, h->njobs, memory_order_relaxed);
    if (h->throttle)
        shard__throttle_note_held(h->throttle, &h->throttled, j->hash, h->njobs);
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
        key_in(h, j);
    else
        h->controls++;
}

void shard__held_push_prio(struct held *h, struct job *j)
{
    j->in_prio = true;
    order_insert_after(h, h->prio_tail, j);
    h->prio_tail = j;
    if (j->kind == JOB_RUN)
        key_in(h, j);
    else
        h->controls++;
}

bool shard__held_has_key(const struct held *h, uint64_t hash)
{
    return h->njobs && shard__keymap_first(&h->keys, hash) != NULL;
}

struct job *shard__held_first(const struct held *h, uint64_t hash)
{
    return h->njobs ? shard__keymap_first(&h->keys, hash) : NULL;
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
    if (j->kind != JOB_RUN) {
        h->controls--;
        return;
    }
    if (!j->owed_to && h->min_known && j->epoch == h->min_epoch && --h->at_min == 0)
        h->min_known = false; /* the next oldest is found when asked */
    bool gone;
    shard__keymap_remove(&h->keys, j, &gone);
    h->nkeys -= gone;
    h->njobs--;
    if (!h->njobs && h->keys.bucket != h->keys.first)
        shard__keymap_reset(&h->keys); /* a grown table goes back once it is empty */
    atomic_store_explicit(&h->jobs, h->njobs, memory_order_relaxed);
    /* Below the allowance: a full holder's waiters may come in (throttle.h's gate). */
    if (h->throttle && h->njobs + 1 == h->throttle->limit)
        shard__throttle_ease(h->throttle);
    if (h->throttle && h->throttled.n)
        shard__throttle_note_left(h->throttle, &h->throttled, j->hash, !shard__held_has_key(h, j->hash),
                                  h->njobs);
}

uint64_t shard__held_min_unowed_epoch(struct held *h)
{
    if (h->min_known)
        return h->min_epoch;
    h->min_epoch = UINT64_MAX;
    h->at_min = 0;
    for (const struct job *j = h->head; j; j = j->next) {
        if (j->kind != JOB_RUN || j->owed_to || j->epoch > h->min_epoch)
            continue;
        h->at_min = j->epoch == h->min_epoch ? h->at_min + 1 : 1;
        h->min_epoch = j->epoch;
    }
    h->min_known = true;
    return h->min_epoch;
}

bool shard__held_defer_due(struct held *h, uint64_t made, uint64_t epoch)
{
    if (made == h->deferred_made && h->unowed_since >= epoch && epoch <= h->deferred_epoch)
        return false;
    h->deferred_epoch = epoch;
    h->unowed_since = UINT64_MAX;
    return true;
}

void shard__held_owed_changed(struct held *h)
{
    h->min_known = false;
}

struct job *shard__held_take_all(struct held *h)
{
    struct job *all = h->head;
    bool was_full = h->throttle && h->throttle->limit && h->njobs >= h->throttle->limit;
    if (h->throttle)
        shard__throttle_release_all(h->throttle, &h->throttled);
    shard__held_destroy(h); /* a grown keymap's table: held_init makes it anew */
    shard__held_init(h, h->throttle);
    if (was_full)
        shard__throttle_ease(h->throttle); /* as in shard__held_remove */
    return all;
}
