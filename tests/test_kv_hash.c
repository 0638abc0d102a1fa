/* kv_server's key hashes (examples/kv/kvmap.h): a key's store hash is keyed by the secret key over
 * the key's bytes (SipHash: one hash tells nothing of another's), so keys that anyone can make collide
 * under shard's public ring seed (XXH3 with a known seed has such collisions) still spread over the
 * store's buckets; and the shard hash kv_server hands to shard is shard_dispatcher_key_hash's. */
#include <criterion/criterion.h>
#include <shard.h>
#include <string.h>

#include <sodium/crypto_shorthash_siphash24.h>

#include "kvmap.h"

unsigned char kv_hash_key[SIPHASH_KEY_BYTES]; /* kvmap.c's, which this test does not link: set here
                                               * as kv_hash_init would */

static void set_key(uint64_t k)
{
    uint64_t words[2] = { k, ~k * 0x9E3779B97F4A7C15ull };
    memcpy(kv_hash_key, words, sizeof kv_hash_key);
}

/* 32 bytes whose halves each start with the default secret's 8 bytes at their offset: under seed 0
 * each half's multiply is by zero, so every such key hashes alike whatever its other 16 bytes. */
static void colliding_key(unsigned char key[32], char fill1, char fill2)
{
    memcpy(key, XXH3_kSecret, 8);
    memset(key + 8, fill1, 8);
    memcpy(key + 16, XXH3_kSecret + 16, 8);
    memset(key + 24, fill2, 8);
}

Test(kv_hash, keys_colliding_under_the_public_seed_do_not_share_a_store_hash)
{
    unsigned char a[32], b[32], c[32];
    colliding_key(a, 'x', 'y');
    colliding_key(b, 'p', 'q');
    colliding_key(c, 'p', 'y');
    cr_assert_eq(kv_shard_hash(a, 32), kv_shard_hash(b, 32), "the construction no longer collides: pick another");
    cr_assert_eq(kv_shard_hash(a, 32), kv_shard_hash(c, 32));
    int same_bucket = 0;
    for (uint64_t seed = 1; seed <= 1000; seed++) {
        set_key(seed * 0x9E3779B97F4A7C15ull);
        uint64_t ha = kv_hash(a, 32), hb = kv_hash(b, 32), hc = kv_hash(c, 32); /* the store hash */
        cr_assert(ha != hb && ha != hc && hb != hc, "key %llu: keys of one public hash share a store hash",
                  (unsigned long long)seed);
        same_bucket += (ha >> 48) == (hb >> 48); /* one bucket of 65,536 (a store's top 16 bits) */
    }
    /* Independent hashes share one in 65,536 seeds: 0.015 expected of 1,000; a store hash that is a
     * function of the public hash shares it in all 1,000. */
    cr_assert_lt(same_bucket, 5, "two colliding keys shared a bucket under %d of 1,000 seeds", same_bucket);
}

/* kv_server's SipHash (siphash.h), at libsodium's rounds (2-4), is libsodium's: the same algorithm,
 * which it uses at 1-2, as Redis does. Every length from 0 to 64 (each tail and several blocks), keys
 * drawn from a fixed seed. */
Test(kv_hash, siphash_is_libsodiums_at_2_4)
{
    unsigned char key[SIPHASH_KEY_BYTES], msg[64];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (unsigned char)(i * 37 + 11);
    for (int k = 0; k < 20; k++) {
        for (size_t i = 0; i < sizeof key; i++)
            key[i] = (unsigned char)(k * 101 + i * 7 + 3);
        for (size_t len = 0; len <= sizeof msg; len++) {
            unsigned char want[crypto_shorthash_siphash24_BYTES];
            crypto_shorthash_siphash24(want, msg, len, key);
            uint64_t w;
            memcpy(&w, want, sizeof w);
            cr_assert_eq(siphash(msg, len, key, 2, 4), w, "key %d, %zu bytes", k, len);
        }
    }
    cr_assert_neq(siphash(msg, 10, key, 1, 2), siphash(msg, 10, key, 2, 4), "the rounds are used");
}

/* The inverse of an odd number modulo 2^64 (Newton's iteration: each step doubles the bits right). */
static uint64_t inverse(uint64_t odd)
{
    uint64_t x = odd;
    for (int i = 0; i < 5; i++)
        x *= 2 - odd * x;
    return x;
}

