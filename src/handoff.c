/* What a job waits for before it may run: per-key order across membership changes.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The protocol. Every job carries the epoch of the ring it was routed with and the worker it was
 * routed to. After publishing epoch e and waiting a grace period (no submit still routes with an older
 * ring), the control thread puts a fence(e) into every worker's queue; a worker passes fence(e)
 * (w->life.passed = e) once it holds no job of an epoch below e: it has run everything it was given under
 * older rings. A job j of key k routed to B under epoch e may run once, for every older epoch e' whose
 * owner X of k was not B, X has passed fence(e' + 1): then every job of k routed before j is done.
 * d->settled, the newest epoch whose fences (and all older ones) every fenced worker has passed, bounds
 * how far back that walk goes: epochs up to it are done everywhere, so the common case is one
 * comparison. It is tracked per snapshot: each counts the fences of its epoch not yet passed, and
 * settled moves forward over snapshots whose count is zero, so a fence costs O(1) amortised, not
 * O(workers). A held job remembers the owner it was found waiting for and is woken when that owner
 * moves on (below), so a blocked job costs nothing until then.
 *
 * A crashed worker never passes another fence. Once its queue is handed over and no release hook of it
 * runs (a hook interrupted by the crash still hands state over: the keys it releases wait for it), it
 * is `epochless`: its unpassed fences stop counting and what it still holds up is kept in the crash table
 * (crash.h) instead, precisely: the key of its still-running job until that job returns, and the key
 * of each job it rerouted until that job has run (for jobs of later epochs only). A fence counts only
 * the jobs routed to its worker and not owed by a crash: a rerouted job is covered by its crash's
 * entry; and a job that a worker holds behind a crash entry when it reaches a fence (a job of a key
 * whose job is stuck on a crashed worker) becomes an entry itself (shard__crash_defer_held) rather than
 * holding the fence, so a stuck job holds its own key and nothing else. If that fence moves the key
 * away, such jobs follow it after the release hook (follow.c's shard__follow_key) and wait, where
 * they arrive, for every owner the key had since their epoch (moved_epoch), so they run where the
 * key's state is.
 *
 * A multi-key job (multi.c) holds each of its keys with a claim, a crash table entry of epoch 0 made
 * when its part of that key runs: the key's later jobs wait behind it as behind a stuck job, and
 * become entries at a fence rather than hold it; its steps are owed entries that follow their key.
 * The key of the part that runs the job (unless it claimed it before it knew it was last), and every
 * key of a job queued whole that runs at once, are held by that running job instead, as any job's key
 * is (a crash meanwhile claims a whole job's keys).
 *
 * Why nothing waits forever: every wait points to strictly older work. A job waits for fences of
 * epochs up to its own, and for older-epoch jobs of its key (also through crash entries, which are in
 * epoch order, a stuck job or a claim first; a claim is made by a multi-key job whose parts entered
 * the queues before the job's, multi.c); an owed job also for the owed jobs of its key and epoch made
 * entries before it (they were submitted before it: crash.h), wherever each now waits; a fence waits for older fences and for held jobs of older epochs
 * that no crash owes. Only drain marks and stops wait for everything ahead of them, and nothing waits
 * for those. */

#include "dispatcher_internal.h"
#include "handoff.h"
#include "rcu.h"

static bool fence_passed_by(struct shard_worker *x, uint64_t fence)
{
    /* acquire (E2, E6; docs/protocol.md): pairs with the (seq_cst, so release) stores of passed (run.c)
     * and epochless (below),
     * so the jobs x ran before them happen before the job about to run. */
    return atomic_load_explicit(&x->life.passed, memory_order_acquire) >= fence ||
           atomic_load_explicit(&x->life.epochless, memory_order_acquire);
}

/* Who is woken for what. A worker holding jobs notes in its waits.on what they wait for: one bit a
 * worker (by id, 62 of them, so unrelated workers may share a bit: a spurious kick at worst),
 * WAIT_CRASH for the crash table's payments, and WAIT_ENTRY, while it holds a drain mark, for entries
 * made (shard__entries_made). An event (a fence passed, a hand-over, an exit, a crash entry
 * paid) kicks only the holders whose note has its bit, so a holder walks its held jobs again only
 * when one of them may have become runnable, not on every event anywhere; for a crash entry paid,
 * and a job come in through its inbox, it looks at that one key's first held job alone (walk.c).
 * The pair: the holder sets the bit and then rereads what it waits for; the waker changes that and
 * then reads the bits, all seq_cst (the stores of passed and epochless included), so either the holder
 * sees the change or the waker sees the bit. For the crash table the pair goes through its lock. */
