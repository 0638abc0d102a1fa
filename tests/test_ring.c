/* The ring's contract: create/clone/destroy, add/remove, lookups, replicas, share, checksum, memory,
 * and every error code of ring.h. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <shard.h>
#include <stdlib.h>
#include <string.h>

#include "ring_oracle.h"

static shard_ring *ring_of(int n, uint32_t vnodes)
{
    shard_ring *r;
    struct shard_ring_config cfg = { .vnodes = vnodes };
    cr_assert_eq(shard_ring_create(&r, &cfg), 0);
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", i);
        cr_assert_eq(shard_ring_add(r, name, 1), 0);
    }
    return r;
}

Test(ring, empty_ring_has_no_owner)
{
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, NULL), 0);
    cr_assert_eq(shard_ring_member_count(r), 0);
    cr_assert_eq(shard_ring_point_count(r), 0);
    cr_assert_null(shard_ring_owner(r, "k", 1));
    cr_assert_null(shard_ring_owner_of_hash(r, 42));
    const char *out[2];
    cr_assert_eq(shard_ring_owners(r, "k", 1, out, 2), 0);
    cr_assert_eq(shard_ring_share(r, "x"), 0);
    shard_ring_destroy(r);
    shard_ring_destroy(NULL);
}

Test(ring, default_vnodes_and_weights)
{
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, NULL), 0);
    cr_assert_eq(shard_ring_add(r, "a", 1), 0);
    cr_assert_eq(shard_ring_add(r, "b", 3), 0);
    cr_assert_eq(shard_ring_point_count(r), 4 * SHARD_DEFAULT_VNODES);
    cr_assert_eq(shard_ring_weight(r, "b"), 3);
    cr_assert_eq(shard_ring_weight(r, "zz"), 0);
    /* A weight-3 member owns about three quarters of the space. */
    cr_assert(fabs(shard_ring_share(r, "b") - 0.75) < 0.05, "share of b %f", shard_ring_share(r, "b"));
    shard_ring_destroy(r);
}

Test(ring, lookup_matches_brute_force)
{
    shard_ring *r = ring_of(17, 40);
    cr_assert(oracle_points_sorted(r));
    char key[32];
    for (unsigned i = 0; i < 3000; i++) {
        size_t n = test_key(key, sizeof key, "k", i);
        uint64_t h = shard_ring_hash(r, key, n);
        cr_assert_str_eq(shard_ring_owner(r, key, n), oracle_owner(r, h));
    }
    /* Edges: every point exactly, one past it, 0 and UINT64_MAX. */
    for (size_t i = 0; i < shard_ring_point_count(r); i++) {
        uint64_t p;
        shard_ring_point(r, i, &p, NULL);
        cr_assert_str_eq(shard_ring_owner_of_hash(r, p), oracle_owner(r, p));
        cr_assert_str_eq(shard_ring_owner_of_hash(r, p + 1), oracle_owner(r, p + 1));
    }
    cr_assert_str_eq(shard_ring_owner_of_hash(r, 0), oracle_owner(r, 0));
    cr_assert_str_eq(shard_ring_owner_of_hash(r, UINT64_MAX), oracle_owner(r, UINT64_MAX));
    shard_ring_destroy(r);
}

Test(ring, single_member_owns_everything)
{
    shard_ring *r = ring_of(1, 1);
    cr_assert_str_eq(shard_ring_owner_of_hash(r, 0), "w0");
    cr_assert_str_eq(shard_ring_owner_of_hash(r, UINT64_MAX), "w0");
    cr_assert_float_eq(shard_ring_share(r, "w0"), 1.0, 1e-12);
    shard_ring_destroy(r);
}

Test(ring, key_hash_is_xxh3_with_seed)
{
    shard_ring *a, *b;
    struct shard_ring_config c1 = { .seed = 1 }, c2 = { .seed = 2 };
    cr_assert_eq(shard_ring_create(&a, &c1), 0);
    cr_assert_eq(shard_ring_create(&b, &c2), 0);
    cr_assert_neq(shard_ring_hash(a, "key", 3), shard_ring_hash(b, "key", 3));
    cr_assert_eq(shard_ring_hash(a, "key", 3), shard_ring_hash(a, "key", 3));
    /* len 0 with NULL key is a valid, empty key. */
    cr_assert_eq(shard_ring_hash(a, NULL, 0), shard_ring_hash(a, "", 0));
    shard_ring_destroy(a);
    shard_ring_destroy(b);
}

