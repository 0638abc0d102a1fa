/* kv_server: the network loops run by the workers themselves (--net-threads 0), shard per core.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * With a network thread beside the workers, every request crosses threads twice: the network thread
 * submits it, a worker runs it and pushes the reply back. On a machine where the client takes a core
 * that is two threads sharing what is left, with a wake-up each way. Here an idle worker runs the
 * loops instead, from shard's idle hook: it reads its connections, submits their commands (those of
 * keys it owns land in its own queue), returns to run them, and when idle again writes the replies.
 * With one worker that is Redis's own loop, on one thread.
 *
 * Each loop has two watchers, the workers that wait on it: its keeper (the n-th worker started keeps
 * loop n; there are as many loops as initial workers, up to one a CPU) and a second (the n-th worker
 * is second on loop n + 1), so that a connection whose keeper is busy in a long job is served by the
 * second when that one is idle; a worker started later watches none. The second leaves a loop to its
 * keeper while the keeper began a round of it within SECOND_AFTER_NS: a connection served by one
 * worker keeps its buffers and requests in that worker's cache and allocator (the two taking turns
 * on every loop cost 2 workers 1.3-1.6x the CPU a request of keeping each loop on its keeper). An
 * idle worker runs a round of each loop it watches (one worker a loop at a time: its drive lock, taken with trylock, so an idle
 * worker never waits for a busy one); when none had anything, it waits on an epoll of wake_fd and the
 * loops it watches. A worker that completes a request signals the loop's eventfd unless it watches
 * that loop itself and no worker waits (it then takes the completion at its own next round). Two
 * waiters a loop at most: an event wakes two workers at most, and a loop's epoll sits in two other
 * epolls at most (the kernel refuses more than 500 such paths from the listening socket, which every
 * loop watches). A worker that stops gives its places up; the other watcher of each loop still
 * serves it, and an idle worker takes the empty places at its next idle call (the stopping one wakes
 * another with a job). */
#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "net_internal.h"

/* Before the loops are live (the dispatcher is being created), or without a descriptor for its epoll,
 * a worker looks at them again this often. */
#define NOT_LIVE_POLL_MS 10
/* A keeper that began no round of its loop for this long is busy (a long job): its second serves the
 * loop. A second that left a ready loop to its keeper looks again after at most this long. */
#define SECOND_AFTER_NS 1000000
#define SECOND_AFTER_MS 1

static atomic_uint          next_token;      /* hands each worker thread its token, from 1 */
static _Thread_local unsigned token;         /* this worker's (0: not a worker that runs loops) */
static _Thread_local unsigned seen_orphans;  /* srv->net_orphans when it last looked for loops */
static _Thread_local int    waits_on = -1;   /* its epoll: wake_fd and the loops it watches */
static _Thread_local bool   stale = true;    /* waits_on must be made again: what it watches changed */

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Whether this worker, nt's second, leaves it to its keeper now. */
static bool left_to_keeper(const struct net_thread *nt, uint64_t *now)
{
    if (atomic_load_explicit(&nt->keeper, memory_order_relaxed) == token)
        return false;
    if (!*now)
        *now = mono_ns();
    return *now - atomic_load_explicit(&nt->keeper_round_ns, memory_order_relaxed) < SECOND_AFTER_NS;
}

static bool watches(const struct net_thread *nt)
{
    return atomic_load_explicit(&nt->keeper, memory_order_relaxed) == token ||
           atomic_load_explicit(&nt->second, memory_order_relaxed) == token;
}

/* Takes place *slot of a loop if it is empty and this worker is not the loop's other watcher. */
static bool take(_Atomic unsigned *slot, _Atomic unsigned *other)
{
    unsigned none = 0;
    return atomic_load_explicit(other, memory_order_relaxed) != token &&
           atomic_compare_exchange_strong_explicit(slot, &none, token, memory_order_relaxed, memory_order_relaxed);
}

/* Takes every empty place (given up by a worker that stopped). */
static void adopt(struct server *srv)
{
    for (uint32_t i = 0; i < srv->nnet; i++) {
        struct net_thread *nt = &srv->net[i];
        if (take(&nt->keeper, &nt->second) || take(&nt->second, &nt->keeper))
            stale = true;
    }
}

/* This worker's epoll set, made again when what it keeps changed. Return: the descriptor; -1 without
 * one (then it looks at its loops every NOT_LIVE_POLL_MS, until what it keeps changes). */
static int wait_set(struct server *srv, int wake_fd)
{
    if (!stale)
        return waits_on;
    stale = false;
    if (waits_on >= 0)
        close(waits_on);
    waits_on = epoll_create1(EPOLL_CLOEXEC);
    if (waits_on < 0)
        return -1;
    struct epoll_event e = { .events = EPOLLIN };
    bool ok = epoll_ctl(waits_on, EPOLL_CTL_ADD, wake_fd, &e) == 0;
    for (uint32_t i = 0; ok && i < srv->nnet; i++) {
        struct net_thread *nt = &srv->net[i];
        if (!watches(nt))
            continue;
        /* The second edge-triggered: woken once for each new event, so that while the keeper takes
         * it the second does not spin on a loop that stays ready until then (the keeper, level-
         * triggered, misses nothing). */
        bool keeper = atomic_load_explicit(&nt->keeper, memory_order_relaxed) == token;
        struct epoll_event l = { .events = keeper ? EPOLLIN : EPOLLIN | EPOLLET };
        ok = epoll_ctl(waits_on, EPOLL_CTL_ADD, nt->epfd, &l) == 0;
    }
    if (!ok) {
        close(waits_on);
        waits_on = -1;
    }
    return waits_on;
}

