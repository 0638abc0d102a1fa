/* Jobs a crash owes follow their key: when a worker's release hook hands a key's state away, the
 * held jobs of that key that a crash owes (rerouted to it, or deferred behind a stuck job) move to
 * the key's current owner, still owed, instead of running where the state has gone.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include "dispatcher_internal.h"
#include "follow.h"
#include "rcu.h"

/* A drain under way may have taken dest's mark already, and w's mark passes once j has left: a mark
 * of its own behind j keeps that drain waiting for j (or for nothing, if j waits behind a stuck job,
 * as marks do). Return: the mark to send with j; NULL if no drain is under way, or if no record could
 * be had: j then moves without one (a drain may return before it has run; its key's order and state,
 * which running where its state has gone would break, come first). */
static struct job *mark_for_move(struct shard_worker *w)
{
    shard_dispatcher *d = w->d;
    struct job *mark = NULL;
    pthread_mutex_lock(&d->lock);
    if (d->marks_pending > 0 && (mark = shard__record_alloc(w)) != NULL) {
        mark->kind = JOB_MARK;
        d->marks_pending++;
    }
    pthread_mutex_unlock(&d->lock);
    return mark;
}

/* Puts j (and mark, if any) into dest's inbox, found as j's key's owner in s, unless dest closed it:
 * j then waits there for every owner its key had before s (moved_epoch). from: the held list j leaves
 * first (under the inbox's lock, before any link of j is reused), or NULL. Return: whether it went. */
static bool into_inbox(struct shard_worker *dest, const struct snap *s, struct job *j, struct job *mark,
                       struct held *from)
{
    pthread_mutex_lock(&dest->inbox.lock);
    bool open = !dest->inbox.closed;
    if (open) {
        if (from)
            shard__held_remove(from, j);
        j->moved_epoch = s->epoch;
        j->wait_snap = NULL; /* what it waited for where it was */
        shard__job_list_append(&dest->inbox.jobs, j);
        if (mark)
            shard__job_list_append(&dest->inbox.jobs, mark);
        /* release (E4, docs/protocol.md): pairs with shard__inbox_pending's acquire. */
        atomic_store_explicit(&dest->inbox.flag, true, memory_order_release);
    }
    pthread_mutex_unlock(&dest->inbox.lock);
    if (open)
        shard__worker_wake(dest);
    return open;
}

/* A mark made for a move that did not happen: the drain no longer waits for it. */
static void mark_unused(struct shard_worker *w, struct job *mark)
{
    pthread_mutex_lock(&w->d->lock);
    if (--w->d->marks_pending == 0)
        pthread_cond_broadcast(&w->d->cond);
    pthread_mutex_unlock(&w->d->lock);
    shard__free_record(w, mark);
}

/* Moves j, held by w, to its key's owner in the current ring, into its inbox, ahead of what that
 * worker holds of the key. j then waits there also for every owner its key has had since j's own
 * epoch (handoff.c: moved_epoch), each of which hands the key's state on at its fence: so it runs
 * where the state is. The current ring may be newer than the fence w is at: if the key has come back
 * to w since, j stays, and waits the same way for the owners in between, which may have run jobs of
 * the key (a job moved to one of them by this same walk before the ring changed, for one) and hand
 * the state back to w at their fences. j also stays, as it is, if the owner closed its inbox (only at
 * destroy, as a crash publishes the ring without its worker before it closes the inbox, and a removed
 * worker leaves the ring before it exits). */
static void move_to_owner(struct shard_worker *w, struct job *j)
{
    bool moved = false;
    struct job *mark = mark_for_move(w);
    shard__rcu_read_lock(); /* the owner found below lives through it */
    const struct snap *s = atomic_load_explicit(&w->d->snap, memory_order_acquire);
    struct shard_worker *dest = snap_worker(s, shard__ring_owner_index(s->ring, j->hash));
    if (dest == w) {
        j->moved_epoch = s->epoch;
        j->wait_snap = NULL;
    } else {
        moved = into_inbox(dest, s, j, mark, &w->own.held);
    }
    shard__rcu_read_unlock();
    if (!moved && mark)
        mark_unused(w, mark);
}

bool shard__follow_deliver(struct shard_worker *me, struct job *j)
{
    struct job *mark = mark_for_move(me);
    bool moved = false;
    /* A closed inbox: its worker crashed after the ring was loaded (the crash published a ring
     * without it first: look again), or destroy stops every worker. */
    for (int tries = 0; !moved && tries < 2; tries++) {
        shard__rcu_read_lock(); /* the owner found below lives through it */
        const struct snap *s = atomic_load_explicit(&me->d->snap, memory_order_acquire);
        moved = into_inbox(snap_worker(s, shard__ring_owner_index(s->ring, j->hash)), s, j, mark, NULL);
        shard__rcu_read_unlock();
    }
    if (!moved && mark)
        mark_unused(me, mark);
    return moved;
}

/* At a fence of epoch where w loses keys, after its release hook handed their state over: held jobs
 * of those keys given to it before the change that a crash owes (rerouted here, or deferred behind a
 * stuck job) must not run here any more, where the state has gone. They follow their key, still
 * owed (so the key's later jobs wait for them), and run first where it is now. Later jobs stay:
 * their key's owner at their own epoch is a later ring's business. */
void shard__follow_key(struct shard_worker *w, uint64_t epoch)
{
    SHARD_CHECK_ON(w);
    for (struct job *j = w->own.held.head, *next; j; j = next) {
        next = j->next;
        if (j->kind == JOB_RUN && j->owed_to && j->epoch < epoch) {
            move_to_owner(w, j);
            w->own.held_dirty = true; /* gone, or waiting for something else */
        }
    }
}

