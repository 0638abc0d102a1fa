/* A worker from birth to free: create, start, its thread's loop (take in order; run.c acts on what it
 * took, walk.c on what it set aside), polling and parking when idle, exit (worker_life.h).
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dispatcher_internal.h"
#include "follow.h"
#include "handoff.h"
#include "load.h"
#include "run.h"
#include "rcu.h"
#include "space.h"
#include "timer.h"
#include "worker_life.h"

#define SPIN_BEFORE_PARK 256

struct shard_worker *shard__worker_new(shard_dispatcher *d, const char *name, uint64_t epoch)
{
    struct shard_worker *w = aligned_alloc(SHARD_CACHELINE, (sizeof *w + SHARD_CACHELINE - 1) / SHARD_CACHELINE * SHARD_CACHELINE);
    if (!w)
        return NULL;
    memset(w, 0, sizeof *w);
    w->park.fd = -1; /* none until shard__park_init below makes one: what shard__worker_free closes */
    if (shard__queue_init(&w->q, d->capacity) != 0) {
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_mutex_init(&w->inbox.lock, NULL);
    shard__held_init(&w->own.held, &d->throttle);
    shard__crash_record_init(&w->crash);
    atomic_init(&w->life.passed, epoch);
    w->ctl.fenced_upto = epoch;
    atomic_init(&w->life.state, SHARD_WORKER_RUNNING);
    w->d = d;
    snprintf(w->name, sizeof w->name, "%s", name);
    w->id = d->next_id++;
    w->stop_item.kind = JOB_STOP;
    w->stop_item.embedded = true;
    shard__timers_worker_init(w);
    w->hot = shard__hot_new(d->cfg.hot_keys, d->cfg.hot_window_ms);
    if ((d->cfg.hot_keys && !w->hot) || shard__park_init(&w->park, d->cfg.on_worker_idle != NULL) != 0) {
        shard__worker_free(w);
        return NULL;
    }
    return w;
}

int shard__worker_start(struct shard_worker *w)
{
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0)
        return -ENOMEM;
    shard__placement_use(&w->d->placement, &attr);
    int err = pthread_create(&w->ctl.thread, &attr, shard__worker_main, w);
    pthread_attr_destroy(&attr);
    if (err) {
        shard__placement_unuse(&w->d->placement);
        return err == EINVAL ? -EINVAL : -EAGAIN; /* EINVAL: a CPU the process may not run on */
    }
    w->ctl.started = true;
    return 0;
}

void shard__worker_stop(struct shard_worker *w)
{
    shard__queue_push_side(&w->q, &w->stop_item);
    shard__worker_wake(w);
}

void shard__worker_join(struct shard_worker *w)
{
    if (w->ctl.started && !w->ctl.joined) {
        pthread_join(w->ctl.thread, NULL);
        w->ctl.joined = true;
    }
}

bool shard__worker_finished_with(struct shard_worker *w)
{
    int st = shard__worker_state(w);
    if (st != SHARD_WORKER_EXITED && st != SHARD_WORKER_CRASHED)
        return false;
    pthread_mutex_lock(&w->d->lock);
    bool done = w->leaving.finished &&
                (st == SHARD_WORKER_EXITED || atomic_load_explicit(&w->life.epochless, memory_order_relaxed));
    pthread_mutex_unlock(&w->d->lock);
    /* Entries owed to its record point at it: its rerouted jobs, and jobs it deferred. */
    return done && shard__crash_settled(&w->d->crash, &w->crash);
}

void shard__worker_free(struct shard_worker *w)
{
    shard__worker_drop_spares(w);
    shard__held_destroy(&w->own.held);
    shard__queue_destroy(&w->q);
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->inbox.lock);
    shard__timers_worker_destroy(w);
    shard__hot_free(w->hot);
    shard__park_destroy(&w->park);
    free(w);
}

/* A crash is waiting for this worker's lock: let it have it (a mutex is not fair, and a worker running
 * back-to-back jobs would otherwise win it again and again). Called only between items, holding no
 * job outside the lists a crash collects. */
static void yield_to_crash(struct shard_worker *w)
{
    if (!atomic_load_explicit(&w->life.crash_pending, memory_order_relaxed))
        return;
    pthread_mutex_unlock(&w->lock); /* E5 (docs/protocol.md): to the crash */
    while (atomic_load_explicit(&w->life.crash_pending, memory_order_acquire))
        sched_yield();
    pthread_mutex_lock(&w->lock);
}

/* A stopped worker exits once it holds nothing and its inbox is empty, closing the inbox then. A job
 * moved to it while it was leaving the ring (the mover read the ring before the removal) follows its
 * key on, since this worker's release hook has already handed the key's state away; at destroy, which
 * changes no ring, it runs here. */
