/* kv_server: the worker-local hash map. SPDX-License-Identifier: LGPL-2.1-or-later */
#include "kvmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define INITIAL_BUCKETS 1024

uint64_t kv_hash(const void *key, size_t len)
{
    return XXH3_64bits(key, len);
}

struct kv_entry *kv_entry_new(uint64_t hash, const void *key, size_t klen, const void *val, size_t vlen)
{
    struct kv_entry *e = malloc(sizeof *e + klen);
    if (!e)
        return NULL;
    *e = (struct kv_entry){ .hash = hash, .klen = klen };
    memcpy(e->key, key, klen);
    if (kv_entry_set(e, val, vlen) != 0) {
        free(e);
        return NULL;
    }
    return e;
}

struct kv_value *kv_value_get(struct kv_value *v)
{
    /* relaxed: the caller's own reference keeps v alive; the new holder is handed v (and its bytes)
     * by whatever passes it on, such as a request's completion. */
    atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
    return v;
}

void kv_value_put(struct kv_value *v)
{
    /* acq_rel: each holder's reads of the bytes are released by its decrement; the last one acquires
     * them all before it frees the value. */
    if (v && atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) == 1)
        free(v);
}

int kv_entry_set(struct kv_entry *e, const void *val, size_t vlen)
{
    struct kv_value *v = malloc(sizeof *v + vlen);
    if (!v)
        return -ENOMEM;
    atomic_init(&v->refs, 1);
    v->len = vlen;
    memcpy(v->data, val, vlen);
    kv_value_put(e->val);
    e->val = v;
    return 0;
}

void kv_entry_free(struct kv_entry *e)
{
    if (e) {
        kv_value_put(e->val);
        free(e);
    }
}

int kvmap_init(struct kvmap *m)
{
    m->buckets = calloc(INITIAL_BUCKETS, sizeof *m->buckets);
    m->mask = INITIAL_BUCKETS - 1;
    m->n = 0;
    return m->buckets ? 0 : -ENOMEM;
}

void kvmap_free(struct kvmap *m)
{
    for (size_t b = 0; m->buckets && b <= m->mask; b++)
        for (struct kv_entry *e = m->buckets[b], *next; e; e = next) {
            next = e->next;
            kv_entry_free(e);
        }
    free(m->buckets);
    *m = (struct kvmap){ 0 };
}

static bool same_key(const struct kv_entry *e, uint64_t hash, const void *key, size_t klen)
{
    return e->hash == hash && e->klen == klen && memcmp(e->key, key, klen) == 0;
}

struct kv_entry *kvmap_find(const struct kvmap *m, uint64_t hash, const void *key, size_t klen)
{
    for (struct kv_entry *e = m->buckets[hash & m->mask]; e; e = e->next)
        if (same_key(e, hash, key, klen))
            return e;
    return NULL;
}

static void grow(struct kvmap *m)
{
    size_t nb = (m->mask + 1) * 2;
    struct kv_entry **b = calloc(nb, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i <= m->mask; i++)
        for (struct kv_entry *e = m->buckets[i], *next; e; e = next) {
            next = e->next;
            e->next = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
        }
    free(m->buckets);
    m->buckets = b;
    m->mask = nb - 1;
}

void kvmap_insert(struct kvmap *m, struct kv_entry *e)
{
    if (m->n > m->mask)
        grow(m);
    struct kv_entry **head = &m->buckets[e->hash & m->mask];
    e->next = *head;
    *head = e;
    m->n++;
}

struct kv_entry *kvmap_take(struct kvmap *m, uint64_t hash, const void *key, size_t klen)
{
    for (struct kv_entry **p = &m->buckets[hash & m->mask]; *p; p = &(*p)->next)
        if (same_key(*p, hash, key, klen)) {
            struct kv_entry *e = *p;
            *p = e->next;
            m->n--;
            return e;
        }
    return NULL;
}

struct kv_entry *kvmap_take_if(struct kvmap *m, bool (*pick)(const struct kv_entry *e, void *ctx),
                               void *ctx)
{
    struct kv_entry *taken = NULL;
    for (size_t b = 0; b <= m->mask; b++)
        for (struct kv_entry **p = &m->buckets[b]; *p;) {
            struct kv_entry *e = *p;
            if (!pick(e, ctx)) {
                p = &e->next;
                continue;
            }
            *p = e->next;
            m->n--;
            e->next = taken;
            taken = e;
        }
    return taken;
}
