/* Throttled keys: a hash table of (key, holder) entries behind a lock-free filter (throttle.h).
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * No ordering is carried here beyond the lock: a throttle only holds submitters back, it publishes
 * nothing they read, so the lock-free counts are relaxed. A waiter is not lost for that: it looks
 * under the lock, after registering as a waiter, and a release wakes waiters after taking it. */
#include "throttle.h"
#include "check.h"

#include <stdlib.h>

static size_t mix(uint64_t hash)
{
    return (size_t)(hash ^ hash >> 31);
}

static _Atomic uint32_t *filter_of(struct throttle *t, uint64_t hash)
{
    return &t->filter[mix(hash) % THROTTLE_FILTER];
}

/* Context: t->lock held, t->nbuckets > 0. */
static struct throttle_key **chain_of(struct throttle *t, uint64_t hash)
{
    SHARD_CHECK_HELD(&t->lock);
    return &t->bucket[mix(hash) % t->nbuckets];
}

/* Doubles the table past two keys a bucket, so that a look stays O(1) however many keys a slow handoff
 * throttles. Out of memory it stays as it is (slower, not wrong). Context: t->lock held. */
static void grow(struct throttle *t)
{
    SHARD_CHECK_HELD(&t->lock);
    size_t n = t->nbuckets ? 2 * t->nbuckets : THROTTLE_BUCKETS;
    struct throttle_key **b = calloc(n, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < t->nbuckets; i++)
        for (struct throttle_key *k = t->bucket[i], *next; k; k = next) {
            next = k->bucket_next;
            k->bucket_next = b[mix(k->hash) % n];
            b[mix(k->hash) % n] = k;
        }
    free(t->bucket);
    t->bucket = b;
    t->nbuckets = n;
}

void shard__throttle_init(struct throttle *t, size_t limit, void (*wake)(void *ctx), void *ctx)
{
    pthread_mutex_init(&t->lock, NULL);
    atomic_init(&t->keys, 0);
    t->limit = limit;
    t->wake = wake;
    t->wake_ctx = ctx;
    for (size_t i = 0; i < THROTTLE_FILTER; i++)
        atomic_init(&t->filter[i], 0);
    t->bucket = NULL;
    t->nbuckets = t->nkeys = 0;
    atomic_init(&t->eased, 0);
    atomic_init(&t->full_waits, 0);
}

void shard__throttle_ease(struct throttle *t)
{
    /* seq_cst, then the wake hook's seq_cst read of the waiters: the pair of a waiter's registration
     * (seq_cst) and its reads of eased and of what it waits for. Either the waiter sees this increment,
     * or this thread sees the waiter and wakes it. Also release: a waiter that reads the new count
     * sees the holder's count (or settled) stored before it. */
    atomic_fetch_add_explicit(&t->eased, 1, memory_order_seq_cst);
    t->wake(t->wake_ctx);
}

void shard__throttle_destroy(struct throttle *t)
{
    for (size_t i = 0; i < t->nbuckets; i++)
        for (struct throttle_key *k = t->bucket[i], *next; k; k = next) {
            next = k->bucket_next;
            free(k);
        }
    free(t->bucket);
    pthread_mutex_destroy(&t->lock);
}

bool shard__throttle_holds(struct throttle *t, uint64_t hash)
{
    if (!atomic_load_explicit(filter_of(t, hash), memory_order_relaxed))
        return false;
    pthread_mutex_lock(&t->lock);
    struct throttle_key *k = t->nbuckets ? *chain_of(t, hash) : NULL;
    while (k && k->hash != hash)
        k = k->bucket_next;
    pthread_mutex_unlock(&t->lock);
    return k != NULL;
}

/* The holder's entry for hash, or NULL. Context: t->lock held. */
static struct throttle_key *find(struct throttle *t, const struct throttle_holder *h, uint64_t hash)
{
    SHARD_CHECK_HELD(&t->lock);
    struct throttle_key *k = t->nbuckets ? *chain_of(t, hash) : NULL;
    while (k && (k->hash != hash || k->holder != h))
        k = k->bucket_next;
    return k;
}

/* Context: t->lock held. */
static void unlink_key(struct throttle *t, struct throttle_holder *h, struct throttle_key *k)
{
    SHARD_CHECK_HELD(&t->lock);
    struct throttle_key **p = chain_of(t, k->hash);
    while (*p != k)
        p = &(*p)->bucket_next;
    *p = k->bucket_next;
    t->nkeys--;
    atomic_fetch_sub_explicit(filter_of(t, k->hash), 1, memory_order_relaxed);
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
    if (t->nkeys >= 2 * t->nbuckets)
        grow(t);
    struct throttle_key *k = find(t, h, hash);
    if (!k && t->nbuckets && (k = malloc(sizeof *k)) != NULL) {
        struct throttle_key **chain = chain_of(t, hash);
        *k = (struct throttle_key){ .hash = hash, .holder = h, .bucket_next = *chain, .holder_next = h->head };
        *chain = k;
        t->nkeys++;
        if (h->head)
            h->head->holder_prev = k;
        h->head = k;
        h->n++;
        atomic_fetch_add_explicit(filter_of(t, hash), 1, memory_order_relaxed);
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
