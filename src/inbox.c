/* A worker's inbox: jobs a crash rerouted to it, taken in at the front of its held jobs.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include "worker.h"

void shard__inbox_put(struct shard_worker *w, const struct job_list *list)
{
    pthread_mutex_lock(&w->inbox.lock);
    shard__job_list_splice(&w->inbox.jobs, list);
    /* release (E4, docs/protocol.md): pairs with shard__inbox_pending's acquire. */
    atomic_store_explicit(&w->inbox.flag, true, memory_order_release);
    pthread_mutex_unlock(&w->inbox.lock);
}

bool shard__inbox_close_if_empty(struct shard_worker *w)
{
    pthread_mutex_lock(&w->inbox.lock);
    bool empty = !w->inbox.jobs.head;
    w->inbox.closed |= empty;
    pthread_mutex_unlock(&w->inbox.lock);
    return empty;
}

struct job *shard__inbox_take(struct shard_worker *w, bool close)
{
    SHARD_CHECK_HELD(&w->lock);
    pthread_mutex_lock(&w->inbox.lock);
    struct job *j = w->inbox.jobs.head;
    w->inbox.jobs = (struct job_list){ 0 };
    w->inbox.closed |= close;
    atomic_store_explicit(&w->inbox.flag, false, memory_order_relaxed);
    pthread_mutex_unlock(&w->inbox.lock);
    return j;
}

/* A job of hash came in: its key is looked at next (walk.c), or everything when too many came. */
static void note_arrival(struct shard_worker *w, uint64_t hash)
{
    if (w->own.narrived && w->own.arrived[w->own.narrived - 1] == hash)
        return;
    if (w->own.narrived < sizeof w->own.arrived / sizeof w->own.arrived[0])
        w->own.arrived[w->own.narrived++] = hash;
    else
        w->own.held_dirty = true;
}

/* Moves jobs rerouted to this worker (or following their key, or a multi-key job's steps) into the
 * front of its held list. */
void shard__inbox_pull(struct shard_worker *w)
{
    SHARD_CHECK_ON(w);
    struct job *j = shard__inbox_take(w, false);
    while (j) {
        struct job *next = j->next;
        shard__held_push_prio(&w->own.held, j);
        if (j->kind == JOB_RUN) {
            shard__count(&w->counts.handed_over);
            note_arrival(w, j->hash);
        } else {
            w->own.held_dirty = true; /* a control item: what it may do needs the whole list */
        }
        j = next;
    }
}
