/* The balancer (dispatcher.h: struct shard_balance_config): a thread that, when the load of the ring's
 * workers stays skewed, places hot keys on less busy workers and reshapes weights around a key that
 * no worker can share. It only calls the public membership functions, like an operator would, so
 * every move has the handoff's guarantees. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The policy, each interval:
 *   1. load_i: what worker i did in the interval (time in jobs, or jobs run), for the ring's members;
 *      a member it has not seen before skips the round (no baseline yet).
 *   2. ratio = max / mean (reported). An interval in which the workers were busy under 5 % of the time
 *      (or ran under 100 jobs each, by jobs) decides nothing: skew in a trickle is noise. Not over the threshold: the streak ends. Over it `rounds` times
 *      in a row: act, and count again from zero (a move shows in the next interval's figures, not
 *      this one's). A worker isolated for an unsplittable key (step 4) is left out of max and mean.
 *   3. Moves: up to max_moves times, from the busiest worker W to the least busy V, the heaviest of
 *      W's hot keys whose load is at most half the gap (it narrows it most without overshooting), or
 *      failing that the lightest one that still lowers the maximum; the estimates are updated after
 *      each move. A key over the mean stays (moving it moves its overload), and so does an isolated
 *      key (step 4).
 *   4. A key heavier than the mean (a worker's fair share) cannot be split, and is never moved (that
 *      would only move its overload): it is named in the stats, and its worker keeps it (pinned there)
 *      and sends its cold keys away: weight 1 against 64 for every other member, once; the weights
 *      return to equal after ISOLATION_CALM rounds without such a key.
 * A round's moves and weights are one ring edit, published as one change (shard__membership_edit):
 * one handoff a round, whose moved keys are only those whose owner the whole round changes.
 * Hot keys are the workers' own space-saving summaries (hot.c) of the last window, which the
 * balancer's interval sets by default. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "balance.h"
#include "dispatcher_internal.h"
#include "membership.h"
#include "ring_internal.h"

#define MAX_MEMBERS 128 /* workers it looks at: the first this many ring members by name */
#define MAX_WEIGHT  64
#define ISOLATION_CALM 20 /* rounds without an unsplittable key before weights return to equal */

struct seen {
    char     name[SHARD_NAME_MAX + 1];
    uint64_t counter; /* busy_ns or executed, as last read */
};

struct member {
    struct seen at;
    double      load; /* over the last interval */
    struct shard_hot_key hot[SHARD_MAX_HOT_KEYS];
    long        nhot;
};

/* A round's decisions, applied as one ring edit: one change, one handoff, however many moves. */
struct plan {
    uint32_t    nmoves;
    uint64_t    hash[SHARD_MAX_HOT_KEYS];
    const char *to[SHARD_MAX_HOT_KEYS];
    const char *isolate;  /* this member's weight 1, every other member's MAX_WEIGHT, and ... */
    uint64_t    isolated_hash; /* ... this key pinned on it, or the weights would move it too */
    bool        equalise; /* every member's weight 1 */
};

struct balancer {
    shard_dispatcher           *d;
    struct shard_balance_config cfg;
    pthread_t                   thread;
    pthread_mutex_t             lock;
    pthread_cond_t              cond;
    bool                        stop;  /* lock */
    uint32_t                    streak;
    char                        isolated[SHARD_NAME_MAX + 1]; /* whose cold keys it sent away; "" */
    uint64_t                    isolated_hash; /* the key it was for: never moved while isolated */
    uint32_t                    calm; /* rounds since it last saw an unsplittable key */
    struct seen                 seen[MAX_MEMBERS]; /* the members of the last round */
    size_t                      nseen;
    /* The balancer thread's scratch (about 300 KiB, only while it is on). */
    struct shard_worker_stats   st[MAX_MEMBERS];
    struct member               m[MAX_MEMBERS];
    /* lock: what shard_dispatcher_stats reports */
    uint64_t                    rounds, moves, weights, unsplittable;
    double                      ratio, unsplittable_share;
};

static uint64_t counter_of(const struct balancer *b, const struct shard_worker_stats *st)
{
    return b->cfg.by_jobs ? st->executed : st->busy_ns;
}

static double hot_load(const struct balancer *b, const struct shard_hot_key *k)
{
    return b->cfg.by_jobs ? (double)k->jobs : (double)k->busy_ns;
}

