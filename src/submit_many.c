/* Batch submit: many keyed jobs in one call, each to its key's owner, for one read-side section and,
 * for each worker a chunk reaches, one claim of slots and one wake-up check.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * What is accepted is always a prefix of the caller's jobs, so that "k accepted" says exactly which.
 * A chunk's workers claim their slots one after another; when one finds fewer free than its jobs need,
 * the prefix ends at its first job that got none, and slots an earlier worker claimed for jobs beyond
 * that point are filled with shard__queue_void, which the worker consumes unseen: a claimed slot
 * cannot be given back. That happens only when a queue fills up during the call. */
#include <errno.h>
#include <limits.h>

#include "dispatcher_internal.h"
#include "hash.h"
#include "outbox.h"
#include "rcu.h"
#include "ring_layout.h"
#include "space.h"
#include "submit.h"

#define CHUNK 64

struct dest {
    struct shard_worker *w;
    uint64_t want, got, first, used;
};

/* Submits the longest prefix of jobs[0..n) (n <= CHUNK) whose queues have room and whose keys are not
 * throttled for this caller (wait: as shard_submit), routed with the current snapshot.
 * Context: inside a read-side section. Return: its length. */
static size_t push_chunk(shard_dispatcher *d, const struct shard_hashed_job *jobs, size_t n, bool wait)
{
    /* The prefix ends before a throttled key's job: it waits, or is refused, as one submit. */
    for (size_t i = 0; i < n && shard__throttle_any(&d->throttle); i++)
        if (shard__submit_throttled(d, jobs[i].hash, wait)) {
            n = i;
            break;
        }
    if (!n)
        return 0;
    /* acquire: pairs with the release store that published the snapshot (membership.c's publish). */
    struct snap *s = atomic_load_explicit(&d->snap, memory_order_acquire);
    struct dest dests[CHUNK];
    uint8_t which[CHUNK];
    size_t nd = 0;
    for (size_t i = 0; i < n; i++) {
        struct shard_worker *w = snap_worker(s, shard__ring_owner_index(s->ring, jobs[i].hash));
        /* And before a job that a worker full of set-aside jobs holds back (throttle.h's gate). */
        if (shard__submit_full(d, s, w, jobs[i].hash, wait)) {
            if (!wait)
                atomic_fetch_add_explicit(&d->throttle.full_waits, 1, memory_order_relaxed);
            n = i;
            break;
        }
        size_t k = 0;
        while (k < nd && dests[k].w != w)
            k++;
        if (k == nd)
            dests[nd++] = (struct dest){ .w = w };
        which[i] = (uint8_t)k;
    }
    if (!n)
        return 0;
    size_t cut = n;
    for (size_t k = 0; k < nd; k++) {
        struct dest *dk = &dests[k];
        for (size_t i = 0; i < cut; i++)
            dk->want += which[i] == k;
        /* A worker leaves a queue that threads wait for to them (shard__submit_hashed says why). */
        bool yield = shard__current_worker && shard__space_waited(dk->w);
        /* No prefetch of the claimed slots for writing (nor in the outbox's delivery): a producer
         * that outruns its worker claims the slots the worker has just freed, and asking for 32 of its
         * lines at once halved a 1-to-1 stream of bursts (bench_peers 1to1_burst 29.5-30.5 -> 12.9-14.2
         * M jobs/s, since 093cd7b). */
        dk->got = dk->want && !yield ? shard__queue_claim_mp(&dk->w->q, dk->want, &dk->first) : 0;
        if (dk->got == dk->want)
            continue;
        /* The prefix ends at this worker's first job without a slot. */
        for (size_t i = 0, seen = 0; i < cut; i++)
            if (which[i] == k && seen++ == dk->got) {
                cut = i;
                break;
            }
    }
    for (size_t i = 0; i < n; i++) {
        struct dest *dk = &dests[which[i]];
        if (dk->used == dk->got)
            continue;
        uint64_t pos = dk->first + dk->used++;
        if (i < cut)
            shard__queue_write(&dk->w->q, pos, jobs[i].fn, jobs[i].arg, jobs[i].hash, s->epoch, ORIGIN_USER);
        else
            shard__queue_write(&dk->w->q, pos, shard__queue_void, NULL, jobs[i].hash, s->epoch, ORIGIN_USER);
    }
    for (size_t k = 0; k < nd; k++)
        if (dests[k].got)
            shard__worker_wake(dests[k].w);
    return cut;
}

