/* kv_server: WATCH (watch.h says what it promises and how). SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>

#include "expire.h"
#include "net_internal.h"
#include "server.h"
#include "watch.h"

_Atomic uint32_t   watch_stamps[WATCH_STAMPS];
_Atomic uint32_t   watch_watched[1u << WATCH_FILTER_BITS];
struct watch_counts watch_counts;
_Thread_local bool  watch_part_unchanged;

/* One WATCH's keys: held by its connection until its watches end, and by the WATCH request until it
 * is freed (its parts write what they read); then by the EXEC that takes it (watch_take). A key's
 * stamp, flushes and expires_ms are written by the WATCH's part of it and read by the EXEC's check,
 * which comes after it in the key's order (watch.h): plain fields. */
struct watch_set {
    atomic_uint       refs;
    uint32_t          n;
    struct watch_set *next; /* the connection's sets, then the EXEC's */
    struct watched {
        uint64_t hash;       /* the key's store hash: its stamp and filter slot */
        uint64_t shard_hash; /* for the EXEC's job to hold the key */
        uint64_t flushes;    /* watch_counts.flushes then */
        int64_t  expires_ms; /* when the key expires, as it stood then; 0: never (or missing) */
        uint32_t stamp;
    } key[];
};

static _Atomic uint32_t *stamp_of(uint64_t hash)
{
    return &watch_stamps[hash >> (64 - WATCH_STAMP_BITS)];
}

static _Atomic uint32_t *watched_of(uint64_t hash)
{
    return &watch_watched[hash >> (64 - WATCH_FILTER_BITS)];
}

void watch_flushed(void)
{
    atomic_fetch_add_explicit(&watch_counts.flushes, 1, memory_order_relaxed);
}

/* A WATCH's part: its key as it stands now, after the connection's earlier commands of it. A key
 * found due is deleted first (store_find: a write, as for any read that finds it so). */
static void watch_part(struct kv_store *s, struct request *r, const struct part *p)
{
    const struct kv_entry *e = store_find(s, HASHED_KEY(r, p));
    struct watched *k = &r->watch->key[p->index];
    k->expires_ms = e && e->exp ? e->exp->at_ms : 0;
    /* relaxed: every write of the key before this part happens before it (the key's order), and so
     * does every flush whose answer came before the WATCH was sent. */
    k->flushes = atomic_load_explicit(&watch_counts.flushes, memory_order_relaxed);
    k->stamp = atomic_load_explicit(stamp_of(p->hash), memory_order_relaxed);
}

static void watch_finish(struct request *r)
{
    resp_simple(&r->reply, "OK");
}

const struct command watch_cmd = { "WATCH", -2, CMD_KEYED, 1, watch_part, watch_finish, NULL, 0, NULL, false, READS };

struct watch_set *watch_set_new(struct request *r)
{
    struct watch_set *s = calloc(1, sizeof *s + r->nparts * sizeof s->key[0]);
    if (!s)
        return NULL;
    atomic_init(&s->refs, 2); /* the connection's and the request's */
    s->n = r->nparts;
    for (uint32_t i = 0; i < s->n; i++) {
        s->key[i].hash = r->parts[i].hash;
        s->key[i].shard_hash = r->parts[i].shard_hash;
        s->key[i].flushes = UINT64_MAX; /* a key whose part never read it (refused) aborts the EXEC */
        /* Before the parts are submitted, which hands the counts to their jobs and so to every later
         * write of those keys (watch.h). */
        atomic_fetch_add_explicit(watched_of(s->key[i].hash), 1, memory_order_relaxed);
    }
    r->watch = s;
    atomic_fetch_add_explicit(&watch_counts.active, s->n, memory_order_relaxed);
    return s;
}

void watch_add(struct conn *c, struct watch_set *s)
{
    s->next = c->watches;
    c->watches = s;
    atomic_store_explicit(&c->watched, watch_count(c) + s->n, memory_order_relaxed);
}

void watch_set_put(struct watch_set *s)
{
    /* acq_rel: the last holder frees what the others wrote (the parts' reads). */
    if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        free(s);
}

void watch_release(struct watch_set *list)
{
    for (struct watch_set *s = list, *next; s; s = next) {
        next = s->next;
        for (uint32_t i = 0; i < s->n; i++)
            atomic_fetch_sub_explicit(watched_of(s->key[i].hash), 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(&watch_counts.active, s->n, memory_order_relaxed);
        watch_set_put(s);
    }
}

struct watch_set *watch_take(struct conn *c)
{
    struct watch_set *list = c->watches;
    c->watches = NULL;
    atomic_store_explicit(&c->watched, 0, memory_order_relaxed);
    return list;
}

void watch_clear(struct conn *c)
{
    watch_release(watch_take(c));
}

uint32_t watch_hashes(const struct watch_set *list, uint64_t *hashes)
{
    uint32_t k = 0;
    for (const struct watch_set *s = list; s; s = s->next)
        for (uint32_t i = 0; i < s->n; i++)
            hashes[k++] = s->key[i].shard_hash;
    return k;
}

bool watch_changed(const struct watch_set *list, int64_t now_ms)
{
    /* relaxed: every write of a watched key that came before the EXEC happens before this, its first
     * step (the key's order), and every one after waits for the job to end (watch.h). */
    uint64_t flushes = atomic_load_explicit(&watch_counts.flushes, memory_order_relaxed);
    for (const struct watch_set *s = list; s; s = s->next)
        for (uint32_t i = 0; i < s->n; i++) {
            const struct watched *k = &s->key[i];
            if (atomic_load_explicit(stamp_of(k->hash), memory_order_relaxed) != k->stamp ||
                k->flushes != flushes || (k->expires_ms && k->expires_ms <= now_ms))
                return true;
        }
    return false;
}

uint32_t watch_count(const struct conn *c)
{
    return atomic_load_explicit(&c->watched, memory_order_relaxed);
}
