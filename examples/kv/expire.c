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

/* Arms x's timer for x->armed_ms; on failure the key expires only when read. */
static void arm(struct kv_expiry *x)
{
    int64_t ms = x->armed_ms - kv_now_ms();
    uint64_t delay = ms > 0 ? SHARD_MS((uint64_t)ms) : 0;
    if (delay > SHARD_TIMER_MAX_NS)
        delay = SHARD_TIMER_MAX_NS; /* it arms itself again when it runs */
    if (shard_submit_after(disp(), x->key, x->klen, delay, expire_run, x, &x->timer) != 0)
        x->timer = 0;
}

/* Lets go of x, which no entry points to any more: freed unless its timer's job may still run, which
 * then frees it (expire_run finds no entry pointing to it). */
static void release(struct kv_expiry *x)
{
    atomic_fetch_sub_explicit(&expiring, 1, memory_order_relaxed);
    /* -EBUSY: the job runs now (a key flushed from the transit area while its new owner expires
     * it). -ESHUTDOWN: destroy has begun; the job runs if it was submitted, or is discarded, and then
     * x is lost: a leak of a few bytes at exit, against freeing what a job may read. */
    if (x->timer == 0 || shard_timer_cancel(disp(), x->timer) == 0)
        free(x);
}

int expire_set(struct kv_entry *e, int64_t at_ms)
{
    struct kv_expiry *x = e->exp;
    if (x && x->timer && at_ms >= x->armed_ms) {
        x->at_ms = at_ms; /* later: the timer, when it runs, arms itself again */
        return 0;
    }
    struct kv_expiry *fresh = malloc(sizeof *fresh + e->klen);
    if (!fresh)
        return -ENOMEM;
    *fresh = (struct kv_expiry){ .at_ms = at_ms, .armed_ms = at_ms, .klen = e->klen };
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

/* The timer's job, a job of x's key on the worker holding it. */
static void expire_run(shard_worker *w, void *arg)
{
    struct kv_expiry *x = arg;
    struct kv_store *s = store_of(w);
    struct kv_entry *e = s ? store_peek(s, kv_hash(x->key, x->klen), x->key, x->klen) : NULL;
    if (!e || e->exp != x) {
        free(x); /* the key was deleted, or given another expiry or none, while this was pending */
        return;
    }
    if (x->at_ms > kv_now_ms()) {
        x->armed_ms = x->at_ms; /* put off since it was armed, or the clock was set back */
        arm(x);
        return;
    }
    e->exp = NULL;
    atomic_fetch_sub_explicit(&expiring, 1, memory_order_relaxed);
    free(x);
    store_del(s, e->hash, e->key, e->klen);
}
