/* The balancer (dispatcher.h: struct shard_balance_config): a thread that, when the load of the ring's
 * workers stays skewed, places hot keys on less busy workers and reshapes weights around a key that
 * no worker can share. It changes the ring only through shard__membership_edit, as add and remove
 * do, so every move has the handoff's guarantees. SPDX-License-Identifier: LGPL-2.1-or-later
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
 *      back to the ring.
 *   4. A key over the mean now and in each of the last STEADY hot-key windows cannot be split: it is
 *      named in the stats, pinned on its worker, and every other member's weight is multiplied by
 *      ISOLATION_FACTOR, so that worker carries few cold keys (skipped when the ring would pass
 *      ISOLATION_MAX_POINTS). The weights saved then are restored after ISOLATION_CALM rounds
 *      without such a key. The isolated worker is left out of max and mean.
 * A round's moves, unplacements and weights are one ring edit, published as one change: one handoff
 * a round, whose moved keys are only those whose owner the whole round changes.
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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "balance.h"
#include "dispatcher_internal.h"
#include "membership.h"
#include "stats.h"

#define MAX_MEMBERS 128 /* workers it looks at: the first this many ring members by name */
#define OWN_MAX     1024 /* keys it keeps placed; beyond, the oldest go back to the ring */
#define ISOLATION_FACTOR     8       /* the other members' weights during an isolation, times theirs */
#define ISOLATION_MAX_POINTS (1u << 22) /* no isolation that would make the ring larger than this */
#define ISOLATION_CALM       20      /* rounds without an unsplittable key before weights return */
#define STEADY_MIN           2       /* hot-key windows in a row, at least, before a key is acted on */

/* A hot key of a member over the hot-key windows it read, loads in units of the round's mean. */
struct track {
    uint64_t hash;
    uint32_t listed; /* windows in a row in which it was among the member's hot keys */
    uint32_t heavy;  /* windows in a row in which its load was over the mean */
    float    last;   /* its load in the last of them */
    float    low;    /* the smaller of its loads in the last two (the last alone when listed once) */
};

/* A member as the balancer remembers it from round to round. */
struct seen {
    char         name[SHARD_NAME_MAX + 1];
    uint64_t     counter; /* busy_ns or executed, as last read */
    uint32_t     over;    /* intervals in a row its load was over threshold times the target */
    uint64_t     window;  /* the number of the hot-key window it read last (0: none) */
    uint32_t     ntrack;
    struct track track[SHARD_MAX_HOT_KEYS]; /* the hot keys of that window; only ntrack are copied */
};

struct member {
    struct seen *s;   /* its record, in the balancer's seen */
    double       load; /* over the last interval */
    struct shard_hot_key hot[SHARD_MAX_HOT_KEYS];
    double       hot_load[SHARD_MAX_HOT_KEYS]; /* each hot key's share of the worker's last window,
                                                * times the worker's load over the interval */
    double       steady[SHARD_MAX_HOT_KEYS];   /* its load as a move sees it (track.low times the
                                                * mean); 0 for a key not yet steady */
    uint32_t     heavy[SHARD_MAX_HOT_KEYS];    /* track.heavy */
    long         nhot;
    bool         source; /* over the threshold `rounds` intervals in a row: keys may leave it */
};

struct saved_weight {
    char     name[SHARD_NAME_MAX + 1];
    uint32_t weight;
};

/* A round's decisions, applied as one ring edit: one change, one handoff, however many moves. */
struct plan {
    uint32_t    nmoves, nunpins;
    uint64_t    hash[SHARD_MAX_HOT_KEYS];
    const char *to[SHARD_MAX_HOT_KEYS];
    uint64_t    unpin[SHARD_MAX_HOT_KEYS]; /* its oldest own placements, past OWN_MAX */
    /* Isolation: pin isolated_hash on isolate, multiply every other member's weight by
     * ISOLATION_FACTOR; or, restore, set the weights saved when it began. */
    const char *isolate;
    uint64_t    isolated_hash;
    const struct saved_weight *restore;
    size_t      nrestore;
};

