/* libFuzzer target: a byte string is a program of ring operations (add, add_many, remove, clone,
 * lookups, owners, diff, checksum) with arbitrary names, weights and keys; after each operation the
 * ring's invariants are checked against the brute-force model of tests/ring_oracle.h:
 *   points sorted (equal points by name); every owner is a member; lookups equal the model's, at
 *   random hashes and at every point and its neighbours (the edges of the lookup's front table);
 *   shares sum to 1; a removal changes only the removed member's keys; diff agrees with lookups;
 *   a clone has the checksum of its original; errors leave the ring unchanged.
 * Small vnodes (1..8) keep it fast; a point hook that collides on purpose exercises ties. */
#include <errno.h>
#include <shard.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "ring_oracle.h"

/* A name from the input: short, from a small alphabet, so repeats and ties are common. */
static void name(struct input *in, char *out)
{
    size_t len = 1 + byte(in) % 4;
    for (size_t i = 0; i < len; i++)
        out[i] = (char)('a' + byte(in) % 6);
    out[len] = 0;
}

static uint64_t colliding_point(const char *member, uint32_t i, void *ctx)
{
    (void)ctx;
    /* few distinct values: ties between members on most points */
    return ((uint64_t)(i % 3) << 62) ^ (uint64_t)(strlen(member) & 1) << 61;
}


static void check_ring(const shard_ring *r, struct input *in)
{
    size_t n = shard_ring_point_count(r), m = shard_ring_member_count(r);
    uint64_t prev = 0;
    const char *prev_o = NULL;
    for (size_t i = 0; i < n; i++) {
        uint64_t p;
        const char *o;
        CHECK(shard_ring_point(r, i, &p, &o) == 0);
        CHECK(shard_ring_weight(r, o) > 0);
        CHECK(!prev_o || p > prev || (p == prev && strcmp(prev_o, o) <= 0)); /* a hook may repeat a point */
        prev = p;
        prev_o = o;
    }
    CHECK(shard_ring_point(r, n, NULL, NULL) == -ERANGE);
    CHECK(shard_ring_memory(r) <= 45 * n);
    if (m) {
        double sum = 0;
        for (size_t i = 0; i < m; i++)
            sum += shard_ring_share(r, shard_ring_member(r, i));
        CHECK(sum > 1 - 1e-9 && sum < 1 + 1e-9);
    }
    /* The model is a linear scan: every point of a small ring, a stride of a large one. */
    for (size_t i = 0; i < n; i += 1 + n / 64) {
        uint64_t p;
        CHECK(shard_ring_point(r, i, &p, NULL) == 0);
        for (uint64_t h = p - 1, k = 0; k < 3; k++, h++)
            CHECK(strcmp(shard_ring_owner_of_hash(r, h), oracle_owner(r, h)) == 0);
    }
    for (int k = 0; k < 4; k++) {
        uint64_t h = 0;
        for (int b = 0; b < 8; b++)
            h = h << 8 | byte(in);
        const char *o = shard_ring_owner_of_hash(r, h);
        CHECK((o == NULL) == (m == 0));
        if (o)
            CHECK(strcmp(o, oracle_owner(r, h)) == 0);
        const char *rep[8];
        size_t got = shard_ring_owners_of_hash(r, h, rep, 8);
        CHECK(got == (m < 8 ? m : 8));
        if (got)
            CHECK(rep[0] == o);
        for (size_t a = 0; a < got; a++)
            for (size_t b = a + 1; b < got; b++)
                CHECK(strcmp(rep[a], rep[b]) != 0);
    }
}

struct diff_check {
    const shard_ring *a, *b;
};

