/* Submitting a multi-key job: its keys' distinct hashes, room in their queues, its parts queued
 * in one order under d->multi_lock (multi.c's head says why that order resolves every wait).
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>

#include "ctl.h"
#include "dispatcher_internal.h"
#include "hash.h"
#include "multi.h"
#include "multi_layout.h"
#include "outbox.h"
#include "rcu.h"
#include "space.h"
#include "submit.h"
#include "shard/multi.h"

/* Queues fn(arg), a job of m of key hash h, to w under snapshot s, never waiting: beyond a full ring
 * (or one whose slots a waiting thread is owed, for a worker) through the side list, in a record of
 * m's block. Context: d->multi_lock, inside a read-side section. */
static void push_to(struct multi *m, struct shard_worker *w, const struct snap *s, shard_job_fn fn, void *arg,
                    uint64_t h, uint8_t origin, bool worker)
{
    if ((worker && shard__space_waited(w)) || !shard__queue_push_mp(&w->q, fn, arg, h, s->epoch, origin)) {
        struct job_block *b = m->block;
        struct job *j = &b->recs[b->used++];
        *j = (struct job){ .fn = fn, .arg = arg, .hash = h, .epoch = s->epoch, .routed = w, .kind = JOB_RUN,
                           .origin = origin, .block = b };
        atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed); /* before anyone can run it */
        shard__queue_push_side(&w->q, j);
    }
    shard__worker_wake(w);
}

/* Queues m under the snapshot in force: whole, as one job of its first key (shard__multi_whole),
 * when every key has one owner in it (what its parts would be, queued one after another there with
 * nothing between them, in one item); else its parts, each where a job of its key goes. Each key's
 * owner is looked up once, into owner[0..m->n). Context: as push_to. */
static void push_multi(shard_dispatcher *d, struct multi *m, uint32_t *owner, bool worker)
{
    /* acquire: pairs with the release store that published the snapshot (membership.c's publish). */
    struct snap *s = atomic_load_explicit(&d->snap, memory_order_acquire);
    bool whole = true;
    for (uint32_t i = 0; i < m->n; i++) {
        owner[i] = (uint32_t)shard__ring_owner_index(s->ring, m->keys[i].hash);
        whole = whole && owner[i] == owner[0];
    }
    if (whole) {
        push_to(m, snap_worker(s, owner[0]), s, shard__multi_whole, m, m->keys[0].hash, ORIGIN_MULTI_WHOLE, worker);
        return;
    }
    shard__multi_parts_ready(m);
    /* n read before: once the last part is queued, the job may run and end, and m be freed. */
    for (uint32_t i = 0, n = m->n; i < n; i++)
        push_to(m, snap_worker(s, owner[i]), s, shard__multi_part, &m->parts[i], m->keys[i].hash, ORIGIN_MULTI_PART,
                worker);
}