static const struct seen *find_seen(const struct balancer *b, const char *name)
{
    for (size_t i = 0; i < b->nseen; i++)
        if (strcmp(b->seen[i].name, name) == 0)
            return &b->seen[i];
    return NULL;
}

/* The members' loads over the interval into m. Return: how many, or -1 when one is new (no baseline). */
static long measure(struct balancer *b, struct member *m)
{
    struct shard_worker_stats *st = b->st;
    long n = shard_dispatcher_worker_stats(b->d, st, MAX_MEMBERS), k = 0;
    bool fresh = false;
    for (long i = 0; i < n && i < MAX_MEMBERS; i++) {
        if (st[i].state != SHARD_WORKER_RUNNING)
            continue;
        const struct seen *old = find_seen(b, st[i].name);
        snprintf(m[k].at.name, sizeof m[k].at.name, "%s", st[i].name);
        m[k].at.counter = counter_of(b, &st[i]);
        m[k].load = old && m[k].at.counter >= old->counter ? (double)(m[k].at.counter - old->counter) : 0;
        fresh |= !old;
        k++;
    }
    for (long i = 0; i < k; i++)
        b->seen[i] = m[i].at;
    b->nseen = (size_t)k;
    return fresh ? -1 : k;
}

/* Plans moving one of w's hot keys to v: never one heavier than the mean, nor the isolated one,
 * which would only take their overload elsewhere. Return: whether it did. */
static bool move_one(struct balancer *b, struct member *w, struct member *v, double mean, struct plan *p)
{
    double gap = w->load - v->load, best = -1;
    long pick = -1;
    for (long i = 0; i < w->nhot; i++) {
        double l = hot_load(b, &w->hot[i]);
        if (w->hot[i].hash == b->isolated_hash && b->isolated[0])
            continue;
        if (l > 0 && l <= gap / 2 && l <= mean && l > best) {
            best = l;
            pick = i;
        }
    }
    for (long i = 0; pick < 0 && i < w->nhot; i++) {
        double l = hot_load(b, &w->hot[i]);
        if (w->hot[i].hash == b->isolated_hash && b->isolated[0])
            continue;
        if (l > 0 && l <= mean && v->load + l < w->load && (pick < 0 || l < best)) {
            best = l;
            pick = i;
        }
    }
    if (pick < 0 || p->nmoves == SHARD_MAX_HOT_KEYS)
        return false;
    p->hash[p->nmoves] = w->hot[pick].hash;
    p->to[p->nmoves++] = v->at.name;
    w->load -= best;
    v->load += best;
    w->hot[pick] = w->hot[--w->nhot];
    return true;
}

/* Applies a plan to a clone of the ring (shard__membership_edit's edit). */
static int apply_plan(shard_ring *r, const void *ctx, bool *changed)
{
    const struct plan *p = ctx;
    int err = 0;
    for (uint32_t i = 0; i < p->nmoves && !err; i++) {
        int64_t now = r->npins ? shard__ring_pinned(r, p->hash[i]) : -1;
        if (now >= 0 && strcmp(r->members[now].name, p->to[i]) == 0)
            continue;
        err = shard_ring_pin(r, p->hash[i], p->to[i]);
        *changed |= !err;
    }
    if (p->isolate && !err) {
        err = shard_ring_pin(r, p->isolated_hash, p->isolate);
        *changed |= !err;
    }
    for (size_t i = 0; (p->isolate || p->equalise) && i < r->nmembers && !err; i++) {
        uint32_t want = p->equalise || strcmp(r->members[i].name, p->isolate) == 0 ? 1 : MAX_WEIGHT;
        if (r->members[i].weight != want) {
            err = shard_ring_set_weight(r, r->members[i].name, want);
            *changed |= !err;
        }
    }
    return err;
}

/* Publishes the plan. Return: the weights it changes (0 on failure). */
static uint64_t apply(struct balancer *b, const struct plan *p, uint64_t *moves)
{
    if (!p->nmoves && !p->isolate && !p->equalise)
        return 0;
    if (shard__membership_edit(b->d, apply_plan, p) != 0) {
        *moves = 0;
        return 0;
    }
    return p->isolate || p->equalise;
}

