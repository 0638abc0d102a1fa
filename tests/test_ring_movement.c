/* What consistent hashing promises: minimal movement on add and remove, placement independent of the
 * order of changes, and balance at the default vnodes. */
#include <criterion/criterion.h>
#include <errno.h>
#include <shard.h>
#include <stdlib.h>
#include <string.h>

#include "ring_oracle.h"

#define KEYS 100000

static void add_n(shard_ring *r, int from, int to)
{
    for (int i = from; i < to; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", i);
        cr_assert_eq(shard_ring_add(r, name, 1), 0);
    }
}

/* Owners by name index "wN" -> N, so the values outlive member removal. */
static int owner_id(const shard_ring *r, unsigned k)
{
    char key[32];
    size_t n = test_key(key, sizeof key, "key", k);
    const char *o = shard_ring_owner(r, key, n);
    cr_assert_not_null(o);
    return atoi(o + 1);
}

Test(movement, four_to_five_moves_a_fifth_all_to_the_new_member)
{
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, NULL), 0);
    add_n(r, 0, 4);
    static int before[KEYS];
    for (unsigned k = 0; k < KEYS; k++)
        before[k] = owner_id(r, k);
    add_n(r, 4, 5);
    int moved = 0;
    for (unsigned k = 0; k < KEYS; k++) {
        int now = owner_id(r, k);
        if (now != before[k]) {
            moved++;
            cr_assert_eq(now, 4, "key %u moved from w%d to w%d, not to the new member", k, before[k], now);
        }
    }
    double frac = (double)moved / KEYS;
    cr_assert(frac >= 0.15 && frac <= 0.25, "moved fraction %.3f", frac);
    shard_ring_destroy(r);
}

Test(movement, removing_changes_only_the_removed_members_keys)
{
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, NULL), 0);
    add_n(r, 0, 9);
    static int before[KEYS];
    for (unsigned k = 0; k < KEYS; k++)
        before[k] = owner_id(r, k);
    cr_assert_eq(shard_ring_remove(r, "w5"), 0);
    int moved = 0;
    for (unsigned k = 0; k < KEYS; k++) {
        int now = owner_id(r, k);
        cr_assert_neq(now, 5);
        if (before[k] != 5)
            cr_assert_eq(now, before[k], "key %u of w%d moved to w%d", k, before[k], now);
        else
            moved++;
    }
    cr_assert_gt(moved, 0);
    shard_ring_destroy(r);
}

Test(movement, insertion_order_does_not_matter)
{
    shard_ring *fwd, *rev, *bulk, *churn;
    cr_assert_eq(shard_ring_create(&fwd, NULL), 0);
    cr_assert_eq(shard_ring_create(&rev, NULL), 0);
    cr_assert_eq(shard_ring_create(&bulk, NULL), 0);
    cr_assert_eq(shard_ring_create(&churn, NULL), 0);
    add_n(fwd, 0, 12);
    for (int i = 11; i >= 0; i--)
        add_n(rev, i, i + 1);
    char names[12][16];
    struct shard_ring_member m[12];
    for (int i = 0; i < 12; i++) {
        snprintf(names[i], sizeof names[i], "w%d", (i * 7) % 12); /* a shuffled order */
        m[i] = (struct shard_ring_member){ names[i], 1 };
    }
    cr_assert_eq(shard_ring_add_many(bulk, m, 12), 0);
    /* Adds and removes of others in between leave no trace. */
    add_n(churn, 6, 12);
    cr_assert_eq(shard_ring_add(churn, "temp", 3), 0);
    add_n(churn, 0, 6);
    cr_assert_eq(shard_ring_remove(churn, "temp"), 0);

    uint64_t sum = shard_ring_checksum(fwd);
    cr_assert_eq(shard_ring_checksum(rev), sum);
    cr_assert_eq(shard_ring_checksum(bulk), sum);
    cr_assert_eq(shard_ring_checksum(churn), sum);
    for (unsigned k = 0; k < 20000; k++) {
        int o = owner_id(fwd, k);
        cr_assert_eq(owner_id(rev, k), o);
        cr_assert_eq(owner_id(bulk, k), o);
        cr_assert_eq(owner_id(churn, k), o);
    }
    shard_ring_destroy(fwd);
    shard_ring_destroy(rev);
    shard_ring_destroy(bulk);
    shard_ring_destroy(churn);
}

static uint64_t same_points(const char *member, uint32_t index, void *ctx)
{
    (void)member;
    (void)ctx;
    return (uint64_t)(index + 1) << 40; /* every member gets the very same points */
}

Test(movement, equal_points_resolve_by_name_whatever_the_order)
{
    struct shard_ring_config cfg = { .vnodes = 3, .point = same_points };
    shard_ring *a, *b;
    cr_assert_eq(shard_ring_create(&a, &cfg), 0);
    cr_assert_eq(shard_ring_create(&b, &cfg), 0);
    const char *names[] = { "delta", "alpha", "charlie", "bravo" };
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(shard_ring_add(a, names[i], 1), 0);
        cr_assert_eq(shard_ring_add(b, names[3 - i], 1), 0);
    }
    cr_assert(oracle_points_sorted(a));
    cr_assert_eq(shard_ring_checksum(a), shard_ring_checksum(b));
    for (uint64_t h = 0; h < 5; h++) {
        cr_assert_str_eq(shard_ring_owner_of_hash(a, h << 40), "alpha");
        cr_assert_str_eq(shard_ring_owner_of_hash(b, h << 40), "alpha");
    }
    cr_assert_float_eq(shard_ring_share(a, "alpha"), 1.0, 1e-12);
    cr_assert_eq(shard_ring_share(a, "bravo"), 0);
    cr_assert_eq(shard_ring_remove(a, "alpha"), 0);
    cr_assert_str_eq(shard_ring_owner_of_hash(a, 7), "bravo");
    shard_ring_destroy(a);
    shard_ring_destroy(b);
}

