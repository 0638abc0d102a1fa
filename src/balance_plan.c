/* A balancer round's decisions (balance.c's head: the policy's steps 2 to 4): moves of hot keys, an
 * isolation and its end, the bound on its own placements, all applied as one ring edit.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "balance_internal.h"
#include "check.h"
#include "membership.h"

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

/* The XXH3 of the worker hash is pinned on in r; 0: none. */
static uint64_t pin_hash(const shard_ring *r, uint64_t hash)
{
    const char *at = shard_ring_pin_of(r, hash);
    return at ? name_hash(at) : 0;
}

/* What the balancer's records say hash is pinned on in a ring that matches them: its own placement's
 * worker (the XXH3 of its name), or 0 for a key it did not place. */
static uint64_t recorded_pin(const struct balancer *b, uint64_t hash)
{
    long at = own_index(b, hash);
    return at >= 0 ? b->own_to[at] : 0;
}

/* Whether the user placed hash (pinned in r, and not by the balancer). */
static bool user_placed(const struct balancer *b, const shard_ring *r, uint64_t hash)
{
    return shard_ring_pin_of(r, hash) && own_index(b, hash) < 0;
}

/* Plans moving w's hot key i to v (p's next move): the loads follow, and the key leaves w's list. */
static void plan_move(struct member *w, long i, struct member *v, struct plan *p)
{
    double l = w->steady[i];
    p->hash[p->nmoves] = w->hot[i].hash;
    p->to[p->nmoves++] = v->s->name;
    w->load -= l;
    v->load += l;
    w->hot[i] = w->hot[w->nhot - 1];
    w->hot_load[i] = w->hot_load[w->nhot - 1];
    w->heavy[i] = w->heavy[w->nhot - 1];
    w->steady[i] = w->steady[--w->nhot];
}

/* Whether hash is w's in r: a hot-key window can be older than the last change (a window longer than
 * the interval, or read again), and list a key the balancer has moved away already. */
static bool still_on(const shard_ring *r, const struct member *w, uint64_t hash)
{
    const char *at = shard_ring_owner_of_hash(r, hash);
    return at && strcmp(at, w->s->name) == 0;
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
                user_placed(b, r, w->hot[i].hash) || !still_on(r, w, w->hot[i].hash))
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
    plan_move(w, pick, v, p);
    return true;
}

/* Whether every key p moves, unplaces or isolates is still pinned in r as when the round copied the
 * ring: the round plans on that copy, and the edit applies to the ring in force, which a user's
 * shard_key_place or _unplace may have changed between (counted under ctl, as this edit runs). A key
 * it moves or unplaces was its own placement then (its record's worker) or placed by none (a key the
 * user placed is never planned); the isolated one, as p says. Unchecked, a move replaced a placement
 * the user had just made and took it for its own, an unplacement removed it, an isolation pinned the
 * key back over it (a review). */
static bool as_planned(const struct plan *p, const shard_ring *r)
{
    for (uint32_t i = 0; i < p->nmoves + p->nunpins; i++) {
        uint64_t hash = i < p->nmoves ? p->hash[i] : p->unpin[i - p->nmoves];
        if (pin_hash(r, hash) != recorded_pin(p->b, hash))
            return false;
    }
    return !p->isolate || pin_hash(r, p->isolated_hash) == p->isolated_pin;
}

