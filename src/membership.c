/* Membership changes: build the next ring, publish it through RCU, fence the old owners, and for a
 * crash hand the worker's queue over. Also drain, stop and stats. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Every change is prepared completely (ring, snapshot, fences, memory) before the point where it is
 * published, so a failure returns an error with nothing changed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher_internal.h"
#include "rcu.h"

static int state_of(const struct shard_worker *w)
{
    return atomic_load_explicit(&w->state, memory_order_relaxed);
}

static void set_state(struct shard_worker *w, int st)
{
    atomic_store_explicit(&w->state, st, memory_order_release);
}

/* The ring member named name, among workers in the ring. Context: ctl held. */
static struct shard_worker *find_member(shard_dispatcher *d, const char *name)
{
    struct snap *s = atomic_load_explicit(&d->snap, memory_order_relaxed);
    long idx = shard__ring_member_index(s->ring, name);
    return idx < 0 ? NULL : s->by_member[idx];
}

static int registry_add(shard_dispatcher *d, struct shard_worker *w)
{
    pthread_mutex_lock(&d->lock);
    if (d->nworkers == d->workers_cap) {
        size_t cap = d->workers_cap ? d->workers_cap * 2 : 16;
        struct shard_worker **v = realloc(d->workers, cap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&d->lock);
            return -ENOMEM;
        }
        d->workers = v;
        d->workers_cap = cap;
    }
    d->workers[d->nworkers++] = w;
    pthread_mutex_unlock(&d->lock);
    return 0;
}

static void registry_drop_last(shard_dispatcher *d)
{
    pthread_mutex_lock(&d->lock);
    d->nworkers--;
    pthread_mutex_unlock(&d->lock);
}

/* Context: ctl held (snap_refs). */
static void snap_free(shard_dispatcher *d, struct snap *s)
{
    for (size_t i = 0; i < shard_ring_member_count(s->ring); i++)
        if (s->by_member[i] != d->gone)
            s->by_member[i]->snap_refs--;
    shard_ring_destroy(s->ring);
    free(s->by_member);
    free(s);
}

/* A snapshot of ring (taken over) at epoch; workers are found by name: the running ones, plus extra. */
static struct snap *snap_new(shard_dispatcher *d, shard_ring *ring, uint64_t epoch, struct shard_worker *extra)
{
    struct snap *s = calloc(1, sizeof *s);
    size_t n = shard_ring_member_count(ring);
    struct shard_worker **by = calloc(n ? n : 1, sizeof *by);
    if (!s || !by) {
        free(s);
        free(by);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const char *name = shard_ring_member(ring, i);
        if (extra && strcmp(extra->name, name) == 0) {
            by[i] = extra;
            continue;
        }
        struct snap *cur = atomic_load_explicit(&d->snap, memory_order_relaxed);
        long idx = shard__ring_member_index(cur->ring, name);
        by[i] = cur->by_member[idx];
    }
    for (size_t i = 0; i < n; i++)
        by[i]->snap_refs++;
    s->epoch = epoch;
    s->ring = ring;
    s->by_member = by;
    atomic_init(&s->prev, NULL);
    return s;
}

/* A change, prepared in full before it is published. */
struct change {
    struct snap  *snap;
    struct job  **fences;   /* by member index of the current ring; NULL for a worker not fenced */
    size_t        nmembers; /* of the current ring */
    double        moved;
};

struct loser_scan {
    const struct snap *old;
    struct change     *c;
};

static void mark_loser(uint64_t first, uint64_t last, const char *owner_a, const char *owner_b, void *ctx)
{
    struct loser_scan *ls = ctx;
    (void)owner_b;
    ls->c->moved += first == last ? 18446744073709551616.0 : (double)(last - first);
    if (!owner_a)
        return;
    struct job *f = ls->c->fences[shard__ring_member_index(ls->old->ring, owner_a)];
    if (f)
        f->release = true;
}

