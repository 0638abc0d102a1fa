/* Multi-key jobs: one job over several keys, each key held from when its part comes up until the
 * job has run. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A multi-key job of k distinct keys queues k parts, one a key, as k jobs of those keys (so each
 * follows its key through changes, crashes and placements as any job does). A part that comes up
 * claims its key: an entry of epoch 0 in the crash table (crash.h), which every later job of the
 * key waits behind, wherever it is, as behind a stuck job; the worker goes on with other keys. The
 * part that finds every other one arrived runs the job, in its own job, then pays every claim. Parts
 * arrive by one atomic add each on the job's state word (arrive); a part that sees, as it comes up,
 * that every other has arrived claims no key without steps, since its running job holds its key as any
 * running job does: no other job of it runs meanwhile, and a crash makes the job's stuck entry of it
 * (with steps it claims its key, which must stay held through the steps that run elsewhere, until
 * done). Two parts coming up at once may both claim, and the last to arrive runs the job with its
 * own claim made: a crash then puts its stuck entry behind that claim, as for a job queued whole.
 * A job with steps (shard_submit_multi_each) runs instead one step a key where the key's own jobs
 * run, one after another in its keys' order, starting in the last part: a step whose key the worker
 * it has reached owns (under a settled ring) runs there, in the same job, its key held by its claim;
 * another turns its claim into a step, an entry of epoch 0 too (so the key stays held) that is also a
 * job, delivered to its key's owner as a job that follows its key (follow.c), which there waits for
 * the key's state as such a job does, claims its key again before it returns, and goes on with the
 * next steps; the last step's job runs the job's done and pays every claim.
 *
 * A job whose keys all have one owner when it is submitted goes there whole, as one job of its first
 * key (shard__multi_whole): what its parts would be, queued one after another with nothing between
 * them. Taken when every key may run there at once (run.c), it runs as that one job and claims
 * nothing: its worker runs nothing else meanwhile, and no other worker may run a job of a key whose
 * epoch is settled and that has no entry. Otherwise it is split into its parts in place (run.c, and a
 * crash's leftovers), which then go as above. A crash while it runs claims every key for it.
 *
 * Why nothing waits for ever. The parts of every multi-key job enter the queues under d->multi_lock,
 * routed with the ring in force under it (multi_submit.c looks again under the lock if a change
 * published another meanwhile), so two multi-key jobs meet each key they share in one order (the
 * order they took the lock: a key's jobs run in queue order, epochs in rising order): call the
 * earlier one older. A part waits only
 * for the jobs ahead of it in its key's order; a single-key job among them waits only for claims
 * ahead of it, which are claims of older multi-key jobs; a multi-key part among them is an older
 * job's. So every wait points to an older multi-key job, or to the protocol's waits (handoff.c),
 * which point to older work: the oldest multi-key job under way is waited on by others and waits
 * for none. No lock is held while anything waits: the lock covers the queueing, which never waits
 * (the caller waited for room before, space.c; a queue full again by then is gone beyond through
 * its side list).
 *
 * Memory: one allocation a job: the multi, its parts, and two records per part, for a queue found
 * full (or, queued whole, for the whole job and its split) and for its step if it is delivered (a
 * job_block, so that
 * the worker that runs a part or a step from such a record frees it as any record: the block goes
 * with the last reference, the multi's own or a record's).
 * Blocks of jobs of few keys are kept in the dispatcher for the next job (d->pool). */
#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cacheline.h"
#include "check.h"
#include "dispatcher_internal.h"
#include "follow.h"
#include "handoff.h"
#include "multi.h"
#include "multi_layout.h"
#include "rcu.h"

/* A block, and its multi in it, start on a cache line (multi_layout.h says why). */
#define LINE SHARD_CACHELINE

static size_t line_up(size_t bytes)
{
    return (bytes + LINE - 1) / LINE * LINE;
}

/* A block of a job of n keys: its head, its keys, its multi and parts, then its 2n records. What a
 * job queued whole and run at once reads and writes (the head, the keys, the multi) is on the
 * block's first lines, one after another: not its records, which it needs only when split, and
 * which put the multi kilobytes from the head when they came first (10 keys: the multi at 4,352
 * bytes, the keys at 7,232), so that a cold block (kv_server submits hundreds before it runs them)
 * missed in three places a job instead of one run of lines. */