static int by_hash(const void *a, const void *b)
{
    const struct key_ref *x = a, *y = b;
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int by_index(const void *a, const void *b)
{
    const struct key_ref *x = a, *y = b;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* The distinct hashes of keys[0..n) into h, each with the index of its first occurrence, in that
 * order. Return: how many, or -EINVAL. */
static int distinct_hashes(shard_dispatcher *d, const struct shard_key *keys, size_t n, struct key_ref *h)
{
    for (size_t i = 0; i < n; i++) {
        if (!keys[i].key && keys[i].len > 0)
            return -EINVAL;
        h[i] = (struct key_ref){ shard__hash_key_cfg(&d->cfg.ring, keys[i].key, keys[i].len), (uint32_t)i };
    }
    size_t k = 0;
    if (n <= 16) { /* a few keys: pairwise */
        for (size_t i = 0; i < n; i++) {
            size_t j = 0;
            while (j < k && h[j].hash != h[i].hash)
                j++;
            if (j == k)
                h[k++] = h[i];
        }
        return (int)k;
    }
    qsort(h, n, sizeof *h, by_hash);
    for (size_t i = 0; i < n; i++)
        if (i == 0 || h[i].hash != h[i - 1].hash)
            h[k++] = h[i];
    qsort(h, k, sizeof *h, by_index);
    return (int)k;
}

/* Waits (wait) until each key's queue would take a job at once; for a thread that may not wait, or
 * a worker, only whether the try variant must refuse. Context: inside a read-side section.
 * Return: 0, -EAGAIN or -ESHUTDOWN. */
static int make_room(shard_dispatcher *d, const struct key_ref *h, size_t k, bool wait)
{
    bool worker = shard__worker_here(d) != NULL;
    if (wait && (worker || shard__rcu_in_outer_section() || shard__ctl_held(d)))
        return 0; /* as their submits: they go in without waiting (submit.c) */
    for (size_t i = 0; i < k; i++) {
        int rc = shard__submit_room(d, h[i].hash, wait);
        if (rc)
            return rc;
    }
    return 0;
}

static int submit_multi(shard_dispatcher *d, const struct shard_key *keys, size_t n, shard_job_fn fn,
                        shard_multi_step_fn step, void *arg, bool wait)
{
    if (!d || !keys || (!fn && !step) || n == 0)
        return -EINVAL;
    if (n > SHARD_MULTI_MAX_KEYS)
        return -E2BIG;
    /* The keys' hashes, then a scratch array for their owners (push_multi). */
    struct key_ref few[16], *h = n <= 16 ? few : malloc(n * (sizeof *h + sizeof(uint32_t)));
    if (!h)
        return -ENOMEM;
    uint32_t few_owners[16], *owner = h == few ? few_owners : (uint32_t *)(h + n);
    int k = distinct_hashes(d, keys, n, h);
    if (k < 0 || (k == 1 && !step)) {
        if (h != few)
            free(h);
        if (k < 0)
            return k;
        return wait ? shard_submit(d, keys[0].key, keys[0].len, fn, arg)
                    : shard_try_submit(d, keys[0].key, keys[0].len, fn, arg);
    }
    /* d is read only inside a read-side section from here on, as in submit (submit.c). */
    shard__rcu_read_lock();
    struct shard_worker *me = shard__worker_here(d);
    bool worker = me != NULL;
    int rc = 0;
    if (worker && !shard__outbox_deliver(me))
        rc = -ENOMEM; /* the job's earlier submits go first */
    if (!rc) {
        rc = make_room(d, h, (size_t)k, wait);
        if (rc == -ESHUTDOWN) {
            shard__rcu_read_unlock(); /* d may be freed: touch it no more */
            if (h != few)
                free(h);
            return rc;
        }
    }
    if (!rc && atomic_load_explicit(&d->shutdown, memory_order_relaxed))
        rc = -ESHUTDOWN;
    struct multi *m = rc ? NULL : shard__multi_new(d, h, (size_t)k, fn, step, arg);
    if (!rc && !m)
        rc = -ENOMEM;
    if (!rc) {
        shard__multi_count_open(d, 1);
        pthread_mutex_lock(&d->multi_lock);
        push_multi(d, m, owner, worker);
        pthread_mutex_unlock(&d->multi_lock);
    }
    shard__rcu_read_unlock();
    if (h != few)
        free(h);
    return rc;
}

SHARD_API int shard_submit_multi(shard_dispatcher *d, const struct shard_key *keys, size_t n, shard_job_fn fn,
                                 void *arg)
{
    return fn ? submit_multi(d, keys, n, fn, NULL, arg, true) : -EINVAL;
}

SHARD_API int shard_try_submit_multi(shard_dispatcher *d, const struct shard_key *keys, size_t n, shard_job_fn fn,
                                     void *arg)
{
    return fn ? submit_multi(d, keys, n, fn, NULL, arg, false) : -EINVAL;
}

SHARD_API int shard_submit_multi_each(shard_dispatcher *d, const struct shard_key *keys, size_t n,
                                      shard_multi_step_fn step, shard_job_fn done, void *arg)
{
    return step ? submit_multi(d, keys, n, done, step, arg, true) : -EINVAL;
}

SHARD_API int shard_try_submit_multi_each(shard_dispatcher *d, const struct shard_key *keys, size_t n,
                                          shard_multi_step_fn step, shard_job_fn done, void *arg)
{
    return step ? submit_multi(d, keys, n, done, step, arg, false) : -EINVAL;
}
