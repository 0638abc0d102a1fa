/* kv_server: WATCH (watch.h says what it promises and how). SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>

#include "net_internal.h"
#include "server.h"
#include "watch.h"

_Atomic uint64_t watch_stamps[WATCH_SLOTS];
atomic_uint      watch_active;

/* One WATCH's keys: held by its connection until its watches end, and by the WATCH request until it
 * is freed (its parts write the stamps); then by the EXEC that takes it (watch_take). */
struct watch_set {
    atomic_uint       refs;
    uint32_t          n;
    struct watch_set *next; /* the connection's sets, then the EXEC's */
    struct watched {
        uint64_t         hash;       /* the key's store hash: its stamp's slot */
        uint64_t         shard_hash; /* for the EXEC's job to hold the key */
        _Atomic uint64_t stamp;      /* what the WATCH's part of the key read */
    } key[];
};

static _Atomic uint64_t *stamp_of(uint64_t hash)
{
    return &watch_stamps[hash >> (64 - WATCH_SLOTS_BITS)];
}

void watch_touch_all(void)
{
    if (atomic_load_explicit(&watch_active, memory_order_relaxed) == 0)
        return;
    for (size_t i = 0; i < WATCH_SLOTS; i++)
        atomic_fetch_add_explicit(&watch_stamps[i], 1, memory_order_relaxed);
}

/* A WATCH's part: its key's stamp now, after the connection's earlier commands of the key. The
 * stamp's reader is ordered after this by the key's order (watch.h): relaxed is enough. */
static void watch_part(struct kv_store *s, struct request *r, const struct part *p)
{
    (void)s;
    uint64_t now = atomic_load_explicit(stamp_of(p->hash), memory_order_relaxed);
    atomic_store_explicit(&r->watch->key[p->index].stamp, now, memory_order_relaxed);
}

static void watch_finish(struct request *r)
{
    resp_simple(&r->reply, "OK");
}

const struct command watch_cmd = { "WATCH", -2, CMD_KEYED, 1, watch_part, watch_finish, NULL, 0, NULL, false, READS };

struct watch_set *watch_set_new(struct request *r)
{
    struct watch_set *s = malloc(sizeof *s + r->nparts * sizeof s->key[0]);
    if (!s)
        return NULL;
    atomic_init(&s->refs, 2); /* the connection's and the request's */
    s->n = r->nparts;
    s->next = NULL;
    for (uint32_t i = 0; i < s->n; i++) {
        s->key[i].hash = r->parts[i].hash;
        s->key[i].shard_hash = r->parts[i].shard_hash;
        atomic_init(&s->key[i].stamp, 0);
    }
    r->watch = s;
    /* Before the parts are submitted, which hands it to their jobs and so to every later write of
     * those keys (watch.h). */
    atomic_fetch_add_explicit(&watch_active, s->n, memory_order_relaxed);
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
    /* acq_rel: the last holder frees what the others wrote (the parts' stamps). */
    if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        free(s);
}

void watch_release(struct watch_set *list)
{
    for (struct watch_set *s = list, *next; s; s = next) {
        next = s->next;
        atomic_fetch_sub_explicit(&watch_active, s->n, memory_order_relaxed);
        watch_set_put(s);
    }
}

void watch_clear(struct conn *c)
{
    watch_release(c->watches);
    c->watches = NULL;
    atomic_store_explicit(&c->watched, 0, memory_order_relaxed);
}

struct watch_set *watch_take(struct conn *c, uint32_t *keys, uint64_t *hashes)
{
    uint32_t k = 0;
    for (struct watch_set *s = c->watches; s; s = s->next)
        for (uint32_t i = 0; i < s->n; i++)
            hashes[k++] = s->key[i].shard_hash;
    *keys = k;
    struct watch_set *list = c->watches;
    c->watches = NULL;
    atomic_store_explicit(&c->watched, 0, memory_order_relaxed);
    return list;
}

bool watch_changed(const struct watch_set *list)
{
    for (const struct watch_set *s = list; s; s = s->next)
        for (uint32_t i = 0; i < s->n; i++)
            if (atomic_load_explicit(stamp_of(s->key[i].hash), memory_order_relaxed) !=
                atomic_load_explicit(&s->key[i].stamp, memory_order_relaxed))
                return true;
    return false;
}

uint32_t watch_count(const struct conn *c)
{
    return atomic_load_explicit(&c->watched, memory_order_relaxed);
}
