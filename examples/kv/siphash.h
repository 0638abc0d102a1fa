/* kv_server: SipHash (Aumasson and Bernstein, 2012), a keyed pseudo-random function of 64 bits for the
 * store's hash. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Written by hand: the store hashes every key of every request, and its cost is the hash's share of a
 * GET. Redis's dict hashes with SipHash-1-2 (one compression round a block, two at the end), which it
 * judges enough against hash flooding; Debian's libraries offer SipHash-2-4 alone (libsodium's
 * crypto_shorthash), which cost kv_server 7 to 17 % more CPU a SET, GET, HSET or MSET of 10 than
 * XXH3 had (4 interleaved rounds). So: the algorithm with its rounds as parameters, checked at 2-4
 * against libsodium's in test_kv_hash, and used at 1-2, as Redis's. */
#ifndef KV_SIPHASH_H
#define KV_SIPHASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SIPHASH_KEY_BYTES 16

static inline uint64_t sip_rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

/* One SipRound over the state v[0..3]. */
static inline void sip_round(uint64_t v[4])
{
    v[0] += v[1];
    v[1] = sip_rotl(v[1], 13) ^ v[0];
    v[0] = sip_rotl(v[0], 32);
    v[2] += v[3];
    v[3] = sip_rotl(v[3], 16) ^ v[2];
    v[0] += v[3];
    v[3] = sip_rotl(v[3], 21) ^ v[0];
    v[2] += v[1];
    v[1] = sip_rotl(v[1], 17) ^ v[2];
    v[2] = sip_rotl(v[2], 32);
}

/* SipHash-c-d of data[0, len) under key (16 bytes, read little-endian as the specification's k0, k1):
 * c rounds a block of 8 bytes, d at the end. Assumes a little-endian machine, as the rest of
 * kv_server does (amd64, arm64). */
static inline uint64_t siphash(const void *data, size_t len, const unsigned char key[SIPHASH_KEY_BYTES],
                               int c, int d)
{
    uint64_t k0, k1;
    memcpy(&k0, key, 8);
    memcpy(&k1, key + 8, 8);
    uint64_t v[4] = { k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull, k0 ^ 0x6c7967656e657261ull,
                      k1 ^ 0x7465646279746573ull };
    const unsigned char *p = data;
    size_t whole = len & ~(size_t)7;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m;
        memcpy(&m, p + i, 8);
        v[3] ^= m;
        for (int r = 0; r < c; r++)
            sip_round(v);
        v[0] ^= m;
    }
    uint64_t last = (uint64_t)len << 56;
    for (size_t i = 0; i < (len & 7); i++)
        last |= (uint64_t)p[whole + i] << (8 * i);
    v[3] ^= last;
    for (int r = 0; r < c; r++)
        sip_round(v);
    v[0] ^= last;
    v[2] ^= 0xff;
    for (int r = 0; r < d; r++)
        sip_round(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

#endif
