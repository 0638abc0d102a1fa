/* kv_server: a single-threaded hash map of byte strings to byte strings.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Written by hand: glibc's hsearch cannot delete or grow, and liburcu's rculfhash is a concurrent map
 * that would make every worker pay for RCU reads on data only it touches. Separate chaining over a
 * power-of-two bucket array, grown at load factor 1; entries are allocated by the caller so that an
 * entry can move between maps (a worker's map and the transit area) without being copied.
 *
 * Values are reference-counted, and a value a reply holds never changes: setting a key gives it a new
 * value, and APPEND and SETRANGE write into the value in place only while the entry holds the only
 * reference (kv_entry_write), so a reply can send a large value without copying it while the key
 * moves on (commands.c). */
#ifndef KV_KVMAP_H
#define KV_KVMAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "siphash.h"

struct kv_value {
    atomic_size_t refs; /* the entry holding it, and each reply sending it */
    size_t        len;
    char          data[];
};

/* One more reference to v. Context: a thread that holds a reference (the store's worker). */
struct kv_value *kv_value_get(struct kv_value *v);
/* Drops a reference; the last one frees v. Accepts NULL. Context: any thread. */
void kv_value_put(struct kv_value *v);

struct kv_expiry;

/* What a key holds. */
enum kv_type { KV_STRING, KV_LIST, KV_HASH, KV_SET, KV_ZSET, KV_STREAM };

/* The type's name as TYPE answers it: "string", "list", ... */
const char *kv_type_name(uint8_t type);

struct kv_entry {
    struct kv_entry *next; /* bucket chain, or a list of entries on their way elsewhere */
    uint64_t         hash; /* kv_hash of the key */
    union {
        struct kv_value *val; /* KV_STRING: the entry's reference (NULL only in a set's members) */
        void            *obj; /* the other types: the type's object (obj.h) */
    };
    struct kv_expiry *exp; /* when the key expires (expire.h); NULL: never. Freed with the entry */
    uint32_t klen;
    uint8_t  type;      /* enum kv_type */
    uint16_t vcap;      /* bytes of the value kept in the entry's own allocation (kv_entry_inline) */
    char     key[];
};

/* Buckets are indexed by the top bits of the hash, so that a bucket holds one range of hashes and the
 * buckets run in hash order, at every size: a range of hashes is a range of buckets (kvmap_range, for
 * SCAN's cursor). */
struct kvmap {
    struct kv_entry **buckets;
    uint32_t          bits; /* 2^bits buckets */
    size_t            n;
};

/* The bucket of hash: its top bits. */
static inline size_t kvmap_bucket_of(const struct kvmap *m, uint64_t hash)
{
    return m->bits ? (size_t)(hash >> (64 - m->bits)) : 0;
}

/* A prefetch that no caller loses: GCC takes a function that only reads memory and prefetches for one
 * without side effects, and drops a call to it as dead (its cddce pass, GCC 12 at -O2; with LTO across
 * files too): until 2026-12-06 store_prefetch and store_prefetch_entry compiled to a bare `ret`, and
 * no lookup of kv_server was ever prefetched. The empty volatile asm is a side effect to the compiler
 * and no instruction to the CPU, so every function that prefetches through this keeps its calls. */
static inline __attribute__((always_inline)) void kvmap_prefetch_line(const void *p)
{
    __builtin_prefetch(p);
    __asm__ volatile("");
}

/* Starts loading the bucket of hash into the cache, for a lookup soon. Context: m's thread. */
static inline __attribute__((always_inline)) void kvmap_prefetch(const struct kvmap *m, uint64_t hash)
{
    if (m->buckets)
        kvmap_prefetch_line(&m->buckets[kvmap_bucket_of(m, hash)]);
}

/* Starts loading the first entry of hash's bucket, whose line kvmap_prefetch asked for earlier: the
 * second of a lookup's two dependent misses. Context: m's thread. */