Test(movement, default_vnodes_balance_64_members)
{
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, NULL), 0);
    add_n(r, 0, 64);
    double max = 0, min = 1;
    for (size_t i = 0; i < 64; i++) {
        double s = shard_ring_share(r, shard_ring_member(r, i));
        max = s > max ? s : max;
        min = s < min ? s : min;
    }
    double mean = 1.0 / 64;
    cr_assert_leq(max / mean, 1.10, "max/mean %.3f", max / mean);
    cr_assert_geq(min / mean, 0.90, "min/mean %.3f", min / mean);
    shard_ring_destroy(r);
}

Test(movement, keys_follow_shares)
{
    /* Counted keys agree with the share of the hash space. */
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, NULL), 0);
    add_n(r, 0, 5);
    int count[5] = { 0 };
    for (unsigned k = 0; k < KEYS; k++)
        count[owner_id(r, k)]++;
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", i);
        double expect = shard_ring_share(r, name) * KEYS;
        cr_assert(count[i] > expect * 0.95 && count[i] < expect * 1.05, "w%d: %d keys, share says %.0f", i,
                  count[i], expect);
    }
    shard_ring_destroy(r);
}

/* A weight change moves only keys that enter or leave the member (as many as its share of the total
 * weight changed by), and leaves
 * the ring exactly as if the member had been added with the new weight. */
Test(movement, set_weight_moves_only_keys_of_that_member_and_equals_a_fresh_add)
{
    shard_ring *r, *fresh;
    cr_assert_eq(shard_ring_create(&r, NULL), 0);
    add_n(r, 0, 4);
    static int before[KEYS];
    for (unsigned k = 0; k < KEYS; k++)
        before[k] = owner_id(r, k);
    const char *w2 = shard_ring_member(r, 2);
    cr_assert_eq(shard_ring_set_weight(r, "w2", 3), 0); /* w2's share 1 / 4 -> 3 / 6: a quarter moves */
    cr_assert_eq(shard_ring_member(r, 2), w2, "member strings stay valid");
    cr_assert_eq(shard_ring_weight(r, "w2"), 3);
    cr_assert_eq(shard_ring_point_count(r), 6u * SHARD_DEFAULT_VNODES);
    int moved = 0;
    for (unsigned k = 0; k < KEYS; k++) {
        int now = owner_id(r, k);
        if (now != before[k]) {
            moved++;
            cr_assert_eq(now, 2, "key %u moved from w%d to w%d, not to the heavier member", k, before[k], now);
        }
    }
    double frac = (double)moved / KEYS;
    cr_assert(frac >= 0.25 * 0.8 && frac <= 0.25 * 1.2, "moved fraction %.3f, expected about 0.25", frac);
    cr_assert_eq(shard_ring_create(&fresh, NULL), 0);
    add_n(fresh, 0, 2);
    cr_assert_eq(shard_ring_add(fresh, "w2", 3), 0);
    add_n(fresh, 3, 4);
    cr_assert_eq(shard_ring_checksum(r), shard_ring_checksum(fresh));
    /* And back down: only w2's keys leave it, to where they were. */
    cr_assert_eq(shard_ring_set_weight(r, "w2", 1), 0);
    for (unsigned k = 0; k < KEYS; k++)
        cr_assert_eq(owner_id(r, k), before[k], "key %u is not back on w%d", k, before[k]);
    cr_assert_eq(shard_ring_point_count(r), 4u * SHARD_DEFAULT_VNODES);
    shard_ring_destroy(fresh);
    shard_ring_destroy(r);
}

Test(movement, set_weight_errors_change_nothing)
{
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, NULL), 0);
    add_n(r, 0, 2);
    uint64_t sum = shard_ring_checksum(r);
    cr_assert_eq(shard_ring_set_weight(NULL, "w0", 2), -EINVAL);
    cr_assert_eq(shard_ring_set_weight(r, NULL, 2), -EINVAL);
    cr_assert_eq(shard_ring_set_weight(r, "w0", 0), -EINVAL);
    cr_assert_eq(shard_ring_set_weight(r, "w0", SHARD_RING_MAX_POINTS), -EINVAL);
    cr_assert_eq(shard_ring_set_weight(r, "w0", SHARD_RING_MAX_POINTS / SHARD_DEFAULT_VNODES), -EINVAL,
                 "the ring's total would pass SHARD_RING_MAX_POINTS");
    cr_assert_eq(shard_ring_set_weight(r, "nope", 2), -ENOENT);
    cr_assert_eq(shard_ring_set_weight(r, "w0", 1), 0, "the same weight is no change");
    cr_assert_eq(shard_ring_checksum(r), sum);
    shard_ring_destroy(r);
}
