/* kv_server's key hashes (examples/kv/kvmap.h): a key's store hash is keyed by the secret seed over
 * the key's bytes, so keys that anyone can make collide under shard's public ring seed (XXH3 with a
 * known seed has such collisions) still spread over the store's buckets; and the shard hash kv_server
 * hands to shard is shard_dispatcher_key_hash's. */
#include <criterion/criterion.h>
#include <shard.h>
#include <string.h>

#include "kvmap.h"

uint64_t kv_hash_seed; /* kvmap.c's, which this test does not link: set here as kv_hash_init would */

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
        kv_hash_seed = seed * 0x9E3779B97F4A7C15ull;
        uint64_t ha = kv_hash(a, 32), hb = kv_hash(b, 32), hc = kv_hash(c, 32); /* the store hash */
        cr_assert(ha != hb && ha != hc && hb != hc, "seed %#llx: keys of one public hash share a store hash",
                  (unsigned long long)kv_hash_seed);
        same_bucket += (ha >> 48) == (hb >> 48); /* one bucket of 65,536 (a store's top 16 bits) */
    }
    /* Independent hashes share one in 65,536 seeds: 0.015 expected of 1,000; a store hash that is a
     * function of the public hash shares it in all 1,000. */
    cr_assert_lt(same_bucket, 5, "two colliding keys shared a bucket under %d of 1,000 seeds", same_bucket);
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
