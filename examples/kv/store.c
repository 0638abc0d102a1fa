/* kv_server: worker stores, the transit area and the shard hooks that move keys between them.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include "store.h"

#include "expire.h"
#include "obj.h"
#include "watch.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct kv_store {
    struct kvmap     map;
    char             name[SHARD_NAME_MAX + 1];
    atomic_size_t    keys; /* map.n, readable by the stats of other threads */
    struct kv_store *next; /* in the registry */
};

/* Striped so that workers adopting moved keys after a change rarely wait for each other. */
#define TRANSIT_STRIPES 64

static struct {
    pthread_mutex_t lock;
    struct kvmap    map;
} transit[TRANSIT_STRIPES];

/* Entries in transit. Read without the lock to skip the transit area when it is empty, which is
 * almost always. Relaxed is enough: an entry is put in transit by a release hook (or a parked crashed
 * worker) that shard orders before the new owner's first command of that key, so the new owner's load
 * sees the increment by coherence of that happens-before. */
static atomic_size_t in_transit;
static atomic_size_t total_keys;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kv_store *registry;

int store_global_init(void)
{
    kv_hash_init();
    for (int i = 0; i < TRANSIT_STRIPES; i++) {
        pthread_mutex_init(&transit[i].lock, NULL);
        if (kvmap_init(&transit[i].map) != 0) {
            store_global_free();
            return -ENOMEM;
        }
    }
    return 0;
}

void store_global_free(void)
{
    for (int i = 0; i < TRANSIT_STRIPES; i++) {
        if (transit[i].map.buckets)
            kvmap_free(&transit[i].map);
        pthread_mutex_destroy(&transit[i].lock);
    }
    atomic_store(&in_transit, 0);
}

static void transit_put_list(struct kv_entry *list)
{
    for (struct kv_entry *e = list, *next; e; e = next) {
        next = e->next;
        pthread_mutex_t *lock = &transit[e->hash % TRANSIT_STRIPES].lock;
        pthread_mutex_lock(lock);
        kvmap_insert(&transit[e->hash % TRANSIT_STRIPES].map, e);
        pthread_mutex_unlock(lock);
        atomic_fetch_add_explicit(&in_transit, 1, memory_order_relaxed);
    }
}