static void change_discard(shard_dispatcher *d, struct change *c)
{
    for (size_t i = 0; c->fences && i < c->nmembers; i++)
        free(c->fences[i]);
    free(c->fences);
    if (c->snap)
        snap_free(d, c->snap);
}

/* Prepares publishing ring (taken over) as the next epoch: its snapshot, a fence for every worker of
 * the current ring except skip, and which of them lose keys. */
static int change_prepare(shard_dispatcher *d, shard_ring *ring, struct shard_worker *extra,
                          struct shard_worker *skip, struct change *c)
{
    struct snap *cur = atomic_load_explicit(&d->snap, memory_order_relaxed);
    memset(c, 0, sizeof *c);
    c->snap = snap_new(d, ring, cur->epoch + 1, extra);
    if (!c->snap) {
        shard_ring_destroy(ring);
        return -ENOMEM;
    }
    size_t n = shard_ring_member_count(cur->ring);
    c->fences = calloc(n, sizeof *c->fences);
    if (!c->fences)
        goto nomem;
    c->nmembers = n;
    for (size_t i = 0; i < n; i++) {
        struct shard_worker *w = cur->by_member[i];
        if (w == skip)
            continue;
        struct job *f = calloc(1, sizeof *f);
        if (!f)
            goto nomem;
        f->kind = JOB_FENCE;
        f->epoch = c->snap->epoch;
        f->routed = w;
        f->fence_before = cur;
        f->fence_after = c->snap;
        c->fences[i] = f;
        c->snap->unpassed++;
    }
    struct loser_scan ls = { cur, c };
    if (shard_ring_diff(cur->ring, ring, mark_loser, &ls) != 0)
        goto nomem;
    c->moved /= 18446744073709551616.0;
    return 0;
nomem:
    change_discard(d, c);
    return -ENOMEM;
}

static void send_waiters_back(shard_dispatcher *d)
{
    pthread_mutex_lock(&d->space_lock);
    atomic_fetch_add_explicit(&d->space_epoch, 1, memory_order_relaxed);
    pthread_cond_broadcast(&d->space_cond);
    pthread_mutex_unlock(&d->space_lock);
}

/* Makes the prepared ring the one in force, and waits until no submit routes with an older one. */
static void publish(shard_dispatcher *d, struct change *c)
{
    struct snap *old = atomic_load_explicit(&d->snap, memory_order_relaxed);
    atomic_store_explicit(&c->snap->prev, old, memory_order_relaxed);
    pthread_mutex_lock(&d->lock);
    old->next = c->snap; /* settled cannot pass it yet: its fences are not pushed */
    pthread_mutex_unlock(&d->lock);
    /* release: readers that load the new snapshot see it fully built (pairs with submit's acquire). */
    atomic_store_explicit(&d->snap, c->snap, memory_order_release);
    atomic_store_explicit(&d->epoch, c->snap->epoch, memory_order_relaxed);
    /* Submitters waiting for room in an old owner's queue look the key up again now: one that waits
     * inside the application's read-side section holds up the grace period below, and the old owner
     * (crashed) may never make room. */
    send_waiters_back(d);
    shard_rcu_synchronize();
    c->snap = NULL;
    pthread_mutex_lock(&d->lock);
    d->changes++;
    d->last_moved = c->moved;
    shard__settle(d);
    pthread_mutex_unlock(&d->lock);
    /* And again: one that found the old ring before the store above registered with the new epoch. */
    send_waiters_back(d);
}

static void push_fences(struct change *c)
{
    for (size_t i = 0; i < c->nmembers; i++) {
        struct job *f = c->fences[i];
        if (!f)
            continue;
        struct shard_worker *w = f->routed; /* f is the worker's once pushed, and may be freed */
        w->fenced_upto = f->epoch;
        shard__queue_push_side(&w->q, f);
        shard__worker_wake(w);
    }
    free(c->fences);
    c->fences = NULL;
    c->nmembers = 0;
}