static size_t multi_offset(size_t n)
{
    _Static_assert(alignof(struct multi) == LINE, "a multi on a line of its own");
    return line_up(sizeof(struct job_block) + n * sizeof(struct key_ref));
}

static size_t records_offset(size_t n)
{
    _Static_assert(sizeof(struct multi_part) % LINE == 0, "parts fill whole lines");
    return multi_offset(n) + sizeof(struct multi) + n * sizeof(struct multi_part);
}

/* Blocks of jobs of up to SHARD_MULTI_POOL_KEYS keys are kept: first by the worker that released
 * them, for its own next jobs (record.c, without a lock), then in the dispatcher's pool, up to
 * POOL_BYTES in all (a block of 16 keys is 11.4 KiB, of 2 keys 1.8 KiB: about 700 and 4,500 blocks).
 * 16, not 8: kv_server's 10-key MSET took a malloc and a free a command (1 worker, 4 % of its CPU in
 * malloc's bins). A block is released where the job ends and taken where the next is submitted: a
 * worker's spares, once full, go to the pool together, so that the pool's lock and lines cross
 * between threads once for many blocks, not twice a job. */
#define POOL_KEYS SHARD_MULTI_POOL_KEYS
#define POOL_BYTES ((size_t)8 << 20)

static size_t block_bytes(size_t n)
{
    return line_up(records_offset(n) + 2 * n * sizeof(struct job)); /* aligned_alloc's: a multiple of it */
}

static struct multi *multi_of(struct job_block *b)
{
    return (struct multi *)((char *)b + multi_offset(b->size / 2));
}

/* The block's last reference went (the multi's own, or a record's: record.c): kept for the next job
 * of as many keys, or freed. */
static void block_release(struct job_block *b)
{
    struct multi *m = multi_of(b);
    shard_dispatcher *d = m->d;
    size_t n = b->size / 2, bytes = block_bytes(n);
    if (n > POOL_KEYS) {
        free(b);
        return;
    }
    struct shard_worker *me = shard__worker_here(d);
    if (me && shard__block_spare_keep(me, b, n - 1, bytes))
        return;
    /* b, and the worker's spares of its class, into the pool as far as it has room. */
    b->next_kept = me ? shard__block_spare_take_all(me, n - 1, bytes) : NULL;
    pthread_mutex_lock(&d->pool_lock);
    while (b && d->pooled + bytes <= POOL_BYTES) {
        struct job_block *next = b->next_kept;
        b->next_kept = d->pool[n - 1];
        d->pool[n - 1] = b;
        d->pooled += bytes;
        b = next;
    }
    pthread_mutex_unlock(&d->pool_lock);
    while (b) {
        struct job_block *next = b->next_kept;
        free(b);
        b = next;
    }
}

void shard__multi_pool_free(shard_dispatcher *d)
{
    for (size_t i = 0; i < POOL_KEYS; i++)
        while (d->pool[i]) {
            struct job_block *b = d->pool[i];
            d->pool[i] = b->next_kept;
            free(b);
        }
}

static struct job_block *block_get(shard_dispatcher *d, size_t n)
{
    struct job_block *b = NULL;
    if (n <= POOL_KEYS) {
        struct shard_worker *me = shard__worker_here(d);
        if (me && (b = shard__block_spare_take(me, n - 1, block_bytes(n))) != NULL)
            return b;
        pthread_mutex_lock(&d->pool_lock);
        if ((b = d->pool[n - 1]) != NULL) {
            d->pool[n - 1] = b->next_kept;
            d->pooled -= block_bytes(n);
        }
        pthread_mutex_unlock(&d->pool_lock);
    }
    return b ? b : aligned_alloc(LINE, block_bytes(n));
}

struct multi *shard__multi_new(shard_dispatcher *d, const struct key_ref *h, size_t n, shard_job_fn fn,
                               shard_multi_step_fn step, void *arg)
{
    /* The records are written whole when used: only the block's head and the multi's head are written
     * here, and its keys (a record is over 200 bytes, and a job uses its two a part only when a queue
     * is full, and for steps; its parts and their owner are made when needed, and a job queued whole
     * that runs at once never needs them). */
    struct job_block *b = block_get(d, n);
    if (!b)
        return NULL;
    memset(b, 0, sizeof *b);
    b->size = 2 * n;
    b->release = block_release;
    b->recs = (struct job *)((char *)b + records_offset(n));
    atomic_init(&b->refs, 1); /* the multi's own: dropped when it has run */
    struct multi *m = multi_of(b);
    struct key_ref *keys = (struct key_ref *)(b + 1);
    memcpy(keys, h, n * sizeof *keys);
    m->d = d;
    m->fn = fn;
    m->step = step;
    m->arg = arg;
    m->block = b;
    m->keys = keys;
    m->n = (uint32_t)n;
    atomic_init(&m->state, 0);
    m->parts_ready = false;
    return m;
}

