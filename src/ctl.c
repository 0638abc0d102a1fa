/* The control lock (d->ctl), which serialises membership changes, drain and destroy, and the rule
 * for who may take it. SPDX-License-Identifier: LGPL-2.1-or-later */
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
