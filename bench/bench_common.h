/* Shared helpers of the benchmark programs: a monotonic clock, pinning a thread to a CPU, their
 * arguments (--quick) and a stream of inputs. */
#ifndef SHARD_BENCH_COMMON_H
#define SHARD_BENCH_COMMON_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Pins the calling thread to CPU cpu (a bench's threads are built with _GNU_SOURCE). Return: false
 * when it cannot (the thread then runs where the scheduler puts it). */
static inline bool bench_pin_cpu(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

/* Whether --quick was given (short runs: CI's smoke test). --help prints the usage line, with
 * usage_more after [--quick], and exits 0; any other argument that accept (NULL: none) does not take
 * is an error: that line on stderr and exit status 2, never a full run nobody asked for. */
static inline bool bench_args(int argc, char **argv, bool (*accept)(const char *arg), const char *usage_more)
{
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = true;
        } else if (strcmp(argv[i], "--help") == 0) {
            printf("usage: %s [--quick]%s\n", argv[0], usage_more ? usage_more : "");
            exit(0);
        } else if (!accept || !accept(argv[i])) {
            fprintf(stderr, "%s: unknown argument '%s'\nusage: %s [--quick]%s\n", argv[0], argv[i], argv[0],
                    usage_more ? usage_more : "");
            exit(2);
        }
    }
    return quick;
}

/* For a benchmark whose only option is --quick. */
static inline bool bench_quick(int argc, char **argv)
{
    return bench_args(argc, argv, NULL, NULL);
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
