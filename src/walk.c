/* A walk over a worker's set-aside jobs, in order, running or acting on whatever may go now.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include <string.h>

#include "dispatcher_internal.h"
#include "handoff.h"
#include "run.h"

/* A fence of epoch is held up by held jobs of older epochs that no crash owes (owed ones do not count:
 * what a fence promises is about the jobs routed here, and the keys of owed jobs stay blocked by their
 * crash's entries until they have run, so a fence never waits for a job stuck behind a crash). Those
 * that wait behind a crash's entry become entries of the crash table themselves
 * (shard__crash_defer_held), which then holds their key instead of this worker's fence; not again
 * while nothing can have given it more to defer (held.h's shard__held_defer_due): every look at held
 * items is a walk while a fence is held. Return: the oldest epoch left. Only called while some crash
 * owes something. */
static uint64_t defer_crash_blocked(struct shard_worker *w, uint64_t epoch)
{
    struct held *h = &w->own.held;
    struct crash_table *t = &w->d->crash;
    if (shard__held_defer_due(h, shard__crash_made(t), epoch) &&
        shard__crash_defer_held(t, &w->crash, h->head, epoch, &h->deferred_made))
        shard__held_owed_changed(h);
    return shard__held_min_unowed_epoch(h);
}

/* Runs what may go now of key hash's held jobs, its first first. Return: false when the walk must
 * stop (the worker crashed or stopped, its submits found no memory): then everything is walked next. */
static bool walk_key(struct shard_worker *w, uint64_t hash)
{
    struct job *j;
    while ((j = shard__held_first(&w->own.held, hash)) != NULL && shard__job_may_run(w->d, w, j)) {
        if (shard__inbox_pending(w)) {
            /* What came in goes first (it may be of this key): look again; its keys are looked at
             * after these (arrived). */
            shard__inbox_pull(w);
            continue;
        }
        shard__held_remove(&w->own.held, j);
        shard__run_job(w, j);
        if (shard__worker_is_crashed(w) || w->own.stopped) {
            w->own.held_dirty = true; /* as in walk_all */
            return false;
        }
        if (w->outbox.n) {
            w->own.held_dirty = true; /* as in walk_all */
            return false;
        }
    }
    return true;
}

/* What a walk over held items has seen so far. Fences, marks and stops are what the list order and
 * the oldest epoch are for: with none held (they only leave during a walk), a job's going depends on
 * its key alone. */
struct walk {
    bool     controls;       /* fences, marks or stops are held */
    uint64_t min_epoch;      /* the oldest epoch of a held job, for fences */
    bool     blocked_before; /* an item before could not go (a stop waits for it) */
    bool     unstuck_before; /* one of those is not behind a stuck key (a mark waits for it) */
    bool     fence_before;   /* one of those is a fence (a later fence waits for it) */
};

/* Whether held item j may go now, after what the walk has seen. */
static bool may_go(struct shard_worker *w, struct walk *k, struct job *j)
{
    shard_dispatcher *d = w->d;
    switch (j->kind) {
    case JOB_RUN:
        return shard__held_first_of_key(&w->own.held, j) && shard__job_may_run(d, w, j);
    case JOB_FENCE:
        if (!k->fence_before && k->min_epoch < j->epoch && shard__crash_any(&d->crash))
            k->min_epoch = defer_crash_blocked(w, j->epoch);
        return !k->fence_before && k->min_epoch >= j->epoch;
    case JOB_MARK:
        return !k->unstuck_before;
    default:
        return !k->blocked_before;
    }
}

/* Held item j may not go: what the items after it must wait for. */
static void saw_blocked(shard_dispatcher *d, struct walk *k, const struct job *j)
{
    k->blocked_before = true;
    /* Once one is not stuck, the rest need not be looked at (a look takes the table's lock). */
    k->unstuck_before = k->unstuck_before || !k->controls || j->kind != JOB_RUN ||
                        !shard__crash_stuck_key(&d->crash, j->hash);
    k->fence_before |= j->kind == JOB_FENCE;
}

/* One walk over the held items in order, running or acting on whatever may go now. A job may go when
 * it is its key's first held job and what it waits for is done; a fence when no held job is of an
 * older epoch and no older fence is ahead of it (a fence must not wait for a mark: a mark waits for
 * the jobs ahead of it, and those may wait for this fence); a stop when nothing is ahead; a drain mark
 * when nothing is ahead but jobs of keys whose job is still running on a crashed worker (drain does
 * not wait for a stuck job, so not for what must follow it either). */