static bool may_exit(struct shard_worker *w)
{
    if (shard__inbox_pending(w)) {
        shard__inbox_pull(w);
        shard__follow_key(w, UINT64_MAX);
    }
    if (w->own.held.count)
        return false;
    return shard__inbox_close_if_empty(w);
}

static bool has_work(struct shard_worker *w)
{
    return shard__worker_is_crashed(w) || shard__inbox_pending(w) || shard__queue_nonempty_sc(&w->q) ||
           shard__walk_needed(w) || shard__timers_due(w);
}

/* What polling reads: as has_work, but the next slot instead of the tail (queue.h's ready). */
static bool work_ready(struct shard_worker *w)
{
    return shard__queue_ready_sc(&w->q) || shard__worker_is_crashed(w) || shard__inbox_pending(w) || shard__walk_needed(w);
}

/* Pauses polled before a poller says so (park.h's polling): a queue that runs dry for a moment
 * between two deliveries (a few microseconds) is no reason to have other workers' jobs deliver to
 * it one at a time; one whose partners' batches leave it idle for their length is. */
#define POLL_QUIET 64

static bool poll_for(struct shard_worker *w, int pauses)
{
    for (int i = 0; i < pauses; i++) {
        if (work_ready(w))
            return true;
        caa_cpu_relax();
    }
    return false;
}

/* Polls for work before parking: poll_us of the config, or SPIN_BEFORE_PARK pauses. The clock is
 * read every POLL_QUIET pauses. After the first POLL_QUIET without work it tells the other workers'
 * jobs that it polls (park.h): what they submit to it then comes at once, not at the end of their
 * batch. Return: whether work came. */
static bool poll_before_park(struct shard_worker *w)
{
    uint32_t us = w->d->cfg.poll_us;
    struct timespec start, now;
    if (us)
        clock_gettime(CLOCK_MONOTONIC, &start);
    if (poll_for(w, POLL_QUIET))
        return true;
    atomic_store_explicit(&w->park.polling, 1, memory_order_relaxed);
    bool found = false;
    if (!us) {
        found = poll_for(w, SPIN_BEFORE_PARK - POLL_QUIET);
    } else {
        for (;;) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if ((now.tv_sec - start.tv_sec) * 1000000 + (now.tv_nsec - start.tv_nsec) / 1000 >= (long)us)
                break;
            if ((found = shard__timers_due(w) || poll_for(w, POLL_QUIET)))
                break;
        }
    }
    atomic_store_explicit(&w->park.polling, 0, memory_order_relaxed);
    return found;
}

/* Waits in the user's idle hook (shard_config.on_worker_idle) instead of on the futex, until wake_at
 * (ns; UINT64_MAX: none). Context: w's thread, parking prepared, w->lock not held. */
static void idle_hook(struct shard_worker *w, uint64_t wake_at)
{
    int timeout_ms = -1;
    if (wake_at != UINT64_MAX) {
        uint64_t now = shard__now_ns();
        uint64_t ms = wake_at > now ? (wake_at - now + 999999) / 1000000 : 0; /* rounded up: not early */
        timeout_ms = ms > INT_MAX ? INT_MAX : (int)ms;
    }
    /* Not own.in_fn: that marks a job or a release hook, which a crash must wait for or take over. A
     * crash treats w as parked (it is, by its flag) and wakes it through the fd. */
    w->d->cfg.on_worker_idle(w, w->park.fd, timeout_ms, w->d->cfg.user);
    shard__park_cancel(&w->park);
}

/* Parks w: in the user's idle hook until wake_at (wait false: a round of the hook that waits for
 * nothing), or on the futex until then. Return: false when work came before it could park. */
static bool park(struct shard_worker *w, bool wait)
{
    if (w->park.fd >= 0)
        shard__park_clear_fd(&w->park); /* before the flag is set: a later wake-up stays readable */
    uint32_t seq = shard__park_prepare(&w->park);
    /* After shard__park_prepare's seq_cst store: a submitter that found the queue full and registered is
     * seen here even if the per-job check missed it (shard__space_notify). */
    shard__space_notify(w->d);
    /* And a timer placed after this read wakes it (timer_place.c's shard__timer_insert_into). */
    uint64_t wake_at = wait ? shard__timers_next(w) : 0;
    if (has_work(w)) {
        shard__park_cancel(&w->park);
        return false;
    }
    if (wait)
        shard__count(&w->counts.parked);
    shard__load_idle(w);
    if (wait && w->hot) /* a window that ended is published; the round reads no clock for it */
        shard__hot_idle(w->hot, shard__now_ns());
    pthread_mutex_unlock(&w->lock);
    if (w->park.fd >= 0)
        idle_hook(w, wake_at);
    else if (wake_at == UINT64_MAX)
        shard__park_wait(&w->park, seq);
    else
        shard__park_wait_until(&w->park, seq, wake_at);
    pthread_mutex_lock(&w->lock);
    return true;
}

