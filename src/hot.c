/* A worker's heaviest keys (hot.h). SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hot.h"

struct hot *shard__hot_new(uint32_t k, uint32_t window_ms)
{
    if (k == 0)
        return NULL;
    struct hot *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->k = k;
    h->window_ns = (uint64_t)(window_ms ? window_ms : 1000) * 1000000u;
    pthread_mutex_init(&h->lock, NULL);
    return h;
}

void shard__hot_free(struct hot *h)
{
    if (!h)
        return;
    pthread_mutex_destroy(&h->lock);
    free(h);
}

static void rotate(struct hot *h, uint64_t now)
{
    if (h->window_end) {
        pthread_mutex_lock(&h->lock);
        memcpy(h->last, h->cur, h->ncur * sizeof *h->cur);
        h->nlast = h->ncur;
        h->last_busy = h->window_busy;
        h->last_jobs = h->window_jobs;
        h->published++;
        pthread_mutex_unlock(&h->lock);
    }
    h->ncur = 0;
    h->window_busy = 0;
    h->window_jobs = 0;
    /* Windows keep to their grid while jobs run; after an idle gap the next one starts now. */
    bool on_grid = h->window_end && now < h->window_end + h->window_ns;
    h->window_end = on_grid ? h->window_end + h->window_ns : now + h->window_ns;
}

void shard__hot_record(struct hot *h, uint64_t hash, uint64_t ns, uint64_t now)
{
    if (now >= h->window_end)
        rotate(h, now);
    h->window_busy += ns;
    h->window_jobs++;
    uint32_t min = 0;
    for (uint32_t i = 0; i < h->ncur; i++) {
        if (h->cur[i].hash == hash) {
            h->cur[i].busy_ns += ns;
            h->cur[i].jobs++;
            return;
        }
        if (h->cur[i].busy_ns < h->cur[min].busy_ns)
            min = i;
    }
    if (h->ncur < h->k) {
        h->cur[h->ncur++] = (struct shard_hot_key){ hash, ns, 0, 1 };
        return;
    }
    struct shard_hot_key *m = &h->cur[min];
    *m = (struct shard_hot_key){ hash, m->busy_ns + ns, m->busy_ns, m->jobs + 1 };
}

void shard__hot_idle(struct hot *h, uint64_t now)
{
    if (h->window_end && now >= h->window_end)
        rotate(h, now);
}

static int heavier_first(const void *a, const void *b)
{
    const struct shard_hot_key *x = a, *y = b;
    return x->busy_ns > y->busy_ns ? -1 : x->busy_ns < y->busy_ns;
}

long shard__hot_read(struct hot *h, struct shard_hot_key *out, size_t n, uint64_t *busy, uint64_t *jobs,
                     uint64_t *seq)
{
    struct shard_hot_key copy[SHARD_MAX_HOT_KEYS];
    pthread_mutex_lock(&h->lock);
    uint32_t len = h->nlast;
    memcpy(copy, h->last, len * sizeof *copy);
    if (busy)
        *busy = h->last_busy;
    if (jobs)
        *jobs = h->last_jobs;
    if (seq)
        *seq = h->published;
    pthread_mutex_unlock(&h->lock);
    qsort(copy, len, sizeof *copy, heavier_first);
    if (n && len) /* out may be NULL with n 0 (dispatcher.h), which memcpy may not be given */
        memcpy(out, copy, (n < len ? n : len) * sizeof *copy);
    return (long)len;
}
