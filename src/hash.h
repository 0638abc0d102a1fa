/* Internal: the default key and point hashes. SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_HASH_H
#define SHARD_SRC_HASH_H

#include <stddef.h>
#include <stdint.h>

/* XXH3_64bits_withSeed(key, len, seed). */
uint64_t shard__hash_key(const void *key, size_t len, uint64_t seed);

/* XXH3_64bits_withSeed(member "#" decimal(index), seed); member at most SHARD_NAME_MAX bytes. */
uint64_t shard__hash_point(const char *member, uint32_t index, uint64_t seed);

#endif