static void on_arc(uint64_t first, uint64_t last, const char *oa, const char *ob, void *ctx)
{
    struct diff_check *dc = ctx;
    CHECK((oa == NULL) != (ob == NULL) || (oa && strcmp(oa, ob) != 0));
    /* the arc's last hash has exactly these owners */
    const char *a = shard_ring_owner_of_hash(dc->a, last), *b = shard_ring_owner_of_hash(dc->b, last);
    CHECK((a == NULL && oa == NULL) || (a && oa && strcmp(a, oa) == 0));
    CHECK((b == NULL && ob == NULL) || (b && ob && strcmp(b, ob) == 0));
    (void)first;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct input in = { data, size };
    struct shard_ring_config cfg = { .vnodes = 1 + byte(&in) % 8, .seed = byte(&in) };
    if (byte(&in) % 4 == 0)
        cfg.point = colliding_point;
    shard_ring *r;
    CHECK(shard_ring_create(&r, &cfg) == 0);
    while (in.n) {
        char nm[8];
        uint8_t op = byte(&in) % 6;
        uint64_t before = shard_ring_checksum(r);
        if (op == 0) {
            name(&in, nm);
            uint32_t w = byte(&in) % 4; /* 0 is invalid on purpose */
            shard_ring *old;
            CHECK(shard_ring_clone(r, &old) == 0);
            int err = shard_ring_add(r, nm, w);
            if (err) {
                CHECK(err == -EINVAL || err == -EEXIST);
                CHECK(shard_ring_checksum(r) == before);
            } else {
                /* adding moves keys only to the new member */
                struct diff_check dc = { old, r };
                CHECK(shard_ring_diff(old, r, on_arc, &dc) == 0);
                for (int k = 0; k < 4; k++) {
                    uint64_t h = (uint64_t)byte(&in) << 56 | (uint64_t)byte(&in) << 8;
                    const char *a = shard_ring_owner_of_hash(old, h), *b = shard_ring_owner_of_hash(r, h);
                    CHECK(!a || strcmp(a, b) == 0 || strcmp(b, nm) == 0);
                }
            }
            shard_ring_destroy(old);
        } else if (op == 1) {
            name(&in, nm);
            shard_ring *old;
            CHECK(shard_ring_clone(r, &old) == 0);
            int err = shard_ring_remove(r, nm);
            if (err) {
                CHECK(err == -ENOENT);
                CHECK(shard_ring_checksum(r) == before);
            } else {
                for (int k = 0; k < 4; k++) {
                    uint64_t h = (uint64_t)byte(&in) << 56 | byte(&in);
                    const char *a = shard_ring_owner_of_hash(old, h), *b = shard_ring_owner_of_hash(r, h);
                    CHECK(strcmp(a, nm) == 0 || (b && strcmp(a, b) == 0));
                }
            }
            shard_ring_destroy(old);
        } else if (op == 2) {
            shard_ring *c;
            CHECK(shard_ring_clone(r, &c) == 0);
            CHECK(shard_ring_checksum(c) == before);
            shard_ring_destroy(r);
            r = c;
        } else if (op == 3) {
            char names[3][8];
            struct shard_ring_member mm[3];
            size_t k = 1 + byte(&in) % 3;
            for (size_t i = 0; i < k; i++) {
                name(&in, names[i]);
                mm[i] = (struct shard_ring_member){ names[i], 1 + byte(&in) % 3 };
            }
            int err = shard_ring_add_many(r, mm, k);
            if (err) {
                CHECK(err == -EEXIST || err == -EINVAL);
                CHECK(shard_ring_checksum(r) == before);
            }
        } else if (op == 4) {
            uint8_t key[8];
            size_t len = byte(&in) % 8;
            for (size_t i = 0; i < len; i++)
                key[i] = byte(&in);
            const char *o = shard_ring_owner(r, key, len);
            CHECK((o == NULL) == (shard_ring_member_count(r) == 0));
            if (o)
                CHECK(strcmp(o, oracle_owner(r, shard_ring_hash(r, key, len))) == 0);
        } else {
            shard_ring *other;
            CHECK(shard_ring_create(&other, &cfg) == 0);
            name(&in, nm);
            shard_ring_add(other, nm, 1);
            struct diff_check dc = { r, other };
            CHECK(shard_ring_diff(r, other, on_arc, &dc) == 0);
            shard_ring_destroy(other);
        }
        check_ring(r, &in);
    }
    shard_ring_destroy(r);
    return 0;
}
