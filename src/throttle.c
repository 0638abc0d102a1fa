/* Throttled keys: a hash table of (key, holder) entries behind a lock-free filter (throttle.h).
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * No ordering is carried here beyond the lock: a throttle only holds submitters back, it publishes
 * nothing they read, so the lock-free counts are relaxed. A waiter is not lost for that: it looks
 * under the lock, after registering as a waiter, and a release wakes waiters after taking it. */
#include "throttle.h"

#include <stdlib.h>

static size_t bucket_of(uint64_t hash)
{
    return (size_t)((hash ^ hash >> 31) % THROTTLE_BUCKETS);
}

void shard__throttle_init(struct throttle *t, size_t limit, void (*wake)(void *ctx), void *ctx)
{
    pthread_mutex_init(&t->lock, NULL);
    atomic_init(&t->keys, 0);
    t->limit = limit;
    t->wake = wake;
    t->wake_ctx = ctx;
    for (size_t i = 0; i < THROTTLE_BUCKETS; i++) {
        atomic_init(&t->filter[i], 0);
        t->bucket[i] = NULL;
    }
}

void shard__throttle_destroy(struct throttle *t)
{
    for (size_t i = 0; i < THROTTLE_BUCKETS; i++)
        for (struct throttle_key *k = t->bucket[i], *next; k; k = next) {
            next = k->bucket_next;
            free(k);
        }
    pthread_mutex_destroy(&t->lock);
}

bool shard__throttle_holds(struct throttle *t, uint64_t hash)
{
    size_t b = bucket_of(hash);
    if (!atomic_load_explicit(&t->filter[b], memory_order_relaxed))
        return false;
    pthread_mutex_lock(&t->lock);
    struct throttle_key *k = t->bucket[b];
    while (k && k->hash != hash)
        k = k->bucket_next;
    pthread_mutex_unlock(&t->lock);
    return k != NULL;
}

/* The holder's entry for hash, or NULL. Context: t->lock held. */
static struct throttle_key *find(struct throttle *t, const struct throttle_holder *h, uint64_t hash)
{
    struct throttle_key *k = t->bucket[bucket_of(hash)];
    while (k && (k->hash != hash || k->holder != h))
        k = k->bucket_next;
    return k;
}

/* Context: t->lock held. */
static void unlink_key(struct throttle *t, struct throttle_holder *h, struct throttle_key *k)
{
    size_t b = bucket_of(k->hash);
    struct throttle_key **p = &t->bucket[b];
    while (*p != k)
        p = &(*p)->bucket_next;
    *p = k->bucket_next;
    atomic_fetch_sub_explicit(&t->filter[b], 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&t->keys, 1, memory_order_relaxed);
    if (k->holder_prev)
        k->holder_prev->holder_next = k->holder_next;
    else
        h->head = k->holder_next;
    if (k->holder_next)
        k->holder_next->holder_prev = k->holder_prev;
    h->n--;
    free(k);
}

void shard__throttle_note_held(struct throttle *t, struct throttle_holder *h, uint64_t hash, size_t held)
{
    if (!t->limit || held < t->limit)
        return;
    pthread_mutex_lock(&t->lock);
    struct throttle_key *k = find(t, h, hash);
    if (!k && (k = malloc(sizeof *k)) != NULL) {
        size_t b = bucket_of(hash);
        *k = (struct throttle_key){ .hash = hash, .holder = h, .bucket_next = t->bucket[b], .holder_next = h->head };
        t->bucket[b] = k;
        if (h->head)
            h->head->holder_prev = k;
        h->head = k;
        h->n++;
        atomic_fetch_add_explicit(&t->filter[b], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&t->keys, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&t->lock);
}

void shard__throttle_note_left(struct throttle *t, struct throttle_holder *h, uint64_t hash, bool key_gone,
                               size_t held)
{
    if (!h->n)
        return;
    if (held < t->limit / 2) {
        shard__throttle_release_all(t, h);
        return;
    }
    if (!key_gone)
        return;
    pthread_mutex_lock(&t->lock);
    struct throttle_key *k = find(t, h, hash);
    if (k)
        unlink_key(t, h, k);
    pthread_mutex_unlock(&t->lock);
    if (k)
        t->wake(t->wake_ctx);
}

void shard__throttle_release_all(struct throttle *t, struct throttle_holder *h)
{
    if (!h->n)
        return;
    pthread_mutex_lock(&t->lock);
    while (h->head)
        unlink_key(t, h, h->head);
    pthread_mutex_unlock(&t->lock);
    t->wake(t->wake_ctx);
}
