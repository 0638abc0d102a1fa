/* The control lock (d->ctl), which serialises membership changes, drain and destroy, and the rule
 * for who may take it. SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>

#include "ctl.h"
#include "dispatcher_internal.h"
#include "rcu.h"

/* The dispatchers whose ctl this thread holds, innermost first, linked through ctl_outer: hooks that
 * run on the control thread (on_dropped, the ring's hooks) may call into another dispatcher, but
 * must not ask for one they are inside of again. */
static _Thread_local shard_dispatcher *ctl_holder;

bool shard__ctl_forbidden(shard_dispatcher *d)
{
    /* A worker may be the one a change waits for; the control thread's own hooks hold ctl; inside an
     * RCU read-side section (the application's, on a thread it registered) a grace period never
     * ends. */
    return shard__current_worker || rcu_read_ongoing() || shard__ctl_held(d);
}

bool shard__ctl_held(shard_dispatcher *d)
{
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

/* Why the count. Destroy holds ctl while it stops everything, then lets it go and frees d: a
 * membership call that came in meanwhile waited for ctl, and took it, wrote ctl_outer and read
 * shutdown in freed memory (a review's program, under ASan, with drain, add, place and crash). Now
 * a call looks at shutdown inside a read-side section and counts itself before it leaves it, as a
 * waiting submitter does (space.c): destroy sets shutdown and waits a grace period, so every call
 * that saw it unset is counted by then, and every other one has left d alone; the count goes down
 * under ctl once the call has it, and destroy reads it under ctl, so the last one has let ctl go. */
int shard__ctl_enter(shard_dispatcher *d)
{
    shard__rcu_read_lock();
    bool shutdown = atomic_load_explicit(&d->shutdown, memory_order_seq_cst);
    if (!shutdown)
        atomic_fetch_add_explicit(&d->ctl_callers, 1, memory_order_relaxed);
    shard__rcu_read_unlock();
    if (shutdown)
        return -ESHUTDOWN;
    shard__ctl_lock(d);
    bool last = atomic_fetch_sub_explicit(&d->ctl_callers, 1, memory_order_relaxed) == 1;
    if (atomic_load_explicit(&d->shutdown, memory_order_relaxed)) {
        if (last)
            pthread_cond_signal(&d->ctl_cond); /* destroy waits for the last (below) */
        shard__ctl_unlock(d);
        return -ESHUTDOWN;
    }
    return 0;
}

void shard__ctl_wait_callers(shard_dispatcher *d)
{
    pthread_mutex_lock(&d->ctl);
    while (atomic_load_explicit(&d->ctl_callers, memory_order_relaxed))
        pthread_cond_wait(&d->ctl_cond, &d->ctl);
    pthread_mutex_unlock(&d->ctl);
}