/* The caller's jobs: keyed (struct shard_job, hashed here a chunk at a time) or hashed already. */
struct batch {
    const struct shard_job        *keyed;
    const struct shard_hashed_job *hashed;
};

/* jobs[at..at+m) of b as hashed jobs: b's own, or hashed into buf. Context: inside a read-side section. */
static const struct shard_hashed_job *chunk_of(shard_dispatcher *d, struct batch b, size_t at, size_t m,
                                               struct shard_hashed_job *buf)
{
    if (b.hashed)
        return b.hashed + at;
    for (size_t i = 0; i < m; i++) {
        const struct shard_job *j = &b.keyed[at + i];
        buf[i] = (struct shard_hashed_job){ shard__hash_key_cfg(&d->cfg.ring, j->key, j->len), j->fn, j->arg };
    }
    return buf;
}

/* Whether every job of b[0..n) is one shard_submit would take. */
static bool batch_valid(struct batch b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b.hashed ? !b.hashed[i].fn : !b.keyed[i].fn || (!b.keyed[i].key && b.keyed[i].len > 0))
            return false;
    return true;
}

static int submit_many(shard_dispatcher *d, struct batch b, size_t n, bool wait)
{
    if (!d || (!b.keyed && !b.hashed && n > 0) || n > INT_MAX || !batch_valid(b, n))
        return -EINVAL;
    /* One read-side section for the whole call, left only while registered as a waiter for room
     * (shard__submit_hashed): destroy frees d after a grace period that follows both, so d is never
     * read between chunks outside of one. */
    shard__rcu_read_lock();
    size_t done = 0;
    int rc = 0;
    struct shard_hashed_job buf[CHUNK];
    struct shard_worker *me = shard__worker_here(d);
    if (me && wait && me->outbox.gathering) {
        /* A running job's: into its worker's outbox, in order, as that many shard_submit (outbox.h). */
        for (; done < n && !rc; done += !rc) {
            const struct shard_hashed_job *j = chunk_of(d, b, done, 1, buf);
            if (atomic_load_explicit(&d->shutdown, memory_order_relaxed))
                rc = -ESHUTDOWN;
            else
                rc = shard__outbox_gather(me, j->hash, j->fn, j->arg, ORIGIN_USER);
        }
        n = done;
    } else if (me && !atomic_load_explicit(&d->shutdown, memory_order_relaxed) &&
               !shard__outbox_deliver(me)) {
        rc = -ENOMEM; /* the worker's earlier submits go first */
    }
    while (done < n && !rc) {
        if (atomic_load_explicit(&d->shutdown, memory_order_relaxed)) {
            rc = -ESHUTDOWN;
            break;
        }
        size_t m = n - done < CHUNK ? n - done : CHUNK;
        const struct shard_hashed_job *jobs = chunk_of(d, b, done, m, buf);
        size_t got = push_chunk(d, jobs, m, wait);
        done += got;
        if (got == m)
            continue;
        if (!wait)
            break;
        /* A full queue or a throttled key: this job waits (or, from a worker, goes beyond a full
         * queue) as one submit does; the chunks go on after it. */
        const struct shard_hashed_job *j = &jobs[got];
        rc = shard__submit_hashed(d, j->hash, j->fn, j->arg, ORIGIN_USER, true);
        if (!rc)
            done++;
    }
    shard__rcu_read_unlock();
    return done || !rc ? (int)done : rc;
}

SHARD_API int shard_submit_many(shard_dispatcher *d, const struct shard_job *jobs, size_t n)
{
    return submit_many(d, (struct batch){ .keyed = jobs }, n, true);
}

SHARD_API int shard_try_submit_many(shard_dispatcher *d, const struct shard_job *jobs, size_t n)
{
    return submit_many(d, (struct batch){ .keyed = jobs }, n, false);
}

SHARD_API int shard_submit_many_hash(shard_dispatcher *d, const struct shard_hashed_job *jobs, size_t n)
{
    return submit_many(d, (struct batch){ .hashed = jobs }, n, true);
}

SHARD_API int shard_try_submit_many_hash(shard_dispatcher *d, const struct shard_hashed_job *jobs, size_t n)
{
    return submit_many(d, (struct batch){ .hashed = jobs }, n, false);
}