#define WAIT_CRASH (1ull << 63)
#define WAIT_ENTRY (1ull << 62)

static uint64_t wait_bit(const struct shard_worker *x)
{
    return 1ull << (x->id % 62);
}

static void note_wait(struct shard_worker *h, uint64_t bit)
{
    atomic_fetch_or_explicit(&h->waits.on, bit, memory_order_seq_cst);
}

void shard__wait_on_crashes(struct shard_worker *w)
{
    note_wait(w, WAIT_CRASH);
}

void shard__wait_on_entries(struct shard_worker *w)
{
    note_wait(w, WAIT_ENTRY);
}

/* The registry's workers, for a kick without d->lock: in a read-side section (registry.c publishes
 * the view and frees a worker only a grace period after a view without it). NULL: none yet. */
static const struct worker_view *workers_view(shard_dispatcher *d)
{
    /* acquire: pairs with view_publish's release store. */
    return atomic_load_explicit(&d->view, memory_order_acquire);
}

/* Context: d->lock (the registry's), which every caller holds for what it changed before: no
 * read-side section, which a worker that has run on_worker_stop may not enter (docs/rcu.md). */
static void kick_holders(shard_dispatcher *d, uint64_t bits)
{
    SHARD_CHECK_HELD(&d->lock);
    if (!atomic_load_explicit(&d->nholding, memory_order_seq_cst))
        return;
    for (size_t i = 0; i < d->nworkers; i++) {
        struct shard_worker *h = d->workers[i];
        if (atomic_load_explicit(&h->waits.holding, memory_order_relaxed) &&
            (atomic_load_explicit(&h->waits.on, memory_order_seq_cst) & bits)) {
            /* seq_cst: before the parking flag is read (the parking Dekker pair, shard__park_prepare). */
            atomic_fetch_add_explicit(&h->waits.kick, 1, memory_order_seq_cst);
            shard__worker_wake(h);
        }
    }
}

void shard__wake_waiters_of(shard_dispatcher *d, struct shard_worker *w)
{
    kick_holders(d, wait_bit(w));
}

/* As kick_holders for the crash table's entries of hashes[0..n), paid: each holder waiting on the
 * table is told which keys, so that it looks at those keys' first held jobs alone (walk.c), with one
 * kick for all of them (a multi-key job pays its claims together: shard__owed_done_all). */
static void kick_crash_holders(shard_dispatcher *d, const uint64_t *hashes, size_t n)
{
    if (!atomic_load_explicit(&d->nholding, memory_order_seq_cst))
        return;
    shard__rcu_read_lock();
    const struct worker_view *v = workers_view(d);
    const size_t slots = sizeof v->w[0]->waits.released / sizeof v->w[0]->waits.released[0];
    for (size_t i = 0; v && i < v->n; i++) {
        struct shard_worker *h = v->w[i];
        if (!atomic_load_explicit(&h->waits.holding, memory_order_relaxed) ||
            !(atomic_load_explicit(&h->waits.on, memory_order_seq_cst) & WAIT_CRASH))
            continue;
        bool lost = false;
        for (size_t k = 0, s = 0; k < n; k++) {
            bool put = false;
            for (; hashes[k] && !put && s < slots; s++) {
                uint64_t free_slot = 0;
                put = atomic_compare_exchange_strong_explicit(&h->waits.released[s], &free_slot, hashes[k],
                                                              memory_order_relaxed, memory_order_relaxed);
            }
            lost |= !put;
        }
        if (lost)
            atomic_store_explicit(&h->waits.released_lost, true, memory_order_relaxed);
        /* seq_cst (so release): the slots above are seen by the holder that reads the count, and the
         * count is read before the parking flag (the parking Dekker pair, shard__park_prepare). */
        atomic_fetch_add_explicit(&h->waits.kick_keys, 1, memory_order_seq_cst);
        shard__worker_wake(h);
    }
    shard__rcu_read_unlock();
}

