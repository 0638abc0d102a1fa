/* Pins without memory. A pin or unpin on a ring that shares its pins with a clone copies a path of the
 * pin trie first: when an allocation fails it returns -ENOMEM and changes nothing, the clone neither.
 * A remove may not fail: when the removed member's pins cannot be purged into a new trie, they stay as
 * dead entries that read as absent everywhere (lookups, count, enumeration, checksum, diff) until a
 * later pin or unpin purges them. The N-th allocation of the calling thread is failed, N = 1, 2, ...,
 * through -Wl,--wrap (static library, as test_faults). */
#include <criterion/criterion.h>
#include <errno.h>
#include <shard.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring_layout.h" /* pins_dead: whether the purge happened */

static _Thread_local long fail_countdown; /* 0: off; 1: the next allocation fails */

static int should_fail(void)
{
    return fail_countdown && --fail_countdown == 0;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
char *__real_strdup(const char *s);

void *__wrap_malloc(size_t n) { return should_fail() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t a, size_t b) { return should_fail() ? NULL : __real_calloc(a, b); }
void *__wrap_realloc(void *p, size_t n) { return should_fail() ? NULL : __real_realloc(p, n); }
void *__wrap_aligned_alloc(size_t a, size_t n) { return should_fail() ? NULL : __real_aligned_alloc(a, n); }
char *__wrap_strdup(const char *s) { return should_fail() ? NULL : __real_strdup(s); }

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static const char *const names[] = { "w0", "w1", "w2" };

static shard_ring *ring_with_pins(int npins, uint64_t *hashes)
{
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, NULL), 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(shard_ring_add(r, names[i], 1), 0);
    uint64_t rng = 7;
    for (int i = 0; i < npins; i++) {
        hashes[i] = mix(&rng);
        cr_assert_eq(shard_ring_pin(r, hashes[i], names[i % 3]), 0);
    }
    return r;
}

/* A ring of w0..w2 pinned to h[0..*k) (names[i % 3]), random from seed, until its pin filter is full:
 * the next pin of a new hash remakes it. */
static shard_ring *ring_with_full_filter(uint64_t seed, uint64_t *h, int max, int *k)
{
    shard_ring *r = ring_with_pins(0, NULL);
    *k = 0;
    do {
        cr_assert_lt(*k, max);
        h[*k] = mix(&seed);
        cr_assert_eq(shard_ring_pin(r, h[*k], names[*k % 3]), 0);
        (*k)++;
    } while (!shard__pin_filter_full(r->pin_filter));
    return r;
}

Test(pin_faults, a_shared_pin_or_unpin_fails_cleanly)
{
    static uint64_t h[1500];
    int saw[2] = { 0, 0 };
    for (long n = 1; n < 12; n++) {
        shard_ring *r = ring_with_pins(1500, h), *c;
        cr_assert_eq(shard_ring_clone(r, &c), 0);
        uint64_t sum = shard_ring_checksum(r);
        size_t count = shard_ring_pin_count(r);
        for (int op = 0; op < 2; op++) {
            fail_countdown = n;
            int err = op == 0 ? shard_ring_unpin(r, h[17]) : shard_ring_pin(r, h[18], "w1");
            fail_countdown = 0;
            cr_assert(err == 0 || err == -ENOMEM, "op %d n=%ld: %d", op, n, err);
            if (err == -ENOMEM) {
                saw[op] = 1;
                cr_assert_eq(shard_ring_checksum(r), sum, "a failed %s changed the ring (n=%ld)",
                             op ? "pin" : "unpin", n);
                cr_assert_eq(shard_ring_pin_count(r), count);
            }
            sum = shard_ring_checksum(r);
            count = shard_ring_pin_count(r);
        }
        /* The clone, which shared every node the ring had, is untouched by both. */
        cr_assert_eq(shard_ring_pin_count(c), 1500);
        cr_assert_str_eq(shard_ring_owner_of_hash(c, h[17]), "w2");
        cr_assert_str_eq(shard_ring_owner_of_hash(c, h[18]), "w0");
        shard_ring_destroy(c);
        shard_ring_destroy(r);
    }
    cr_assert(saw[0] && saw[1], "no allocation of unpin (%d) or pin (%d) was failed", saw[0], saw[1]);
}

struct listing {
    uint64_t h[1500];
    char     m[1500][4];
    size_t   n;
};

static void list_pins(const shard_ring *r, struct listing *l)
{
    l->n = shard_ring_pin_count(r);
    for (size_t i = 0; i < l->n; i++) {
        const char *m;
        cr_assert_eq(shard_ring_pin_at(r, i, &l->h[i], &m), 0);
        snprintf(l->m[i], sizeof l->m[i], "%s", m);
        cr_assert(i == 0 || l->h[i] > l->h[i - 1], "pins in hash order");
    }
    cr_assert_eq(shard_ring_pin_at(r, l->n, NULL, NULL), -ERANGE);
}