/* Frees snapshots older than every epoch a held job may still look back to. Context: ctl held. */
static void reap_snapshots(shard_dispatcher *d)
{
    pthread_mutex_lock(&d->lock);
    struct snap *s = d->settled_snap;
    pthread_mutex_unlock(&d->lock);
    struct snap *cut = atomic_load_explicit(&s->prev, memory_order_relaxed);
    if (!cut)
        return;
    atomic_store_explicit(&s->prev, NULL, memory_order_release);
    shard_rcu_synchronize(); /* no reader still walks into what was cut off */
    while (cut) {
        struct snap *next = atomic_load_explicit(&cut->prev, memory_order_relaxed);
        snap_free(d, cut);
        cut = next;
    }
}

/* Whether a worker that left the ring is done with: its thread is returning, and, crashed, its queue
 * has been handed over; and its crash record owes nothing (its stuck job returned, every job it
 * rerouted or deferred has run: those entries point at it until shard__owed_done). */
static bool finished_with(struct shard_worker *w)
{
    int st = state_of(w);
    if (st != SHARD_WORKER_EXITED && st != SHARD_WORKER_CRASHED)
        return false;
    pthread_mutex_lock(&w->d->lock);
    bool done = w->finished && (st == SHARD_WORKER_EXITED || atomic_load_explicit(&w->handed, memory_order_relaxed));
    pthread_mutex_unlock(&w->d->lock);
    /* Entries owed to its record point at it: its rerouted jobs, and jobs it deferred. */
    return done && shard__crash_settled(&w->d->crash, &w->crash);
}

/* Whether w, which left the ring, is finished with and no submitter waits for room in its queue. */
static bool reapable(struct shard_worker *w)
{
    /* acquire: pairs with the waiters' release decrement; their reads of w come first. */
    return finished_with(w) && !atomic_load_explicit(&w->space_refs, memory_order_acquire);
}

/* Points the entries of w in the snapshots still kept at d->gone: a worker that is finished with
 * answers every older_owners_done question as d->gone does, so it need not live as long as the
 * snapshots (which are kept back to the settled epoch, however far behind that is). */
static void unname(shard_dispatcher *d, struct shard_worker *w)
{
    for (struct snap *s = atomic_load_explicit(&d->snap, memory_order_relaxed); s && w->snap_refs;
         s = atomic_load_explicit(&s->prev, memory_order_relaxed)) {
        long idx = shard__ring_member_index(s->ring, w->name);
        if (idx >= 0 && s->by_member[idx] == w) {
            /* release: pairs with snap_worker's acquire. reapable() acquired w's finishing (its
             * d->lock section, its crash record's lock), so a reader of d->gone sees it too. */
            __atomic_store_n(&s->by_member[idx], d->gone, __ATOMIC_RELEASE);
            w->snap_refs--;
        }
    }
}

/* Frees workers that left the ring (removed, or crashed) once they are finished with and nothing can
 * reach them any more. A worker is reached through the registry (d->lock), through snapshots (RCU
 * readers: submitters and the handoff walk in handoff.c), by submitters waiting for room in its
 * queue (space_refs) and, crashed, by the jobs it rerouted (finished_with). Its entries in kept
 * snapshots are rewritten to d->gone (unname) and snapshots that named it may have been cut off by
 * reap_snapshots; either way a grace period has passed since; submitters that found it did so
 * before the grace period of its leaving and counted themselves in space_refs then.
 * Context: ctl held, so no change is under way. */
static void reap_workers(shard_dispatcher *d)
{
    bool unnamed = false;
    for (size_t i = 0; i < d->nworkers; i++) {
        struct shard_worker *w = d->workers[i];
        if (w->snap_refs && reapable(w)) {
            unname(d, w);
            unnamed = true;
        }
    }
    if (unnamed)
        shard_rcu_synchronize(); /* readers that found one of those entries before are done */
    for (size_t i = 0; i < d->nworkers;) {
        struct shard_worker *w = d->workers[i];
        if (w->snap_refs || !reapable(w)) {
            i++;
            continue;
        }
        if (!w->joined) {
            pthread_join(w->thread, NULL); /* it is returning */
            w->joined = true;
        }
        pthread_mutex_lock(&d->lock);
        memmove(&d->workers[i], &d->workers[i + 1], (d->nworkers - i - 1) * sizeof *d->workers);
        d->nworkers--;
        pthread_mutex_unlock(&d->lock);
        shard__worker_free(w);
    }
}

