/* kv_server: the worker-local hash map. SPDX-License-Identifier: LGPL-2.1-or-later */
#include "kvmap.h"

#include "obj.h"

#include <errno.h>
#include <malloc.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define INITIAL_BITS 10

/* Drawn at start: keys crafted to fall into one bucket of an unseeded hash (hash flooding) cannot be
 * made without it. Written once before any thread reads it. */
unsigned char kv_hash_key[SIPHASH_KEY_BYTES];

void kv_hash_init(void)
{
    if (getrandom(kv_hash_key, sizeof kv_hash_key, 0) != (ssize_t)sizeof kv_hash_key) {
        uint64_t weak[2] = { (uint64_t)time(NULL), (uint64_t)getpid() }; /* no entropy yet: still per process */
        memcpy(kv_hash_key, weak, sizeof kv_hash_key);
    }
}

/* Where an entry with a key of klen bytes keeps its inline value: after the key, aligned. */
static size_t inline_offset(size_t klen)
{
    return (offsetof(struct kv_entry, key) + klen + alignof(struct kv_value) - 1) &
           ~(alignof(struct kv_value) - 1);
}

struct kv_value *kv_entry_inline(const struct kv_entry *e)
{
    return e->vcap ? (struct kv_value *)((char *)e + inline_offset(e->klen)) : NULL;
}

struct kv_entry *kv_entry_new(uint64_t hash, const void *key, size_t klen, const void *val, size_t vlen)
{
    /* Room for the value and a little more (an INCR that gains a digit), in 8-byte steps. */
    size_t cap = vlen < KV_INLINE_MAX ? (vlen + 8) & ~(size_t)7 : 0;
    struct kv_entry *e = malloc(cap ? inline_offset(klen) + sizeof(struct kv_value) + cap : sizeof *e + klen);
    if (!e)
        return NULL;
    *e = (struct kv_entry){ .hash = hash, .klen = (uint32_t)klen, .type = KV_STRING, .vcap = (uint16_t)cap };
    memcpy(e->key, key, klen);
    if (cap) {
        struct kv_value *v = kv_entry_inline(e);
        atomic_init(&v->refs, 1);
        v->len = 0;
    }
    if (kv_entry_set(e, val, vlen) != 0) {
        free(e);
        return NULL;
    }
    return e;
}

struct kv_entry *kv_entry_new_obj(uint64_t hash, const void *key, size_t klen, enum kv_type type, void *obj)
{
    struct kv_entry *e = malloc(sizeof *e + klen);
    if (!e)
        return NULL;
    *e = (struct kv_entry){ .hash = hash, .obj = obj, .klen = (uint32_t)klen, .type = (uint8_t)type };
    memcpy(e->key, key, klen);
    return e;
}