static void idle(struct shard_worker *w)
{
    shard__queue_publish_head_sc(&w->q); /* the slots taken so far are free for producers again */
    bool in_ring = atomic_load_explicit(&w->life.state, memory_order_relaxed) == SHARD_WORKER_RUNNING;
    /* With an idle hook, one round of it that waits for nothing comes first: its events (a network
     * loop's input) are work the poll cannot see, and a worker that polled first would keep them
     * waiting the poll's length each time its queue ran dry. */
    if (in_ring && w->park.fd >= 0 && (!park(w, false) || has_work(w)))
        return;
    /* Spinning saves a futex round trip when jobs keep coming; a worker that left the ring gets no
     * new jobs, so it parks at once and leaves the cores to workers that have work. */
    if (in_ring && poll_before_park(w))
        return;
    park(w, true);
}

/* Waiting submitters are woken once half the ring is free, not after every job: one wake-up then
 * refills half a ring instead of paying a syscall a job. */
static void notify_space(struct shard_worker *w)
{
    if (atomic_load_explicit(&w->d->space_waiters, memory_order_relaxed) &&
        shard__queue_length(&w->q) <= shard__queue_capacity(&w->q) / 2) {
        shard__queue_publish_head_sc(&w->q);
        shard__space_notify(w->d);
    }
}

static void loop(struct shard_worker *w)
{
    while (!shard__worker_is_crashed(w) && !(w->own.stopped && may_exit(w))) {
        yield_to_crash(w);
        if (shard__worker_is_crashed(w))
            break;
        if (w->outbox.n && !shard__outbox_deliver(w)) {
            /* Out of memory for a job beyond a full queue: its jobs' submits wait, in order. */
            pthread_mutex_unlock(&w->lock);
            sched_yield();
            pthread_mutex_lock(&w->lock);
            continue;
        }
        if (shard__timers_due(w))
            shard__timers_fire_due(w);
        if (shard__inbox_pending(w))
            shard__inbox_pull(w);
        shard__worker_sync_holding(w);
        if (shard__walk_needed(w)) {
            shard__walk_held(w);
            continue;
        }
        if (shard__run_batch(w)) {
            notify_space(w);
            continue;
        }
        if (!shard__run_record_ready(w)) {
            /* Out of memory: take nothing from the ring until a record can be had. */
            pthread_mutex_unlock(&w->lock);
            sched_yield();
            pthread_mutex_lock(&w->lock);
            continue;
        }
        struct job *j = shard__queue_pop_sc(&w->q, &w->own.scratch);
        if (!j) {
            idle(w);
            continue;
        }
        if (j == &w->own.scratch) {
            j->routed = w;
            notify_space(w);
        }
        shard__run_take(w, j);
    }
}

void *shard__worker_main(void *arg)
{
    struct shard_worker *w = arg;
    shard_dispatcher *d = w->d;
    shard__current_worker = w;
    shard__placement_name_self(w->name);
    if (d->cfg.on_worker_start)
        d->cfg.on_worker_start(w, d->cfg.user);
    pthread_mutex_lock(&w->lock);
    loop(w);
    /* Its last jobs' submits (a crashed worker's too: they were made): to the keys' owners now. */
    while (!shard__outbox_deliver(w)) {
        pthread_mutex_unlock(&w->lock);
        sched_yield();
        pthread_mutex_lock(&w->lock);
    }
    bool was_crashed = shard__worker_is_crashed(w);
    shard__worker_sync_holding(w); /* a crash may have taken its held jobs */
    /* A worker that left may be kept a while (a crash's entries, snapshots): not its spares. */
    shard__worker_drop_spares(w);
    pthread_mutex_unlock(&w->lock);
    if (d->cfg.on_worker_stop)
        d->cfg.on_worker_stop(w, d->cfg.user);

    pthread_mutex_lock(&d->lock);
    if (!was_crashed) {
        if (atomic_load_explicit(&w->life.state, memory_order_relaxed) == SHARD_WORKER_RETIRING && --d->nretiring == 0)
            pthread_cond_broadcast(&d->cond);
        atomic_store_explicit(&w->life.passed, UINT64_MAX, memory_order_seq_cst); /* as in run.c's pass_fence */
        shard__worker_set_state(w, SHARD_WORKER_EXITED);
        shard__wake_waiters_of(d, w);
    }
    w->leaving.finished = true;
    pthread_mutex_unlock(&d->lock);
    shard__current_worker = NULL;
    return NULL;
}
