/* kv_server: the network loops run by the workers themselves (--net-threads 0), shard per core.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * With a network thread beside the workers, every request crosses threads twice: the network thread
 * submits it, a worker runs it and pushes the reply back. On a machine where the client takes a core
 * that is two threads sharing what is left, with a wake-up each way. Here an idle worker runs the
 * loops instead, from shard's idle hook: it reads its connections, submits their commands (those of
 * keys it owns land in its own queue, without a wake-up), returns to run them, and when idle again
 * writes the replies. With one worker that is Redis's own loop, on one thread.
 *
 * A worker may run any loop, one worker a loop at a time (its drive lock, taken with trylock: an idle
 * worker never waits for a busy one). Worker i tries loop i first (of the initial workers), then the
 * others, so a loop whose worker was removed or crashed is run by those left. When no loop it could
 * take had an event, it waits on its own epoll of every loop's epoll and wake_fd: the first event,
 * job, timer or change returns it. */
#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "net_internal.h"

/* Before the loops are live (the dispatcher is being created), or without a descriptor for its epoll,
 * a worker looks at them again this often. */
#define NOT_LIVE_POLL_MS 10

static atomic_uint          next_home;       /* hands each worker thread its first loop */
static _Thread_local int    home = -1;       /* this worker's first loop */
static _Thread_local int    waits_on = -1;   /* its epoll: wake_fd and every loop's epoll */

/* This worker's epoll set, made at its first idle wait. Return: the descriptor; -1 without one. */
static int wait_set(struct server *srv, int wake_fd)
{
    if (waits_on >= 0)
        return waits_on;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        return -1;
    struct epoll_event e = { .events = EPOLLIN };
    bool ok = epoll_ctl(ep, EPOLL_CTL_ADD, wake_fd, &e) == 0;
    for (uint32_t i = 0; ok && i < srv->nnet; i++)
        ok = epoll_ctl(ep, EPOLL_CTL_ADD, srv->net[i].epfd, &e) == 0;
    if (!ok) {
        close(ep);
        return -1;
    }
    return waits_on = ep;
}

/* timeout_ms, but at most NOT_LIVE_POLL_MS. */
static int capped(int timeout_ms)
{
    return timeout_ms >= 0 && timeout_ms < NOT_LIVE_POLL_MS ? timeout_ms : NOT_LIVE_POLL_MS;
}

static void wait_fd_only(int wake_fd, int timeout_ms)
{
    struct pollfd p = { .fd = wake_fd, .events = POLLIN };
    int n = poll(&p, 1, timeout_ms);
    (void)n; /* an error or EINTR: the worker calls again */
}

void net_on_idle(shard_worker *w, int wake_fd, int timeout_ms, void *user)
{
    (void)w;
    struct server *srv = user;
    if (atomic_load_explicit(&srv->stopping, memory_order_acquire)) {
        wait_fd_only(wake_fd, timeout_ms); /* the loops are stopped: only jobs and changes now */
        return;
    }
    if (!atomic_load_explicit(&srv->net_live, memory_order_acquire)) {
        wait_fd_only(wake_fd, capped(timeout_ms));
        return;
    }
    if (home < 0)
        home = (int)(atomic_fetch_add_explicit(&next_home, 1, memory_order_relaxed) % srv->nnet);
    bool any = false;
    for (uint32_t k = 0; k < srv->nnet; k++) {
        struct net_thread *nt = &srv->net[((uint32_t)home + k) % srv->nnet];
        if (pthread_mutex_trylock(&nt->drive) != 0)
            continue; /* another worker runs it now */
        /* Under drive, after the check: net_stop takes every drive lock after setting stopping. */
        if (!atomic_load_explicit(&srv->stopping, memory_order_acquire))
            any |= net_round(nt, 0);
        pthread_mutex_unlock(&nt->drive);
    }
    if (any)
        return; /* the commands it submitted to itself run now; it comes back when they are done */
    int ep = wait_set(srv, wake_fd);
    if (ep < 0) {
        wait_fd_only(wake_fd, capped(timeout_ms));
        return;
    }
    /* seq_cst, the Dekker pair with request_complete's push then net_completion_wakes' read: either
     * this sees a completion pushed without a signal, or the pusher sees this worker waiting. */
    atomic_fetch_add_explicit(&srv->net_waiters, 1, memory_order_seq_cst);
    bool pending = false;
    for (uint32_t k = 0; k < srv->nnet && !pending; k++)
        pending = atomic_load_explicit(&srv->net[k].done, memory_order_seq_cst) != NULL;
    if (!pending) {
        struct epoll_event ev;
        int n = epoll_wait(ep, &ev, 1, timeout_ms);
        (void)n; /* whatever woke it, the worker looks at its queue and calls again */
    }
    atomic_fetch_sub_explicit(&srv->net_waiters, 1, memory_order_relaxed);
}

bool net_completion_wakes(struct server *srv)
{
    /* home is set once this thread has run net_on_idle: it is a worker that runs the loops, and runs
     * a round of each when it is next idle (unless another worker is running it then: that one is
     * not waiting, and runs it again when it is idle). */
    return srv->opt.net_threads || home < 0 || atomic_load_explicit(&srv->net_waiters, memory_order_seq_cst) != 0;
}

void net_worker_stop(void)
{
    if (waits_on >= 0)
        close(waits_on);
    waits_on = -1;
    home = -1;
}