static void round_once(struct balancer *b)
{
    struct member *m = b->m;
    long n = measure(b, m);
    if (n < 2)
        return;
    double total = 0, max = 0;
    for (long i = 0; i < n; i++) {
        total += m[i].load;
        if (m[i].load > max)
            max = m[i].load;
    }
    double mean = total / (double)n, ratio = mean > 0 ? max / mean : 1;
    uint64_t unsplittable = 0;
    double unsplittable_load = 0;
    const char *holder = NULL;
    for (long i = 0; i < n; i++) {
        m[i].nhot = shard_worker_hot_keys(b->d, m[i].at.name, m[i].hot, SHARD_MAX_HOT_KEYS, NULL);
        if (m[i].nhot < 0)
            m[i].nhot = 0;
        for (long k = 0; k < m[i].nhot; k++) {
            double l = hot_load(b, &m[i].hot[k]);
            if (l > mean && l > unsplittable_load) {
                unsplittable = m[i].hot[k].hash;
                unsplittable_load = l;
                holder = m[i].at.name;
            }
        }
    }
    pthread_mutex_lock(&b->lock);
    b->rounds++;
    b->ratio = ratio;
    b->unsplittable = unsplittable;
    b->unsplittable_share = total > 0 ? unsplittable_load / total : 0;
    pthread_mutex_unlock(&b->lock);
    /* A trickle is noise, not skew: under 5 % busy (100 jobs a worker), nothing is decided. */
    double floor = b->cfg.by_jobs ? 100.0 * (double)n : 0.05 * (double)b->cfg.interval_ms * 1e6 * (double)n;
    if (total < floor) {
        b->streak = 0;
        return;
    }
    /* An isolated worker whose key has cooled gets its cold keys back, after a calm spell. */
    if (holder)
        b->calm = 0;
    if (!holder && b->isolated[0] && ++b->calm >= ISOLATION_CALM) {
        struct plan back = { .equalise = true };
        uint64_t none, w = apply(b, &back, &none);
        b->isolated[0] = '\0';
        pthread_mutex_lock(&b->lock);
        b->weights += w;
        pthread_mutex_unlock(&b->lock);
        return;
    }
    /* The worker isolated for an unsplittable key is as good as it gets: the others are balanced
     * among themselves (their mean is what they should each carry). */
    long isolated = -1;
    double others = total;
    for (long i = 0; b->isolated[0] && i < n; i++) {
        if (strcmp(m[i].at.name, b->isolated) == 0) {
            isolated = i;
            others -= m[i].load;
        }
    }
    double target = isolated >= 0 && n > 2 ? others / (double)(n - 1) : mean, worst = 0;
    for (long i = 0; i < n; i++)
        if (i != isolated && m[i].load > worst)
            worst = m[i].load;
    if (target <= 0 || worst <= b->cfg.threshold * target) {
        b->streak = 0;
        return;
    }
    if (++b->streak < b->cfg.rounds)
        return;
    b->streak = 0;
    uint64_t moves = 0, weights = 0;
    struct plan p = { 0 };
    for (uint32_t k = 0; k < b->cfg.max_moves; k++) {
        struct member *w = NULL, *v = NULL;
        for (long i = 0; i < n; i++) {
            if (i == isolated)
                continue;
            if (!w || m[i].load > w->load)
                w = &m[i];
            if (!v || m[i].load < v->load)
                v = &m[i];
        }
        if (!w || w == v || w->load <= b->cfg.threshold * target || !move_one(b, w, v, target, &p))
            break;
        moves++;
    }
    /* A key no worker can share: its worker keeps it and sends its cold keys away (weight 1 against
     * MAX_WEIGHT: about 1 / (64 (n - 1) + 1) of the ring), once, until the key cools. In the same
     * change as the moves: one handoff. */
    if (holder && strcmp(holder, b->isolated) != 0) {
        p.isolate = holder;
        p.isolated_hash = unsplittable;
        snprintf(b->isolated, sizeof b->isolated, "%s", holder);
        b->isolated_hash = unsplittable;
    }
    weights = apply(b, &p, &moves);
    pthread_mutex_lock(&b->lock);
    b->moves += moves;
    b->weights += weights;
    pthread_mutex_unlock(&b->lock);
}

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
        round_once(b);
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

void shard__balance_stats(shard_dispatcher *d, struct shard_stats *out)
{
    struct balancer *b = d->balancer;
    if (!b)
        return;
    pthread_mutex_lock(&b->lock);
    out->balance_rounds = b->rounds;
    out->balance_moves = b->moves;
    out->balance_weights = b->weights;
    out->balance_ratio = b->ratio;
    out->unsplittable_hash = b->unsplittable;
    out->unsplittable_share = b->unsplittable_share;
    pthread_mutex_unlock(&b->lock);
}
