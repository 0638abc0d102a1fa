/* bench_rebuild: time to build a ring of N members at the default vnodes, against qsort of the same
 * number of 64-bit values (the baseline, measured in the same run). One line per size:
 *   bench=rebuild members=N points=P shard_ns=... qsort_ns=... ratio=shard/qsort
 * plus the cost of one incremental shard_ring_add to a ring of that size. */
#include <shard.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static uint64_t build_ns(struct shard_ring_member *m, size_t n)
{
    shard_ring *r;
    shard_ring_create(&r, NULL);
    uint64_t t0 = bench_now_ns();
    if (shard_ring_add_many(r, m, n) != 0)
        abort();
    uint64_t t = bench_now_ns() - t0;
    shard_ring_destroy(r);
    return t;
}

static uint64_t qsort_ns(size_t npoints)
{
    uint64_t *v = malloc(npoints * sizeof *v), s = 42;
    for (size_t i = 0; i < npoints; i++)
        v[i] = bench_mix(&s);
    uint64_t t0 = bench_now_ns();
    qsort(v, npoints, sizeof *v, cmp_u64);
    uint64_t t = bench_now_ns() - t0;
    free(v);
    return t;
}

static uint64_t add_one_ns(struct shard_ring_member *m, size_t n)
{
    shard_ring *r;
    shard_ring_create(&r, NULL);
    shard_ring_add_many(r, m, n - 1);
    uint64_t t0 = bench_now_ns();
    if (shard_ring_add(r, m[n - 1].name, 1) != 0)
        abort();
    uint64_t t = bench_now_ns() - t0;
    shard_ring_destroy(r);
    return t;
}

static uint64_t min3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t m = a < b ? a : b;
    return m < c ? m : c;
}

int main(int argc, char **argv)
{
    bool quick = bench_quick(argc, argv);
    static const size_t sizes[] = { 10, 100, 1000 };
    static char names[1000][16];
    struct shard_ring_member m[1000];
    for (int i = 0; i < 1000; i++) {
        snprintf(names[i], sizeof names[i], "node-%d", i);
        m[i] = (struct shard_ring_member){ names[i], 1 };
    }
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        size_t n = sizes[s], points = n * SHARD_DEFAULT_VNODES;
        int reps = quick ? 1 : 3;
        uint64_t best_b = UINT64_MAX, best_q = UINT64_MAX, best_a = UINT64_MAX;
        for (int r = 0; r < reps; r++) {
            best_b = min3(best_b, build_ns(m, n), UINT64_MAX);
            best_q = min3(best_q, qsort_ns(points), UINT64_MAX);
            best_a = min3(best_a, add_one_ns(m, n), UINT64_MAX);
        }
        printf("bench=rebuild members=%zu points=%zu shard_ns=%llu qsort_ns=%llu ratio=%.2f add_one_ns=%llu\n", n,
               points, (unsigned long long)best_b, (unsigned long long)best_q, (double)best_b / (double)best_q,
               (unsigned long long)best_a);
    }
    return 0;
}