void shard__multi_parts_ready(struct multi *m)
{
    if (m->parts_ready)
        return;
    _Static_assert(offsetof(struct multi_part, claim) + JOB_TABLE_BYTES <= 2 * LINE, "a claim's entry on two lines");
    m->parts_ready = true;
    /* Only what is read: the owner's count, and each part up to the end of what the table reads of
     * its claim (its first two lines). The submitter writes these lines, and then a part's worker
     * reads them (the others stay untouched): zeroing whole parts and the owner's stuck entry, never
     * made, wrote seven more lines a 2-key job, each one asked for from wherever the block's last
     * job left it, and waited for at the submitter's next lock. */
    shard__crash_owner_init(&m->owner);
    for (uint32_t i = 0; i < m->n; i++) {
        struct multi_part *p = &m->parts[i];
        memset(p, 0, offsetof(struct multi_part, claim) + JOB_TABLE_BYTES);
        p->m = m;
        p->key = m->keys[i].index;
        p->claim.hash = m->keys[i].hash;
        p->claim.embedded = true;
        p->claim.sibling = &m->parts[(i + 1) % m->n].claim;
        atomic_init(&p->claimed, false);
    }
}

static void multi_put(struct multi *m)
{
    shard__job_block_put(m->block);
}

static bool dropped(const struct multi *m)
{
    /* acquire: pairs with shard__multi_dropped's (acq_rel) setting of the bit. */
    return atomic_load_explicit(&m->state, memory_order_acquire) & MULTI_DROPPED;
}

/* Pays each claim of m whose part's flag says it is in the table, all of them with one kick a holder:
 * the flag exchanged to false (exchange), or read (see the two callers below). */
static void pay_claims(struct multi *m, bool exchange)
{
    struct job *paid[SHARD_OWED_DONE_MAX];
    size_t k = 0;
    for (uint32_t i = 0; m->parts_ready && i < m->n; i++) {
        struct multi_part *p = &m->parts[i];
        if (exchange ? atomic_exchange_explicit(&p->claimed, false, memory_order_acq_rel)
                     : atomic_load_explicit(&p->claimed, memory_order_relaxed))
            paid[k++] = &p->claim;
        if (k == sizeof paid / sizeof paid[0] || (k && i + 1 == m->n)) {
            shard__owed_done_all(m->d, paid, k);
            k = 0;
        }
    }
}

/* A drop lets go of the keys m's parts have claimed so far, while others may still come up and
 * claim (hold): the exchange lets exactly one of the drop and the end pay each claim. acq_rel:
 * acquires the set, after which the claim was made; what the job did goes to the keys' next jobs
 * through the payment (its stripe's lock, the bucket's count). */
static void release_claims_racing(struct multi *m)
{
    pay_claims(m, true);
}

/* The job's end lets go of every key m still holds. No other thread writes a flag any more, and each
 * write to one happens before this (so relaxed reads; the flags stay set: nothing reads them again,
 * and shard__multi_parts_ready makes them anew): a part's claim (hold, release) before its arrival,
 * which the last arrival acquired (arrive: the adds and the drop's or are one release sequence); a
 * drop's exchange before its dropped part arrives; a step's claim and its swap (step_body, make_step)
 * before the step's delivery, or on this thread; a crash's claims of a whole job (under the crashed
 * worker's lock, which its end takes after them: multi.h's shard__multi_whole_end). An exchange would
 * be a full barrier on each part's line, last written by the worker that claimed: a 10-key MSET over
 * two workers waited for ten such lines one after another (about 200 ns a line on the machine
 * measured); read, they load at once. */
static void release_claims_at_end(struct multi *m)
{
    /* Every part arrived (a drop's too), or none: a whole job, whose claims a crash made. Only in the
     * checked builds: the state is not loaded again otherwise. */
    SHARD_CHECK(!m->parts_ready ||
                (atomic_load_explicit(&m->state, memory_order_relaxed) & ~MULTI_DROPPED) % m->n == 0); /* 0 or n */
    pay_claims(m, false);
}

