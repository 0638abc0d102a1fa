/* What crashes still owe, per key: one keymap for all crashes, locked a stripe of its buckets at a
 * time, a lock-free filter in front.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include "crash.h"
#include "check.h"
#include "mutex.h"

#include <stdlib.h>
#include <string.h>

/* A hash's filter bucket: its keymap bucket's low bits, so its stripe (below), and 4 bits more. */
static uint32_t filter_index(uint64_t hash)
{
    _Static_assert(CRASH_FILTER_BUCKETS == (uint32_t)KEYMAP_BUCKETS << 4, "filter_index's bits");
    _Static_assert(KEYMAP_BUCKETS % CRASH_STRIPES == 0, "a bucket's keys in one stripe");
    _Static_assert(CRASH_STRIPES <= 64, "a bit a stripe in stripes_used");
    return (uint32_t)(shard__keymap_mix(hash) % KEYMAP_BUCKETS) | (uint32_t)(hash >> 60) * KEYMAP_BUCKETS;
}

/* A count kept under a lock, and its bit in a word read without it, set while the count is not 0:
 * a filter bucket's (filter_bits) and a stripe's (stripes_used). One more; published by the caller's
 * later release store (crash.h). seq_cst: the entry's maker then reads, seq_cst, whether a worker
 * holding a drain mark waits on entries (handoff.c's shard__entries_made), while that worker notes so
 * and then reads this bit, seq_cst, without a lock when it is clear (shard__crash_stuck_key): one of
 * them sees the other. An RMW costs the same either way on x86. Context: the count's stripe's lock. */
static void count_up(uint32_t *count, _Atomic uint64_t *word, uint64_t bit)
{
    if ((*count)++ == 0)
        atomic_fetch_or_explicit(word, bit, memory_order_seq_cst);
}

/* One fewer. release (E7, docs/protocol.md): whatever the job did (a stuck job's writes to its key's
 * state) happens before a worker that reads the bit cleared with acquire (shard__crash_may_block)
 * and runs the key's next job without taking the lock. The word is changed by RMWs only, so a reader
 * of a later value of it still synchronizes with this. Context: as count_up. */
static void count_down(uint32_t *count, _Atomic uint64_t *word, uint64_t bit)
{
    if (--*count == 0)
        atomic_fetch_and_explicit(word, ~bit, memory_order_release);
}

/* Whether hash's bucket may hold an entry. Context: any thread; lock-free. */
static bool filter_marked(struct crash_table *t, uint64_t hash)
{
    uint32_t i = filter_index(hash);
    /* acquire: as count_down says. */
    return atomic_load_explicit(&t->filter_bits[i / 64], memory_order_acquire) >> (i % 64) & 1;
}

/* A key's stripe: its keymap bucket's, as a change to its FIFO writes only there (the bucket's low
 * bits, whatever the keymap's size: keymap.h). */
static size_t stripe_index(uint64_t hash)
{
    return shard__keymap_mix(hash) % CRASH_STRIPES;
}

static struct crash_stripe *stripe_of(struct crash_table *t, uint64_t hash)
{
    return &t->stripe[stripe_index(hash)];
}

/* One more entry of hash's bucket and of its stripe, or one fewer. Context: the stripe's lock. */
static void entry_counted(struct crash_table *t, uint64_t hash, bool up)
{
    uint32_t f = filter_index(hash);
    size_t s = stripe_index(hash);
    if (up) {
        count_up(&t->filter[f], &t->filter_bits[f / 64], 1ull << (f % 64));
        count_up(&t->stripe[s].entries, &t->stripes_used, 1ull << s);
    } else {
        count_down(&t->filter[f], &t->filter_bits[f / 64], 1ull << (f % 64));
        count_down(&t->stripe[s].entries, &t->stripes_used, 1ull << s);
    }
}

static void lock_all(struct crash_table *t)
{
    for (size_t i = 0; i < CRASH_STRIPES; i++)
        pthread_mutex_lock(&t->stripe[i].lock);
}

static void unlock_all(struct crash_table *t)
{
    for (size_t i = CRASH_STRIPES; i-- > 0;)
        pthread_mutex_unlock(&t->stripe[i].lock);
}

