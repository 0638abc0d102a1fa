/* The balancer's own placements (the keys it placed, which it alone moves again or sends back):
 * past OWN_MAX while an isolation is in force whose key is one of them (a key it moved, then grown
 * heavier than a share), the oldest go back to the ring, but never the isolated key; and an edit that
 * fails leaves its records as the ring still is; a key the user placed or unplaced between a round's
 * plan and its edit stays as the user left it. src/balance_plan.c is compiled in (its plan and
 * commit are static), on a real dispatcher's ring, without the balancer's thread: the test makes each
 * round's plan itself. Linked with the static library, whose copy of the file is then not pulled in. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "balance_plan.c"

#define K 0x5eed5eed5eed5eedull /* the key isolated on w1 */

/* Plans p as a round would, on the ring in force: its balancer, the isolated key's pin, its bound on
 * the balancer's own placements. */
static void plan(struct balancer *b, struct plan *p)
{
    p->b = b;
    if (p->isolate) {
        shard_ring *r;
        cr_assert_eq(shard_dispatcher_ring(b->d, &r), 0);
        p->isolated_pin = pin_hash(r, p->isolated_hash);
        shard_ring_destroy(r);
    }
    plan_own_bound(b, p);
}

/* Whether plan p's edit was applied (its commit). */
static bool commit(struct balancer *b, const struct plan *p)
{
    struct round rd = { .n = 0 };
    return commit_plan(b, NULL, &rd, p);
}

/* Plans and applies p, as a round would. */
static void apply(struct balancer *b, struct plan *p)
{
    plan(b, p);
    cr_assert(commit(b, p), "the plan's ring edit failed");
}

static const char *pin_of(shard_dispatcher *d, uint64_t hash, char out[SHARD_NAME_MAX + 1])
{
    shard_ring *r;
    cr_assert_eq(shard_dispatcher_ring(d, &r), 0);
    const char *at = shard_ring_pin_of(r, hash);
    if (at)
        snprintf(out, SHARD_NAME_MAX + 1, "%s", at);
    shard_ring_destroy(r);
    return at ? out : NULL;
}

/* A dispatcher of n workers, and a balancer record of it without its thread, whose first placement
 * is K on w1 (placed by a plan of its own). */
static struct balancer *balancer_with_k(unsigned n)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = n };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    struct balancer *b = calloc(1, sizeof *b);
    cr_assert_not_null(b);
    b->d = d;
    b->steady = STEADY_MIN;
    struct plan p = { .nmoves = 1, .hash = { K }, .to = { "w1" } };
    apply(b, &p);
    return b;
}

static void balancer_free(struct balancer *b)
{
    shard_dispatcher_destroy(b->d);
    free(b);
}

/* The plan that isolates K on w1. */
static bool iso_unplaced;
static uint64_t iso_places;
static struct plan isolation(shard_dispatcher *d)
{
    return (struct plan){ .isolate = "w1", .isolated_hash = K, .places = &d->user_places,
                          .isolated_unplaced = &iso_unplaced, .isolated_places = &iso_places };
}

/* K placed on w1 by the balancer (its oldest placement), isolated there unless isolate is false, and
 * OWN_MAX - 1 more placements on w0 and w2: the cap reached. */
static struct balancer *at_cap(bool isolate)
{
    struct balancer *b = balancer_with_k(3);
    if (isolate) {
        struct plan iso = isolation(b->d);
        apply(b, &iso);
        cr_assert_str_eq(b->isolated, "w1");
    }
    for (uint64_t k = 1; k < OWN_MAX;) {
        struct plan p = { 0 };
        for (; p.nmoves < SHARD_MAX_HOT_KEYS && k < OWN_MAX; k++) {
            p.hash[p.nmoves] = k * 0x9e3779b97f4a7c15ull;
            p.to[p.nmoves++] = k % 2 ? "w0" : "w2";
        }
        apply(b, &p);
    }
    cr_assert_eq(b->nown, OWN_MAX);
    cr_assert_eq(b->own[0], K, "K is the oldest of the balancer's placements");
    return b;
}

/* At the cap, with K isolated (begin_with_cap: by the plan that passes it), one more placement. */
static void run(bool begin_with_cap)
{
    struct balancer *b = at_cap(!begin_with_cap);
    shard_dispatcher *d = b->d;
    uint64_t second = b->own[1];
    struct plan p = begin_with_cap ? isolation(d) : (struct plan){ 0 };
    p.nmoves = 1;
    p.hash[0] = 0xfeedull;
    p.to[0] = "w0";
    apply(b, &p);
    char at[SHARD_NAME_MAX + 1];
    cr_assert_str_eq(b->isolated, "w1");
    cr_assert_not_null(pin_of(d, K, at), "the isolated key went back to the ring");
    cr_assert_str_eq(at, "w1");
    cr_assert_null(pin_of(d, second, at), "the oldest placement that is not isolated stays placed");
    cr_assert_eq(b->nown, OWN_MAX);
    cr_assert_geq(own_index(b, K), 0);
    cr_assert_lt(own_index(b, second), 0);
    balancer_free(b);
}

