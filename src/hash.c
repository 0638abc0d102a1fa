/* Default hashes: XXH3-64 with the ring's seed. SPDX-License-Identifier: LGPL-2.1-or-later */
#include "hash.h"

#include <string.h>

#include "shard/common.h"

uint64_t shard__hash_point(const char *member, uint32_t index, uint64_t seed)
{
    char buf[SHARD_NAME_MAX + 1 + 10];
    size_t n = strnlen(member, SHARD_NAME_MAX);
    memcpy(buf, member, n);
    buf[n++] = '#';
    /* decimal(index), written backwards then placed: no snprintf on the ring build path. */
    char digits[10];
    size_t d = 0;
    do {
        digits[d++] = (char)('0' + index % 10);
        index /= 10;
    } while (index);
    while (d)
        buf[n++] = digits[--d];
    return XXH3_64bits_withSeed(buf, n, seed);
}
