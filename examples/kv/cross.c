/* kv_server: bringing the keys of one command together in its last part (cross.h).
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include "cross.h"

#include <errno.h>
#include <string.h>

#include "expire.h"

static bool same_key(const struct request *r, const struct part *a, const struct part *b)
{
    const struct resp_arg *x = key_of(r, a), *y = key_of(r, b);
    return a->hash == b->hash && x->len == y->len && memcmp(x->p, y->p, x->len) == 0;
}

/* Each part's first part of the same key, where that key's entry waits. */
static void match_keys(struct request *r)
{
    for (uint32_t i = 0; i < r->nparts; i++)
        for (uint32_t j = 0; j <= i; j++)
            if (same_key(r, &r->parts[i], &r->parts[j])) {
                r->parts[i].same = j;
                break;
            }
}

/* Every entry back where its key's owner finds it: the last part's key into its own store. */
static void put_back(struct kv_store *s, struct request *r, const struct part *last)
{
    for (uint32_t i = 0; i < r->nparts; i++) {
        struct kv_entry *e = r->parts[i].held;
        r->parts[i].held = NULL;
        if (!e || r->parts[i].same != i)
            continue;
        if (i == last->same)
            store_add(s, e);
        else
            store_hand_over(e);
    }
}

void cross_part(struct kv_store *s, struct request *r, const struct part *p, cross_decide_fn *decide)
{
    r->parts[p->index].held = store_take(s, HASHED_KEY(r, p)); /* NULL for a repeated key: taken */
    /* The parts before this one have run (the job's steps run one after another, each seeing what
     * the ones before did: multi.h), so their decrements are seen: the last part sees 1. */
    if (atomic_load_explicit(&r->parts_left, memory_order_relaxed) != 1)
        return;
    match_keys(r);
    /* A part that found no store (request.c) took nothing: its key is unknown, so nothing is done. */
    if (atomic_load_explicit(&r->error, memory_order_relaxed) == 0)
        decide(s, r, p);
    put_back(s, r, p);
}

void cross_drop(struct request *r, uint32_t i)
{
    struct kv_entry **e = cross_entry(r, i);
    expire_clear(*e); /* a timer of a held key: cancelled from any thread (shard/timer.h) */
    kv_entry_free(*e);
    *e = NULL;
}

int cross_make(struct request *r, uint32_t i, enum kv_type type, const void *obj, size_t len)
{
    const struct part *p = &r->parts[i];
    struct kv_entry *e = type == KV_STRING ? kv_entry_new(HASHED_KEY(r, p), obj, len)
                                           : kv_entry_new_obj(HASHED_KEY(r, p), type, (void *)obj);
    if (!e)
        return -ENOMEM;
    *cross_entry(r, i) = e;
    return 0;
}