void shard__entries_made(void *ctx)
{
    shard_dispatcher *d = ctx;
    /* seq_cst: the other half of the holder's note, then its look at the table: under the stripes'
     * locks, which the entry's maker let go before this, or, for a key with no entry, at the filter's
     * bit, which the maker set seq_cst (crash.c's count_up). draining was counted before the marks were
     * pushed, so a holder that noted a mark was seen with it. */
    if (!atomic_load_explicit(&d->draining, memory_order_seq_cst) ||
        !atomic_load_explicit(&d->nholding, memory_order_seq_cst))
        return;
    shard__rcu_read_lock();
    const struct worker_view *v = workers_view(d);
    for (size_t i = 0; v && i < v->n; i++) {
        struct shard_worker *h = v->w[i];
        if (atomic_load_explicit(&h->waits.holding, memory_order_relaxed) &&
            (atomic_load_explicit(&h->waits.on, memory_order_seq_cst) & WAIT_ENTRY)) {
            /* seq_cst: before the parking flag is read (as kick_holders). */
            atomic_fetch_add_explicit(&h->waits.kick, 1, memory_order_seq_cst);
            shard__worker_wake(h);
        }
    }
    shard__rcu_read_unlock();
}

/* Whether x, the owner of j's key in snapshot s, is done with what it was given under s. If not,
 * h notes that it is to be kicked when it is; so the answer is read again after the note. */
static bool owner_done(struct shard_worker *h, struct shard_worker *x, uint64_t epoch)
{
    if (fence_passed_by(x, epoch + 1))
        return true;
    note_wait(h, wait_bit(x));
    return atomic_load_explicit(&x->life.passed, memory_order_seq_cst) >= epoch + 1 ||
           atomic_load_explicit(&x->life.epochless, memory_order_seq_cst);
}

/* Whether every job of j's key routed before j elsewhere is done: for each older epoch whose owner x
 * of the key was not j's worker, x has passed the next fence; and, for a job moved to h at a later
 * epoch, whether every owner since its own epoch other than h has passed its fence too (it handed
 * the key's state on by then). Remembers the first wait it finds.
 * Context: a read-side section begun before settled was loaded, so that the snapshots from settled
 * on, and the workers they name, outlive it (shard__snap_reap and shard__registry_reap wait a grace period). */
static bool older_owners_done(shard_dispatcher *d, struct shard_worker *h, struct job *j, uint64_t settled)
{
    /* The wait found last time, if its snapshot is still at or above settled (so it is kept): while
     * it holds, nothing else needs looking at. */
    if (j->wait_snap && j->wait_epoch >= settled &&
        !owner_done(h, snap_worker(j->wait_snap, j->wait_member), j->wait_epoch))
        return false;
    j->wait_snap = NULL;
    uint64_t until = j->epoch > j->moved_epoch ? j->epoch : j->moved_epoch;
    for (struct snap *s = atomic_load_explicit(&d->snap, memory_order_acquire); s && s->epoch >= settled;
         s = atomic_load_explicit(&s->prev, memory_order_acquire)) {
        if (s->epoch >= until)
            continue;
        size_t i = shard__ring_owner_index(s->ring, j->hash);
        struct shard_worker *x = snap_worker(s, i);
        if (x != (s->epoch < j->epoch ? j->routed : h) && !owner_done(h, x, s->epoch)) {
            j->wait_snap = s;
            j->wait_epoch = s->epoch;
            j->wait_member = (uint32_t)i;
            return false;
        }
    }
    return true;
}

bool shard__key_waits_older(shard_dispatcher *d, struct shard_worker *w, uint64_t epoch, uint64_t hash)
{
    /* As older_owners_done for a job not moved, without notes: nothing is kicked for a submitter. */
    uint64_t settled = atomic_load_explicit(&d->settled, memory_order_acquire);
    for (struct snap *s = atomic_load_explicit(&d->snap, memory_order_acquire); s && s->epoch >= settled;
         s = atomic_load_explicit(&s->prev, memory_order_acquire)) {
        if (s->epoch >= epoch)
            continue;
        struct shard_worker *x = snap_worker(s, shard__ring_owner_index(s->ring, hash));
        if (x != w && !fence_passed_by(x, s->epoch + 1))
            return true;
    }
    return false;
}