/* The counts' stripe of the calling thread (dispatcher_internal.h). */
static struct multi_counts *counts_here(shard_dispatcher *d)
{
    const struct shard_worker *me = shard__worker_here(d);
    size_t i = me ? 1 + me->id % (MULTI_COUNT_STRIPES - 1) : 0;
    return &d->multi_counts[i];
}

void shard__multi_count_open(shard_dispatcher *d, int64_t delta)
{
    atomic_fetch_add_explicit(&counts_here(d)->open, delta, memory_order_relaxed);
}

static void count_waiting(shard_dispatcher *d, int64_t delta)
{
    atomic_fetch_add_explicit(&counts_here(d)->waiting, delta, memory_order_relaxed);
}

void shard__multi_counts(shard_dispatcher *d, uint64_t *open, uint64_t *waiting)
{
    int64_t o = 0, w = 0;
    for (size_t i = 0; i < MULTI_COUNT_STRIPES; i++) {
        o += atomic_load_explicit(&d->multi_counts[i].open, memory_order_relaxed);
        w += atomic_load_explicit(&d->multi_counts[i].waiting, memory_order_relaxed);
    }
    /* Read one stripe after another, while they change: a job's two changes may be seen one
     * without the other, in either order. */
    *open = o > 0 ? (uint64_t)o : 0;
    *waiting = w > 0 ? (uint64_t)w : 0;
}

/* One more part came up or was dropped: one atomic add on m->state. Return: whether it was the last.
 * A part that is not may touch m no more once it has arrived: the last may free it at once. The add
 * is acq_rel, so everything each part did before it arrived (its claim, what its key's jobs before it
 * did) happens before the last part goes on (the adds form one release sequence that the last one
 * reads). A job not dropped counts as waiting from its first part to its last (multi_waiting); a
 * dropped one stopped counting when it was dropped (shard__multi_dropped, which decides from the same
 * word: so each job's count goes up and down once, if at all, though the two may be seen in either
 * order: the stats clamp it). */
static bool arrive(struct multi *m)
{
    shard_dispatcher *d = m->d; /* read before the add: after it, m may be gone */
    uint32_t n = m->n;
    uint32_t was = atomic_fetch_add_explicit(&m->state, 1, memory_order_acq_rel);
    uint32_t a = (was & ~MULTI_DROPPED) + 1;
    bool drop = was & MULTI_DROPPED;
    if (!drop && a == 1)
        count_waiting(d, 1);
    if (a < n)
        return false;
    if (!drop)
        count_waiting(d, -1);
    return true;
}

/* The job has run, or was dropped: its keys go free. A dropped job stopped counting as open when
 * it was dropped. */
static void end(struct multi *m)
{
    shard_dispatcher *d = m->d;
    release_claims_at_end(m);
    if (!dropped(m))
        shard__multi_count_open(d, -1);
    multi_put(m);
}

static void next_step(struct multi *m, struct shard_worker *w, uint32_t i);

/* The user's step of p's key, which is then held again before the step's entry is paid (when the
 * step's job returns, run.c): the key stays held till the job ends. */
static void step_body(struct multi *m, struct shard_worker *w, struct multi_part *p)
{
    m->step(w, m->arg, p->key);
    shard__crash_claim(&m->d->crash, &m->owner, &p->claim);
    /* relaxed: the one step running, no race; the end reads it after the next step's delivery, or on
     * this thread (release_claims_at_end). */
    atomic_store_explicit(&p->claimed, true, memory_order_relaxed);
}

/* Part p's claim becomes a step: an entry of epoch 0 too (the key stays held) that is also a job, to
 * be delivered where its key's jobs run. Context: the job's steps before p have run; no other thread
 * touches the block's records (the parts are all queued and arrived). */
static struct job *make_step(struct multi *m, struct multi_part *p)
{
    struct job_block *b = m->block;
    struct job *j = &b->recs[b->used++];
    /* sibling: its part's claim, through which the crash table sees its job (crash.c's key_stuck). */
    *j = (struct job){ .fn = shard__multi_step, .arg = p, .hash = p->claim.hash, .kind = JOB_RUN,
                       .origin = ORIGIN_MULTI_STEP, .block = b, .sibling = &p->claim };
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    shard__crash_swap(&m->d->crash, &m->owner, &p->claim, j);
    atomic_store_explicit(&p->claimed, false, memory_order_relaxed); /* as step_body's */
    return j;
}