void net_worker_start(struct server *srv)
{
    if (srv->opt.net_threads)
        return;
    token = atomic_fetch_add_explicit(&next_token, 1, memory_order_relaxed) + 1;
    if (token <= srv->nnet) { /* an initial worker (a later one only adopts) */
        struct net_thread *mine = &srv->net[token - 1], *next = &srv->net[token % srv->nnet];
        take(&mine->keeper, &mine->second);
        take(&next->second, &next->keeper); /* with one loop, it keeps it and is not second */
    }
    seen_orphans = 0;
    stale = true;
}

static void wake_someone(shard_worker *w, void *arg)
{
    (void)w, (void)arg; /* its worker, once idle, adopts the loops given up */
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
    unsigned orphans = atomic_load_explicit(&srv->net_orphans, memory_order_acquire);
    if (orphans != seen_orphans) {
        seen_orphans = orphans;
        adopt(srv);
    }
    bool any = false, left = false;
    uint64_t now = 0;
    for (uint32_t i = 0; i < srv->nnet; i++) {
        struct net_thread *nt = &srv->net[i];
        if (!watches(nt))
            continue;
        if (left_to_keeper(nt, &now)) {
            left = true;
            continue;
        }
        if (pthread_mutex_trylock(&nt->drive) != 0) {
            /* Another worker runs it now, and its round may leave events for the next (net.c's
             * ROUND_COMMANDS), which wake nobody: look again soon, in case it is then in a long job. */
            left = true;
            continue;
        }
        if (atomic_load_explicit(&nt->keeper, memory_order_relaxed) == token)
            atomic_store_explicit(&nt->keeper_round_ns, mono_ns(), memory_order_relaxed);
        /* Under drive, after the check: net_stop takes every drive lock after setting stopping. */
        if (!atomic_load_explicit(&srv->stopping, memory_order_acquire))
            any |= net_round(nt, 0);
        pthread_mutex_unlock(&nt->drive);
    }
    if (any)
        return; /* the commands it submitted run now; it comes back when they are done */
    if (left && (timeout_ms < 0 || timeout_ms > SECOND_AFTER_MS))
        timeout_ms = SECOND_AFTER_MS; /* the keeper may be in a long job by then */
    int ep = wait_set(srv, wake_fd);
    if (ep < 0) {
        wait_fd_only(wake_fd, capped(timeout_ms));
        return;
    }
    /* seq_cst, the Dekker pair with request_complete's push then net_completion_wakes' read: either
     * this sees a completion pushed without a signal, or the pusher sees this worker waiting. */
    atomic_fetch_add_explicit(&srv->net_waiters, 1, memory_order_seq_cst);
    bool pending = false;
    for (uint32_t k = 0; k < srv->nnet && !pending; k++) {
        struct net_thread *nt = &srv->net[k];
        if (!watches(nt) || !atomic_load_explicit(&nt->done, memory_order_seq_cst))
            continue;
        /* A loop in another watcher's round: that one looks at the stack again before it waits. */
        if (pthread_mutex_trylock(&nt->drive) == 0) {
            pthread_mutex_unlock(&nt->drive);
            pending = true;
        }
    }
    if (!pending) {
        struct epoll_event ev;
        int n = epoll_wait(ep, &ev, 1, timeout_ms);
        (void)n; /* whatever woke it, the worker looks at its queue and calls again */
    }
    atomic_fetch_sub_explicit(&srv->net_waiters, 1, memory_order_relaxed);
}

bool net_completion_wakes(struct server *srv, const struct net_thread *nt)
{
    /* A watcher of nt runs a round of it when it is next idle (unless another watcher is running it
     * then: that one is not waiting, and runs it again before it waits). */
    return srv->opt.net_threads || token == 0 || !watches(nt) ||
           atomic_load_explicit(&srv->net_waiters, memory_order_seq_cst) != 0;
}

void net_worker_stop(shard_worker *w, struct server *srv)
{
    if (token == 0)
        return;
    bool gave = false;
    for (uint32_t i = 0; i < srv->nnet; i++) {
        /* Completions it pushed without a signal, for a round it will not run: the other watcher's. */
        if (watches(&srv->net[i]) && atomic_load_explicit(&srv->net[i].done, memory_order_seq_cst)) {
            uint64_t one = 1;
            ssize_t n = write(srv->net[i].event_fd, &one, sizeof one);
            (void)n;
        }
        unsigned mine = token;
        gave |= atomic_compare_exchange_strong_explicit(&srv->net[i].keeper, &mine, 0, memory_order_relaxed,
                                                        memory_order_relaxed);
        mine = token;
        gave |= atomic_compare_exchange_strong_explicit(&srv->net[i].second, &mine, 0, memory_order_relaxed,
                                                        memory_order_relaxed);
    }
    if (gave) {
        atomic_fetch_add_explicit(&srv->net_orphans, 1, memory_order_release);
        /* Whichever worker the key reaches (this one has left the ring) takes the places when idle;
         * any other idle worker may first, and meanwhile each loop's other watcher serves it.
         * -ESHUTDOWN during destroy: nobody needs them then. */
        (void)shard_submit(shard_worker_dispatcher(w), "kv:net:adopt", 12, wake_someone, NULL);
    }
    if (waits_on >= 0)
        close(waits_on);
    waits_on = -1;
    token = 0;
    stale = true;
}