void shard__crash_table_init(struct crash_table *t)
{
    for (size_t i = 0; i < CRASH_STRIPES; i++) {
        shard__mutex_init_brief(&t->stripe[i].lock);
        atomic_init(&t->stripe[i].owe_seq, 0);
        t->stripe[i].entries = 0;
        t->stripe[i].keys = 0;
    }
    shard__keymap_init(&t->owed, KEYMAP_CRASH);
    memset(t->filter, 0, sizeof t->filter);
    for (size_t i = 0; i < CRASH_FILTER_BUCKETS / 64; i++)
        atomic_init(&t->filter_bits[i], 0);
    atomic_init(&t->stripes_used, 0);
    t->visit = 0;
    atomic_init(&t->grow, false);
    atomic_init(&t->shrink, false);
    t->made = NULL;
    t->made_ctx = NULL;
}

/* The keymap grown, as an insert asked (t->grow), for 16 times the keys of its fullest stripe, which
 * is what asked: so a stripe past 2 keys a bucket of its share always makes it grow. The new table is
 * sized and allocated before the locks are taken (a rehash under every lock is long enough: 28 ms for
 * 131,000 keys, measured by the review), and not used if another thread grew the map meanwhile.
 * Context: no stripe's lock held. */
static void grow(struct crash_table *t)
{
    size_t most = 0, n = 0;
    for (size_t i = 0; i < CRASH_STRIPES; i++) {
        pthread_mutex_lock(&t->stripe[i].lock);
        if (t->stripe[i].keys > most)
            most = t->stripe[i].keys;
        if (i == 0)
            n = t->owed.mask + 1;
        pthread_mutex_unlock(&t->stripe[i].lock);
    }
    size_t want = shard__keymap_fit_size(n, CRASH_STRIPES * most);
    struct job **b = want > n ? calloc(want, sizeof *b) : NULL;
    lock_all(t);
    /* Not if every entry was paid meanwhile: those payments saw the first buckets and asked for no
     * shrink, so a table grown now would stay grown, and empty (found by review). */
    if (b && t->owed.mask + 1 == n && atomic_load_explicit(&t->stripes_used, memory_order_relaxed)) {
        shard__keymap_grow_into(&t->owed, b, want);
        b = NULL;
    }
    /* Cleared even without memory: the next key of a full stripe asks again. */
    atomic_store_explicit(&t->grow, false, memory_order_relaxed);
    unlock_all(t);
    free(b);
}

/* The keymap back to its first buckets, as a payment that emptied the table asked (t->shrink), if it
 * is still empty: the buckets of a burst of claims (65,536 for 60,000 keys, 512 KiB) are not kept
 * for good. O(1): an empty map holds nothing to move. Context: no stripe's lock held. */
static void shrink(struct crash_table *t)
{
    lock_all(t);
    if (!atomic_load_explicit(&t->stripes_used, memory_order_relaxed))
        shard__keymap_reset(&t->owed);
    atomic_store_explicit(&t->shrink, false, memory_order_relaxed);
    unlock_all(t);
}

/* An entry was made (its locks let go): the keymap grown if it must be, and the hook. */
static void entry_made(struct crash_table *t)
{
    if (atomic_load_explicit(&t->grow, memory_order_relaxed))
        grow(t);
    if (t->made)
        t->made(t->made_ctx);
}

void shard__crash_table_destroy(struct crash_table *t)
{
    for (size_t i = 0; i < CRASH_STRIPES; i++)
        pthread_mutex_destroy(&t->stripe[i].lock);
    shard__keymap_reset(&t->owed);
}

void shard__crash_record_init(struct crash_record *c)
{
    memset(c, 0, sizeof *c);
    c->stuck.kind = JOB_RUN;
    c->stuck.embedded = true;
}

void shard__crash_owner_init(struct crash_record *c)
{
    atomic_init(&c->owed, 0);
}

/* Context: the lock of j's stripe held. The relaxed counts are published by the caller's later
 * release store (see crash.h); they are read with acquire below for the same chain. owe_seq orders a
 * key's entries only, so its stripe's count does. */