/* The dispatchers whose ctl this thread holds, innermost first, linked through ctl_outer: hooks that
 * run on the control thread (on_dropped, the ring's hooks) may call into another dispatcher, but
 * must not ask for one they are inside of again. */
static _Thread_local shard_dispatcher *ctl_holder;

bool shard__ctl_forbidden(shard_dispatcher *d)
{
    /* A worker may be the one a change waits for; the control thread's own hooks hold ctl; inside an
     * RCU read-side section (the application's, on a thread it registered) a grace period never
     * ends. */
    if (shard__current_worker || rcu_read_ongoing())
        return true;
    for (shard_dispatcher *h = ctl_holder; h; h = h->ctl_outer)
        if (h == d)
            return true;
    return false;
}

void shard__ctl_lock(shard_dispatcher *d)
{
    pthread_mutex_lock(&d->ctl);
    d->ctl_outer = ctl_holder;
    ctl_holder = d;
}

void shard__ctl_unlock(shard_dispatcher *d)
{
    ctl_holder = d->ctl_outer;
    pthread_mutex_unlock(&d->ctl);
}

static int ctl_enter(shard_dispatcher *d)
{
    if (!d)
        return -EINVAL;
    if (shard__ctl_forbidden(d))
        return -EDEADLK;
    shard__ctl_lock(d);
    if (atomic_load_explicit(&d->shutdown, memory_order_relaxed)) {
        shard__ctl_unlock(d);
        return -ESHUTDOWN;
    }
    reap_snapshots(d);
    reap_workers(d);
    return 0;
}

static int check_name(const char *name)
{
    if (!name || !name[0])
        return -EINVAL;
    return strnlen(name, SHARD_NAME_MAX + 1) > SHARD_NAME_MAX ? -ENAMETOOLONG : 0;
}

static void stop_and_join(struct shard_worker *w)
{
    shard__queue_push_side(&w->q, &w->stop_item);
    shard__worker_wake(w);
    pthread_join(w->thread, NULL);
    w->joined = true;
}

/* ---- create ---- */

int shard__membership_init(shard_dispatcher *d)
{
    uint32_t n = d->cfg.workers;
    shard_ring *ring;
    int err = shard_ring_create(&ring, &d->cfg.ring);
    if (err)
        return err;
    struct shard_ring_member *m = calloc(n, sizeof *m);
    struct snap *s = calloc(1, sizeof *s);
    struct shard_worker **by = calloc(n, sizeof *by);
    err = -ENOMEM;
    if (!m || !s || !by)
        goto fail;
    for (uint32_t i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%u", i);
        struct shard_worker *w = shard__worker_new(d, name, 1, 1);
        if (!w || registry_add(d, w) != 0) {
            if (w)
                shard__worker_free(w);
            goto fail;
        }
        m[i] = (struct shard_ring_member){ w->name, 1 };
    }
    if ((err = shard_ring_add_many(ring, m, n)) != 0)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        by[shard__ring_member_index(ring, d->workers[i]->name)] = d->workers[i];
        d->workers[i]->snap_refs = 1;
    }
    s->epoch = 1;
    s->ring = ring;
    s->by_member = by;
    d->settled_snap = s;
    atomic_store_explicit(&d->snap, s, memory_order_release);
    atomic_store_explicit(&d->epoch, 1, memory_order_relaxed);
    ring = NULL;
    by = NULL;
    s = NULL;
    for (size_t i = 0; i < d->nworkers; i++)
        if ((err = shard__worker_start(d->workers[i])) != 0)
            goto fail;
    free(m);
    return 0;
