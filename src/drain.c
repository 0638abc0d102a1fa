/* shard_drain: a mark behind everything in every member's queue, and the wait for all of them.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>

#include "ctl.h"
#include "dispatcher_internal.h"
#include "membership.h"
#include "outbox.h"

/* A drain mark behind everything in every member's queue, and the wait for all of them. Context: ctl.
 * Return: 0 or -ENOMEM. */
static int mark_all(shard_dispatcher *d)
{
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
    if (!marks)
        return -ENOMEM;
    pthread_mutex_lock(&d->lock);
    d->marks_pending += n;
    pthread_mutex_unlock(&d->lock);
    /* seq_cst: before the marks are pushed, so a worker that holds one is seen with it by an entry's
     * maker (handoff.c's shard__entries_made). */
    atomic_fetch_add_explicit(&d->draining, 1, memory_order_seq_cst);
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
    atomic_fetch_sub_explicit(&d->draining, 1, memory_order_relaxed);
    return 0;
}

SHARD_API int shard_drain(shard_dispatcher *d)
{
    int err = shard__membership_enter(d);
    if (err)
        return err;
    /* A job's submits wait in its worker's outbox until its batch ends (outbox.h): one made before this
     * call may reach its queue only after that queue's mark. The worker's own mark comes after its
     * batch, so once the first marks are through such submits are queued, and a second mark is
     * behind them. A job still running on a crashed worker is not waited for, nor what it submits. */
    pthread_mutex_lock(&d->lock);
    bool gathered = shard__outboxes_open(d);
    pthread_mutex_unlock(&d->lock);
    err = mark_all(d);
    if (!err && gathered)
        err = mark_all(d);
    shard__ctl_unlock(d);
    return err;
}