static inline __attribute__((always_inline)) void kvmap_prefetch_entry(const struct kvmap *m, uint64_t hash)
{
    if (m->buckets) {
        const struct kv_entry *e = m->buckets[kvmap_bucket_of(m, hash)];
        if (e)
            kvmap_prefetch_line(e);
    }
}

/* The first entry of hash's bucket with that hash, or NULL: most likely the key's entry, found
 * without comparing keys; for loading what a lookup will touch next, never for an answer. Context:
 * m's thread. */
static inline const struct kv_entry *kvmap_guess(const struct kvmap *m, uint64_t hash)
{
    const struct kv_entry *e = m->buckets ? m->buckets[kvmap_bucket_of(m, hash)] : NULL;
    while (e && e->hash != hash)
        e = e->next;
    return e;
}

/* Draws kv_hash's key at random, so that clients cannot craft keys that collide. Context: once,
 * before any other thread starts (store_global_init). SCAN's cursors, positions in the space of these
 * hashes, so hold for one run of the server. */
void kv_hash_init(void);

/* The key kv_hash_init drew: secret. */
extern unsigned char kv_hash_key[SIPHASH_KEY_BYTES];

/* SipHash-1-2 of the bytes under the secret key (siphash.h: Redis's dict hash): a key's hash in its
 * store, a hash's field's, a set's member's. A keyed pseudo-random function, because replies show
 * these hashes: SCAN's order, and its cursors, positions in their space, which a client may choose, so
 * that 64 calls read a key's hash exactly. Until 2026-12-07 this was XXH3 with a secret 64-bit seed,
 * which is not one: from a key of a few bytes and its hash the seed comes back by inverting XXH3's
 * last steps (a hostile review did it through SCAN's and HSCAN's cursors), and with it keys that
 * collide. Always of the bytes themselves: XXH3 with a known seed has collisions anyone can make
 * (xxhash.h says so for 17 to 240 bytes: 2^128 keys of 32 bytes share one seed-0 hash), which no
 * function of that hash, keyed or not, can tell apart again. */
static inline uint64_t kv_hash(const void *key, size_t len)
{
    return siphash(key, len, kv_hash_key, 1, 2);
}

/* The seed of shard's ring in kv_server: public, as SHARD.STATS shows shard hashes (placements, hot
 * keys), from which, with the key, XXH3's seed can be worked out for short keys. */
#define KV_RING_SEED 0

/* The bytes of a key that place it, as Redis Cluster's hash tags: when the key has a '{' and a '}'
 * after it with at least one byte between the first '{' and the first '}' after it, those bytes;
 * otherwise the whole key. "{user:42}:cart" and "{user:42}:inventory" are placed by "user:42", so they
 * live on one worker, move together, and a command or transaction of only such keys runs as one job
 * there (shard: keys of one hash are one key; multi.h). "a{}{b}" has an empty first tag: the whole key. */
static inline const void *kv_key_tag(const void *key, size_t *len)
{
    const char *open = *len ? memchr(key, '{', *len) : NULL;
    if (!open)
        return key;
    size_t after = *len - (size_t)(open + 1 - (const char *)key);
    const char *close = after ? memchr(open + 1, '}', after) : NULL;
    if (!close || close == open + 1)
        return key;
    *len = (size_t)(close - open - 1);
    return open + 1;
}

/* A key's shard hash: XXH3 with KV_RING_SEED of its tag (kv_key_tag), which the ring's hash hook is
 * (kv_ring_hash), so that shard_dispatcher_key_hash, the timers, placements and hand-overs, which
 * hash a key's bytes themselves, agree with it. Taken once a key by request_new: its parts go to shard
 * by it, and shard hashes no key of a command again. */
static inline uint64_t kv_shard_hash(const void *key, size_t len)
{
    key = kv_key_tag(key, &len);
    return XXH3_64bits_withSeed(key, len, KV_RING_SEED);
}

/* kv_shard_hash as shard's ring hash hook (shard_ring_config.hash; ctx unused). */
static inline uint64_t kv_ring_hash(const void *key, size_t len, void *ctx)
{
    (void)ctx;
    return kv_shard_hash(key, len);
}