static void insert(struct crash_table *t, struct crash_record *c, struct job *j)
{
    struct crash_stripe *s = stripe_of(t, j->hash);
    SHARD_CHECK_HELD(&s->lock);
    j->owed_to = c;
    j->in_table = true;
    j->owe_seq = atomic_load_explicit(&s->owe_seq, memory_order_relaxed) + 1;
    atomic_store_explicit(&s->owe_seq, j->owe_seq, memory_order_relaxed);
    bool new_key = shard__keymap_insert(&t->owed, j);
    atomic_fetch_add_explicit(&c->owed, 1, memory_order_relaxed);
    entry_counted(t, j->hash, true);
    /* The stripe's keys past 2 a bucket of its share: the table grows once the locks are let go
     * (entry_made). Keys, not entries: one key's many jobs (a crash's rerouted queue) share a chain
     * link. The mask changes only under every lock, so this one is enough to read it. */
    if (new_key && ++s->keys > 2 * (t->owed.mask + 1) / CRASH_STRIPES &&
        !atomic_load_explicit(&t->grow, memory_order_relaxed))
        atomic_store_explicit(&t->grow, true, memory_order_relaxed);
}

static bool remove_entry(struct crash_table *t, struct job *j)
{
    struct crash_stripe *s = stripe_of(t, j->hash);
    SHARD_CHECK_HELD(&s->lock);
    bool gone, first = shard__keymap_remove(&t->owed, j, &gone);
    s->keys -= gone;
    j->in_table = false;
    atomic_fetch_sub_explicit(&j->owed_to->owed, 1, memory_order_relaxed);
    entry_counted(t, j->hash, false);
    /* The table's last entry, with the keymap grown (the mask changes only under every lock, so this
     * one is enough to read it): shard__crash_paid shrinks it once the lock is let go. */
    if (!s->entries && t->owed.mask + 1 > KEYMAP_BUCKETS &&
        !atomic_load_explicit(&t->stripes_used, memory_order_relaxed))
        atomic_store_explicit(&t->shrink, true, memory_order_relaxed);
    return first;
}

/* Whether a job of j's key that must run before j is still owed. For a job not owed, one of an older
 * epoch. For an owed job, any entry ahead of it: the jobs a crash owes of one key and one epoch are
 * pieces of one worker's run that may be spread over several workers (rerouted, deferred, following
 * their key by different paths), and only the table's order (by epoch, then by owe_seq) says which
 * goes first. Every entry ahead of j is older work, so this wait too points backwards. */
static bool older_entry(struct crash_table *t, const struct job *j)
{
    const struct job *first = shard__keymap_first(&t->owed, j->hash);
    if (!first)
        return false;
    return j->owed_to ? first != j : first->epoch < j->epoch;
}

bool shard__crash_blocks(struct crash_table *t, const struct job *j)
{
    /* acquire (E7): the counts were raised before a release store this thread has acquired (crash.h). */
    if (!filter_marked(t, j->hash))
        return false;
    struct crash_stripe *s = stripe_of(t, j->hash);
    pthread_mutex_lock(&s->lock);
    bool blocked = older_entry(t, j);
    pthread_mutex_unlock(&s->lock);
    return blocked;
}

/* Whether entry e is a crashed worker's job that has not returned (its record's stuck entry), not a
 * multi-key job's claim or step, which are of epoch 0 too. */
static bool is_stuck_entry(const struct job *e)
{
    return e->epoch == 0 && e == &e->owed_to->stuck;
}

/* Whether entry e is a multi-key job's step (multi.c): an epoch-0 job that is neither a stuck entry
 * nor a claim; its sibling is its part's claim. */
static bool is_step_entry(const struct job *e)
{
    return e->epoch == 0 && e->kind == JOB_RUN && !is_stuck_entry(e);
}

/* Whether the entry right behind e is a stuck entry. */
static bool stuck_behind(struct crash_table *t, const struct job *e)
{
    const struct job *behind = shard__keymap_next(&t->owed, e);
    return behind && is_stuck_entry(behind);
}

/* Whether the multi-key job of claim c (first in its key, so every claim of the job that is in the
 * table is first in its key: crash.h) is running on a crashed worker: the crash made a stuck entry
 * behind the claim of a whole job's first key (multi.c), or behind the claim of the last part, which
 * runs a job without steps, when it claimed before it knew it was last. A last part that knew claims
 * nothing: its stuck entry is first in its key, which key_stuck sees through the claim not in the
 * table. With steps, what runs is the last part (its claim made, the stuck entry behind
 * it, whichever step runs in that job), or a delivered step, the stuck entry behind its step entry
 * (first in its key) or behind the claim it made again; a step entry made later, behind a stuck entry
 * of its key, key_stuck sees through that key's first entry. Context: every lock. */