fail:
    for (size_t i = 0; i < d->nworkers; i++)
        if (d->workers[i]->started)
            stop_and_join(d->workers[i]);
    free(m);
    free(s);
    free(by);
    shard_ring_destroy(ring);
    return err;
}

/* ---- add, remove, crash ---- */

SHARD_API int shard_worker_add(shard_dispatcher *d, const char *name, uint32_t weight)
{
    int err = check_name(name);
    if (err || weight == 0)
        return err ? err : -EINVAL;
    if ((err = ctl_enter(d)) != 0)
        return err;
    struct snap *cur = atomic_load_explicit(&d->snap, memory_order_relaxed);
    shard_ring *ring = NULL;
    struct shard_worker *w = NULL;
    struct change c;
    if (find_member(d, name)) {
        err = -EEXIST;
        goto out;
    }
    if (shard_ring_member_count(cur->ring) >= SHARD_MAX_WORKERS) {
        err = -EINVAL;
        goto out;
    }
    if ((err = shard_ring_clone(cur->ring, &ring)) != 0)
        goto out;
    if ((err = shard_ring_add(ring, name, weight)) != 0)
        goto out;
    w = shard__worker_new(d, name, weight, cur->epoch + 1);
    if (!w) {
        err = -ENOMEM;
        goto out;
    }
    if ((err = change_prepare(d, ring, w, NULL, &c)) != 0) {
        ring = NULL; /* taken over */
        goto out;
    }
    ring = NULL;
    if ((err = registry_add(d, w)) != 0) {
        change_discard(d, &c);
        goto out;
    }
    if ((err = shard__worker_start(w)) != 0) {
        registry_drop_last(d);
        change_discard(d, &c);
        goto out;
    }
    w = NULL;
    publish(d, &c);
    push_fences(&c);
out:
    if (w)
        shard__worker_free(w);
    shard_ring_destroy(ring);
    shard__ctl_unlock(d);
    return err;
}

/* The common start of remove and crash: checks, then the next ring (without name) prepared as a change,
 * with a fence for every worker of the current ring, x's too when fence_x. On success ctl is held and
 * *x is the worker; on failure nothing changed and ctl is not held. */
static int leave_prepare(shard_dispatcher *d, const char *name, bool fence_x, struct shard_worker **x,
                         struct change *c)
{
    int err = check_name(name);
    if (err)
        return err == -ENAMETOOLONG ? -ENOENT : err;
    if ((err = ctl_enter(d)) != 0)
        return err;
    struct snap *cur = atomic_load_explicit(&d->snap, memory_order_relaxed);
    shard_ring *ring = NULL;
    *x = find_member(d, name);
    if (!*x)
        err = -ENOENT;
    else if (shard_ring_member_count(cur->ring) == 1)
        err = -EBUSY;
    else if ((err = shard_ring_clone(cur->ring, &ring)) == 0 && (err = shard_ring_remove(ring, name)) == 0)
        err = change_prepare(d, ring, NULL, fence_x ? NULL : *x, c); /* takes the ring over */
    else
        shard_ring_destroy(ring);
    if (err)
        shard__ctl_unlock(d);
    return err;
}

SHARD_API int shard_worker_remove(shard_dispatcher *d, const char *name)
{
    struct shard_worker *x;
    struct change c;
    int err = leave_prepare(d, name, true, &x, &c);
    if (err)
        return err;
    publish(d, &c);
    pthread_mutex_lock(&d->lock);
    set_state(x, SHARD_WORKER_RETIRING);
    d->nretiring++;
    pthread_mutex_unlock(&d->lock);
    push_fences(&c); /* x's fence included: it runs x's release hook once x's queue is done */
    shard__queue_push_side(&x->q, &x->stop_item);
    shard__worker_wake(x);
    shard__ctl_unlock(d);
    return 0;
}

