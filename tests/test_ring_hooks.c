/* The point and hash hooks reproduce other systems' placement exactly: Envoy's ring_hash (the
 * conformance vector in tests/vectors, a copy of shared/vectors) and a ketama-style ring with 32-bit
 * points; and the hooks are called with the documented arguments. */
#include <criterion/criterion.h>
#include <shard.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "ring_oracle.h"

#ifndef SHARD_VECTORS_DIR
#error "SHARD_VECTORS_DIR must name tests/vectors"
#endif

/* Envoy: XXH64(addr "_" decimal(i), seed 0). */
static uint64_t envoy_point(const char *member, uint32_t i, void *ctx)
{
    (void)ctx;
    char buf[300];
    int n = snprintf(buf, sizeof buf, "%s_%u", member, i);
    return XXH64(buf, (size_t)n, 0);
}

struct vector {
    char     members[16][64];
    int      nmembers;
    uint64_t point[64];
    char     point_owner[64][64];
    int      npoints;
    uint64_t hash[64];
    char     hash_owner[64][64];
    int      nhashes;
};

/* Reads the Markdown vector: the "Members:" line, then the point table, then the lookup table. */
static void load_vector(const char *path, struct vector *v)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s", path);
    char line[512];
    int table = 0;
    memset(v, 0, sizeof *v);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "Members:", 8) == 0) {
            for (char *tok = strtok(line + 8, ", \n"); tok; tok = strtok(NULL, ", \n"))
                snprintf(v->members[v->nmembers++], 64, "%s", tok);
        } else if (strncmp(line, "| point", 7) == 0) {
            table = 1;
        } else if (strncmp(line, "| hash", 6) == 0) {
            table = 2;
        } else if (line[0] == '|' && line[2] >= '0' && line[2] <= '9') {
            char *end;
            uint64_t x = strtoull(line + 2, &end, 10);
            char *owner = strrchr(line, '|');
            *owner = 0;
            owner = strrchr(line, '|') + 1;
            while (*owner == ' ')
                owner++;
            owner[strcspn(owner, " ")] = 0;
            if (table == 1) {
                v->point[v->npoints] = x;
                snprintf(v->point_owner[v->npoints++], 64, "%s", owner);
            } else if (table == 2) {
                v->hash[v->nhashes] = x;
                snprintf(v->hash_owner[v->nhashes++], 64, "%s", owner);
            }
        }
    }
    fclose(f);
}

Test(hooks, envoy_ring_hash_vector)
{
    struct vector v;
    load_vector(SHARD_VECTORS_DIR "/envoy_ring_hash.md", &v);
    cr_assert_eq(v.nmembers, 6);
    cr_assert_eq(v.npoints, 12);
    cr_assert_eq(v.nhashes, 5);

    struct shard_ring_config cfg = { .vnodes = 2, .point = envoy_point };
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, &cfg), 0);
    for (int i = 0; i < v.nmembers; i++)
        cr_assert_eq(shard_ring_add(r, v.members[i], 1), 0);
    cr_assert_eq(shard_ring_point_count(r), (size_t)v.npoints);
    for (int i = 0; i < v.npoints; i++) {
        uint64_t p;
        const char *o;
        cr_assert_eq(shard_ring_point(r, (size_t)i, &p, &o), 0);
        cr_assert_eq(p, v.point[i], "point %d: %llu, Envoy has %llu", i, (unsigned long long)p,
                     (unsigned long long)v.point[i]);
        cr_assert_str_eq(o, v.point_owner[i]);
    }
    for (int i = 0; i < v.nhashes; i++)
        cr_assert_str_eq(shard_ring_owner_of_hash(r, v.hash[i]), v.hash_owner[i], "hash %llu",
                         (unsigned long long)v.hash[i]);
    shard_ring_destroy(r);
}

/* A ketama stand-in without MD5: the 16-byte digest is XXH128 instead, every other rule is ketama's
 * (4 points a digest, little-endian u32 at byte 4 * (i mod 4) of digest(member "-" floor(i / 4)),
 * key hash = little-endian u32 of the first 4 bytes of digest(key)). */
static void digest16(const void *data, size_t len, unsigned char out[16])
{
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(data, len));
    memcpy(out, c.digest, 16);
}

static uint32_t le32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t ketama_point(const char *member, uint32_t i, void *ctx)
{
    (void)ctx;
    char buf[300];
    unsigned char d[16];
    int n = snprintf(buf, sizeof buf, "%s-%u", member, i / 4);
    digest16(buf, (size_t)n, d);
    return le32(d + 4 * (i % 4));
}

static uint64_t ketama_hash(const void *key, size_t len, void *ctx)
{
    (void)ctx;
    unsigned char d[16];
    digest16(key, len, d);
    return le32(d);
}

struct ref_point {
    uint64_t p;
    const char *owner;
};

static int cmp_ref(const void *a, const void *b)
{
    const struct ref_point *x = a, *y = b;
    if (x->p != y->p)
        return x->p < y->p ? -1 : 1;
    return strcmp(x->owner, y->owner);
}