bool shard__job_may_run(shard_dispatcher *d, struct shard_worker *w, struct job *j)
{
    SHARD_CHECK_HELD(&w->lock);
    /* The common case: j's epoch is settled, every older owner is done; no read-side section. acquire
     * (E3): the fences of the settled epochs happen before j. */
    uint64_t until = j->epoch > j->moved_epoch ? j->epoch : j->moved_epoch;
    if (until > atomic_load_explicit(&d->settled, memory_order_acquire)) {
        shard__rcu_read_lock();
        uint64_t settled = atomic_load_explicit(&d->settled, memory_order_acquire);
        bool ok = until <= settled || older_owners_done(d, w, j, settled);
        shard__rcu_read_unlock();
        if (!ok)
            return false;
    }
    if (!shard__crash_blocks(&d->crash, j))
        return true;
    note_wait(w, WAIT_CRASH);
    return !shard__crash_blocks(&d->crash, j);
}

void shard__settle(shard_dispatcher *d)
{
    struct snap *s = d->settled_snap;
    while (s->next && s->next->unpassed == 0)
        s = s->next;
    if (s == d->settled_snap)
        return;
    d->settled_snap = s;
    /* release (E3): a reader that sees the new value also sees the passes and hand-overs behind it. */
    atomic_store_explicit(&d->settled, s->epoch, memory_order_release);
    pthread_cond_broadcast(&d->cond); /* destroy waits for every fence (shard__membership_stop_all) */
    /* Submitters that a full holder held back wait for this too (throttle.h's gate); its increment
     * is the release a waiter that reads it acquires, so it sees settled as stored above. */
    shard__throttle_ease(&d->throttle);
}

void shard__fence_passed(shard_dispatcher *d, struct shard_worker *w, struct snap *s)
{
    s->unpassed--;
    shard__settle(d);
    shard__wake_waiters_of(d, w);
}

/* x's fences that it will never pass (it crashed) stop counting. Its passed is final: a crashed
 * worker processes no further item. Snapshots from settled on are kept, and settled is at most
 * x's passed while one of them counts it. */
static void unfence(shard_dispatcher *d, struct shard_worker *x)
{
    uint64_t passed = atomic_load_explicit(&x->life.passed, memory_order_relaxed);
    for (struct snap *s = d->settled_snap; s && s->epoch <= x->ctl.fenced_upto; s = s->next)
        if (s->epoch > passed)
            s->unpassed--;
}

void shard__epochless_if_done(shard_dispatcher *d, struct shard_worker *x)
{
    SHARD_CHECK_HELD(&d->lock);
    if (!x->leaving.queue_handed || x->leaving.hook_at_crash ||
        atomic_load_explicit(&x->life.epochless, memory_order_relaxed))
        return;
    unfence(d, x);
    /* release (E6): the deliveries of its queue, and its release hook, happen before anyone who sees x
     * handed over (fence_passed_by() above, and settled). */
    atomic_store_explicit(&x->life.epochless, true, memory_order_seq_cst);
    shard__settle(d);
    shard__wake_waiters_of(d, x);
}

void shard__owed_done(shard_dispatcher *d, struct job *j)
{
    if (!shard__crash_paid(&d->crash, j))
        return;
    /* No lock: a multi-key job pays its claims through here, one a key, from every worker; with
     * d->lock taken here, bench_multi's reused pairs (whose keys' later jobs are held) cost 3.2-3.5 us
     * of CPU a job, without it 1.7-1.9 us in 7 rounds of 9. kick_crash_holders reads
     * nholding first (seq_cst, after the table's lock was let go): a holder that begins to hold after
     * that read then finds the entry gone when it looks (its count first, then the table's lock:
     * crash.h). */
    kick_crash_holders(d, &j->hash, 1);
}

void shard__owed_done_all(shard_dispatcher *d, struct job *const *js, size_t n)
{
    uint64_t first[SHARD_OWED_DONE_MAX];
    size_t k = 0;
    SHARD_CHECK(n <= SHARD_OWED_DONE_MAX);
    for (size_t i = 0; n > 1 && i < n; i++)
        shard__crash_prefetch(&d->crash, js[i]);
    for (size_t i = 0; i < n; i++)
        if (shard__crash_paid(&d->crash, js[i]))
            first[k++] = js[i]->hash;
    if (k)
        kick_crash_holders(d, first, k); /* as shard__owed_done: after the table's locks */
}