/* Fields: I set at start; "lock" under lock; every other field the balancer thread's alone. */
struct balancer {
    shard_dispatcher           *d;
    struct shard_balance_config cfg;
    pthread_t                   thread;
    pthread_mutex_t             lock;
    pthread_cond_t              cond;
    bool                        stop;  /* lock */
    /* The keys it placed, oldest first: only these it moves again or unplaces; a user's placement
     * (shard_key_place) is left alone. */
    uint64_t                    own[OWN_MAX + SHARD_MAX_HOT_KEYS];
    uint64_t                    own_to[OWN_MAX + SHARD_MAX_HOT_KEYS]; /* XXH3 of the worker it chose */
    uint32_t                    nown;
    /* An isolation in force: the worker, its key, and every member's weight before it. */
    char                        isolated[SHARD_NAME_MAX + 1]; /* "" when none */
    uint64_t                    isolated_hash;
    struct saved_weight         saved[MAX_MEMBERS];
    size_t                      nsaved;
    uint32_t                    calm; /* rounds since it last saw an unsplittable key */
    /* The members of the last round, in one of two buffers: each round copies every member's record
     * from the one into the other (by name: the members may have changed), then swaps them. */
    struct seen                *seen, *spare;
    size_t                      nseen;
    uint32_t                    steady; /* I: STEADY, max(cfg.rounds, STEADY_MIN) */
    /* The balancer thread's scratch, with buf: about 1 MiB, only while it is on, of which a round
     * touches a few KiB a member. */
    struct seen                 buf[2][MAX_MEMBERS];
    struct shard_worker_stats   st[MAX_MEMBERS];
    struct member               m[MAX_MEMBERS];
};

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
static long measure(struct balancer *b, struct member *m)
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
static void read_hot(struct balancer *b, struct member *m, double mean)
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

static long own_index(const struct balancer *b, uint64_t hash)
{
    for (uint32_t i = 0; i < b->nown; i++)
        if (b->own[i] == hash)
            return i;
    return -1;
}

static void own_drop(struct balancer *b, uint32_t i)
{
    memmove(&b->own[i], &b->own[i + 1], (b->nown - i - 1) * sizeof *b->own);
    memmove(&b->own_to[i], &b->own_to[i + 1], (b->nown - i - 1) * sizeof *b->own_to);
    b->nown--;
}

static uint64_t name_hash(const char *name)
{
    return XXH3_64bits(name, strlen(name));
}

/* Whether the user placed hash (pinned in r, and not by the balancer). */
static bool user_placed(const struct balancer *b, const shard_ring *r, uint64_t hash)
{
    return shard_ring_pin_of(r, hash) && own_index(b, hash) < 0;
}

/* Plans moving one of w's steady hot keys to v: never one heavier than the mean, the isolated one, or
 * one the user placed. Return: whether it did. */
static bool move_one(struct balancer *b, const shard_ring *r, struct member *w, struct member *v, double mean,
                     struct plan *p)
{
    double gap = w->load - v->load, best = -1;
    long pick = -1;
    for (int pass = 0; pass < 2 && pick < 0; pass++) {
        for (long i = 0; i < w->nhot; i++) {
            double l = w->steady[i];
            if (l <= 0 || l > mean || (b->isolated[0] && w->hot[i].hash == b->isolated_hash) ||
                user_placed(b, r, w->hot[i].hash))
                continue;
            /* First pass: the heaviest within half the gap (narrows it most without overshooting);
             * second: the lightest that still lowers the maximum. */
            bool ok = pass == 0 ? l <= gap / 2 && l > best : v->load + l < w->load && (pick < 0 || l < best);
            if (ok) {
                best = l;
                pick = i;
            }
        }
    }
    if (pick < 0 || p->nmoves == SHARD_MAX_HOT_KEYS)
        return false;
    p->hash[p->nmoves] = w->hot[pick].hash;
    p->to[p->nmoves++] = v->s->name;
    w->load -= best;
    v->load += best;
    w->hot[pick] = w->hot[w->nhot - 1];
    w->hot_load[pick] = w->hot_load[w->nhot - 1];
    w->heavy[pick] = w->heavy[w->nhot - 1];
    w->steady[pick] = w->steady[--w->nhot];
    return true;
}

