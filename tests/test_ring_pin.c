/* Pinned hashes (shard_ring_pin): a pin moves exactly its hash, follows its member through the ring's
 * changes, goes with it, and shows in lookups, clones, checksums, replicas and diffs. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>
#include <shard.h>
#include <stdio.h>
#include <string.h>

#define KEYS 50000

static shard_ring *make(int members)
{
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, NULL), 0);
    for (int i = 0; i < members; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", i);
        cr_assert_eq(shard_ring_add(r, name, 1), 0);
    }
    return r;
}

static size_t key(char *buf, unsigned i)
{
    return (size_t)snprintf(buf, 24, "key-%u", i);
}

Test(pin, a_pin_moves_its_hash_and_nothing_else)
{
    shard_ring *r = make(4), *before;
    cr_assert_eq(shard_ring_clone(r, &before), 0);
    char k[24];
    size_t n = key(k, 7);
    uint64_t h = shard_ring_hash(r, k, n);
    const char *was = shard_ring_owner(r, k, n), *to = strcmp(was, "w0") == 0 ? "w1" : "w0";
    cr_assert_null(shard_ring_pin_of(r, h), "not pinned yet, though it has an owner");
    cr_assert_eq(shard_ring_pin(r, h, to), 0);
    cr_assert_eq(shard_ring_pin_count(r), 1);
    cr_assert_str_eq(shard_ring_pin_of(r, h), to);
    cr_assert_null(shard_ring_pin_of(r, h + 1), "a neighbouring hash is not pinned");
    cr_assert_str_eq(shard_ring_owner(r, k, n), to);
    cr_assert_str_eq(shard_ring_owner_of_hash(r, h), to);
    for (unsigned i = 0; i < KEYS; i++) {
        if (i == 7)
            continue;
        size_t m = key(k, i);
        cr_assert_str_eq(shard_ring_owner(r, k, m), shard_ring_owner(before, k, m), "key %u moved", i);
    }
    cr_assert_neq(shard_ring_checksum(r), shard_ring_checksum(before));
    uint64_t ph;
    const char *pm;
    cr_assert_eq(shard_ring_pin_at(r, 0, &ph, &pm), 0);
    cr_assert_eq(ph, h);
    cr_assert_str_eq(pm, to);
    cr_assert_eq(shard_ring_pin_at(r, 1, &ph, &pm), -ERANGE);
    /* Replicas: the pin first, then the ring's order without it. */
    const char *owners[4];
    cr_assert_eq(shard_ring_owners_of_hash(r, h, owners, 4), 4);
    cr_assert_str_eq(owners[0], to);
    for (int i = 1; i < 4; i++)
        cr_assert_str_neq(owners[i], to);
    /* Pinned again: moves; unpinned: back. */
    cr_assert_eq(shard_ring_pin(r, h, "w3"), 0);
    cr_assert_str_eq(shard_ring_owner_of_hash(r, h), "w3");
    cr_assert_eq(shard_ring_pin_count(r), 1);
    cr_assert_str_eq(shard_ring_pin_of(r, h), "w3");
    cr_assert_eq(shard_ring_unpin(r, h), 0);
    cr_assert_null(shard_ring_pin_of(r, h));
    cr_assert_str_eq(shard_ring_owner_of_hash(r, h), was);
    cr_assert_eq(shard_ring_checksum(r), shard_ring_checksum(before));
    shard_ring_destroy(before);
    shard_ring_destroy(r);
}

Test(pin, errors_change_nothing)
{
    shard_ring *r = make(2);
    uint64_t sum = shard_ring_checksum(r);
    cr_assert_eq(shard_ring_pin(NULL, 1, "w0"), -EINVAL);
    cr_assert_eq(shard_ring_pin(r, 1, NULL), -EINVAL);
    cr_assert_eq(shard_ring_pin(r, 1, "nope"), -ENOENT);
    cr_assert_eq(shard_ring_unpin(NULL, 1), -EINVAL);
    cr_assert_eq(shard_ring_unpin(r, 1), -ENOENT);
    cr_assert_eq(shard_ring_pin_at(NULL, 0, NULL, NULL), -EINVAL);
    cr_assert_eq(shard_ring_pin_count(NULL), 0);
    cr_assert_null(shard_ring_pin_of(NULL, 1));
    cr_assert_eq(shard_ring_checksum(r), sum);
    for (uint64_t h = 0; h < SHARD_RING_MAX_PINS; h++)
        cr_assert_eq(shard_ring_pin(r, h * 0x9e3779b97f4a7c15ull, h % 2 ? "w0" : "w1"), 0);
    cr_assert_eq(shard_ring_pin(r, 12345, "w0"), -E2BIG);
    cr_assert_eq(shard_ring_pin(r, 3 * 0x9e3779b97f4a7c15ull, "w1"), 0, "a hash pinned already may move");
    cr_assert_eq(shard_ring_pin_count(r), SHARD_RING_MAX_PINS);
    for (uint64_t h = 0; h < SHARD_RING_MAX_PINS; h++)
        cr_assert_str_eq(shard_ring_owner_of_hash(r, h * 0x9e3779b97f4a7c15ull), h % 2 && h != 3 ? "w0" : "w1");
    shard_ring_destroy(r);
}