const char *kv_type_name(uint8_t type)
{
    static const char *const names[] = { "string", "list", "hash", "set", "zset", "stream" };
    return type < sizeof names / sizeof names[0] ? names[type] : "unknown";
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

/* Drops what e holds as its value or object, except its inline value. */
static void drop_held(struct kv_entry *e)
{
    if (e->type != KV_STRING)
        kv_obj_free(e->type, e->obj);
    else if (e->val != kv_entry_inline(e))
        kv_value_put(e->val);
}

int kv_entry_set(struct kv_entry *e, const void *val, size_t vlen)
{
    struct kv_value *v = kv_entry_inline(e);
    /* refs 1: nothing but the entry holds its inline value (KV_INLINE_MAX), so it can be rewritten */
    if (!v || vlen > e->vcap || atomic_load_explicit(&v->refs, memory_order_relaxed) != 1) {
        v = malloc(sizeof *v + vlen);
        if (!v)
            return -ENOMEM;
        atomic_init(&v->refs, 1);
    }
    v->len = vlen;
    if (vlen)
        memcpy(v->data, val, vlen);
    if (e->type != KV_STRING || e->val != v)
        drop_held(e);
    e->type = KV_STRING;
    e->val = v;
    return 0;
}

/* Below it a value grows to twice its length, above it by this much (Redis's SDS_MAX_PREALLOC). */
#define GROW_DOUBLE_MAX ((size_t)1 << 20)

int kv_entry_write(struct kv_entry *e, size_t off, const void *data, size_t n)
{
    struct kv_value *v = e->val, *inl = kv_entry_inline(e);
    size_t end = off + n, len = end > v->len ? end : v->len;
    if (len == v->len && n == 0)
        return 0; /* an empty APPEND or SETRANGE within the string: nothing to write, nor to copy */
    /* acquire: a reply that sent v dropped its reference with a release (kv_value_put), so its reads
     * of the bytes are over before these writes. */
    bool alone = atomic_load_explicit(&v->refs, memory_order_acquire) == 1;
    size_t room = v == inl ? e->vcap : malloc_usable_size(v) - sizeof *v;
    if (!alone || len > room) {
        size_t cap = len < GROW_DOUBLE_MAX ? 2 * len : len + GROW_DOUBLE_MAX;
        struct kv_value *grown = malloc(sizeof *grown + cap);
        if (!grown)
            return -ENOMEM;
        atomic_init(&grown->refs, 1);
        grown->len = v->len;
        memcpy(grown->data, v->data, v->len);
        if (v != inl)
            kv_value_put(v);
        e->val = v = grown;
    }
    if (off > v->len)
        memset(v->data + v->len, 0, off - v->len);
    memcpy(v->data + off, data, n);
    v->len = len;
    return 0;
}

void kv_entry_free(struct kv_entry *e)
{
    if (!e)
        return;
    drop_held(e);
    free(e->exp);
    free(e);
}

int kvmap_init_bits(struct kvmap *m, uint32_t bits)
{
    m->buckets = calloc((size_t)1 << bits, sizeof *m->buckets);
    m->bits = bits;
    m->n = 0;
    return m->buckets ? 0 : -ENOMEM;
}

int kvmap_init(struct kvmap *m)
{
    return kvmap_init_bits(m, INITIAL_BITS);
}

static size_t nbuckets(const struct kvmap *m)
{
    return (size_t)1 << m->bits;
}


void kvmap_free(struct kvmap *m)
{
    for (size_t b = 0; m->buckets && b < nbuckets(m); b++)
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
    for (struct kv_entry *e = m->buckets[kvmap_bucket_of(m, hash)]; e; e = e->next)
        if (same_key(e, hash, key, klen))
            return e;
    return NULL;
}

static void grow(struct kvmap *m)
{
    struct kvmap bigger = { .bits = m->bits + 1 };
    bigger.buckets = calloc(nbuckets(&bigger), sizeof *bigger.buckets);
    if (!bigger.buckets)
        return;
    for (size_t i = 0; i < nbuckets(m); i++)
        for (struct kv_entry *e = m->buckets[i], *next; e; e = next) {
            next = e->next;
            struct kv_entry **head = &bigger.buckets[kvmap_bucket_of(&bigger, e->hash)];
            e->next = *head;
            *head = e;
        }
    free(m->buckets);
    m->buckets = bigger.buckets;
    m->bits = bigger.bits;
}

void kvmap_insert(struct kvmap *m, struct kv_entry *e)
{
    if (m->n >= nbuckets(m) && m->bits < 48)
        grow(m);
    struct kv_entry **head = &m->buckets[kvmap_bucket_of(m, e->hash)];
    e->next = *head;
    *head = e;
    m->n++;
}

struct kv_entry *kvmap_take(struct kvmap *m, uint64_t hash, const void *key, size_t klen)
{
    for (struct kv_entry **p = &m->buckets[kvmap_bucket_of(m, hash)]; *p; p = &(*p)->next)
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
    for (size_t b = 0; b < nbuckets(m); b++)
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

uint64_t kvmap_range(const struct kvmap *m, uint64_t from, uint64_t to,
                     bool (*fn)(const struct kv_entry *e, void *ctx), void *ctx)
{
    if (from > to)
        return to + 1;
    for (size_t b = kvmap_bucket_of(m, from), last = kvmap_bucket_of(m, to); b <= last; b++) {
        bool more = true;
        for (const struct kv_entry *e = m->buckets[b]; e; e = e->next)
            if (e->hash >= from && e->hash <= to)
                more &= fn(e, ctx);
        if (!more && b < last)
            return (uint64_t)(b + 1) << (64 - m->bits);
    }
    return to + 1;
}