/* Applies a plan to a clone of the ring (shard__membership_edit's edit). */
static int apply_plan(shard_ring *r, const void *ctx, bool *changed)
{
    const struct plan *p = ctx;
    int err = 0;
    for (uint32_t i = 0; i < p->nunpins && !err; i++) {
        err = shard_ring_unpin(r, p->unpin[i]);
        if (err == -ENOENT)
            err = 0; /* its worker left: the pin went with it */
        else
            *changed |= !err;
    }
    for (uint32_t i = 0; i < p->nmoves && !err; i++) {
        const char *now = shard_ring_pin_of(r, p->hash[i]);
        if (now && strcmp(now, p->to[i]) == 0)
            continue;
        err = shard_ring_pin(r, p->hash[i], p->to[i]);
        *changed |= !err;
    }
    if (p->isolate && !err) {
        err = shard_ring_pin(r, p->isolated_hash, p->isolate);
        *changed |= !err;
        for (size_t i = 0; i < shard_ring_member_count(r) && !err; i++) {
            const char *name = shard_ring_member(r, i);
            if (strcmp(name, p->isolate) == 0)
                continue;
            err = shard_ring_set_weight(r, name, shard_ring_weight(r, name) * ISOLATION_FACTOR);
            *changed |= !err;
        }
    }
    for (size_t i = 0; i < p->nrestore && !err; i++) {
        uint32_t now = shard_ring_weight(r, p->restore[i].name);
        if (now && now != p->restore[i].weight) {
            err = shard_ring_set_weight(r, p->restore[i].name, p->restore[i].weight);
            *changed |= !err;
        }
    }
    return err;
}

/* Whether an isolation of holder would keep the ring under ISOLATION_MAX_POINTS. A member has vnodes
 * points a unit of weight, so the points after are the points now scaled by the weights after. */
static bool isolation_fits(const shard_ring *r, const char *holder)
{
    uint64_t weight = 0, after = 0;
    for (size_t i = 0; i < shard_ring_member_count(r); i++) {
        const char *name = shard_ring_member(r, i);
        uint64_t w = shard_ring_weight(r, name);
        weight += w;
        after += strcmp(name, holder) == 0 ? w : w * ISOLATION_FACTOR;
    }
    return weight && shard_ring_point_count(r) / weight * after <= ISOLATION_MAX_POINTS;
}

static void save_weights(struct balancer *b, const shard_ring *r)
{
    b->nsaved = 0;
    for (size_t i = 0; i < shard_ring_member_count(r) && b->nsaved < MAX_MEMBERS; i++) {
        const char *name = shard_ring_member(r, i);
        snprintf(b->saved[b->nsaved].name, sizeof b->saved[0].name, "%s", name);
        b->saved[b->nsaved++].weight = shard_ring_weight(r, name);
    }
}

/* The key has cooled: the weights return to what they were, and its worker takes cold keys again.
 * Return: 1 when it did (the stats count isolations begun and ended). */
static uint64_t end_isolation(struct balancer *b)
{
    struct plan p = { .restore = b->saved, .nrestore = b->nsaved };
    if (shard__membership_edit(b->d, apply_plan, &p) != 0)
        return 0;
    b->isolated[0] = '\0';
    return 1;
}

static void report(struct balancer *b, double ratio, uint64_t unsplittable, double share, uint64_t moves,
                   uint64_t weights)
{
    struct balance_report *rep = &b->d->balance_report;
    pthread_mutex_lock(&rep->lock);
    rep->rounds++;
    rep->ratio = ratio;
    rep->unsplittable = unsplittable;
    rep->unsplittable_share = share;
    rep->moves += moves;
    rep->weights += weights;
    pthread_mutex_unlock(&rep->lock);
}

/* Its own placements that a departed worker took with it, or that the user placed anew
 * (shard_key_place to another worker, or unplaced), are no longer its. */