static struct kv_entry *transit_take(uint64_t hash, const void *key, size_t klen)
{
    if (atomic_load_explicit(&in_transit, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_t *lock = &transit[hash % TRANSIT_STRIPES].lock;
    pthread_mutex_lock(lock);
    struct kv_entry *e = kvmap_take(&transit[hash % TRANSIT_STRIPES].map, hash, key, klen);
    pthread_mutex_unlock(lock);
    if (e)
        atomic_fetch_sub_explicit(&in_transit, 1, memory_order_relaxed);
    return e;
}

/* The calling worker's store; NULL on other threads. */
static _Thread_local struct kv_store *own_store;

void store_prefetch(uint64_t hash)
{
    if (own_store)
        kvmap_prefetch(&own_store->map, hash);
}

void store_prefetch_entry(uint64_t hash)
{
    if (own_store)
        kvmap_prefetch_entry(&own_store->map, hash);
}

const struct kv_entry *store_own_guess(uint64_t hash)
{
    return own_store ? kvmap_guess(&own_store->map, hash) : NULL;
}

void store_on_start(shard_worker *w, void *user)
{
    (void)user;
    struct kv_store *s = calloc(1, sizeof *s);
    if (s && kvmap_init(&s->map) != 0) {
        free(s);
        s = NULL;
    }
    if (!s)
        return; /* its commands answer "out of memory" */
    strcpy(s->name, shard_worker_name(w));
    expire_init(shard_worker_dispatcher(w));
    pthread_mutex_lock(&registry_lock);
    s->next = registry;
    registry = s;
    pthread_mutex_unlock(&registry_lock);
    shard_worker_set_user(w, s);
    own_store = s;
}

void store_on_stop(shard_worker *w, void *user)
{
    (void)user;
    struct kv_store *s = shard_worker_user(w);
    if (!s)
        return;
    pthread_mutex_lock(&registry_lock);
    for (struct kv_store **p = &registry; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    pthread_mutex_unlock(&registry_lock);
    atomic_fetch_sub(&total_keys, s->map.n);
    kvmap_free(&s->map);
    free(s);
    shard_worker_set_user(w, NULL);
    own_store = NULL;
}

struct kv_store *store_of(shard_worker *w)
{
    return shard_worker_user(w);
}

const char *store_name(const struct kv_store *s)
{
    return s->name;
}

static void count_local(struct kv_store *s)
{
    atomic_store_explicit(&s->keys, s->map.n, memory_order_relaxed);
}

static bool moves_away(const struct kv_entry *e, void *ctx)
{
    return shard_handoff_moves(ctx, e->key, e->klen);
}

static bool everything(const struct kv_entry *e, void *ctx)
{
    (void)e;
    (void)ctx;
    return true;
}

void store_on_release(shard_worker *w, const struct shard_handoff *h, void *user)
{
    (void)user;
    struct kv_store *s = shard_worker_user(w);
    if (!s)
        return;
    transit_put_list(kvmap_take_if(&s->map, moves_away, (void *)h)); /* read only, by moves_away */
    count_local(s);
}

void store_evacuate(struct kv_store *s)
{
    transit_put_list(kvmap_take_if(&s->map, everything, NULL));
    count_local(s);
}

struct kv_entry *store_peek(struct kv_store *s, uint64_t hash, const void *key, size_t klen)
{
    struct kv_entry *e = kvmap_find(&s->map, hash, key, klen);
    if (e)
        return e;
    e = transit_take(hash, key, klen);
    if (e) {
        kvmap_insert(&s->map, e);
        count_local(s);
    }
    return e;
}

struct kv_entry *store_find(struct kv_store *s, uint64_t hash, const void *key, size_t klen)
{
    struct kv_entry *e = store_peek(s, hash, key, klen);
    if (e && e->exp && expire_due(e, kv_now_ms())) {
        store_del(s, hash, key, klen);
        return NULL;
    }
    return e;
}

struct kv_entry *store_set(struct kv_store *s, uint64_t hash, const void *key, size_t klen,
                           const void *val, size_t vlen)
{
    struct kv_entry *e = store_find(s, hash, key, klen);
    if (e)
        return kv_entry_set(e, val, vlen) == 0 ? e : NULL;
    e = kv_entry_new(hash, key, klen, val, vlen);
    if (e)
        store_add(s, e);
    return e;
}

void store_add(struct kv_store *s, struct kv_entry *e)
{
    kvmap_insert(&s->map, e);
    count_local(s);
    atomic_fetch_add_explicit(&total_keys, 1, memory_order_relaxed);
}

bool store_del(struct kv_store *s, uint64_t hash, const void *key, size_t klen)
{
    struct kv_entry *e = kvmap_take(&s->map, hash, key, klen);
    if (!e)
        e = transit_take(hash, key, klen);
    if (!e)
        return false;
    expire_clear(e);
    kv_entry_free(e);
    count_local(s);
    atomic_fetch_sub_explicit(&total_keys, 1, memory_order_relaxed);
    /* An expiry's (a read that finds the key due, or its timer), which the EXEC's check of the key's
     * deadline misses if the clock was set back since; a DEL's part adds its own as well. */
    watch_touch(hash);
    return true;
}

struct kv_entry *store_take(struct kv_store *s, uint64_t hash, const void *key, size_t klen)
{
    if (!store_find(s, hash, key, klen)) /* adopted from the transit area, or gone if expired */
        return NULL;
    struct kv_entry *e = kvmap_take(&s->map, hash, key, klen);
    count_local(s);
    atomic_fetch_sub_explicit(&total_keys, 1, memory_order_relaxed);
    return e;
}

void store_hand_over(struct kv_entry *e)
{
    e->next = NULL;
    atomic_fetch_add_explicit(&total_keys, 1, memory_order_relaxed);
    /* The owner's next command of the key follows the multi-key job that holds it, which shard orders
     * after this put: its relaxed read of in_transit sees the increment, as for a release hook's. */
    transit_put_list(e);
}

size_t store_total_keys(void)
{
    return atomic_load_explicit(&total_keys, memory_order_relaxed);
}

size_t store_total_expires(void)
{
    return expire_count();
}

size_t store_transit_keys(void)
{
    return atomic_load_explicit(&in_transit, memory_order_relaxed);
}

size_t store_worker_keys(const char *name)
{
    size_t n = 0;
    pthread_mutex_lock(&registry_lock);
    for (struct kv_store *s = registry; s; s = s->next)
        if (strcmp(s->name, name) == 0)
            n = atomic_load_explicit(&s->keys, memory_order_relaxed);
    pthread_mutex_unlock(&registry_lock);
    return n;
}

struct range_walk {
    bool (*mine)(const struct kv_entry *e, void *ctx); /* NULL: every entry (the store's own) */
    bool (*fn)(const struct kv_entry *e, void *ctx);
    void *ctx;
    bool  stopped;
};

static bool range_step(const struct kv_entry *e, void *ctx)
{
    struct range_walk *w = ctx;
    if (!w->stopped && (!w->mine || w->mine(e, w->ctx)) && !w->fn(e, w->ctx))
        w->stopped = true;
    return !w->stopped;
}

void store_range(struct kv_store *s, uint64_t from, uint64_t to, bool (*mine)(const struct kv_entry *e, void *ctx),
                 bool (*fn)(const struct kv_entry *e, void *ctx), void *ctx)
{
    struct range_walk w = { NULL, fn, ctx, false };
    kvmap_range(&s->map, from, to, range_step, &w);
    w.mine = mine;
    if (atomic_load_explicit(&in_transit, memory_order_relaxed) == 0)
        return;
    for (int i = 0; i < TRANSIT_STRIPES && !w.stopped; i++) {
        pthread_mutex_lock(&transit[i].lock);
        kvmap_range(&transit[i].map, from, to, range_step, &w);
        pthread_mutex_unlock(&transit[i].lock);
    }
}

static size_t free_list(struct kv_entry *list)
{
    size_t n = 0;
    for (struct kv_entry *e = list, *next; e; e = next) {
        next = e->next;
        expire_clear(e);
        kv_entry_free(e);
        n++;
    }
    atomic_fetch_sub_explicit(&total_keys, n, memory_order_relaxed);
    return n;
}

size_t store_clear(struct kv_store *s, bool (*mine)(const struct kv_entry *e, void *ctx), void *ctx)
{
    size_t n = free_list(kvmap_take_if(&s->map, everything, NULL));
    count_local(s);
    watch_flushed(); /* every key is written, whether this store held it or not */
    for (int i = 0; mine && i < TRANSIT_STRIPES; i++) {
        pthread_mutex_lock(&transit[i].lock);
        struct kv_entry *list = kvmap_take_if(&transit[i].map, mine, ctx);
        pthread_mutex_unlock(&transit[i].lock);
        size_t k = free_list(list);
        atomic_fetch_sub_explicit(&in_transit, k, memory_order_relaxed);
        n += k;
    }
    return n;
}
