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
 * m's block. The caller wakes w (wake_owners). Context: d->multi_lock, inside a read-side section. */
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
}

/* Each key's owner under s into owner[0..n): the index of its ring member. Return: whether they are
 * all one (the job goes whole). */
static bool owners_of(const struct snap *s, const struct key_ref *h, uint32_t n, uint32_t *owner)
{
    bool whole = true;
    for (uint32_t i = 0; i < n; i++) {
        owner[i] = (uint32_t)shard__ring_owner_index(s->ring, h[i].hash);
        whole = whole && owner[i] == owner[0];
    }
    return whole;
}

/* Queues m under snapshot s, in which its keys' owners are owner[] (owners_of; whole: all one): whole,
 * as one job of its first key (shard__multi_whole), what its parts would be, queued one after another
 * there with nothing between them, in one item; else its parts, each where a job of its key goes.
 * Context: as push_to, s the snapshot in force. */
static void push_multi(struct multi *m, const struct snap *s, const uint32_t *owner, bool whole, bool worker)
{
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

/* Wakes each worker that push_multi queued to (owner[0..n), under s), once (members beyond the 64th
 * once a run of them). After the pushes, in program order, as any submit's wake-up (the Dekker pair:
 * the pushes' seq_cst claims, then shard__worker_wake's look at the parking flag); and after
 * d->multi_lock, which a wake-up's write to a parked worker's eventfd or futex (a system call) held
 * for every other multi-key submitter. Context: inside the pushes' read-side section (s and its
 * workers stay). */
static void wake_owners(const struct snap *s, const uint32_t *owner, uint32_t n)
{
    uint64_t woken = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t o = owner[i];
        if (o < 64 ? woken >> o & 1 : i > 0 && owner[i - 1] == o)
            continue;
        if (o < 64)
            woken |= 1ull << o;
        shard__worker_wake(snap_worker(s, o));
    }
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

/* A multi-key job's keys as the caller gave them: by their bytes, or by their hashes. */
struct keys {
    const struct shard_key *bytes;
    const uint64_t         *hashes;
};

/* Up to this many keys are told apart in a table on the stack; more are sorted. */
#define FEW_KEYS 16

/* The distinct hashes of k's n keys into h, each with the index of its first occurrence, in that
 * order. Return: how many, or -EINVAL. */
static int distinct_hashes(shard_dispatcher *d, struct keys k, size_t n, struct key_ref *h)
{
    for (size_t i = 0; i < n; i++) {
        if (k.bytes && !k.bytes[i].key && k.bytes[i].len > 0)
            return -EINVAL;
        uint64_t hash = k.hashes ? k.hashes[i] : shard__hash_key_cfg(&d->cfg.ring, k.bytes[i].key, k.bytes[i].len);
        h[i] = (struct key_ref){ hash, (uint32_t)i };
    }
    size_t kept = 0;
    if (n <= FEW_KEYS) {
        /* A few keys (an MGET's): an open-addressing table of the kept ones' positions + 1, by their
         * top bits, at most half full; kept in place, as h[kept] is never ahead of h[i]. O(n), where
         * comparing each with every kept one was 1.5 % of a 10-key MGET's CPU in kv_server. */
        uint8_t at[2 * FEW_KEYS] = { 0 };
        for (size_t i = 0; i < n; i++) {
            size_t slot = (size_t)(h[i].hash >> 59);
            while (at[slot] && h[at[slot] - 1].hash != h[i].hash)
                slot = (slot + 1) % (2 * FEW_KEYS);
            if (!at[slot]) {
                h[kept] = h[i];
                at[slot] = (uint8_t)++kept;
            }
        }
        return (int)kept;
    }
    qsort(h, n, sizeof *h, by_hash);
    for (size_t i = 0; i < n; i++)
        if (i == 0 || h[i].hash != h[i - 1].hash)
            h[kept++] = h[i];
    qsort(h, kept, sizeof *h, by_index);
    return (int)kept;
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

/* A cancelled waiter's cleanup (make_room waits at a cancellation point): its keys' array, if on the
 * heap. */
static void free_keys(void *heap)
{
    free(heap);
}

/* A job whose keys are all one: a plain submit, inside the caller's section (one section from the
 * keys' hashes on). heap: the keys' array to free if the thread is cancelled while it waits. In a
 * function of its own: the cleanup handler's setjmp would clobber the caller's locals. */
static int submit_one(shard_dispatcher *d, uint64_t hash, shard_job_fn fn, void *arg, bool wait, void *heap)
{
    int rc;
    pthread_cleanup_push(free_keys, heap);
    rc = shard__submit_hashed(d, hash, fn, arg, ORIGIN_USER, wait);
    pthread_cleanup_pop(0);
    return rc;
}

static int submit_multi(shard_dispatcher *d, struct keys keys, size_t n, shard_job_fn fn, shard_multi_step_fn step,
                        void *arg, bool wait)
{
    if (!d || (!keys.bytes && !keys.hashes) || (!fn && !step) || n == 0)
        return -EINVAL;
    if (n > SHARD_MULTI_MAX_KEYS)
        return -E2BIG;
    /* The keys' hashes, then a scratch array for their owners (push_multi). */
    struct key_ref few[FEW_KEYS], *h = n <= FEW_KEYS ? few : malloc(n * (sizeof *h + sizeof(uint32_t)));
    if (!h)
        return -ENOMEM;
    uint32_t few_owners[FEW_KEYS], *owner = h == few ? few_owners : (uint32_t *)(h + n);
    /* d is read only inside one read-side section from here on (the keys' hashes read d->cfg), as in
     * submit (submit.c): a section ended and another begun would let destroy free d in between. */
    shard__rcu_read_lock();
    int k = distinct_hashes(d, keys, n, h);
    if (k < 0 || (k == 1 && !step)) {
        int rc = k == 1 ? submit_one(d, h[0].hash, fn, arg, wait, h != few ? h : NULL) : k;
        shard__rcu_read_unlock();
        if (h != few)
            free(h);
        return rc;
    }
    struct shard_worker *me = shard__worker_here(d);
    bool worker = me != NULL;
    int rc = 0;
    if (worker && !shard__outbox_deliver(me))
        rc = -ENOMEM; /* the job's earlier submits go first */
    if (!rc) {
        pthread_cleanup_push(free_keys, h != few ? h : NULL);
        rc = make_room(d, h, (size_t)k, wait);
        pthread_cleanup_pop(0);
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
        /* The owners are looked up before the lock, and again under it only if a change published
         * another snapshot meanwhile (inside the read-side section, the one looked at is not freed,
         * so an unchanged pointer is that snapshot): the lock covers the pushes alone.
         * acquire: pairs with the release store that published the snapshot (membership.c's publish). */
        struct snap *s = atomic_load_explicit(&d->snap, memory_order_acquire);
        bool whole = owners_of(s, h, (uint32_t)k, owner);
        pthread_mutex_lock(&d->multi_lock);
        struct snap *now = atomic_load_explicit(&d->snap, memory_order_acquire);
        if (now != s) {
            s = now;
            whole = owners_of(s, h, (uint32_t)k, owner);
        }
        push_multi(m, s, owner, whole, worker);
        pthread_mutex_unlock(&d->multi_lock);
        wake_owners(s, owner, whole ? 1 : (uint32_t)k); /* m may be gone: its keys' owners are ours */
    }
    shard__rcu_read_unlock();
    if (h != few)
        free(h);
    return rc;
}

SHARD_API int shard_submit_multi(shard_dispatcher *d, const struct shard_key *keys, size_t n, shard_job_fn fn,
                                 void *arg)
{
    return fn ? submit_multi(d, (struct keys){ .bytes = keys }, n, fn, NULL, arg, true) : -EINVAL;
}

SHARD_API int shard_try_submit_multi(shard_dispatcher *d, const struct shard_key *keys, size_t n, shard_job_fn fn,
                                     void *arg)
{
    return fn ? submit_multi(d, (struct keys){ .bytes = keys }, n, fn, NULL, arg, false) : -EINVAL;
}

SHARD_API int shard_submit_multi_each(shard_dispatcher *d, const struct shard_key *keys, size_t n,
                                      shard_multi_step_fn step, shard_job_fn done, void *arg)
{
    return step ? submit_multi(d, (struct keys){ .bytes = keys }, n, done, step, arg, true) : -EINVAL;
}

SHARD_API int shard_try_submit_multi_each(shard_dispatcher *d, const struct shard_key *keys, size_t n,
                                          shard_multi_step_fn step, shard_job_fn done, void *arg)
{
    return step ? submit_multi(d, (struct keys){ .bytes = keys }, n, done, step, arg, false) : -EINVAL;
}

SHARD_API int shard_submit_multi_hash(shard_dispatcher *d, const uint64_t *hashes, size_t n, shard_job_fn fn,
                                      void *arg)
{
    return fn ? submit_multi(d, (struct keys){ .hashes = hashes }, n, fn, NULL, arg, true) : -EINVAL;
}

SHARD_API int shard_try_submit_multi_hash(shard_dispatcher *d, const uint64_t *hashes, size_t n, shard_job_fn fn,
                                          void *arg)
{
    return fn ? submit_multi(d, (struct keys){ .hashes = hashes }, n, fn, NULL, arg, false) : -EINVAL;
}

SHARD_API int shard_submit_multi_each_hash(shard_dispatcher *d, const uint64_t *hashes, size_t n,
                                           shard_multi_step_fn step, shard_job_fn done, void *arg)
{
    return step ? submit_multi(d, (struct keys){ .hashes = hashes }, n, done, step, arg, true) : -EINVAL;
}

SHARD_API int shard_try_submit_multi_each_hash(shard_dispatcher *d, const uint64_t *hashes, size_t n,
                                               shard_multi_step_fn step, shard_job_fn done, void *arg)
{
    return step ? submit_multi(d, (struct keys){ .hashes = hashes }, n, done, step, arg, false) : -EINVAL;
}