/* Records for the jobs in a worker's ring, allocated before a crash reaches its point of no return. */
static struct job_block *block_new(size_t n)
{
    struct job_block *b = calloc(1, sizeof *b + n * sizeof *b->recs);
    if (b) {
        atomic_init(&b->refs, 1); /* the crash's own, dropped when it is done with the block */
        b->size = n;
    }
    return b;
}

static void block_release(struct job_block *b)
{
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
        free(b);
}

/* Everything x still holds, in order: held items, then its inbox, then its queue (ring slots copied into
 * records of block). Context: x->lock held, after the grace period that ended pushes to x. */
static struct job *take_leftovers(struct shard_worker *x, struct job_block *block)
{
    struct job_list all = { 0 };
    struct job *held = shard__held_take_all(&x->held);
    shard__worker_sync_holding(x);
    for (struct job *j = held, *next; j; j = next) {
        next = j->held_next;
        shard__job_list_append(&all, j);
    }
    for (struct job *j = shard__inbox_take(x, true), *next; j; j = next) {
        next = j->held_next;
        shard__job_list_append(&all, j);
    }
    struct job scratch = { 0 }, *j;
    while ((j = shard__queue_pop_sc(&x->q, &scratch))) {
        if (j == &scratch) {
            struct job *r = &block->recs[block->used++]; /* as many as the ring has slots */
            *r = scratch;
            r->routed = x;
            r->block = block;
            atomic_fetch_add_explicit(&block->refs, 1, memory_order_relaxed);
            j = r;
        }
        shard__job_list_append(&all, j);
    }
    return all.head;
}

/* Jobs for one new owner, gathered so that each inbox is locked and woken once. */
static void deliver(struct shard_worker *dest, struct job_list *list)
{
    if (!list->head)
        return;
    pthread_mutex_lock(&dest->inbox_lock);
    shard__job_list_splice(&dest->inbox, list);
    atomic_store_explicit(&dest->inbox_flag, true, memory_order_release);
    pthread_mutex_unlock(&dest->inbox_lock);
    shard__worker_wake(dest);
}

static void hand_over(shard_dispatcher *d, struct shard_worker *x, struct job *left, enum shard_crash_policy policy,
                      struct job_list *lists)
{
    struct snap *now = atomic_load_explicit(&d->snap, memory_order_relaxed);
    /* x now owes each of its own jobs: other workers' jobs of those keys wait until it has run.
     * Jobs some other crash owes already stay owed to it. */
    if (policy == SHARD_CRASH_REROUTE)
        shard__crash_owe_list(&d->crash, &x->crash, left);
    for (struct job *j = left, *next; j; j = next) {
        next = j->held_next;
        if (j->kind != JOB_RUN) {
            shard__free_record(NULL, j); /* x's fences: it will never pass them */
            continue;
        }
        if (policy == SHARD_CRASH_REROUTE) {
            shard__job_list_append(&lists[shard__ring_owner_index(now->ring, j->hash)], j);
            continue;
        }
        if (d->cfg.on_dropped)
            d->cfg.on_dropped(j->fn, j->arg, d->cfg.user);
        atomic_fetch_add_explicit(&d->dropped, 1, memory_order_relaxed);
        if (j->owed_to)
            shard__owed_done(d, j);
        shard__free_record(NULL, j);
    }
    for (size_t i = 0; i < shard_ring_member_count(now->ring); i++)
        deliver(now->by_member[i], &lists[i]);
    pthread_mutex_lock(&d->lock);
    x->queue_handed = true;
    shard__handed_if_done(d, x);
    pthread_mutex_unlock(&d->lock);
}

