/* kv_server: hashes and sets: a kvmap of members. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The store's own map serves for a collection's members (a member is an entry: its key the member,
 * its value a hash field's value, or none for a set). Two things it lacks are added here: a map that
 * has become sparse is rebuilt smaller (kvmap only grows), which gives memory back and keeps a random
 * pick cheap (every removal of a member goes through obj_map_take or shrinks after it); and a random
 * pick, as Redis's dictGetRandomKey makes one: random buckets until one holds members, then one of
 * its members. A member that shares its bucket comes up less often than one alone (at a load of at
 * most 1, chains are short), as in Redis; with the load kept between 1/8 and 1 it costs O(1) expected.
 * (Until SRANDMEMBER, the pick was the entry after a random hash, which favoured members after runs
 * of empty buckets, and one that shared a bucket with an entry of a larger hash ahead of it never came
 * up; and SMOVE left a set's map as large as it had been, which made every pick walk it.) */
#include <stdlib.h>

#include "obj.h"

#define MIN_BITS 2

struct kvmap *obj_map_new(void)
{
    struct kvmap *m = malloc(sizeof *m);
    if (m && kvmap_init_bits(m, MIN_BITS) != 0) {
        free(m);
        return NULL;
    }
    return m;
}

void obj_map_free(struct kvmap *m)
{
    if (!m)
        return;
    kvmap_free(m);
    free(m);
}

struct kv_entry *obj_member_new(uint64_t hash, const void *key, size_t klen, const void *val, size_t vlen)
{
    if (val)
        return kv_entry_new(hash, key, klen, val, vlen);
    /* a set's member: no value at all (the entry's val NULL, which kv_entry_free accepts) */
    return kv_entry_new_obj(hash, key, klen, KV_STRING, NULL);
}

static bool every(const struct kv_entry *e, void *ctx)
{
    (void)e;
    (void)ctx;
    return true;
}

/* Rebuilds m with about two buckets per member once fewer than one in eight is used; O(old buckets),
 * paid for by the deletions that made it sparse. Without memory it stays as it is. */
static void shrink(struct kvmap *m)
{
    if (m->bits <= MIN_BITS || m->n >= ((size_t)1 << m->bits) / 8)
        return;
    uint32_t bits = MIN_BITS;
    while (((size_t)1 << bits) < 2 * m->n)
        bits++;
    struct kvmap small;
    if (kvmap_init_bits(&small, bits) != 0)
        return;
    for (struct kv_entry *e = kvmap_take_if(m, every, NULL), *next; e; e = next) {
        next = e->next;
        kvmap_insert(&small, e);
    }
    kvmap_free(m);
    *m = small;
}

struct kv_entry *obj_map_take(struct kvmap *m, uint64_t hash, const void *key, size_t klen)
{
    struct kv_entry *e = kvmap_take(m, hash, key, klen);
    if (e)
        shrink(m);
    return e;
}

bool obj_map_del(struct kvmap *m, const void *key, size_t klen)
{
    struct kv_entry *e = obj_map_take(m, kv_hash(key, klen), key, klen);
    bool had = e != NULL;
    kv_entry_free(e);
    return had;
}

/* Random buckets tried before the pick settles for the first one with members after the last: at the
 * lowest load (1/8), 64 empty ones in a row come about once in 3,000 picks. */
#define PICK_TRIES 64

const struct kv_entry *obj_map_random(const struct kvmap *m)
{
    if (m->n == 0)
        return NULL;
    size_t mask = ((size_t)1 << m->bits) - 1, b = kvmap_bucket_of(m, obj_random()), len = 0;
    for (int t = 1; t < PICK_TRIES && !m->buckets[b]; t++)
        b = kvmap_bucket_of(m, obj_random());
    while (!m->buckets[b])
        b = (b + 1) & mask;
    const struct kv_entry *e = m->buckets[b];
    for (; e; e = e->next)
        len++;
    size_t k = (size_t)(obj_random() % len);
    for (e = m->buckets[b]; k > 0; k--)
        e = e->next;
    return e;
}

struct kv_entry *obj_map_take_random(struct kvmap *m)
{
    const struct kv_entry *found = obj_map_random(m);
    if (!found)
        return NULL;
    return obj_map_take(m, found->hash, found->key, found->klen);
}