Test(ring, replicas_are_distinct_and_start_at_owner)
{
    shard_ring *r = ring_of(10, 50);
    char key[32];
    for (unsigned i = 0; i < 2000; i++) {
        size_t n = test_key(key, sizeof key, "r", i);
        const char *out[12];
        size_t got = shard_ring_owners(r, key, n, out, 3);
        cr_assert_eq(got, 3);
        cr_assert_str_eq(out[0], shard_ring_owner(r, key, n));
        cr_assert_neq(strcmp(out[0], out[1]), 0);
        cr_assert_neq(strcmp(out[0], out[2]), 0);
        cr_assert_neq(strcmp(out[1], out[2]), 0);
        /* Asking for more than there are gives every member once. */
        cr_assert_eq(shard_ring_owners(r, key, n, out, 12), 10);
        for (int x = 0; x < 10; x++)
            for (int y = x + 1; y < 10; y++)
                cr_assert_neq(strcmp(out[x], out[y]), 0);
    }
    shard_ring_destroy(r);
}

Test(ring, replica_two_is_owner_after_removing_owner)
{
    /* What replicas are for: when the owner goes, the second replica becomes the owner. */
    shard_ring *r = ring_of(8, 64);
    char key[32];
    for (unsigned i = 0; i < 500; i++) {
        size_t n = test_key(key, sizeof key, "f", i);
        const char *out[2];
        cr_assert_eq(shard_ring_owners(r, key, n, out, 2), 2);
        char second[32], first[32];
        strcpy(first, out[0]);
        strcpy(second, out[1]);
        shard_ring *c;
        cr_assert_eq(shard_ring_clone(r, &c), 0);
        cr_assert_eq(shard_ring_remove(c, first), 0);
        cr_assert_str_eq(shard_ring_owner(c, key, n), second);
        shard_ring_destroy(c);
    }
    shard_ring_destroy(r);
}

Test(ring, shares_sum_to_one)
{
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, NULL), 0);
    for (int i = 0; i < 13; i++) {
        char name[16];
        snprintf(name, sizeof name, "m%d", i);
        cr_assert_eq(shard_ring_add(r, name, 1 + (uint32_t)i % 3), 0);
    }
    double sum = 0;
    for (size_t i = 0; i < shard_ring_member_count(r); i++)
        sum += shard_ring_share(r, shard_ring_member(r, i));
    cr_assert_float_eq(sum, 1.0, 1e-9);
    cr_assert_eq(shard_ring_share(r, "absent"), 0);
    shard_ring_destroy(r);
}

Test(ring, checksum_equal_for_equal_rings_and_changes_with_them)
{
    shard_ring *a = ring_of(6, 30), *b = ring_of(6, 30), *c;
    cr_assert_eq(shard_ring_checksum(a), shard_ring_checksum(b));
    cr_assert_eq(shard_ring_clone(a, &c), 0);
    cr_assert_eq(shard_ring_checksum(a), shard_ring_checksum(c));
    cr_assert_eq(shard_ring_remove(c, "w3"), 0);
    cr_assert_neq(shard_ring_checksum(a), shard_ring_checksum(c));
    cr_assert_eq(shard_ring_add(c, "w3", 2), 0); /* same name, other weight */
    cr_assert_neq(shard_ring_checksum(a), shard_ring_checksum(c));
    cr_assert_eq(shard_ring_remove(c, "w3"), 0);
    cr_assert_eq(shard_ring_add(c, "w3", 1), 0);
    cr_assert_eq(shard_ring_checksum(a), shard_ring_checksum(c));
    shard_ring_destroy(a);
    shard_ring_destroy(b);
    shard_ring_destroy(c);
}

Test(ring, clone_is_independent)
{
    shard_ring *a = ring_of(4, 20), *c;
    cr_assert_eq(shard_ring_clone(a, &c), 0);
    cr_assert_eq(shard_ring_add(c, "extra", 1), 0);
    cr_assert_eq(shard_ring_member_count(a), 4);
    cr_assert_eq(shard_ring_member_count(c), 5);
    shard_ring_destroy(a);
    cr_assert_eq(shard_ring_member_count(c), 5);
    cr_assert(oracle_points_sorted(c));
    shard_ring_destroy(c);
}