static void no_arc(uint64_t first, uint64_t last, const char *a, const char *b, void *ctx)
{
    (void)first, (void)last, (void)a, (void)b;
    (*(int *)ctx)++;
}

/* Every allocation of the purge failed in turn: the remove succeeds, and the ring reads as one whose
 * remove had memory, before and after the dead entries are purged by a later pin. */
Test(pin_faults, a_remove_without_memory_leaves_its_pins_dead)
{
    static uint64_t h[1500];
    static struct listing want, got;
    shard_ring *ref = ring_with_pins(1500, h), *refc;
    cr_assert_eq(shard_ring_clone(ref, &refc), 0);
    cr_assert_eq(shard_ring_remove(refc, "w1"), 0);
    cr_assert_eq(refc->pins_dead, 0);
    list_pins(refc, &want);
    cr_assert_eq(want.n, 1000);
    int dead_seen = 0, purged = 0;
    for (long n = 1; n < 80; n++) {
        shard_ring *r = ring_with_pins(1500, h), *c;
        cr_assert_eq(shard_ring_clone(r, &c), 0); /* shared, as a dispatcher's next ring is */
        fail_countdown = n;
        int err = shard_ring_remove(c, "w1");
        fail_countdown = 0;
        cr_assert_eq(err, 0, "a remove never fails (n=%ld)", n);
        dead_seen += c->pins_dead == 500;
        purged += c->pins_dead == 0;
        cr_assert(c->pins_dead == 0 || c->pins_dead == 500);
        cr_assert_eq(shard_ring_checksum(c), shard_ring_checksum(refc), "n=%ld", n);
        list_pins(c, &got);
        cr_assert_eq(got.n, want.n);
        cr_assert_eq(memcmp(got.h, want.h, want.n * sizeof *want.h), 0);
        cr_assert_eq(memcmp(got.m, want.m, sizeof want.m[0] * want.n), 0);
        int arcs = 0;
        cr_assert_eq(shard_ring_diff(c, refc, no_arc, &arcs), 0);
        cr_assert_eq(arcs, 0);
        for (int i = 0; i < 1500; i++)
            cr_assert_str_eq(shard_ring_owner_of_hash(c, h[i]), shard_ring_owner_of_hash(refc, h[i]), "pin %d", i);
        /* A dead hash is not pinned: unpinning it is -ENOENT, pinning it makes it live again. */
        cr_assert_eq(shard_ring_unpin(c, h[1]), -ENOENT);
        cr_assert_eq(shard_ring_pin(c, h[1], "w2"), 0);
        cr_assert_eq(c->pins_dead, 0, "purged by the next pin");
        cr_assert_eq(shard_ring_pin_count(c), 1001);
        cr_assert_str_eq(shard_ring_owner_of_hash(c, h[1]), "w2");
        cr_assert_eq(shard_ring_add(c, "w1", 1), 0); /* back, with none of its old pins */
        cr_assert_eq(shard_ring_pin_count(c), 1001);
        cr_assert_eq(shard_ring_pin(c, h[4], "w1"), 0);
        cr_assert_str_eq(shard_ring_owner_of_hash(c, h[4]), "w1");
        shard_ring_destroy(c);
        shard_ring_destroy(r);
    }
    cr_assert_gt(dead_seen, 0, "no purge was failed");
    cr_assert_gt(purged, 0, "no purge had memory");
    shard_ring_destroy(refc);
    shard_ring_destroy(ref);
}

/* A pin that finds the ring's pin filter full makes a new one first: when that (or anything after it)
 * has no memory, the pin is -ENOMEM and the ring is as it was, its filter and memory too; with memory, the
 * pin is made and every pin, old and new, is answered. */