SHARD_API int shard_worker_crash(shard_dispatcher *d, const char *name, enum shard_crash_policy policy)
{
    if (policy != SHARD_CRASH_REROUTE && policy != SHARD_CRASH_DROP)
        return -EINVAL;
    struct shard_worker *x;
    struct change c;
    int err = leave_prepare(d, name, false, &x, &c);
    if (err)
        return err;
    struct job_block *block = block_new(shard__queue_capacity(&x->q));
    struct job_list *lists = calloc(shard_ring_member_count(c.snap->ring), sizeof *lists);
    if (!block || !lists) {
        free(block);
        free(lists);
        change_discard(d, &c);
        err = -ENOMEM;
        goto out;
    }
    /* From here on it cannot fail. x takes no further job; a job it is running keeps its key fenced. */
    atomic_store_explicit(&x->crash_pending, true, memory_order_relaxed);
    pthread_mutex_lock(&x->lock);
    atomic_store_explicit(&x->crash_pending, false, memory_order_release);
    set_state(x, SHARD_WORKER_CRASHED);
    if (x->in_fn && x->running_job) {
        /* Before the publication below: a job routed with the new ring sees the entry. */
        shard__crash_stick(&d->crash, &x->crash, x->running_hash);
        x->crash_stuck = true;
    }
    pthread_mutex_lock(&d->lock);
    x->hook_at_crash = x->in_fn && !x->running_job; /* its release hook: the keys it moves wait */
    pthread_mutex_unlock(&d->lock);
    pthread_mutex_unlock(&x->lock);
    shard__worker_wake(x);
    publish(d, &c);
    pthread_mutex_lock(&x->lock);
    struct job *left = take_leftovers(x, block);
    pthread_mutex_unlock(&x->lock);
    block_release(block);
    hand_over(d, x, left, policy, lists);
    free(lists);
    push_fences(&c);
out:
    shard__ctl_unlock(d);
    return err;
}

/* ---- drain, stop ---- */

SHARD_API int shard_drain(shard_dispatcher *d)
{
    int err = ctl_enter(d);
    if (err)
        return err;
    struct snap *cur = atomic_load_explicit(&d->snap, memory_order_relaxed);
    size_t n = shard_ring_member_count(cur->ring);
    struct job **marks = calloc(n, sizeof *marks);
    for (size_t i = 0; marks && i < n; i++) {
        if (!(marks[i] = calloc(1, sizeof **marks))) {
            for (size_t k = 0; k < i; k++)
                free(marks[k]);
            free(marks);
            marks = NULL;
        }
    }
    if (!marks) {
        shard__ctl_unlock(d);
        return -ENOMEM;
    }
    pthread_mutex_lock(&d->lock);
    d->marks_pending += n;
    pthread_mutex_unlock(&d->lock);
    for (size_t i = 0; i < n; i++) {
        marks[i]->kind = JOB_MARK;
        marks[i]->epoch = cur->epoch;
        shard__queue_push_side(&cur->by_member[i]->q, marks[i]);
        shard__worker_wake(cur->by_member[i]);
    }
    free(marks);
    pthread_mutex_lock(&d->lock);
    while (d->marks_pending || d->nretiring)
        pthread_cond_wait(&d->cond, &d->lock);
    pthread_mutex_unlock(&d->lock);
    shard__ctl_unlock(d);
    return 0;
}

void shard__membership_stop_all(shard_dispatcher *d)
{
    /* Every fence passed first: a worker that stops with its inbox closed before another worker's
     * release hook hands it a key would leave the jobs that should follow that key behind (worker.c's
     * move_to_owner). Fences wait only for older jobs no crash owes, so this ends. */
    pthread_mutex_lock(&d->lock);
    while (d->settled_snap != atomic_load_explicit(&d->snap, memory_order_relaxed))
        pthread_cond_wait(&d->cond, &d->lock);
    pthread_mutex_unlock(&d->lock);
    for (size_t i = 0; i < d->nworkers; i++) {
        struct shard_worker *w = d->workers[i];
        if (state_of(w) == SHARD_WORKER_RUNNING) {
            shard__queue_push_side(&w->q, &w->stop_item);
            shard__worker_wake(w);
        }
    }
    for (size_t i = 0; i < d->nworkers; i++)
        if (d->workers[i]->started && !d->workers[i]->joined) {
            pthread_join(d->workers[i]->thread, NULL);
            d->workers[i]->joined = true;
        }
}