Test(ring, memory_at_most_45_bytes_a_point)
{
    for (int n = 1; n <= 200; n += 37) {
        shard_ring *r = ring_of(n, SHARD_DEFAULT_VNODES);
        cr_assert_leq(shard_ring_memory(r), 45 * shard_ring_point_count(r), "n=%d", n);
        shard_ring_destroy(r);
    }
}

Test(ring, names_up_to_name_max)
{
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, NULL), 0);
    char name[SHARD_NAME_MAX + 2];
    memset(name, 'n', SHARD_NAME_MAX);
    name[SHARD_NAME_MAX] = 0;
    cr_assert_eq(shard_ring_add(r, name, 1), 0);
    cr_assert_str_eq(shard_ring_owner(r, "k", 1), name);
    name[SHARD_NAME_MAX] = 'n';
    name[SHARD_NAME_MAX + 1] = 0;
    cr_assert_eq(shard_ring_add(r, name, 1), -ENAMETOOLONG);
    cr_assert_eq(shard_ring_member_count(r), 1);
    shard_ring_destroy(r);
}

Test(ring_errors, create_and_clone)
{
    shard_ring *r;
    cr_assert_eq(shard_ring_create(NULL, NULL), -EINVAL);
    cr_assert_eq(shard_ring_clone(NULL, &r), -EINVAL);
    cr_assert_eq(shard_ring_create(&r, NULL), 0);
    cr_assert_eq(shard_ring_clone(r, NULL), -EINVAL);
    shard_ring_destroy(r);
}

Test(ring_errors, add_errors_leave_the_ring_unchanged)
{
    shard_ring *r = ring_of(3, 10);
    uint64_t sum = shard_ring_checksum(r);
    cr_assert_eq(shard_ring_add(NULL, "a", 1), -EINVAL);
    cr_assert_eq(shard_ring_add(r, NULL, 1), -EINVAL);
    cr_assert_eq(shard_ring_add(r, "", 1), -EINVAL);
    cr_assert_eq(shard_ring_add(r, "a", 0), -EINVAL);
    cr_assert_eq(shard_ring_add(r, "a", SHARD_RING_MAX_POINTS), -EINVAL); /* vnodes * weight too many */
    cr_assert_eq(shard_ring_add(r, "w1", 1), -EEXIST);
    struct shard_ring_member dup[] = { { "x", 1 }, { "y", 1 }, { "x", 2 } };
    cr_assert_eq(shard_ring_add_many(r, dup, 3), -EEXIST);
    struct shard_ring_member bad[] = { { "p", 1 }, { "q", 0 } };
    cr_assert_eq(shard_ring_add_many(r, bad, 2), -EINVAL);
    cr_assert_eq(shard_ring_add_many(r, NULL, 1), -EINVAL);
    cr_assert_eq(shard_ring_add_many(r, NULL, 0), 0);
    cr_assert_eq(shard_ring_checksum(r), sum);
    cr_assert_eq(shard_ring_member_count(r), 3);
    shard_ring_destroy(r);
}

Test(ring_errors, remove_and_point)
{
    shard_ring *r = ring_of(2, 4);
    cr_assert_eq(shard_ring_remove(r, "nope"), -ENOENT);
    cr_assert_eq(shard_ring_remove(r, NULL), -EINVAL);
    cr_assert_eq(shard_ring_remove(NULL, "w0"), -EINVAL);
    cr_assert_eq(shard_ring_point(r, 8, NULL, NULL), -ERANGE);
    cr_assert_eq(shard_ring_point(NULL, 0, NULL, NULL), -EINVAL);
    cr_assert_eq(shard_ring_remove(r, "w0"), 0);
    cr_assert_eq(shard_ring_remove(r, "w0"), -ENOENT);
    cr_assert_eq(shard_ring_point_count(r), 4);
    shard_ring_destroy(r);
}

Test(ring_errors, null_key_with_length)
{
    shard_ring *r = ring_of(2, 4);
    const char *out[2];
    cr_assert_null(shard_ring_owner(r, NULL, 3));
    cr_assert_eq(shard_ring_owners(r, NULL, 3, out, 2), 0);
    cr_assert_eq(shard_ring_owners(r, "k", 1, NULL, 2), 0);
    cr_assert_eq(shard_ring_hash(r, NULL, 3), 0);
    cr_assert_not_null(shard_ring_owner(r, NULL, 0));
    shard_ring_destroy(r);
}