static bool claim_job_stuck_in_run(struct crash_table *t, const struct job *c)
{
    const struct job *s = c;
    do {
        if (s->in_table && stuck_behind(t, s))
            return true;
        const struct job *f = shard__keymap_first(&t->owed, s->hash);
        if (f && is_step_entry(f) && f->sibling == s && stuck_behind(t, f))
            return true;
        s = s->sibling;
    } while (s != c);
    return false;
}

/* Marks every claim of c's job as seen by walk `visit`, and pushes c on the walk's stack (through
 * next: a claim is on no list). Return: false if the job was seen already. Context: every lock. */
static bool claim_visit(struct job *c, uint64_t visit, struct job **stack)
{
    if (c->pos == visit)
        return false;
    struct job *s = c;
    do {
        s->pos = visit;
        s = s->sibling;
    } while (s != c);
    c->next = *stack;
    *stack = c;
    return true;
}

/* Whether the key's first entry is stuck: a crashed worker's job that has not returned; or a claim
 * of a multi-key job that waits for one: one of its parts is yet to claim a key that is stuck so,
 * through any number of multi-key jobs each waiting for the next, or the job itself is running on a
 * crashed worker (its keys are held until it returns). A step stands for its job as its claim does
 * (the key stays held until done has returned). A walk over the jobs the key waits for, each
 * visited once (the claims' pos records the visit, a claim being on no queue): linear in the claims it
 * reaches, however they chain. Context: every lock; the key's first entry a claim or a step. */
static bool key_stuck(struct crash_table *t, uint64_t hash)
{
    struct job *first = shard__keymap_first(&t->owed, hash);
    if (!first || first->epoch != 0)
        return false; /* paid between the looks (shard__crash_stuck_key) */
    if (is_stuck_entry(first))
        return true;
    uint64_t visit = ++t->visit;
    struct job *stack = NULL;
    claim_visit(first->kind == JOB_CLAIM ? first : first->sibling, visit, &stack);
    while (stack) {
        struct job *c = stack;
        stack = c->next;
        c->next = NULL;
        if (claim_job_stuck_in_run(t, c))
            return true;
        struct job *s = c;
        do {
            if (!s->in_table) {
                struct job *f = shard__keymap_first(&t->owed, s->hash);
                if (f && f->epoch == 0) {
                    if (is_stuck_entry(f))
                        return true;
                    if (f->kind == JOB_CLAIM)
                        claim_visit(f, visit, &stack);
                    else /* a step: its own (seen already), or an older job's that holds the key */
                        claim_visit(f->sibling, visit, &stack);
                }
            }
            s = s->sibling;
        } while (s != c);
    }
    return false;
}

bool shard__crash_stuck_key(struct crash_table *t, uint64_t hash)
{
    uint32_t i = filter_index(hash);
    /* seq_cst: as count_up says (acquire too: as filter_marked). */
    if (!(atomic_load_explicit(&t->filter_bits[i / 64], memory_order_seq_cst) >> (i % 64) & 1))
        return false;
    /* The key's stripe alone says most answers; a claim's chain goes through other keys' stripes. */
    struct crash_stripe *s = stripe_of(t, hash);
    pthread_mutex_lock(&s->lock);
    const struct job *first = shard__keymap_first(&t->owed, hash);
    bool held = first && first->epoch == 0, chain = held && !is_stuck_entry(first);
    pthread_mutex_unlock(&s->lock);
    if (!chain)
        return held; /* a stuck entry first, or no epoch-0 entry at all */
    lock_all(t);
    bool stuck = key_stuck(t, hash);
    unlock_all(t);
    return stuck;
}

bool shard__crash_may_block(struct crash_table *t, uint64_t hash)
{
    /* The bucket's bit alone, not `entries` first: multi-key jobs' claims change the table all the
     * time, and every job of every worker reads this; a bit's word is written only by entries of its
     * 64 buckets' keys, as the first of them comes and the last goes. */
    return filter_marked(t, hash);
}