static void walk_all(struct shard_worker *w)
{
    shard_dispatcher *d = w->d;
    w->own.held_dirty = false;
    w->own.narrived = 0; /* every arrival is looked at below */
    w->own.seen_kick = atomic_load_explicit(&w->waits.kick, memory_order_acquire);
    /* Rebuilt by this walk: each blocked job notes what it waits for. Fences and marks may wait on
     * crash entries (deferral, stuck keys). */
    atomic_store_explicit(&w->waits.on, 0, memory_order_relaxed);
    if (shard__crash_any(&d->crash))
        shard__wait_on_crashes(w);
    struct walk k = { .controls = w->own.held.controls != 0 };
    /* A mark waits for the held jobs ahead of it that are not behind a stuck key; an entry made
     * elsewhere may make one of them so (a chain of multi-key jobs reaching a stuck key): noted
     * before the look (shard__crash_stuck_key), as every wait is. */
    if (k.controls)
        shard__wait_on_entries(w);
    k.min_epoch = k.controls ? shard__held_min_unowed_epoch(&w->own.held) : UINT64_MAX;
    bool progress = false;
    uint64_t ran[32];
    size_t nran = 0;
    for (struct job *j = w->own.held.head, *next; j; j = next) {
        next = j->next;
        if (!may_go(w, &k, j)) {
            saw_blocked(d, &k, j);
            continue;
        }
        if (j->kind == JOB_RUN && shard__inbox_pending(w)) {
            /* What came in goes first; the rest of the list is not looked at yet: walk again. */
            shard__inbox_pull(w);
            w->own.held_dirty = true;
            return;
        }
        shard__held_remove(&w->own.held, j);
        progress = true;
        if (j->kind == JOB_RUN && nran < sizeof ran / sizeof ran[0])
            ran[nran++] = j->hash;
        else if (j->kind == JOB_RUN)
            w->own.held_dirty = true; /* too many to look at key by key: walk again */
        if (j->kind == JOB_RUN)
            shard__run_job(w, j);
        else
            shard__run_control(w, j);
        if (shard__worker_is_crashed(w) || w->own.stopped) {
            /* A stopped worker runs on what its inbox still brings (a step, a job following its
             * key) until it may exit: the rest held may go too, and no kick need come for it (a
             * look at the paid keys alone would miss it): walk again. */
            w->own.held_dirty = true;
            return;
        }
        if (w->outbox.n) {
            /* Its submits found no memory: the loop delivers them before a drain mark here passes. */
            w->own.held_dirty = true;
            return;
        }
    }
    /* What ran may have unblocked items earlier in the list: a control item (then walk again), or a
     * later job of the same key (a job's key order is the keymap's, which the list's need not be:
     * owed jobs go first), which a look at that key finds. Nothing else: a job waits for other
     * workers' fences and for its own key's crash entries, whose payment kicks (handoff.c). */
    if (progress && w->own.held.controls)
        w->own.held_dirty = true;
    for (size_t i = 0; i < nran && !w->own.held_dirty; i++)
        if (!walk_key(w, ran[i]))
            return;
}

void shard__walk_held(struct shard_worker *w)
{
    SHARD_CHECK_ON(w);
    /* The keys whose crash entries were paid since the last look, taken before anything is looked at
     * (a payment after this is a new kick). acquire: pairs with the payer's seq_cst increment. */
    uint64_t keys = atomic_load_explicit(&w->waits.kick_keys, memory_order_seq_cst), hashes[8];
    size_t n = 0;
    if (keys != w->own.seen_kick_keys) {
        w->own.seen_kick_keys = keys;
        for (size_t s = 0; s < sizeof w->waits.released / sizeof w->waits.released[0]; s++) {
            uint64_t h = atomic_exchange_explicit(&w->waits.released[s], 0, memory_order_acquire);
            if (h)
                hashes[n++] = h;
        }
    }
    /* Everything is walked when something other than such a payment or a job's arrival happened (a
     * fence passed or a hand-over elsewhere, a control item came in, a walk left work), a payment or
     * an arrival found no slot, or control items are held (what a job's going means to them needs
     * the whole list). */
    bool lost = atomic_exchange_explicit(&w->waits.released_lost, false, memory_order_acquire);
    if (w->own.held_dirty || lost || w->own.held.controls ||
        atomic_load_explicit(&w->waits.kick, memory_order_acquire) != w->own.seen_kick) {
        walk_all(w);
        return;
    }
    /* And the keys of what the inbox brought in, taken now: a look may pull more, for the next. */
    uint64_t arrived[sizeof w->own.arrived / sizeof w->own.arrived[0]];
    size_t na = w->own.narrived;
    memcpy(arrived, w->own.arrived, na * sizeof *arrived);
    w->own.narrived = 0;
    for (size_t i = 0; i < n; i++)
        if (!walk_key(w, hashes[i]))
            return;
    for (size_t i = 0; i < na; i++)
        if (!walk_key(w, arrived[i]))
            return;
}

void shard__worker_sync_holding(struct shard_worker *w)
{
    SHARD_CHECK_HELD(&w->lock);
    bool now = w->own.held.count > 0;
    if (now == w->own.holding_now)
        return;
    w->own.holding_now = now;
    atomic_store_explicit(&w->waits.holding, now, memory_order_relaxed);
    /* seq_cst: before this worker walks its held jobs again, and so before it notes what they wait
     * for (handoff.c's kick_holders reads nholding, seq_cst, after its event's seq_cst store). */
    if (now)
        atomic_fetch_add_explicit(&w->d->nholding, 1, memory_order_seq_cst);
    else
        atomic_fetch_sub_explicit(&w->d->nholding, 1, memory_order_seq_cst);
}

bool shard__walk_needed(struct shard_worker *w)
{
    return w->own.held.count &&
           (w->own.held_dirty || w->own.narrived ||
            atomic_load_explicit(&w->waits.kick, memory_order_seq_cst) != w->own.seen_kick ||
            atomic_load_explicit(&w->waits.kick_keys, memory_order_seq_cst) != w->own.seen_kick_keys);
}
