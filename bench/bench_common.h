/* Shared helpers of the benchmark programs: a monotonic clock and the --quick flag. */
#ifndef SHARD_BENCH_COMMON_H
#define SHARD_BENCH_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline bool bench_quick(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--quick") == 0)
            return true;
    return false;
}

/* splitmix64: a fast deterministic stream of 64-bit values for inputs. */
static inline uint64_t bench_mix(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#endif
