/* kv_server: keys that expire, on shard's keyed timers. SPDX-License-Identifier: LGPL-2.1-or-later */
#include "expire.h"

#include <errno.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"
#include "store.h"

/* Set by every worker's start hook (the same value each time), read by its jobs after. */
static _Atomic(shard_dispatcher *) dispatcher;
static atomic_size_t               expiring;

void expire_init(shard_dispatcher *d)
{
    atomic_store_explicit(&dispatcher, d, memory_order_relaxed);
}

static shard_dispatcher *disp(void)
{
    return atomic_load_explicit(&dispatcher, memory_order_relaxed);
}

int64_t kv_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int expire_deadline(const char *arg, size_t len, int64_t unit_ms, bool relative, int64_t *at_ms)
{
    int64_t n;
    if (!parse_int64(arg, len, &n))
        return -EINVAL;
    if (n > INT64_MAX / unit_ms || n < INT64_MIN / unit_ms)
        return -ERANGE;
    n *= unit_ms;
    if (relative) {
        int64_t now = kv_now_ms();
        if (n > INT64_MAX - now)
            return -ERANGE;
        n += now;
    }
    *at_ms = n;
    return 0;
}

size_t expire_count(void)
{
    return atomic_load_explicit(&expiring, memory_order_relaxed);
}

static void expire_run(shard_worker *w, void *arg);

/* Drops one of x's two holds (its entry's, its timer job's); the last frees it. acq_rel: whatever one
 * holder did with x comes before the other's free. */
static void put(struct kv_expiry *x)
{
    if (atomic_fetch_sub_explicit(&x->holds, 1, memory_order_acq_rel) == 1)
        free(x);
}

/* The timer's delay from now to at_ms. */
static uint64_t delay_until(int64_t at_ms)
{
    int64_t ms = at_ms - kv_now_ms();
    uint64_t delay = ms > 0 ? SHARD_MS((uint64_t)ms) : 0;
    return delay > SHARD_TIMER_MAX_NS ? SHARD_TIMER_MAX_NS : delay; /* it arms itself again when it runs */
}

/* Arms x's timer for x->armed_ms, the timer job taking a hold on x; on failure the key expires only
 * when read. Context: a job of x's key (its timer job cannot run before this returns). */
static void arm(struct kv_expiry *x)
{
    uint64_t delay = delay_until(x->armed_ms);
    atomic_fetch_add_explicit(&x->holds, 1, memory_order_relaxed);
    if (shard_submit_after(disp(), x->key, x->klen, delay, expire_run, x, &x->timer) != 0) {
        x->timer = 0;
        atomic_fetch_sub_explicit(&x->holds, 1, memory_order_relaxed);
    }
}

/* The entry lets go of x. If shard says the timer's job will not run, its hold goes too. Otherwise
 * the job runs now or has run on the key's owner (a key flushed from the transit area while its owner
 * expires it), or destroy discards it (-ESHUTDOWN: x is then lost, a leak of a few bytes at exit,
 * against freeing what a job may read): the job's hold is the job's to drop. */
static void release(struct kv_expiry *x)
{
    atomic_fetch_sub_explicit(&expiring, 1, memory_order_relaxed);
    if (x->timer && shard_timer_cancel(disp(), x->timer) == 0)
        put(x);
    put(x);
}

int expire_set(struct kv_entry *e, int64_t at_ms)
{
    struct kv_expiry *x = e->exp;
    if (x && x->timer && at_ms >= x->armed_ms) {
        x->at_ms = at_ms; /* later: the timer, when it runs, arms itself again */
        return 0;
    }
    /* Sooner: the pending timer's deadline moves, in the wheel of this worker (its job's hold on x
     * stays); only while it moves with its key, or its job is due, is x replaced. */
    if (x && x->timer && shard_timer_rearm(disp(), x->timer, delay_until(at_ms)) == 0) {
        x->at_ms = x->armed_ms = at_ms;
        return 0;
    }
    struct kv_expiry *fresh = malloc(sizeof *fresh + e->klen);
    if (!fresh)
        return -ENOMEM;
    *fresh = (struct kv_expiry){ .at_ms = at_ms, .armed_ms = at_ms, .klen = e->klen };
    atomic_init(&fresh->holds, 1); /* the entry's */
    memcpy(fresh->key, e->key, e->klen);
    if (x)
        release(x);
    atomic_fetch_add_explicit(&expiring, 1, memory_order_relaxed);
    e->exp = fresh;
    arm(fresh);
    return 0;
}

void expire_clear(struct kv_entry *e)
{
    if (e->exp) {
        release(e->exp);
        e->exp = NULL;
    }
}

/* The timer's job, a job of x's key on the worker holding it. It holds x, whatever became of the
 * entry: it finds the entry by the key x carries, and acts only if the entry still points to x. */
static void expire_run(shard_worker *w, void *arg)
{
    struct kv_expiry *x = arg;
    struct kv_store *s = store_of(w);
    struct kv_entry *e = s ? store_peek(s, kv_hash(x->key, x->klen), x->key, x->klen) : NULL;
    if (!e || e->exp != x) {
        put(x); /* deleted, given another expiry or none, or being flushed: the entry side lets go */
        return;
    }
    if (x->at_ms > kv_now_ms()) {
        x->armed_ms = x->at_ms; /* put off since it was armed, or the clock was set back */
        put(x);                 /* this run's hold; arm takes the next run's */
        arm(x);
        return;
    }
    e->exp = NULL;
    atomic_fetch_sub_explicit(&expiring, 1, memory_order_relaxed);
    put(x); /* the entry's */
    put(x); /* this run's */
    store_del(s, e->hash, e->key, e->klen);
}