/* A value shorter than this lives in its entry's own allocation, after the key: one allocation a key
 * and one cache line less to read, and a new value that fits is written in place. Nothing but the
 * entry ever holds such a value: a reply copies a value shorter than COPY_MAX (server.h), and
 * KV_INLINE_MAX is below it. */
#define KV_INLINE_MAX 128

/* The value kept in e's own allocation, or NULL if e has no room for one; e->val is it, or a value
 * allocated apart when the last one did not fit. Never passed to kv_value_put. */
struct kv_value *kv_entry_inline(const struct kv_entry *e);

/* A new string entry with a copy of key and of val; NULL without memory. Free with kv_entry_free. */
struct kv_entry *kv_entry_new(uint64_t hash, const void *key, size_t klen, const void *val, size_t vlen);
/* A new entry of type holding obj, which it then owns (KV_STRING with obj NULL: a set's member, with
 * no value); NULL without memory (obj is still the caller's). */
struct kv_entry *kv_entry_new_obj(uint64_t hash, const void *key, size_t klen, enum kv_type type, void *obj);
/* Gives e a new value, a copy of val, dropping its reference to the old one (or, for another type, its
 * object: e becomes a string). Return: 0; -ENOMEM (the old value stays). */
int  kv_entry_set(struct kv_entry *e, const void *val, size_t vlen);
/* Writes the n bytes at data into e's string value at off, which grows to off + n if it is shorter (a
 * gap after its end filled with zero bytes): APPEND and SETRANGE. In place when nothing else holds the
 * value (no reply is sending it) and its allocation has room; else into a new one with room to grow,
 * twice the length up to 1 MiB and 1 MiB more beyond, as Redis's strings grow: a string built by n
 * appends costs O(n) copies in all, where a copy of the whole at each one cost O(n^2) (8 MB by 2,000
 * APPENDs: 103 s, a hostile review). Return: 0; -ENOMEM (the value unchanged). */
int  kv_entry_write(struct kv_entry *e, size_t off, const void *data, size_t n);
/* Frees e, its value or object (obj.h) and its expiry record included; the caller has ended the
 * expiry's timer first (expire_clear), unless destroy discarded it. Accepts NULL. */
void kv_entry_free(struct kv_entry *e);

/* An empty map. Return: 0; -ENOMEM. Pair with kvmap_free, which frees the entries too. */
int  kvmap_init(struct kvmap *m);
/* An empty map of 2^bits buckets to begin with (a small one for a collection's members). */
int  kvmap_init_bits(struct kvmap *m, uint32_t bits);
void kvmap_free(struct kvmap *m);

struct kv_entry *kvmap_find(const struct kvmap *m, uint64_t hash, const void *key, size_t klen);
/* Adds e, whose key must not be in m. Never fails: without memory to grow, chains get longer. */
void kvmap_insert(struct kvmap *m, struct kv_entry *e);
/* Unlinks and returns the entry of key; NULL when absent. */
struct kv_entry *kvmap_take(struct kvmap *m, uint64_t hash, const void *key, size_t klen);
/* Unlinks every entry for which pick(e, ctx) is true and returns them as a list linked by next. */
struct kv_entry *kvmap_take_if(struct kvmap *m, bool (*pick)(const struct kv_entry *e, void *ctx),
                               void *ctx);
/* Calls fn(e, ctx) for entries whose hash is in [from, to], in bucket order (the order of their
 * hashes' top bits), while it returns true. fn must not change the map. Return: the first hash not yet
 * visited: to + 1 (0 when to is UINT64_MAX) when fn never stopped it, else the start of the bucket
 * after the one where it stopped (every entry of that bucket in the range was visited). */
uint64_t kvmap_range(const struct kvmap *m, uint64_t from, uint64_t to,
                     bool (*fn)(const struct kv_entry *e, void *ctx), void *ctx);

#endif