Test(balance_own, the_isolated_key_stays_when_the_oldest_placements_go_back)
{
    run(false);
}

/* The plan that begins the isolation passes the cap: its edit unplaces before it pins, so K would
 * have stayed on w1 even before the fix, but its record went in place of the oldest other one, whose
 * placement stayed past the bound. */
Test(balance_own, nor_in_the_round_that_isolates_it)
{
    run(true);
}

/* A move whose edit fails (here its worker is gone; or no memory) changes none of its records: the
 * key it would have moved again stays its own, where it is. Before, the record went at the plan, the
 * pin stayed, and the balancer took the key for the user's for good. */
Test(balance_own, a_failed_edit_keeps_its_records)
{
    struct balancer *b = balancer_with_k(2);
    shard_dispatcher *d = b->d;
    struct plan p = { .nmoves = 1, .hash = { K }, .to = { "gone" } };
    plan(b, &p);
    cr_assert_not(commit(b, &p), "a move to a worker not in the ring is refused");
    char at[SHARD_NAME_MAX + 1];
    cr_assert_not_null(pin_of(d, K, at));
    cr_assert_str_eq(at, "w1");
    cr_assert_eq(b->nown, 1);
    cr_assert_eq(own_index(b, K), 0, "the key is still the balancer's placement");
    shard_ring *r;
    cr_assert_eq(shard_dispatcher_ring(d, &r), 0);
    cr_assert_not(user_placed(b, r, K));
    shard_ring_destroy(r);
    balancer_free(b);
}

/* A hot-key window can be older than the last change: w0's lists K, heavy, after the balancer moved K
 * to w1. K is no worker's unsplittable key on w0's word (an isolation of w0 would pin K back where
 * it no longer runs, and its record, naming w1, would go: the pin nobody's); on w1's it is. */
Test(balance_own, a_key_listed_where_it_no_longer_runs_is_not_isolated_there)
{
    struct balancer *b = balancer_with_k(2);
    static struct seen s[2] = { { .name = "w0" }, { .name = "w1" } };
    static struct member m[2];
    m[0] = (struct member){ .s = &s[0], .nhot = 1, .hot = { { .hash = K } }, .hot_load = { 3.0 }, .heavy = { 5 } };
    m[1] = (struct member){ .s = &s[1] };
    shard_ring *r;
    cr_assert_eq(shard_dispatcher_ring(b->d, &r), 0);
    struct round rd = { .n = 2, .mean = 1.0 };
    find_unsplittable(b, r, m, &rd);
    cr_assert_null(rd.holder, "K was found unsplittable on %s, where it no longer runs", rd.holder);
    cr_assert_eq(rd.unsplittable, 0);
    m[1] = m[0];
    m[1].s = &s[1];
    m[0] = (struct member){ .s = &s[0] };
    rd = (struct round){ .n = 2, .mean = 1.0 };
    find_unsplittable(b, r, m, &rd);
    cr_assert_not_null(rd.holder);
    cr_assert_str_eq(rd.holder, "w1");
    cr_assert_eq(rd.unsplittable, K);
    shard_ring_destroy(r);
    balancer_free(b);
}

/* How many of the balancer's records are of hash. */
static int records_of(const struct balancer *b, uint64_t hash)
{
    int n = 0;
    for (uint32_t i = 0; i < b->nown; i++)
        n += b->own[i] == hash;
    return n;
}

/* At the cap, a key of its own placed again is one record, naming its new worker, and is not among
 * those sent back: moved alone, nothing goes back; with a new key, the oldest other placement does
 * (not K, isolated, nor the key moved). */