/* Whether step p may run here and now, in the job before it, rather than be delivered: w owns its key
 * in the ring in force, whose epoch is settled (every owner the key had before is done), and has not
 * crashed. Delivered to w, the step would find just that and run first of its key's jobs there (its
 * entry is first in its key: every older job of the key ran before its part claimed it, and the
 * younger ones wait behind it), after a trip through w's inbox and held list; to another worker, with
 * a wake-up. Context: w's thread, in a job. */
static bool step_here(struct multi *m, struct shard_worker *w, const struct multi_part *p)
{
    if (!w || shard__worker_is_crashed(w))
        return false;
    shard__rcu_read_lock();
    /* acquire: pairs with the release store that published the snapshot (membership.c's publish);
     * and settled's (E3): the fences of the settled epochs happen before the step. */
    struct snap *s = atomic_load_explicit(&m->d->snap, memory_order_acquire);
    bool here = snap_worker(s, shard__ring_owner_index(s->ring, p->claim.hash)) == w &&
                s->epoch <= atomic_load_explicit(&m->d->settled, memory_order_acquire);
    shard__rcu_read_unlock();
    return here;
}

/* Steps before i have run (each key still held, by its claim): step i runs here (step_here) or is
 * delivered, or, after the last, done runs and every key goes free. Context: the worker w of the step before (or of
 * the last part). */
static void next_step(struct multi *m, struct shard_worker *w, uint32_t i)
{
    for (; i < m->n; i++) {
        struct multi_part *p = &m->parts[i];
        if (step_here(m, w, p)) {
            /* Here, in this job, its key held by its claim throughout (also after, until done has
             * run): no step entry to make and pay, nor claim to make again. shard_job_key_hash gives
             * its key, as in a step's own job. */
            w->own.job_hash = p->claim.hash;
            m->step(w, m->arg, p->key);
            continue;
        }
        struct job *j = make_step(m, p);
        if (shard__follow_deliver(w, j))
            return; /* m may be gone from here on: the step may have run and ended it */
        /* Destroy is stopping every worker: the step runs here, as the last thing this one does. */
        if (w)
            w->own.job_hash = p->claim.hash;
        step_body(m, w, p);
        shard__owed_done(m->d, j);
        shard__free_record(w, j); /* the block lives on: the multi's own reference */
    }
    if (m->fn)
        m->fn(w, m->arg);
    end(m);
}

/* Every part has come up or was dropped: the job runs (unless dropped), or its steps begin. */
static void finish(struct multi *m, shard_worker *w)
{
    bool drop = dropped(m);
    if (!drop && m->step) {
        next_step(m, w, 0);
        return;
    }
    if (!drop)
        m->fn(w, m->arg);
    end(m);
}

void shard__multi_step(shard_worker *w, void *arg)
{
    struct multi_part *p = arg;
    struct multi *m = p->m;
    step_body(m, w, p);
    next_step(m, w, (uint32_t)(p - m->parts) + 1);
}

/* Part p holds its key before it arrives, unless the job was dropped already: a part that comes up
 * after a drop claims nothing, as it will not run. One that claims while a drop is under way keeps its
 * claim until it is paid by the drop (shard__multi_dropped_end, after on_dropped has returned), if that
 * sees it, or else at the job's end, when the last part has arrived, which is after the dropped part
 * arrived, so after on_dropped too: either way the key is held until on_dropped has returned, as for
 * a part that claimed before the drop; the drop's exchange, and the end's read after it, let exactly one
 * of them pay (release_claims_racing, release_claims_at_end). The
 * part that will be last (all others arrived: the count is final but for its own add) runs the job in
 * its own job, which holds its key as any running job does (a crash meanwhile makes its stuck entry),
 * and claims only with steps, whose run goes on past this job (elsewhere) and whose done runs with
 * every key held; a part that finds itself last only when it arrives has claimed, and its claim is
 * paid with the others at the end. */
static void hold(struct multi *m, struct multi_part *p)
{
    /* acquire: pairs with the drop's setting of the bit (its on_dropped may not have run yet). */
    uint32_t now = atomic_load_explicit(&m->state, memory_order_acquire);
    if ((now & MULTI_DROPPED) || (!m->step && now + 1 == m->n))
        return;
    shard__crash_claim(&m->d->crash, &m->owner, &p->claim);
    /* release: the claim is in the table before whoever exchanges this sees it set. */
    atomic_store_explicit(&p->claimed, true, memory_order_release);
}