Test(pin_faults, a_pin_whose_filter_must_be_remade_fails_cleanly)
{
    static uint64_t h[4000];
    int failed = 0, made = 0;
    for (long n = 1; n < 12; n++) {
        int k;
        shard_ring *r = ring_with_full_filter(9, h, 4000, &k);
        uint64_t rng = 10;
        const struct pin_filter *f = r->pin_filter;
        size_t bytes = shard_ring_memory(r);
        uint64_t sum = shard_ring_checksum(r), extra = mix(&rng);
        fail_countdown = n;
        int err = shard_ring_pin(r, extra, "w1");
        fail_countdown = 0;
        cr_assert(err == 0 || err == -ENOMEM, "n=%ld: %d", n, err);
        if (err) {
            failed++;
            cr_assert_eq(r->pin_filter, f, "a failed pin kept its filter (n=%ld)", n);
            cr_assert_eq(shard_ring_memory(r), bytes, "a failed pin changed the ring's memory (n=%ld)", n);
            cr_assert_eq(shard_ring_checksum(r), sum, "a failed pin changed the ring (n=%ld)", n);
            cr_assert_eq(shard_ring_pin_count(r), (size_t)k);
            cr_assert_null(shard_ring_pin_of(r, extra));
        } else {
            made++;
            cr_assert_neq(r->pin_filter, f, "a full filter was remade (n=%ld)", n);
            cr_assert_str_eq(shard_ring_owner_of_hash(r, extra), "w1");
        }
        for (int i = 0; i < k; i++)
            cr_assert_str_eq(shard_ring_owner_of_hash(r, h[i]), names[i % 3], "pin %d (n=%ld)", i, n);
        shard_ring_destroy(r);
    }
    cr_assert(failed && made, "failed %d, made %d", failed, made);
}

/* A pin whose hash's bit is set already (a pinned hash moved to another member) needs no new filter,
 * even a full one: it neither rebuilds it nor fails for want of memory to. */
Test(pin_faults, moving_a_pin_never_remakes_the_filter)
{
    static uint64_t h[4000];
    int k;
    shard_ring *r = ring_with_full_filter(21, h, 4000, &k);
    const struct pin_filter *f = r->pin_filter;
    for (int i = 0; i < k; i++) {
        fail_countdown = 1;
        int err = shard_ring_pin(r, h[i], names[(i + 1) % 3]);
        fail_countdown = 0;
        cr_assert_eq(err, 0, "moving pin %d: %d", i, err);
        cr_assert_eq(r->pin_filter, f, "moving pin %d remade the filter", i);
        cr_assert_str_eq(shard_ring_owner_of_hash(r, h[i]), names[(i + 1) % 3]);
    }
    shard_ring_destroy(r);
}

/* The rare paths together: a remove whose purge found no memory leaves its member's pins dead in the
 * trie, later pins keep failing to purge them, and one of those pins finds the filter full and remakes
 * it from the live pins while the dead ones are still there. The new filter must hold every live pin
 * (and may leave the dead out); the dead read as absent, and once the member is back a dead hash
 * pinned again is its own. */
Test(pin_faults, a_filter_remade_beside_dead_pins_keeps_the_live_ones)
{
    static uint64_t h[1500], extra[4000];
    shard_ring *r = ring_with_pins(1500, h), *c, *ref;
    cr_assert_eq(shard_ring_clone(r, &c), 0); /* shared, as a dispatcher's next ring is */
    cr_assert_eq(shard_ring_clone(r, &ref), 0);
    cr_assert_eq(shard_ring_remove(ref, "w1"), 0); /* with memory: the answers c must give */
    fail_countdown = 1;                           /* the purge's first allocation */
    cr_assert_eq(shard_ring_remove(c, "w1"), 0);
    fail_countdown = 0;
    cr_assert_eq(c->pins_dead, 500);
    const struct pin_filter *f = c->pin_filter;
    uint64_t rng = 33;
    int k = 0;
    while (c->pin_filter == f) {
        cr_assert_lt(k, 4000, "the filter was never remade");
        extra[k] = mix(&rng);
        fail_countdown = 1; /* the purge fails again; the filter, if it must be remade, has memory */
        int err = shard_ring_pin(c, extra[k], names[k % 2 ? 2 : 0]);
        fail_countdown = 0;
        cr_assert_eq(err, 0, "pin %d", k);
        cr_assert_eq(c->pins_dead, 500, "pin %d purged the dead", k);
        cr_assert_eq(shard_ring_pin(ref, extra[k], names[k % 2 ? 2 : 0]), 0);
        k++;
    }
    for (int i = 0; i < 1500; i++)
        cr_assert_str_eq(shard_ring_owner_of_hash(c, h[i]), shard_ring_owner_of_hash(ref, h[i]), "pin %d", i);
    for (int i = 0; i < k; i++)
        cr_assert_str_eq(shard_ring_owner_of_hash(c, extra[i]), names[i % 2 ? 2 : 0], "new pin %d", i);
    cr_assert_eq(shard_ring_pin_count(c), 1000 + (size_t)k);
    cr_assert_eq(shard_ring_add(c, "w1", 1), 0);
    cr_assert_eq(shard_ring_pin(c, h[1], "w1"), 0); /* h[1] was w1's: dead, now live again */
    cr_assert_str_eq(shard_ring_owner_of_hash(c, h[1]), "w1");
    cr_assert_eq(c->pins_dead, 0, "purged by that pin");
    shard_ring_destroy(ref);
    shard_ring_destroy(c);
    shard_ring_destroy(r);
}
