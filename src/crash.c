/* What crashes still owe, per key: one keymap for all crashes, a lock-free filter in front.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include "crash.h"

#include <string.h>

static _Atomic uint32_t *bucket(struct crash_table *t, uint64_t hash)
{
    return &t->filter[(hash ^ hash >> 29) % CRASH_FILTER_BUCKETS];
}

void shard__crash_table_init(struct crash_table *t)
{
    pthread_mutex_init(&t->lock, NULL);
    shard__keymap_init(&t->owed, KEYMAP_CRASH);
    for (size_t i = 0; i < CRASH_FILTER_BUCKETS; i++)
        atomic_init(&t->filter[i], 0);
    atomic_init(&t->entries, 0);
    t->owe_seq = 0;
}

void shard__crash_table_destroy(struct crash_table *t)
{
    pthread_mutex_destroy(&t->lock);
}

void shard__crash_record_init(struct crash_record *c)
{
    memset(c, 0, sizeof *c);
    c->stuck.kind = JOB_RUN;
    c->stuck.embedded = true;
}

/* Context: t->lock held. The relaxed counts are published by the caller's later release store (see
 * crash.h); they are read with acquire below for the same chain. */
static void insert(struct crash_table *t, struct crash_record *c, struct job *j)
{
    j->owed_to = c;
    j->in_table = true;
    j->owe_seq = ++t->owe_seq;
    shard__keymap_insert(&t->owed, j);
    c->owed++;
    atomic_fetch_add_explicit(bucket(t, j->hash), 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->entries, 1, memory_order_relaxed);
}

static bool remove_entry(struct crash_table *t, struct job *j)
{
    bool first = shard__keymap_first(&t->owed, j->hash) == j;
    shard__keymap_remove(&t->owed, j);
    j->in_table = false;
    j->owed_to->owed--;
    /* release: whatever the job did (a stuck job's writes to its key's state) happens before a worker
     * that reads the lowered count with acquire (shard__crash_blocks) and runs the key's next job
     * without taking the lock. */
    atomic_fetch_sub_explicit(bucket(t, j->hash), 1, memory_order_release);
    atomic_fetch_sub_explicit(&t->entries, 1, memory_order_release);
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
    /* acquire: the counts were raised before a release store this thread has acquired (crash.h).
     * `entries` first: one line that every worker reads and only crashes write. */
    if (!atomic_load_explicit(&t->entries, memory_order_acquire) ||
        !atomic_load_explicit(bucket(t, j->hash), memory_order_acquire))
        return false;
    pthread_mutex_lock(&t->lock);
    bool blocked = older_entry(t, j);
    pthread_mutex_unlock(&t->lock);
    return blocked;
}

/* Whether the key's first entry is stuck: a crashed worker's job that has not returned (its record's
 * stuck entry); or a claim
 * of a multi-key job one of whose parts is yet to claim a key that is stuck so (the job waits for
 * it, so its claims hold their keys as long). A claim waiting on a claim is followed depth levels
 * down at most: deeper chains are taken as not stuck, so drain waits for them. Context: t->lock. */
static bool key_stuck(struct crash_table *t, uint64_t hash, int depth)
{
    const struct job *first = shard__keymap_first(&t->owed, hash);
    if (!first || first->epoch != 0)
        return false;
    if (first == &first->owed_to->stuck)
        return true;
    if (first->kind != JOB_CLAIM)
        return false; /* a multi-key job's step: it waits only as a job that followed its key */
    if (depth == 0)
        return false;
    for (const struct job *c = first->sibling; c != first; c = c->sibling)
        if (!c->in_table && key_stuck(t, c->hash, depth - 1))
            return true;
    return false;
}

bool shard__crash_stuck_key(struct crash_table *t, uint64_t hash)
{
    if (!atomic_load_explicit(bucket(t, hash), memory_order_acquire))
        return false;
    pthread_mutex_lock(&t->lock);
    bool stuck = key_stuck(t, hash, 4);
    pthread_mutex_unlock(&t->lock);
    return stuck;
}

bool shard__crash_may_block(struct crash_table *t, uint64_t hash)
{
    /* acquire: as shard__crash_blocks. */
    return atomic_load_explicit(&t->entries, memory_order_acquire) &&
           atomic_load_explicit(bucket(t, hash), memory_order_acquire);
}

void shard__crash_swap(struct crash_table *t, struct crash_record *owner, struct job *claim, struct job *step)
{
    pthread_mutex_lock(&t->lock);
    /* The step in first: the bucket's count, read without the lock, never drops to 0 between. */
    step->epoch = 0;
    insert(t, owner, step);
    remove_entry(t, claim);
    claim->owed_to = NULL;
    pthread_mutex_unlock(&t->lock);
}

void shard__crash_claim(struct crash_table *t, struct crash_record *owner, struct job *claim)
{
    pthread_mutex_lock(&t->lock);
    claim->kind = JOB_CLAIM;
    claim->epoch = 0;
    insert(t, owner, claim);
    pthread_mutex_unlock(&t->lock);
}

void shard__crash_stick(struct crash_table *t, struct crash_record *x, uint64_t hash)
{
    pthread_mutex_lock(&t->lock);
    x->stuck.hash = hash;
    x->stuck.epoch = 0;
    insert(t, x, &x->stuck);
    pthread_mutex_unlock(&t->lock);
}

void shard__crash_owe_list(struct crash_table *t, struct crash_record *x, struct job *list)
{
    pthread_mutex_lock(&t->lock);
    for (struct job *j = list; j; j = j->next)
        if (j->kind == JOB_RUN && !j->owed_to)
            insert(t, x, j);
    pthread_mutex_unlock(&t->lock);
}

void shard__crash_defer_held(struct crash_table *t, struct crash_record *holder, struct job *held,
                             uint64_t epoch)
{
    /* One lock for the whole walk: a key's held jobs of one epoch are then all deferred, in their
     * held order, or none is. Deciding job by job let a crash add an entry for the key between two of
     * them: the later job became owed, and so sorted ahead of the earlier one, which the next walk
     * deferred behind it; each then waited for the other (a review found it). */
    pthread_mutex_lock(&t->lock);
    for (struct job *j = held; j; j = j->next)
        if (j->kind == JOB_RUN && !j->owed_to && j->epoch < epoch &&
            atomic_load_explicit(bucket(t, j->hash), memory_order_relaxed) && older_entry(t, j))
            insert(t, holder, j);
    pthread_mutex_unlock(&t->lock);
}

bool shard__crash_paid(struct crash_table *t, struct job *j)
{
    pthread_mutex_lock(&t->lock);
    bool first = remove_entry(t, j);
    pthread_mutex_unlock(&t->lock);
    j->owed_to = NULL;
    return first;
}


bool shard__crash_settled(struct crash_table *t, struct crash_record *x)
{
    pthread_mutex_lock(&t->lock);
    bool settled = x->owed == 0;
    pthread_mutex_unlock(&t->lock);
    return settled;
}
