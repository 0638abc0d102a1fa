/* The balancer (dispatcher.h: struct shard_balance_config): a thread that, when the load of the ring's
 * workers stays skewed, places hot keys on less busy workers and reshapes weights around a key that
 * no worker can share. It changes the ring only through shard__membership_edit, as add and remove
 * do, so every move has the handoff's guarantees. This file is its thread; what a member did is
 * balance_measure.c's, a round's decisions balance_plan.c's (balance_internal.h: the state they share).
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The policy, each interval:
 *   1. load_i: what worker i did in the interval (time in jobs, or jobs given: run plus queued), for
 *      the first MAX_MEMBERS ring members; a member it has not seen before skips the round (no baseline yet).
 *      A hot key's load is its share of its worker's last hot-key window times the worker's load; by
 *      time, of the time the key surely had (busy_ns - error_ns: not what space-saving inherited).
 *   2. Under 5 % busy (100 jobs a worker, by jobs) nothing is decided: skew in a trickle is noise.
 *      ratio = max / mean is reported. A worker over the threshold `rounds` intervals in a row (the
 *      same worker, each counting its own) is one that keys may leave; once a round has changed the
 *      ring, every count starts again from zero (a move shows in the next interval's figures).
 *   3. Moves: up to max_moves times, from the busiest such worker W to the least busy V, the heaviest
 *      of W's steady hot keys (Noise, below) whose load is at most half the gap, or failing that the
 *      lightest that still lowers the maximum. Never a key over the mean (it would move its
 *      overload), nor an isolated one, nor one the user placed (shard_key_place): only its own
 *      placements are its to change. Its own placements are bounded: past OWN_MAX the oldest go
 *      back to the ring (never an isolated key).
 *   4. A key over the mean now and in each of the last STEADY hot-key windows, on the worker the ring
 *      gives it now (a window can be older than a move), cannot be split: it is named in the stats,
 *      pinned on its worker, and every other member's weight is multiplied by
 *      ISOLATION_FACTOR, so that worker carries few cold keys (skipped when the ring would pass
 *      ISOLATION_MAX_POINTS). The weights saved then are restored after ISOLATION_CALM rounds in
 *      which the isolated worker held no such key (another worker's may be isolated next), and the
 *      key's pin, if no one had placed it and the user placed no key meanwhile, becomes one of its
 *      own placements. The isolated worker is left out of max and mean, and is no source: instead
 *      each of its other steady hot keys (still its own in the ring: a window can be older than the
 *      last change) heavier than max(threshold - 1, 0.25) times the larger of the mean and the
 *      others' mean goes to the least busy member, whatever its load (another key no worker can
 *      share is better apart). Moves, too, take only keys the ring still gives their worker.
 * A round's moves, unplacements and weights are one ring edit, published as one change: one handoff
 * a round, whose moved keys are only those whose owner the whole round changes. The round plans on a
 * copy of the ring; its edit is refused if the user placed or unplaced a key it touches since
 * (balance_plan.c's as_planned), and the next round plans again.
 *
 * Noise. A job's time is wall time, time its thread was preempted included: with more workers than
 * cores, a job the scheduler interrupted makes a cold key look heavier than a worker's share in one
 * window, and a worker look busy in one interval (4,000 equal keys on 4 workers and 2 shared cores,
 * 5 ms intervals: 300 to 1,100 moves and an isolation, max / mean of jobs 1.3 against 1.02 without
 * a balancer). So nothing acts on one reading. A key is steady once it has been among its worker's
 * hot keys in STEADY = max(rounds, STEADY_MIN) windows in a row (distinct windows: shard__hot_read
 * numbers them, and one read twice counts once), and a move weighs it by the smaller of its last two
 * windows' loads; it is unsplittable only when over the mean in each of those windows. An
 * interrupted job hits another key each time; a hot key stays hot. Thread CPU time would leave
 * preemption out, but also the time a job blocks (load too, by time: blocking jobs are what the
 * balancer by time is for), and a CLOCK_THREAD_CPUTIME_ID read is a system call (1.6 us against
 * 30 ns for CLOCK_MONOTONIC, measured on the 2-core VM of the figures above): not for every job. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "balance.h"
#include "balance_internal.h"

static void *balancer_main(void *arg)
{
    struct balancer *b = arg;
    pthread_mutex_lock(&b->lock);
    while (!b->stop) {
        struct timespec at;
        clock_gettime(CLOCK_MONOTONIC, &at);
        uint64_t ns = (uint64_t)at.tv_nsec + (uint64_t)b->cfg.interval_ms * 1000000u;
        at.tv_sec += (time_t)(ns / 1000000000u);
        at.tv_nsec = (long)(ns % 1000000000u);
        while (!b->stop && pthread_cond_timedwait(&b->cond, &b->lock, &at) != ETIMEDOUT)
            ;
        if (b->stop)
            break;
        pthread_mutex_unlock(&b->lock);
        shard__balance_round(b);
        pthread_mutex_lock(&b->lock);
    }
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

int shard__balance_check(const struct shard_config *cfg)
{
    const struct shard_balance_config *c = &cfg->balance;
    return c->interval_ms && c->threshold != 0 && !(c->threshold >= 1.0) ? -EINVAL : 0;
}

void shard__balance_defaults(struct shard_config *cfg)
{
    struct shard_balance_config *c = &cfg->balance;
    if (!c->interval_ms)
        return;
    if (c->threshold == 0)
        c->threshold = 1.15;
    if (!c->rounds)
        c->rounds = 3;
    if (!c->max_moves)
        c->max_moves = 8;
    if (!cfg->hot_keys)
        cfg->hot_keys = 16;
    if (!cfg->hot_window_ms)
        cfg->hot_window_ms = c->interval_ms;
}

int shard__balance_start(shard_dispatcher *d)
{
    if (!d->cfg.balance.interval_ms)
        return 0;
    struct balancer *b = calloc(1, sizeof *b);
    if (!b)
        return -ENOMEM;
    b->d = d;
    b->cfg = d->cfg.balance;
    b->seen = b->buf[0];
    b->spare = b->buf[1];
    b->steady = b->cfg.rounds > STEADY_MIN ? b->cfg.rounds : STEADY_MIN;
    pthread_mutex_init(&b->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&b->thread, NULL, balancer_main, b) != 0) {
        pthread_cond_destroy(&b->cond);
        pthread_mutex_destroy(&b->lock);
        free(b);
        return -EAGAIN;
    }
    d->balancer = b;
    return 0;
}

void shard__balance_stop(shard_dispatcher *d)
{
    struct balancer *b = d->balancer;
    if (!b)
        return;
    pthread_mutex_lock(&b->lock);
    b->stop = true;
    pthread_cond_signal(&b->cond);
    pthread_mutex_unlock(&b->lock);
    pthread_join(b->thread, NULL);
}

void shard__balance_free(shard_dispatcher *d)
{
    struct balancer *b = d->balancer;
    if (!b)
        return;
    pthread_cond_destroy(&b->cond);
    pthread_mutex_destroy(&b->lock);
    free(b);
    d->balancer = NULL;
}
