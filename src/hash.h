/* Internal: the default key and point hashes. SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_HASH_H
#define SHARD_SRC_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "shard/ring.h"

/* Inline: a submit hashes every key, and the call through a function alone cost as much as XXH3 on a
 * short key. */
#define XXH_INLINE_ALL
#include <xxhash.h>

/* XXH3_64bits_withSeed(key, len, seed). */
static inline uint64_t shard__hash_key(const void *key, size_t len, uint64_t seed)
{
    return XXH3_64bits_withSeed(key, len, seed);
}

/* A key's position under a ring config: its hash hook, or XXH3 with its seed. key may be NULL with
 * len 0. The one definition the ring and the dispatcher both use. */
static inline uint64_t shard__hash_key_cfg(const struct shard_ring_config *cfg, const void *key, size_t len)
{
    if (cfg->hash)
        return cfg->hash(key, len, cfg->ctx);
    return shard__hash_key(key ? key : "", len, cfg->seed);
}

/* XXH3_64bits_withSeed(member "#" decimal(index), seed); member at most SHARD_NAME_MAX bytes. */
uint64_t shard__hash_point(const char *member, uint32_t index, uint64_t seed);

#endif