static void forget_lost_placements(struct balancer *b, const shard_ring *r)
{
    for (uint32_t i = 0; i < b->nown;) {
        const char *at = shard_ring_pin_of(r, b->own[i]);
        if (!at || name_hash(at) != b->own_to[i])
            own_drop(b, i);
        else
            i++;
    }
}

/* A round's figures, as measured and judged. */
struct round {
    long        n;            /* members measured */
    double      total, mean, ratio;
    uint64_t    unsplittable; /* the heaviest key no worker can share, or 0 */
    double      unsplittable_load;
    const char *holder;       /* its worker, or NULL */
    long        isolated;     /* the member isolated for such a key, or -1 */
    double      target;       /* what each other member should carry */
};

/* Unsplittable: over the mean now and in each of the last STEADY windows (Noise, above). */
static void find_unsplittable(struct balancer *b, struct member *m, struct round *rd)
{
    for (long i = 0; i < rd->n; i++) {
        read_hot(b, &m[i], rd->mean);
        for (long k = 0; k < m[i].nhot; k++) {
            if (m[i].heavy[k] >= b->steady && m[i].hot_load[k] > rd->mean &&
                m[i].hot_load[k] > rd->unsplittable_load) {
                rd->unsplittable = m[i].hot[k].hash;
                rd->unsplittable_load = m[i].hot_load[k];
                rd->holder = m[i].s->name;
            }
        }
    }
}

/* The worker isolated for an unsplittable key is as good as it gets: the others are balanced among
 * themselves (their mean is what they should each carry). Then each worker's own count of intervals
 * over the threshold in a row: a worker that the scheduler made look busy in one interval is rarely
 * the one it makes look busy in the next. Return: whether some worker is a source now. */
static bool judge_members(struct balancer *b, struct member *m, struct round *rd)
{
    double others = rd->total;
    rd->isolated = -1;
    for (long i = 0; b->isolated[0] && i < rd->n; i++) {
        if (strcmp(m[i].s->name, b->isolated) == 0) {
            rd->isolated = i;
            others -= m[i].load;
        }
    }
    rd->target = rd->isolated >= 0 && rd->n > 2 ? others / (double)(rd->n - 1) : rd->mean;
    bool over = false;
    for (long i = 0; i < rd->n; i++) {
        bool now = i != rd->isolated && rd->target > 0 && m[i].load > b->cfg.threshold * rd->target;
        m[i].s->over = now ? m[i].s->over + 1 : 0;
        m[i].source = m[i].s->over >= b->cfg.rounds;
        over |= m[i].source;
    }
    return over;
}

/* From the busiest of the workers over the threshold all those intervals, to the least busy, at most
 * max_moves keys. Return: the moves planned. */
static uint64_t plan_moves(struct balancer *b, const shard_ring *r, struct member *m, const struct round *rd,
                           struct plan *p)
{
    uint64_t moves = 0;
    for (uint32_t k = 0; k < b->cfg.max_moves; k++) {
        struct member *w = NULL, *v = NULL;
        for (long i = 0; i < rd->n; i++) {
            if (i == rd->isolated)
                continue;
            if (m[i].source && (!w || m[i].load > w->load))
                w = &m[i];
            if (!v || m[i].load < v->load)
                v = &m[i];
        }
        if (!w || w == v || w->load <= b->cfg.threshold * rd->target || !move_one(b, r, w, v, rd->target, p))
            break;
        moves++;
    }
    return moves;
}

/* Its placements stay bounded: a key it moves again is no longer its old placement, and past OWN_MAX
 * the oldest go back to the ring in the same change. */
static void plan_own_bound(struct balancer *b, struct plan *p)
{
    for (uint32_t i = 0; i < p->nmoves; i++) {
        long at = own_index(b, p->hash[i]);
        if (at >= 0)
            own_drop(b, (uint32_t)at);
    }
    uint32_t over_cap = b->nown + p->nmoves > OWN_MAX ? b->nown + p->nmoves - OWN_MAX : 0;
    for (uint32_t i = 0; i < over_cap && i < b->nown; i++)
        p->unpin[p->nunpins++] = b->own[i];
}