/* What XXH3 with a secret seed gives away (the store hash until 2026-12-07): the seed, from one key of
 * 1 to 3 bytes and its hash, its last steps inverted (XXH3_len_1to3_64b: the avalanche of the key's
 * bytes xor the default secret's first two words plus the seed). A client read such a hash exactly
 * through SCAN's cursors, then made keys that collide. */
static uint64_t xxh3_seed_from(const unsigned char *key, size_t len, uint64_t hash)
{
    uint64_t h = hash;
    h ^= h >> 32;
    h *= inverse(XXH_PRIME64_3);
    h ^= h >> 29 ^ h >> 58;
    h *= inverse(XXH_PRIME64_2);
    h ^= h >> 33;
    uint32_t combined = (uint32_t)key[0] << 16 | (uint32_t)key[len >> 1] << 24 | key[len - 1] | (uint32_t)len << 8;
    return (h ^ combined) - (XXH_readLE32(XXH3_kSecret) ^ XXH_readLE32(XXH3_kSecret + 4));
}

Test(kv_hash, a_key_and_its_store_hash_tell_nothing_of_another_keys)
{
    /* The inversion is right: it recovers XXH3's seed, which then foretells every other key's hash. */
    const unsigned char a[] = "a", b[] = "bb";
    uint64_t seed = 0x1234567890abcdefull;
    cr_assert_eq(xxh3_seed_from(a, 1, XXH3_64bits_withSeed(a, 1, seed)), seed);
    /* The store hash is a keyed pseudo-random function (SipHash-1-2): the same reading foretells nothing. */
    for (uint64_t k = 1; k <= 100; k++) {
        set_key(k);
        uint64_t guess = xxh3_seed_from(a, 1, kv_hash(a, 1));
        cr_assert_neq(XXH3_64bits_withSeed(b, 2, guess), kv_hash(b, 2), "key %llu: one hash told another's",
                      (unsigned long long)k);
    }
}

Test(kv_hash, the_shard_hash_is_the_dispatchers)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 1, .ring = { .seed = KV_RING_SEED, .hash = kv_ring_hash } };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    const char *keys[] = { "", "k", "key:1234", "a key longer than sixteen bytes, and than one hundred and "
                                                "twenty-eight, so that XXH3's every length class is taken here "
                                                "at least once: this is the long one",
                           "{user:42}:cart", "a{}{b}" };
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        cr_assert_eq(kv_shard_hash(keys[i], strlen(keys[i])), shard_dispatcher_key_hash(d, keys[i], strlen(keys[i])),
                     "key %zu", i);
    shard_dispatcher_destroy(d);
}

static uint64_t plain(const char *bytes)
{
    return XXH3_64bits_withSeed(bytes, strlen(bytes), KV_RING_SEED);
}

static uint64_t shard_hash(const char *key)
{
    return kv_shard_hash(key, strlen(key));
}

/* Redis Cluster's rule and its specification's examples: the bytes between the first '{' and the
 * first '}' after it, when there is at least one; else the whole key. */
Test(kv_hash, a_key_with_a_tag_is_placed_by_its_tag)
{
    cr_assert_eq(shard_hash("{user1000}.following"), plain("user1000"));
    cr_assert_eq(shard_hash("{user1000}.followers"), shard_hash("{user1000}.following"));
    cr_assert_eq(shard_hash("foo{bar}{zap}"), plain("bar"), "the first tag only");
    cr_assert_eq(shard_hash("foo{{bar}}zap"), plain("{bar"), "from the first '{' to the first '}' after it");
    cr_assert_eq(shard_hash("x{}"), plain("x{}"), "an empty tag: the whole key");
    cr_assert_eq(shard_hash("foo{}{bar}"), plain("foo{}{bar}"), "the first tag is empty: the whole key");
    cr_assert_eq(shard_hash("a{b"), plain("a{b"), "no '}': the whole key");
    cr_assert_eq(shard_hash("a}b{c"), plain("a}b{c"), "no '}' after the '{': the whole key");
    cr_assert_eq(shard_hash("{"), plain("{"));
    cr_assert_eq(shard_hash("{x}"), plain("x"), "the tag is the whole key but its braces");
    cr_assert_eq(kv_shard_hash(NULL, 0), plain(""), "the empty key");
    /* A tag is found at every offset, in keys long enough to take memchr's every path. */
    char key[300];
    for (size_t at = 0; at + 5 < sizeof key; at += 7) {
        memset(key, 'k', sizeof key);
        memcpy(key + at, "{tag}", 5);
        cr_assert_eq(kv_shard_hash(key, sizeof key), plain("tag"), "a tag at %zu", at);
    }
}