/* Applies a plan to a clone of the ring (shard__membership_edit's edit). */
static int apply_plan(shard_ring *r, const void *ctx, bool *changed)
{
    const struct plan *p = ctx;
    if (p->b && !as_planned(p, r))
        return -EAGAIN; /* b's records are as they were: the next round plans again */
    int err = 0;
    /* Each still pinned where its record says (as_planned): a worker gone since took its pins with
     * it, and the edit was refused. */
    for (uint32_t i = 0; i < p->nunpins && !err; i++) {
        err = shard_ring_unpin(r, p->unpin[i]);
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
        *p->isolated_unplaced = !shard_ring_pin_of(r, p->isolated_hash);
        *p->isolated_places = atomic_load_explicit(p->places, memory_order_relaxed);
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
    /* Only the weights the isolation set (ISOLATION_FACTOR times the saved one): one the user set
     * meanwhile (shard_worker_set_weight) is the user's, and the isolated worker's was never changed. */
    for (size_t i = 0; i < p->nrestore && !err; i++) {
        uint32_t now = shard_ring_weight(r, p->restore[i].name);
        if (now == (uint64_t)p->restore[i].weight * ISOLATION_FACTOR) {
            err = shard_ring_set_weight(r, p->restore[i].name, p->restore[i].weight);
            *changed |= !err;
        }
    }
    if (p->end_worker && !err) {
        /* Under ctl, where user placements are counted (ring_edit.c): one since the isolation began
         * may have placed the key where the isolation pinned it, which the ring cannot tell apart. */
        const char *at = shard_ring_pin_of(r, p->end_hash);
        bool ours = at && strcmp(at, p->end_worker) == 0 &&
                    atomic_load_explicit(p->places, memory_order_relaxed) == p->places_seen;
        if (ours && !p->end_room) {
            err = shard_ring_unpin(r, p->end_hash);
            *changed |= !err;
        }
        *p->adopt = ours && p->end_room && !err;
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

/* The key has cooled: the weights return to what they were, and its worker takes cold keys again. Its
 * pin of the key, if no one had placed the key before, it is still where it pinned it and the user has
 * placed or unplaced no key since the isolation began, becomes one of its own placements (moved again
 * or sent back to the ring as they are); were it left as it is, every later round would take it for
 * the user's and never move it. With OWN_MAX of them already, it goes back to the ring in the same
 * change. Return: 1 when it did (the stats count isolations begun and ended). */
static uint64_t end_isolation(struct balancer *b)
{
    bool adopt = false;
    struct plan p = { .restore = b->saved, .nrestore = b->nsaved, .places = &b->d->user_places,
                      .end_hash = b->isolated_hash, .places_seen = b->isolated_places,
                      .end_room = b->nown < OWN_MAX, .adopt = &adopt };
    if (b->isolated_unplaced && own_index(b, b->isolated_hash) < 0)
        p.end_worker = b->isolated; /* the question is asked only then */
    if (shard__membership_edit(b->d, apply_plan, &p) != 0)
        return 0;
    if (adopt) {
        b->own_to[b->nown] = name_hash(b->isolated);
        b->own[b->nown++] = b->isolated_hash;
    }
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
        if (pin_hash(r, b->own[i]) != b->own_to[i])
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
    bool        isolated_holds; /* the isolated worker has such a key (its isolation is still needed) */
    long        isolated;     /* the member isolated for such a key, or -1 */
    double      target;       /* what each other member should carry */
};

/* Unsplittable: over the mean now and in each of the last STEADY windows (Noise, above), and still
 * its worker's in r: a window can be older than the last change (a key the balancer or the user moved
 * away, or a change of members or weights, leaves it listed where it was), and an isolation on that
 * worker would pin the key back there, where it no longer runs: over the user's placement, or making
 * the pin nobody's (the key's record named the worker it had been moved to). The members' hot keys are
 * read (shard__balance_read_hot) before. */
static void find_unsplittable(const struct balancer *b, const shard_ring *r, const struct member *m, struct round *rd)
{
    for (long i = 0; i < rd->n; i++) {
        for (long k = 0; k < m[i].nhot; k++) {
            bool unsplittable = m[i].heavy[k] >= b->steady && m[i].hot_load[k] > rd->mean &&
                                still_on(r, &m[i], m[i].hot[k].hash);
            if (unsplittable && b->isolated[0] && strcmp(m[i].s->name, b->isolated) == 0)
                rd->isolated_holds = true;
            if (unsplittable && m[i].hot_load[k] > rd->unsplittable_load) {
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

/* The least busy member, the isolated one left out. */
static struct member *least_busy(struct member *m, const struct round *rd)
{
    struct member *v = NULL;
    for (long i = 0; i < rd->n; i++)
        if (i != rd->isolated && (!v || m[i].load < v->load))
            v = &m[i];
    return v;
}

/* The worker isolated for a key carries that key and little else: each other steady hot key of it,
 * still its own in the ring and heavier than a slack (below), goes to the least busy member, whatever
 * its load (two keys no worker can share are better apart), unless the user placed it. The isolated
 * worker is no source and a key over the mean is never moved otherwise, so such a key would stay with
 * it (three hot keys on one worker, the first isolated and the ring's new weights leaving the other
 * two where they were). Return: the moves planned. */
static uint64_t plan_shed(struct balancer *b, const shard_ring *r, struct member *m, const struct round *rd,
                          struct plan *p)
{
    if (rd->isolated < 0)
        return 0;
    struct member *w = &m[rd->isolated];
    /* Not (threshold - 1) times the target alone: the target is 0 when the others were idle (a
     * submitter blocked on the isolated worker's full queue), and a threshold may be 1.0; either made
     * every steady key of the isolated worker "heavy" (by time, cold keys moved every few rounds for
     * good). At least a quarter of the mean share. */
    double share = rd->target > rd->mean ? rd->target : rd->mean;
    double slack = (b->cfg.threshold - 1 > 0.25 ? b->cfg.threshold - 1 : 0.25) * share;
    uint64_t moves = 0;
    for (long i = 0; i < w->nhot && moves < b->cfg.max_moves && p->nmoves < SHARD_MAX_HOT_KEYS;) {
        struct member *v = least_busy(m, rd);
        if (!v || w->steady[i] <= slack || w->hot[i].hash == b->isolated_hash ||
            user_placed(b, r, w->hot[i].hash) || !still_on(r, w, w->hot[i].hash)) {
            i++;
            continue;
        }
        plan_move(w, i, v, p); /* the list's last key takes its place: i again */
        moves++;
    }
    return moves;
}

/* From the busiest of the workers over the threshold all those intervals, to the least busy, up to
 * max_moves keys a round (done of them planned already). Return: the moves planned. */
static uint64_t plan_moves(struct balancer *b, const shard_ring *r, struct member *m, const struct round *rd,
                           struct plan *p, uint64_t done)
{
    uint64_t moves = 0;
    for (uint64_t k = done; k < b->cfg.max_moves; k++) {
        struct member *w = NULL, *v = least_busy(m, rd);
        for (long i = 0; i < rd->n; i++)
            if (i != rd->isolated && m[i].source && (!w || m[i].load > w->load))
                w = &m[i];
        if (!w || w == v || w->load <= b->cfg.threshold * rd->target || !move_one(b, r, w, v, rd->target, p))
            break;
        moves++;
    }
    return moves;
}

/* Whether hash is the key of the isolation in force, or of the one p begins. */
static bool isolated_key(const struct balancer *b, const struct plan *p, uint64_t hash)
{
    return (b->isolated[0] && hash == b->isolated_hash) || (p->isolate && hash == p->isolated_hash);
}

/* Whether hash is one of p's moves. */
static bool moved_by(const struct plan *p, uint64_t hash)
{
    for (uint32_t i = 0; i < p->nmoves; i++)
        if (p->hash[i] == hash)
            return true;
    return false;
}

/* Its placements stay bounded: a key it moves again is no longer its old placement, and past OWN_MAX
 * the oldest go back to the ring in the same change, but not an isolated key, which one of them may
 * be (moved, then grown heavier than a share): sent back to the ring, where the other workers' weights
 * are ISOLATION_FACTOR times the isolated one's, it would leave the worker isolated for it, and land
 * among another's cold keys. Plans only: b's records follow when the edit is applied (commit_plan), so
 * an edit that fails (a worker gone meanwhile, no memory) leaves them as the ring still is; dropped
 * before, a key moved in a failed edit kept its pin and lost its record, and was taken for the user's
 * for good (a review). */
static void plan_own_bound(const struct balancer *b, struct plan *p)
{
    /* Each commit leaves at most OWN_MAX, so the unpins are at most the moves (SHARD_MAX_HOT_KEYS,
     * p->unpin's size); and a plan never both moves and isolates a key (moves take no key over the
     * mean, which an unsplittable one is in each of its last windows). */
    SHARD_CHECK(b->nown <= OWN_MAX);
    SHARD_CHECK(!p->isolate || !moved_by(p, p->isolated_hash));
    uint32_t stay = b->nown;
    for (uint32_t i = 0; i < p->nmoves; i++)
        stay -= own_index(b, p->hash[i]) >= 0;
    uint32_t over_cap = stay + p->nmoves > OWN_MAX ? stay + p->nmoves - OWN_MAX : 0;
    for (uint32_t i = 0; p->nunpins < over_cap && i < b->nown; i++)
        if (!isolated_key(b, p, b->own[i]) && !moved_by(p, b->own[i]))
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
    for (uint32_t i = 0; i < p->nunpins; i++) {
        long at = own_index(b, p->unpin[i]);
        SHARD_CHECK(at >= 0); /* each one of its own (plan_own_bound) */
        if (at >= 0)
            own_drop(b, (uint32_t)at);
    }
    for (uint32_t i = 0; i < p->nmoves; i++) {
        long at = own_index(b, p->hash[i]); /* placed again: its old record goes */
        if (at >= 0)
            own_drop(b, (uint32_t)at);
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
        b->isolated_unplaced = *p->isolated_unplaced;
        b->isolated_places = *p->isolated_places;
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
    for (long i = 0; i < rd->n; i++)
        shard__balance_read_hot(b, &m[i], rd->mean);
    find_unsplittable(b, r, m, rd);
    if (rd->isolated_holds)
        b->calm = 0;
    if (!rd->isolated_holds && b->isolated[0] && ++b->calm >= ISOLATION_CALM) {
        report(b, rd->ratio, 0, 0, 0, end_isolation(b));
        return;
    }
    double share = rd->total > 0 ? rd->unsplittable_load / rd->total : 0;
    bool over = judge_members(b, m, rd);
    bool isolate = rd->holder && !b->isolated[0] && isolation_fits(r, rd->holder);
    struct plan p = { .b = b };
    bool iso_unplaced = false;
    uint64_t iso_places = 0;
    uint64_t moves = plan_shed(b, r, m, rd, &p);
    if (over)
        moves += plan_moves(b, r, m, rd, &p, moves);
    /* A key no worker can share: its worker keeps it (pinned) and sends its cold keys away (the
     * others' weights times ISOLATION_FACTOR), until the key cools. In the same change as the moves. */
    if (isolate) {
        p.isolate = rd->holder;
        p.isolated_hash = rd->unsplittable;
        p.isolated_pin = pin_hash(r, rd->unsplittable);
        p.places = &b->d->user_places;
        p.isolated_unplaced = &iso_unplaced;
        p.isolated_places = &iso_places;
        save_weights(b, r);
    }
    plan_own_bound(b, &p);
    bool applied = (p.nmoves || p.isolate || p.nunpins) && commit_plan(b, m, rd, &p);
    report(b, rd->ratio, rd->unsplittable, share, applied ? moves : 0, applied && p.isolate);
}

void shard__balance_round(struct balancer *b)
{
    struct round rd = { .n = shard__balance_measure(b, b->m) };
    shard_ring *r;
    if (rd.n < 2 || shard_dispatcher_ring(b->d, &r) != 0)
        return;
    round_on(b, b->m, r, &rd);
    shard_ring_destroy(r);
}
