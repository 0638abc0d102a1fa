/* The simulated cluster: nodes "node-0".."node-<N-1>" with SIM_POINTS points each on shard's ring,
 * sessions "session-0".."session-<K-1>", and where each session lives before and after node N/3
 * crashes. Everything the tables and the picture read about the crash is computed here, once. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "crash_sim.h"

shard_ring *sim_ring(int n, uint32_t points, int skip)
{
    struct shard_ring_config cfg = { .vnodes = points };
    shard_ring *r = NULL;
    struct shard_ring_member *m = calloc((size_t)n, sizeof *m);
    char (*names)[16] = calloc((size_t)n, sizeof *names);
    if (m && names && shard_ring_create(&r, &cfg) == 0) {
        size_t k = 0;
        for (int i = 0; i < n; i++) {
            if (i == skip)
                continue;
            snprintf(names[k], sizeof names[k], "node-%d", i);
            m[k] = (struct shard_ring_member){ names[k], 1 };
            k++;
        }
        /* the ring copies the names */
        if (shard_ring_add_many(r, m, k) != 0) {
            shard_ring_destroy(r);
            r = NULL;
        }
    }
    free(m);
    free(names);
    return r;
}

int sim_node_id(const char *name)
{
    return atoi(name + strlen("node-"));
}

double sim_turn(uint64_t point)
{
    return (double)point / 18446744073709551616.0;
}

void sim_ring_shares(const shard_ring *r, int n, double *share)
{
    memset(share, 0, (size_t)n * sizeof *share);
    size_t np = shard_ring_point_count(r);
    uint64_t prev;
    shard_ring_point(r, np - 1, &prev, NULL);
    for (size_t i = 0; i < np; i++) {
        uint64_t p;
        const char *owner;
        shard_ring_point(r, i, &p, &owner);
        /* point i owns (prev, p]; unsigned subtraction wraps past 2^64 for the first point */
        share[sim_node_id(owner)] += sim_turn(p - prev);
        prev = p;
    }
}

int sim_create(struct sim *s, int nodes, int keys)
{
    *s = (struct sim){ .nodes = nodes, .keys = keys, .crashed = nodes / 3 };
    s->key_hash = malloc((size_t)keys * sizeof *s->key_hash);
    s->before = malloc((size_t)keys * sizeof *s->before);
    s->after = malloc((size_t)keys * sizeof *s->after);
    s->count_before = calloc((size_t)nodes, sizeof *s->count_before);
    s->count_after = calloc((size_t)nodes, sizeof *s->count_after);
    s->share = calloc((size_t)nodes, sizeof *s->share);
    s->full = sim_ring(nodes, SIM_POINTS, -1);
    s->less = sim_ring(nodes, SIM_POINTS, s->crashed);
    if (!s->key_hash || !s->before || !s->after || !s->count_before || !s->count_after || !s->share ||
        !s->full || !s->less) {
        sim_free(s);
        return -ENOMEM;
    }
    for (int k = 0; k < keys; k++) {
        char key[24];
        int len = snprintf(key, sizeof key, "session-%d", k);
        s->key_hash[k] = XXH3_64bits(key, (size_t)len);
        s->before[k] = sim_node_id(shard_ring_owner_of_hash(s->full, s->key_hash[k]));
        s->after[k] = sim_node_id(shard_ring_owner_of_hash(s->less, s->key_hash[k]));
        s->count_before[s->before[k]]++;
        s->count_after[s->after[k]]++;
    }
    sim_ring_shares(s->full, nodes, s->share);
    return 0;
}

void sim_free(struct sim *s)
{
    free(s->key_hash);
    free(s->before);
    free(s->after);
    free(s->count_before);
    free(s->count_after);
    free(s->share);
    shard_ring_destroy(s->full);
    shard_ring_destroy(s->less);
    *s = (struct sim){ 0 };
}