void shard__membership_free(shard_dispatcher *d)
{
    struct snap *s = atomic_load_explicit(&d->snap, memory_order_relaxed);
    while (s) {
        struct snap *p = atomic_load_explicit(&s->prev, memory_order_relaxed);
        snap_free(d, s);
        s = p;
    }
    for (size_t i = 0; i < d->nworkers; i++)
        shard__worker_free(d->workers[i]);
    free(d->workers);
}

/* ---- inspection ---- */

SHARD_API int shard_dispatcher_ring(shard_dispatcher *d, shard_ring **out)
{
    if (!d || !out)
        return -EINVAL;
    shard_rcu_read_lock();
    if (atomic_load_explicit(&d->shutdown, memory_order_relaxed)) {
        shard_rcu_read_unlock();
        return -ESHUTDOWN;
    }
    int err = shard_ring_clone(atomic_load_explicit(&d->snap, memory_order_acquire)->ring, out);
    shard_rcu_read_unlock();
    return err;
}

SHARD_API int shard_dispatcher_stats(shard_dispatcher *d, struct shard_stats *out)
{
    if (!d || !out)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    shard_rcu_read_lock();
    struct snap *s = atomic_load_explicit(&d->snap, memory_order_acquire);
    out->epoch = s->epoch;
    out->ring_checksum = shard_ring_checksum(s->ring);
    out->workers = shard_ring_member_count(s->ring);
    shard_rcu_read_unlock();
    pthread_mutex_lock(&d->lock);
    out->changes = d->changes;
    out->last_moved_share = d->last_moved;
    pthread_mutex_unlock(&d->lock);
    out->dropped = atomic_load_explicit(&d->dropped, memory_order_relaxed);
    return 0;
}

static void fill_stats(const struct shard_worker *w, struct shard_worker_stats *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%s", w->name);
    o->state = (enum shard_worker_state)state_of(w); /* read once */
    o->running = atomic_load_explicit(&w->busy, memory_order_relaxed);
    /* A crashed worker's queue was handed over: its positions are no longer advanced. */
    o->queued = atomic_load_explicit(&w->handed, memory_order_acquire) ? 0 : shard__queue_length(&w->q);
    o->executed = atomic_load_explicit(&w->executed, memory_order_relaxed);
    o->set_aside = atomic_load_explicit(&w->set_aside, memory_order_relaxed);
    o->handed_over = atomic_load_explicit(&w->handed_over, memory_order_relaxed);
    o->parked = atomic_load_explicit(&w->parked, memory_order_relaxed);
    o->woken = atomic_load_explicit(&w->woken, memory_order_relaxed);
}

SHARD_API long shard_dispatcher_worker_stats(shard_dispatcher *d, struct shard_worker_stats *out, size_t n)
{
    if (!d || (!out && n > 0))
        return -EINVAL;
    size_t k = 0;
    /* Ring members from the snapshot, whose members are in name order; then the registry's others.
     * d->lock inside the read-side section: no holder of d->lock waits for a grace period. */
    shard_rcu_read_lock();
    pthread_mutex_lock(&d->lock);
    const struct snap *s = atomic_load_explicit(&d->snap, memory_order_acquire);
    size_t members = shard_ring_member_count(s->ring);
    for (size_t i = 0; i < members; i++, k++)
        if (k < n)
            fill_stats(s->by_member[i], &out[k]);
    for (size_t i = 0; i < d->nworkers; i++) {
        const struct shard_worker *w = d->workers[i];
        long idx = shard__ring_member_index(s->ring, w->name);
        if (state_of(w) == SHARD_WORKER_EXITED || (idx >= 0 && s->by_member[idx] == w))
            continue;
        if (k < n)
            fill_stats(w, &out[k]);
        k++;
    }
    pthread_mutex_unlock(&d->lock);
    shard_rcu_read_unlock();
    return (long)k;
}
