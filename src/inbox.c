/* A worker's inbox: jobs a crash rerouted to it, taken in at the front of its held jobs.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include "worker.h"

struct job *shard__inbox_take(struct shard_worker *w, bool close)
{
    SHARD_CHECK_HELD(&w->lock);
    pthread_mutex_lock(&w->inbox_lock);
    struct job *j = w->inbox.head;
    w->inbox = (struct job_list){ 0 };
    w->inbox_closed |= close;
    atomic_store_explicit(&w->inbox_flag, false, memory_order_relaxed);
    pthread_mutex_unlock(&w->inbox_lock);
    return j;
}

/* A job of hash came in: its key is looked at next (pass.c), or everything when too many came. */
static void note_arrival(struct shard_worker *w, uint64_t hash)
{
    if (w->narrived && w->arrived[w->narrived - 1] == hash)
        return;
    if (w->narrived < sizeof w->arrived / sizeof w->arrived[0])
        w->arrived[w->narrived++] = hash;
    else
        w->held_dirty = true;
}

/* Moves jobs rerouted to this worker (or following their key, or a multi-key job's steps) into the
 * front of its held list. */
void shard__inbox_pull(struct shard_worker *w)
{
    SHARD_CHECK_ON(w);
    struct job *j = shard__inbox_take(w, false);
    while (j) {
        struct job *next = j->next;
        shard__held_push_prio(&w->held, j);
        if (j->kind == JOB_RUN) {
            shard__count(&w->handed_over);
            note_arrival(w, j->hash);
        } else {
            w->held_dirty = true; /* a control item: what it may do needs the whole list */
        }
        j = next;
    }
}