Test(pin, pins_follow_their_member_and_go_with_it)
{
    shard_ring *r = make(3);
    uint64_t h1 = 0x1234567890abcdefull, h2 = 42;
    cr_assert_eq(shard_ring_pin(r, h1, "w2"), 0);
    cr_assert_eq(shard_ring_pin(r, h2, "w1"), 0);
    /* "a" and "b" sort before every "w": members are renumbered, pins keep their member. */
    struct shard_ring_member more[] = { { "b", 1 }, { "a", 2 } };
    cr_assert_eq(shard_ring_add_many(r, more, 2), 0);
    cr_assert_str_eq(shard_ring_owner_of_hash(r, h1), "w2");
    cr_assert_str_eq(shard_ring_owner_of_hash(r, h2), "w1");
    shard_ring *c;
    cr_assert_eq(shard_ring_clone(r, &c), 0);
    cr_assert_eq(shard_ring_pin_count(c), 2);
    cr_assert_str_eq(shard_ring_owner_of_hash(c, h1), "w2");
    cr_assert_str_eq(shard_ring_pin_of(c, h2), "w1", "a clone keeps the pins, renumbered members and all");
    cr_assert_eq(shard_ring_checksum(c), shard_ring_checksum(r));
    cr_assert_eq(shard_ring_set_weight(r, "w2", 3), 0);
    cr_assert_str_eq(shard_ring_owner_of_hash(r, h1), "w2");
    /* Removing a member drops its pins; the others stay, renumbered. */
    cr_assert_eq(shard_ring_remove(r, "a"), 0);
    cr_assert_eq(shard_ring_remove(r, "w1"), 0);
    cr_assert_eq(shard_ring_pin_count(r), 1);
    cr_assert_str_eq(shard_ring_owner_of_hash(r, h1), "w2");
    cr_assert_str_eq(shard_ring_pin_of(r, h1), "w2");
    cr_assert_null(shard_ring_pin_of(r, h2), "its member went, and its pin with it");
    cr_assert_str_neq(shard_ring_owner_of_hash(r, h2), "w1");
    shard_ring_destroy(c);
    shard_ring_destroy(r);
}

struct arcs {
    int      n;
    uint64_t first, last;
    char     a[16], b[16];
};

static void note_arc(uint64_t first, uint64_t last, const char *a, const char *b, void *ctx)
{
    struct arcs *x = ctx;
    if (x->n++ == 0) {
        x->first = first;
        x->last = last;
        snprintf(x->a, sizeof x->a, "%s", a);
        snprintf(x->b, sizeof x->b, "%s", b);
    }
}

Test(pin, a_diff_reports_a_pinned_hash_as_its_own_arc)
{
    shard_ring *a = make(4), *b;
    cr_assert_eq(shard_ring_clone(a, &b), 0);
    uint64_t h = 0x7777777777777777ull;
    const char *owner = shard_ring_owner_of_hash(a, h), *to = strcmp(owner, "w0") == 0 ? "w1" : "w0";
    cr_assert_eq(shard_ring_pin(b, h, to), 0);
    struct arcs x = { 0 };
    cr_assert_eq(shard_ring_diff(a, b, note_arc, &x), 0);
    cr_assert_eq(x.n, 1);
    cr_assert_eq(x.first, h - 1);
    cr_assert_eq(x.last, h);
    cr_assert_str_eq(x.a, owner);
    cr_assert_str_eq(x.b, to);
    /* Pinned alike in both: no difference. */
    cr_assert_eq(shard_ring_pin(a, h, to), 0);
    x.n = 0;
    cr_assert_eq(shard_ring_diff(a, b, note_arc, &x), 0);
    cr_assert_eq(x.n, 0);
    shard_ring_destroy(a);
    shard_ring_destroy(b);
}

/* Against brute force: with pins on both sides and a member added, a hash lies in a reported arc
 * exactly when its two owners differ. */
struct all_arcs {
    int      n;
    uint64_t first[4096], last[4096];
};

static void keep_arc(uint64_t first, uint64_t last, const char *a, const char *b, void *ctx)
{
    (void)a;
    (void)b;
    struct all_arcs *x = ctx;
    cr_assert_lt(x->n, 4096);
    x->first[x->n] = first;
    x->last[x->n++] = last;
}

static bool in_arcs(const struct all_arcs *x, uint64_t h)
{
    for (int i = 0; i < x->n; i++) {
        uint64_t f = x->first[i], l = x->last[i];
        if (f == l || (f < l ? h > f && h <= l : h > f || h <= l))
            return true;
    }
    return false;
}

Test(pin, a_diff_with_pins_agrees_with_the_lookups)
{
    shard_ring *a = make(3), *b;
    cr_assert_eq(shard_ring_clone(a, &b), 0);
    uint64_t x = 99, pinned[64];
    for (int i = 0; i < 64; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        pinned[i] = x;
        const char *m = i % 3 == 0 ? "w0" : i % 3 == 1 ? "w1" : "w2";
        if (i % 4 != 1)
            cr_assert_eq(shard_ring_pin(a, x, m), 0);
        if (i % 4 != 2)
            cr_assert_eq(shard_ring_pin(b, x, i % 4 == 3 ? "w2" : m), 0);
    }
    cr_assert_eq(shard_ring_add(b, "w3", 1), 0);
    static struct all_arcs arcs;
    cr_assert_eq(shard_ring_diff(a, b, keep_arc, &arcs), 0);
    for (int i = 0; i < 64 * 3 + 20000; i++) {
        uint64_t h;
        if (i < 64 * 3) {
            h = pinned[i / 3] + (uint64_t)(i % 3) - 1; /* each pin and its neighbours */
        } else {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            h = x;
        }
        bool differ = strcmp(shard_ring_owner_of_hash(a, h), shard_ring_owner_of_hash(b, h)) != 0;
        cr_assert_eq(in_arcs(&arcs, h), differ, "hash %#llx: owners %s / %s, in an arc: %d", (unsigned long long)h,
                     shard_ring_owner_of_hash(a, h), shard_ring_owner_of_hash(b, h), in_arcs(&arcs, h));
    }
    shard_ring_destroy(a);
    shard_ring_destroy(b);
}