Test(hooks, ketama_style_ring_with_32_bit_points)
{
    static const char *servers[] = { "10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11211", "10.0.0.4:11211",
                                     "10.0.0.5:11211" };
    static const uint32_t weights[] = { 40, 40, 80, 40, 20 }; /* digests: 160 points is weight 40 */
    struct shard_ring_config cfg = { .vnodes = 4, .point = ketama_point, .hash = ketama_hash };
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, &cfg), 0);
    size_t total = 0;
    for (int s = 0; s < 5; s++) {
        cr_assert_eq(shard_ring_add(r, servers[s], weights[s]), 0);
        total += 4 * weights[s];
    }
    /* An independent build: every point from the formula, sorted. */
    struct ref_point *ref = malloc(total * sizeof *ref);
    size_t n = 0;
    for (int s = 0; s < 5; s++)
        for (uint32_t i = 0; i < 4 * weights[s]; i++)
            ref[n++] = (struct ref_point){ ketama_point(servers[s], i, NULL), servers[s] };
    qsort(ref, n, sizeof *ref, cmp_ref);
    cr_assert_eq(shard_ring_point_count(r), n);
    for (size_t i = 0; i < n; i++) {
        uint64_t p;
        const char *o;
        shard_ring_point(r, i, &p, &o);
        cr_assert_lt(p, UINT64_C(1) << 32);
        cr_assert_eq(p, ref[i].p);
        cr_assert_str_eq(o, ref[i].owner);
    }
    /* Lookups over the crowded 32-bit range agree with a lower_bound over the reference points. */
    char key[32];
    for (unsigned k = 0; k < 20000; k++) {
        size_t len = test_key(key, sizeof key, "memcache", k);
        uint64_t h = ketama_hash(key, len, NULL);
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (ref[mid].p < h)
                lo = mid + 1;
            else
                hi = mid;
        }
        cr_assert_str_eq(shard_ring_owner(r, key, len), ref[lo == n ? 0 : lo].owner, "key %s", key);
    }
    /* Hashes above every point wrap to the smallest. */
    cr_assert_str_eq(shard_ring_owner_of_hash(r, UINT64_MAX), ref[0].owner);
    cr_assert_str_eq(shard_ring_owner_of_hash(r, ref[n - 1].p + 1), ref[0].owner);
    free(ref);
    shard_ring_destroy(r);
}

struct calls {
    int      points;
    unsigned seen[64];
    int      bad;
    int      hashes;
    const void *last_key;
    size_t   last_len;
};

static uint64_t counting_point(const char *member, uint32_t i, void *ctx)
{
    struct calls *c = ctx;
    c->points++;
    if (strcmp(member, "member") != 0 || i >= 15)
        c->bad++;
    else
        c->seen[i]++;
    return (uint64_t)i * 1000003u;
}

static uint64_t counting_hash(const void *key, size_t len, void *ctx)
{
    struct calls *c = ctx;
    c->hashes++;
    c->last_key = key;
    c->last_len = len;
    return len;
}

Test(hooks, called_with_documented_arguments)
{
    struct calls c = { 0 };
    struct shard_ring_config cfg = { .vnodes = 5, .point = counting_point, .hash = counting_hash, .ctx = &c };
    shard_ring *r;
    cr_assert_eq(shard_ring_create(&r, &cfg), 0);
    cr_assert_eq(shard_ring_add(r, "member", 3), 0);
    cr_assert_eq(c.points, 15);
    cr_assert_eq(c.bad, 0);
    for (int i = 0; i < 15; i++)
        cr_assert_eq(c.seen[i], 1, "index %d called %u times", i, c.seen[i]);
    const char key[] = "some key";
    cr_assert_str_eq(shard_ring_owner(r, key, 8), "member");
    cr_assert_eq(c.hashes, 1);
    cr_assert_eq(c.last_key, key);
    cr_assert_eq(c.last_len, 8);
    cr_assert_eq(shard_ring_hash(r, key, 3), 3);
    shard_ring_destroy(r);
}

static uint64_t xxh3_hash_point(const char *member, uint32_t i, void *ctx)
{
    char buf[300];
    int n = snprintf(buf, sizeof buf, "%s#%u", member, i);
    return XXH3_64bits_withSeed(buf, (size_t)n, *(uint64_t *)ctx);
}

Test(hooks, default_point_is_xxh3_of_member_hash_index)
{
    uint64_t seed = 77;
    struct shard_ring_config def = { .vnodes = 9, .seed = seed };
    struct shard_ring_config hook = { .vnodes = 9, .seed = seed, .point = xxh3_hash_point, .ctx = &seed };
    shard_ring *a, *b;
    cr_assert_eq(shard_ring_create(&a, &def), 0);
    cr_assert_eq(shard_ring_create(&b, &hook), 0);
    for (int i = 0; i < 7; i++) {
        char name[16];
        snprintf(name, sizeof name, "node%d", i * 13);
        cr_assert_eq(shard_ring_add(a, name, 2), 0);
        cr_assert_eq(shard_ring_add(b, name, 2), 0);
    }
    cr_assert_eq(shard_ring_checksum(a), shard_ring_checksum(b));
    cr_assert_eq(shard_ring_hash(a, "abc", 3), XXH3_64bits_withSeed("abc", 3, seed));
    shard_ring_destroy(a);
    shard_ring_destroy(b);
}
