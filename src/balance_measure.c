/* What each member did in an interval, as the balancer reads it: its load, and its hot keys tracked over
 * windows (balance.c's head: the policy's step 1 and Noise). SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <string.h>

#include "balance_internal.h"
#include "stats.h"

/* By jobs, what a worker was given: jobs run plus jobs waiting, so that a worker the scheduler starved
 * in an interval does not look idle (and attract keys) for it. By time, its time in jobs. */
static uint64_t counter_of(const struct balancer *b, const struct shard_worker_stats *st)
{
    return b->cfg.by_jobs ? st->executed + st->queued : st->busy_ns;
}

static const struct seen *find_seen(const struct balancer *b, const char *name)
{
    for (size_t i = 0; i < b->nseen; i++)
        if (strcmp(b->seen[i].name, name) == 0)
            return &b->seen[i];
    return NULL;
}

/* The members' loads over the interval into m, each with its record carried over from the last round.
 * Return: how many, or -1 when one is new (no baseline). */
long shard__balance_measure(struct balancer *b, struct member *m)
{
    struct shard_worker_stats *st = b->st;
    long n = shard_dispatcher_worker_stats(b->d, st, MAX_MEMBERS), k = 0;
    bool fresh = false;
    for (long i = 0; i < n && i < MAX_MEMBERS; i++) {
        if (st[i].state != SHARD_WORKER_RUNNING) /* ring members only */
            continue;
        const struct seen *old = find_seen(b, st[i].name);
        struct seen *s = &b->spare[k];
        if (old) {
            memcpy(s, old, offsetof(struct seen, track) + old->ntrack * sizeof *old->track);
        } else {
            memset(s, 0, offsetof(struct seen, track));
            snprintf(s->name, sizeof s->name, "%s", st[i].name);
        }
        uint64_t counter = counter_of(b, &st[i]);
        m[k].load = old && counter >= old->counter ? (double)(counter - old->counter) : 0;
        s->counter = counter;
        m[k].s = s;
        fresh |= !old;
        k++;
    }
    struct seen *last = b->seen;
    b->seen = b->spare;
    b->spare = last;
    b->nseen = (size_t)k;
    return fresh ? -1 : k;
}

static const struct track *find_track(const struct seen *s, uint64_t hash)
{
    for (uint32_t i = 0; i < s->ntrack; i++)
        if (s->track[i].hash == hash)
            return &s->track[i];
    return NULL;
}

/* A member's hot keys, with loads in the units of its interval load: a key's share of its worker's
 * last window (whatever the window's length: of the time it surely had, or of its jobs by jobs) times
 * the worker's load. A window it has not read before extends each key's record (a key missing from
 * it starts again); one it has read keeps them as they are. */
void shard__balance_read_hot(struct balancer *b, struct member *m, double mean)
{
    struct seen *s = m->s;
    uint64_t window = 0, jobs = 0, seq = 0;
    m->nhot = shard__hot_keys_of(b->d, s->name, m->hot, SHARD_MAX_HOT_KEYS, &window, &jobs, &seq);
    if (m->nhot < 0 || window == 0 || jobs == 0)
        m->nhot = 0;
    bool new_window = seq != s->window;
    struct track next[SHARD_MAX_HOT_KEYS];
    for (long k = 0; k < m->nhot; k++) {
        const struct shard_hot_key *h = &m->hot[k];
        double share = b->cfg.by_jobs ? (double)h->jobs / (double)jobs
                                      : (double)(h->busy_ns - h->error_ns) / (double)window;
        m->hot_load[k] = share * m->load;
        const struct track *t = find_track(s, h->hash);
        if (new_window) {
            float rel = mean > 0 ? (float)(m->hot_load[k] / mean) : 0;
            next[k] = (struct track){ .hash = h->hash, .listed = t ? t->listed + 1 : 1, .last = rel,
                                      .heavy = rel > 1 ? (t ? t->heavy + 1 : 1) : 0,
                                      .low = t && t->last < rel ? t->last : rel };
            t = &next[k];
        }
        m->steady[k] = t && t->listed >= b->steady ? (double)t->low * mean : 0;
        m->heavy[k] = t ? t->heavy : 0;
    }
    if (new_window) {
        memcpy(s->track, next, (size_t)m->nhot * sizeof *next);
        s->ntrack = (uint32_t)m->nhot;
        s->window = seq;
    }
}
