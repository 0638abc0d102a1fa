/* Internal: the one clock shard reads, CLOCK_MONOTONIC in ns (timers, busy time, queue age).
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_CLOCK_H
#define SHARD_SRC_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t shard__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