bool shard__crash_any(struct crash_table *t)
{
    /* acquire: as filter_marked. */
    return atomic_load_explicit(&t->stripes_used, memory_order_acquire) != 0;
}

void shard__crash_swap(struct crash_table *t, struct crash_record *owner, struct job *claim, struct job *step)
{
    struct crash_stripe *s = stripe_of(t, claim->hash); /* the step's key is the claim's */
    pthread_mutex_lock(&s->lock);
    /* The step in first: the bucket's count, read without the lock, never drops to 0 between. */
    step->epoch = 0;
    insert(t, owner, step);
    remove_entry(t, claim);
    claim->owed_to = NULL;
    pthread_mutex_unlock(&s->lock);
}

void shard__crash_claim(struct crash_table *t, struct crash_record *owner, struct job *claim)
{
    struct crash_stripe *s = stripe_of(t, claim->hash);
    pthread_mutex_lock(&s->lock);
    claim->kind = JOB_CLAIM;
    claim->epoch = 0;
    insert(t, owner, claim);
    pthread_mutex_unlock(&s->lock);
    entry_made(t);
}

void shard__crash_stick(struct crash_table *t, struct crash_record *x, uint64_t hash)
{
    struct crash_stripe *s = stripe_of(t, hash);
    pthread_mutex_lock(&s->lock);
    x->stuck.hash = hash;
    x->stuck.epoch = 0;
    insert(t, x, &x->stuck);
    pthread_mutex_unlock(&s->lock);
    entry_made(t);
}

void shard__crash_owe_list(struct crash_table *t, struct crash_record *x, struct job *list)
{
    lock_all(t); /* a key's jobs of the list in list order, as one step against other entries */
    for (struct job *j = list; j; j = j->next)
        if (j->kind == JOB_RUN && !j->owed_to)
            insert(t, x, j);
    unlock_all(t);
    entry_made(t);
}

size_t shard__crash_defer_held(struct crash_table *t, struct crash_record *holder, struct job *held,
                               uint64_t epoch, uint64_t *made)
{
    /* One lock for the whole walk: a key's held jobs of one epoch are then all deferred, in their
     * held order, or none is. Deciding job by job let a crash add an entry for the key between two of
     * them: the later job became owed, and so sorted ahead of the earlier one, which the next walk
     * deferred behind it; each then waited for the other (a review found it). */
    size_t n = 0;
    lock_all(t);
    for (struct job *j = held; j; j = j->next)
        if (j->kind == JOB_RUN && !j->owed_to && j->epoch < epoch &&
            t->filter[filter_index(j->hash)] && older_entry(t, j)) {
            insert(t, holder, j);
            n++;
        }
    *made = shard__crash_made(t); /* exact: no entry is made while every lock is held */
    unlock_all(t);
    if (n)
        entry_made(t);
    return n;
}

uint64_t shard__crash_made(struct crash_table *t)
{
    uint64_t made = 0;
    for (size_t i = 0; i < CRASH_STRIPES; i++)
        made += atomic_load_explicit(&t->stripe[i].owe_seq, memory_order_relaxed);
    return made;
}

void shard__crash_prefetch(struct crash_table *t, const struct job *j)
{
    uint32_t f = filter_index(j->hash);
    __builtin_prefetch(&stripe_of(t, j->hash)->lock, 1);
    __builtin_prefetch(&t->filter[f], 1);
    __builtin_prefetch(&t->filter_bits[f / 64], 1);
    __builtin_prefetch(&j->links[KEYMAP_CRASH], 1);
}

bool shard__crash_paid(struct crash_table *t, struct job *j)
{
    struct crash_stripe *s = stripe_of(t, j->hash);
    pthread_mutex_lock(&s->lock);
    bool first = remove_entry(t, j);
    pthread_mutex_unlock(&s->lock);
    j->owed_to = NULL;
    if (atomic_load_explicit(&t->shrink, memory_order_relaxed))
        shrink(t);
    return first;
}


bool shard__crash_settled(struct crash_table *t, struct crash_record *x)
{
    /* Every lock: no payment of one of x's entries is still in its stripe's section. */
    lock_all(t);
    bool settled = atomic_load_explicit(&x->owed, memory_order_relaxed) == 0;
    unlock_all(t);
    return settled;
}