Test(balance_own, a_key_placed_again_at_the_cap_is_one_record)
{
    struct balancer *b = at_cap(true);
    uint64_t again = b->own[1], third = b->own[2];
    char at[SHARD_NAME_MAX + 1];
    const char *to = strcmp(pin_of(b->d, again, at), "w0") == 0 ? "w2" : "w0";
    struct plan p = { .nmoves = 1, .hash = { again }, .to = { to } };
    apply(b, &p);
    cr_assert_eq(p.nunpins, 0, "a key placed again takes no room: nothing goes back");
    cr_assert_eq(b->nown, OWN_MAX);
    cr_assert_eq(records_of(b, again), 1);
    cr_assert_eq(b->own_to[own_index(b, again)], name_hash(to));
    cr_assert_str_eq(pin_of(b->d, again, at), to);
    to = strcmp(to, "w0") == 0 ? "w2" : "w0";
    p = (struct plan){ .nmoves = 2, .hash = { again, 0xfeedull }, .to = { to, "w0" } };
    apply(b, &p);
    cr_assert_eq(p.nunpins, 1);
    cr_assert_eq(p.unpin[0], third, "the oldest placement neither isolated nor moved goes back");
    cr_assert_null(pin_of(b->d, third, at));
    cr_assert_eq(b->nown, OWN_MAX);
    cr_assert_eq(records_of(b, again), 1);
    cr_assert_eq(b->own_to[own_index(b, again)], name_hash(to));
    cr_assert_eq(records_of(b, K), 1);
    balancer_free(b);
}

/* The round plans on a copy of the ring and edits the ring in force: a key the user places between
 * the two stays where the user put it, and the whole edit is refused (the next round plans again), for
 * a key the plan moves (placed by none, or by the balancer), unplaces (past the cap) or isolates. */
static void user_places_between(struct balancer *b, struct plan *p, uint64_t hash, const char *where)
{
    plan(b, p);
    uint32_t nown = b->nown;
    cr_assert_eq(shard_key_place_hash(b->d, hash, where), 0);
    cr_assert_not(commit(b, p), "the edit went ahead over the user's placement");
    char at[SHARD_NAME_MAX + 1];
    cr_assert_not_null(pin_of(b->d, hash, at));
    cr_assert_str_eq(at, where);
    cr_assert_eq(b->nown, nown, "the balancer's records changed with its edit refused");
    cr_assert_eq(b->isolated[0], '\0');
}

Test(balance_own, a_key_the_user_places_between_plan_and_edit_stays_the_users)
{
    struct balancer *b = balancer_with_k(3);
    struct plan p = { .nmoves = 1, .hash = { 0xfeedull }, .to = { "w0" } };
    user_places_between(b, &p, 0xfeedull, "w2");
    cr_assert_lt(own_index(b, 0xfeedull), 0);
    p = (struct plan){ .nmoves = 1, .hash = { K }, .to = { "w0" } };
    user_places_between(b, &p, K, "w2");
    p = isolation(b->d);
    user_places_between(b, &p, K, "w0");
    balancer_free(b);
    b = at_cap(false);
    p = (struct plan){ .nmoves = 1, .hash = { 0xfeedull }, .to = { "w0" } };
    struct plan q = p;
    plan(b, &q);
    cr_assert(q.nunpins == 1 && q.unpin[0] == K, "K, the oldest, would go back");
    user_places_between(b, &p, K, "w2");
    balancer_free(b);
}

/* The worker that holds a placement the plan unplaces leaves between plan and edit (its pins go with
 * it): the edit is refused, nothing recorded changes; the next round forgets what left and its plan
 * goes through, the bound falling on the next oldest. */
Test(balance_own, a_worker_that_leaves_between_plan_and_edit)
{
    struct balancer *b = at_cap(false);
    uint64_t next = b->own[1];
    struct plan p = { .nmoves = 1, .hash = { 0xfeedull }, .to = { "w0" } };
    plan(b, &p);
    cr_assert(p.nunpins == 1 && p.unpin[0] == K);
    cr_assert_eq(shard_worker_remove(b->d, "w1"), 0); /* K's worker */
    cr_assert_not(commit(b, &p), "the edit went ahead on a plan its ring no longer matches");
    cr_assert_eq(b->nown, OWN_MAX);
    cr_assert_eq(own_index(b, K), 0);
    shard_ring *r;
    cr_assert_eq(shard_dispatcher_ring(b->d, &r), 0);
    forget_lost_placements(b, r); /* as the next round begins */
    shard_ring_destroy(r);
    cr_assert_lt(own_index(b, K), 0);
    cr_assert_eq(b->nown, OWN_MAX - 1);
    p = (struct plan){ .nmoves = 2, .hash = { 0xfeedull, 0xbeefull }, .to = { "w0", "w2" } };
    apply(b, &p);
    char at[SHARD_NAME_MAX + 1];
    cr_assert(p.nunpins == 1 && p.unpin[0] == next);
    cr_assert_null(pin_of(b->d, next, at));
    cr_assert_eq(b->nown, OWN_MAX);
    balancer_free(b);
}