/* The plan, applied as one change; on success the balancer's own records follow it. Return: whether
 * it was applied. */
static bool commit_plan(struct balancer *b, struct member *m, const struct round *rd, const struct plan *p)
{
    if (shard__membership_edit(b->d, apply_plan, p) != 0)
        return false;
    /* What it changed shows in the next interval's figures, not in these: count again. */
    for (long i = 0; i < rd->n; i++)
        m[i].s->over = 0;
    for (uint32_t i = 0; i < p->nunpins; i++)
        own_drop(b, 0);
    for (uint32_t i = 0; i < p->nmoves; i++) {
        b->own_to[b->nown] = name_hash(p->to[i]);
        b->own[b->nown++] = p->hash[i];
    }
    if (p->isolate) {
        /* A member's name, at most SHARD_NAME_MAX bytes (ring.c checks it); copied by length, which
         * GCC can see is bounded where it cannot for "%s". */
        size_t len = strnlen(p->isolate, sizeof b->isolated - 1);
        memcpy(b->isolated, p->isolate, len);
        b->isolated[len] = '\0';
        b->isolated_hash = p->isolated_hash;
    }
    return true;
}

/* One round on the ring r in force, with the members measured: judge, plan, apply, report. */
static void round_on(struct balancer *b, struct member *m, const shard_ring *r, struct round *rd)
{
    forget_lost_placements(b, r);
    double max = 0;
    for (long i = 0; i < rd->n; i++) {
        rd->total += m[i].load;
        if (m[i].load > max)
            max = m[i].load;
    }
    rd->mean = rd->total / (double)rd->n;
    rd->ratio = rd->mean > 0 ? max / rd->mean : 1;
    /* A trickle is noise, not skew: under 5 % busy (100 jobs a worker), nothing is decided but the
     * end of an isolation whose key has gone quiet. */
    double floor = b->cfg.by_jobs ? 100.0 * (double)rd->n : 0.05 * (double)b->cfg.interval_ms * 1e6 * (double)rd->n;
    if (rd->total < floor) {
        for (long i = 0; i < rd->n; i++)
            m[i].s->over = 0;
        uint64_t weights = b->isolated[0] && ++b->calm >= ISOLATION_CALM ? end_isolation(b) : 0;
        report(b, rd->ratio, 0, 0, 0, weights);
        return;
    }
    find_unsplittable(b, m, rd);
    if (rd->holder)
        b->calm = 0;
    if (!rd->holder && b->isolated[0] && ++b->calm >= ISOLATION_CALM) {
        report(b, rd->ratio, 0, 0, 0, end_isolation(b));
        return;
    }
    double share = rd->total > 0 ? rd->unsplittable_load / rd->total : 0;
    bool over = judge_members(b, m, rd);
    bool isolate = rd->holder && !b->isolated[0] && isolation_fits(r, rd->holder);
    if (!over && !isolate) {
        report(b, rd->ratio, rd->unsplittable, share, 0, 0);
        return;
    }
    struct plan p = { 0 };
    uint64_t moves = over ? plan_moves(b, r, m, rd, &p) : 0;
    /* A key no worker can share: its worker keeps it (pinned) and sends its cold keys away (the
     * others' weights times ISOLATION_FACTOR), until the key cools. In the same change as the moves. */
    if (isolate) {
        p.isolate = rd->holder;
        p.isolated_hash = rd->unsplittable;
        save_weights(b, r);
    }
    plan_own_bound(b, &p);
    bool applied = (p.nmoves || p.isolate || p.nunpins) && commit_plan(b, m, rd, &p);
    report(b, rd->ratio, rd->unsplittable, share, applied ? moves : 0, applied && p.isolate);
}

static void round_once(struct balancer *b)
{
    struct round rd = { .n = measure(b, b->m) };
    shard_ring *r;
    if (rd.n < 2 || shard_dispatcher_ring(b->d, &r) != 0)
        return;
    round_on(b, b->m, r, &rd);
    shard_ring_destroy(r);
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
