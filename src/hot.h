/* Internal: a worker's heaviest keys over a window (hot.c), when shard_config.hot_keys asks for them.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Space-saving (Metwally, Agrawal, El Abbadi, 2005) with k counters weighted by job time: a key not
 * counted takes over the smallest counter, inheriting its count as its error, so every key heavier
 * than 1/k of the total is kept, with its time overestimated by at most its error. k is small (at
 * most SHARD_MAX_HOT_KEYS), so the counters are a plain array scanned per job: a hash table and a
 * stream-summary list would cost more at this size. The worker counts the current window alone; at
 * its end it publishes it under a lock that readers take. */
#ifndef SHARD_SRC_HOT_H
#define SHARD_SRC_HOT_H

#include <pthread.h>
#include <stdint.h>

#include "shard/dispatcher.h"

struct hot {
    uint32_t             k;         /* I */
    uint64_t             window_ns; /* I */
    /* The worker's: the window being counted. */
    struct shard_hot_key cur[SHARD_MAX_HOT_KEYS];
    uint32_t             ncur;
    uint64_t             window_end, window_busy, window_jobs;
    /* lock: the last whole window, and how many windows were published (which one it is). */
    pthread_mutex_t      lock;
    struct shard_hot_key last[SHARD_MAX_HOT_KEYS];
    uint32_t             nlast;
    uint64_t             last_busy, last_jobs, published;
};

/* NULL when k is 0 or memory is short (then nothing is tracked). */
struct hot *shard__hot_new(uint32_t k, uint32_t window_ms);
void        shard__hot_free(struct hot *h);
/* A job of key hash ran for ns, ending at now. Context: the worker. */
void        shard__hot_record(struct hot *h, uint64_t hash, uint64_t ns, uint64_t now);
/* The worker goes idle at now: a window that has ended is published. Context: the worker. */
void        shard__hot_idle(struct hot *h, uint64_t now);
/* The last whole window, heaviest first, up to n into out; *busy and *jobs its totals, *seq its number
 * (windows published up to it; 0: none yet): a reader that gets the same number twice has read the
 * same window twice. busy, jobs and seq may be NULL. Return: its length. */
long        shard__hot_read(struct hot *h, struct shard_hot_key *out, size_t n, uint64_t *busy, uint64_t *jobs,
                            uint64_t *seq);

#endif