void shard__multi_part(shard_worker *w, void *arg)
{
    struct multi_part *p = arg;
    struct multi *m = p->m;
    hold(m, p);
    if (arrive(m))
        finish(m, w);
}

void shard__multi_whole(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    abort(); /* never called: run.c runs a whole job through shard__multi_whole_run */
}

bool shard__multi_whole_run(shard_worker *w, void *arg)
{
    struct multi *m = arg;
    for (uint32_t i = 0; m->step && i < m->n; i++) {
        /* A crash stopped w after the step before: the keys have moved on, each step goes where its
         * key's jobs run now, as steps of their own. The crash claimed every key (under w->lock, after
         * marking w crashed: taking the lock orders those claims before their swap into steps). */
        if (i > 0 && shard__worker_is_crashed(w)) {
            pthread_mutex_lock(&w->lock);
            pthread_mutex_unlock(&w->lock);
            next_step(m, w, i);
            return true;
        }
        /* shard_job_key_hash: the step's key, as in a step of its own (the worker's field, which only
         * its thread writes, and this is its thread); done then sees the last step's, as it would. */
        w->own.job_hash = m->keys[i].hash;
        m->step(w, m->arg, m->keys[i].index);
    }
    if (m->fn)
        m->fn(w, m->arg);
    return false;
}

uint32_t shard__multi_whole_count(const void *arg)
{
    return ((const struct multi *)arg)->n;
}

uint64_t shard__multi_whole_hash(const void *arg, uint32_t i)
{
    return ((const struct multi *)arg)->keys[i].hash;
}

struct job *shard__multi_whole_split(struct job *j)
{
    struct multi *m = j->arg;
    struct job_block *b = m->block;
    struct job *last = j, *after = j->next;
    shard__multi_parts_ready(m);
    j->fn = shard__multi_part;
    j->arg = &m->parts[0];
    j->origin = ORIGIN_MULTI_PART;
    for (uint32_t i = 1; i < m->n; i++) {
        /* A record of the block: with the one the whole job may have taken for a full queue, and one
         * a step, the block's 2n (multi_layout.h). */
        struct job *r = &b->recs[b->used++];
        *r = (struct job){ .fn = shard__multi_part, .arg = &m->parts[i], .hash = m->parts[i].claim.hash,
                           .epoch = j->epoch, .routed = j->routed, .kind = JOB_RUN, .origin = ORIGIN_MULTI_PART,
                           .moved_epoch = j->moved_epoch, .block = b };
        atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed); /* before anyone can run it */
        last->next = r;
        last = r;
    }
    last->next = after;
    return last;
}

void shard__multi_whole_crashed(void *arg)
{
    struct multi *m = arg;
    shard__multi_parts_ready(m);
    for (uint32_t i = 0; i < m->n; i++) {
        shard__crash_claim(&m->d->crash, &m->owner, &m->parts[i].claim);
        /* relaxed: under the crashed worker's lock, which the job's end takes after it (multi.h) */
        atomic_store_explicit(&m->parts[i].claimed, true, memory_order_relaxed);
    }
}

void shard__multi_whole_end(void *arg)
{
    end(arg);
}

bool shard__multi_dropped(void *arg, shard_job_fn *fn, void **user_arg)
{
    struct multi_part *p = arg;
    struct multi *m = p->m;
    shard_dispatcher *d = m->d;
    /* acq_rel: in the state's one order of adds (arrive), as a part's look at it (hold). */
    uint32_t was = atomic_fetch_or_explicit(&m->state, MULTI_DROPPED, memory_order_acq_rel);
    bool first = !(was & MULTI_DROPPED);
    if (first) {
        /* Dropped now, as on_dropped hears: no longer open, nor waiting (stats). */
        if (was)
            count_waiting(d, -1);
        shard__multi_count_open(d, -1);
    }
    *fn = m->fn;
    *user_arg = m->arg;
    return first;
}

void shard__multi_dropped_end(void *arg, bool first)
{
    struct multi *m = ((struct multi_part *)arg)->m;
    if (first)
        release_claims_racing(m); /* one made meanwhile (hold) is paid at the end; none is last before this arrives */
    if (arrive(m))
        finish(m, NULL);
}

