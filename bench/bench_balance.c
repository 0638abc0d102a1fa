/* bench_balance: load spread and movement, from the ring's own shares (exact, no sampling):
 *   max/mean and min/mean ownership for members x vnodes;
 *   the fraction of the hash space moved by adding one member to N (ideal 1/(N+1)) and removing
 *   one of N+1 (ideal 1/(N+1) too: the removed member's share), from shard_ring_diff; against
 *   hash % N, measured on 1,000,000 keys.
 * One line per measurement. */
#include <shard.h>
#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>

#include "bench_common.h"

static shard_ring *ring_of(uint32_t n, uint32_t vnodes)
{
    struct shard_ring_config cfg = { .vnodes = vnodes };
    shard_ring *r;
    shard_ring_create(&r, &cfg);
    char (*names)[16] = calloc(n, 16);
    struct shard_ring_member *m = calloc(n, sizeof *m);
    for (uint32_t i = 0; i < n; i++) {
        snprintf(names[i], 16, "w%u", i);
        m[i] = (struct shard_ring_member){ names[i], 1 };
    }
    shard_ring_add_many(r, m, n);
    free(m);
    free(names);
    return r;
}

static void spread(uint32_t n, uint32_t vnodes)
{
    shard_ring *r = ring_of(n, vnodes);
    double max = 0, min = 1;
    for (size_t i = 0; i < n; i++) {
        double s = shard_ring_share(r, shard_ring_member(r, i));
        max = s > max ? s : max;
        min = s < min ? s : min;
    }
    printf("bench=balance members=%u vnodes=%u max_over_mean=%.3f min_over_mean=%.3f\n", n, vnodes, max * n,
           min * n);
    shard_ring_destroy(r);
}

static void sum_arc(uint64_t first, uint64_t last, const char *a, const char *b, void *ctx)
{
    (void)a;
    (void)b;
    *(double *)ctx += first == last ? 18446744073709551616.0 : (double)(last - first);
}

static void movement(uint32_t n, int keys)
{
    shard_ring *a = ring_of(n, 0), *b = ring_of(n + 1, 0);
    double add = 0, rem = 0;
    shard_ring_diff(a, b, sum_arc, &add);
    shard_ring_diff(b, a, sum_arc, &rem);
    add /= 18446744073709551616.0;
    rem /= 18446744073709551616.0;
    long mod_add = 0;
    for (int k = 0; k < keys; k++) {
        char key[24];
        int len = snprintf(key, sizeof key, "key-%d", k);
        uint64_t h = XXH3_64bits(key, (size_t)len);
        mod_add += h % n != h % (n + 1);
    }
    printf("bench=movement members=%u->%u ring_moved=%.4f ideal=%.4f ratio_vs_ideal=%.3f modulo_moved=%.4f\n", n,
           n + 1, add, 1.0 / (n + 1), add * (n + 1), (double)mod_add / keys);
    printf("bench=movement members=%u->%u ring_moved=%.4f ideal=%.4f ratio_vs_ideal=%.3f modulo_moved=%.4f\n", n + 1,
           n, rem, 1.0 / (n + 1), rem * (n + 1), (double)mod_add / keys);
    shard_ring_destroy(a);
    shard_ring_destroy(b);
}

int main(int argc, char **argv)
{
    bool quick = bench_quick(argc, argv);
    static const uint32_t members[] = { 8, 64, 1000 };
    static const uint32_t vnodes[] = { 1, 10, 100, 160, 1024 };
    for (int m = 0; m < (quick ? 2 : 3); m++)
        for (int v = 0; v < 5; v++)
            spread(members[m], vnodes[v]);
    static const uint32_t moves[] = { 4, 49, 100 };
    for (int m = 0; m < 3; m++)
        movement(moves[m], quick ? 100000 : 1000000);
    return 0;
}
