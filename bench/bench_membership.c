/* bench_membership: what a membership change and a drain cost against the number of workers.
 *   For 10, 100 and 1,000 idle workers (--quick: 10 and 100): the wall time of shard_worker_add,
 *   shard_worker_remove, shard_worker_crash (REROUTE, empty queue) and shard_drain, median of a few
 *   rounds, and the CPU time of the whole process over the same calls (every thread: the workers'
 *   share of a change shows there). Baseline, same run: the change's ring work alone (clone + add,
 *   clone + remove of a shard_ring with as many members), which no dispatcher can avoid.
 * One line per measurement: bench=membership workers=N op=... ms=X cpu_ms=Y ring_ms=Z */
#include <shard.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "bench_common.h"

#define ROUNDS 5

static double cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec / 1e3 + ru.ru_stime.tv_sec * 1e3 + ru.ru_stime.tv_usec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* The ring work a change needs: a copy of the ring with one member more or less. */
static double ring_ms(uint32_t workers, int op)
{
    shard_ring *r;
    if (shard_ring_create(&r, NULL) != 0)
        return -1;
    for (uint32_t i = 0; i < workers; i++) {
        char name[32];
        snprintf(name, sizeof name, "w%u", i);
        shard_ring_add(r, name, 1);
    }
    double t[ROUNDS];
    for (int k = 0; k < ROUNDS; k++) {
        uint64_t t0 = bench_now_ns();
        shard_ring *c;
        if (shard_ring_clone(r, &c) != 0)
            return -1;
        if (op == 0)
            shard_ring_add(c, "extra", 1);
        else
            shard_ring_remove(c, "w0");
        t[k] = (double)(bench_now_ns() - t0) / 1e6;
        shard_ring_destroy(c);
    }
    shard_ring_destroy(r);
    return median(t, ROUNDS);
}

static int run(uint32_t workers)
{
    struct shard_config cfg = { .workers = workers, .queue_capacity = 64 };
    shard_dispatcher *d;
    int err = shard_dispatcher_create(&d, &cfg);
    if (err) {
        fprintf(stderr, "bench_membership: create %u workers: %s\n", workers, shard_strerror(err));
        return 1;
    }
    static const char *ops[] = { "add", "remove", "crash", "drain" };
    double wall[4][ROUNDS], cpu[4][ROUNDS];
    for (int k = 0; k < ROUNDS; k++) {
        char name[32];
        snprintf(name, sizeof name, "x%d", k);
        for (int op = 0; op < 4; op++) {
            double c0 = cpu_ms();
            uint64_t t0 = bench_now_ns();
            if (op == 0)
                err = shard_worker_add(d, name, 1);
            else if (op == 1)
                err = shard_worker_remove(d, name);
            else if (op == 2) {
                err = shard_worker_add(d, name, 1); /* not timed apart: subtracted below */
                if (!err) {
                    c0 = cpu_ms();
                    t0 = bench_now_ns();
                    err = shard_worker_crash(d, name, SHARD_CRASH_REROUTE);
                }
            } else
                err = shard_drain(d);
            wall[op][k] = (double)(bench_now_ns() - t0) / 1e6;
            cpu[op][k] = cpu_ms() - c0;
            if (err) {
                fprintf(stderr, "bench_membership: %s with %u workers: %s\n", ops[op], workers, shard_strerror(err));
                shard_dispatcher_destroy(d);
                return 1;
            }
        }
    }
    double ring[2] = { ring_ms(workers, 0), ring_ms(workers, 1) };
    for (int op = 0; op < 4; op++)
        printf("bench=membership workers=%u op=%s ms=%.3f cpu_ms=%.3f ring_ms=%.3f\n", workers, ops[op],
               median(wall[op], ROUNDS), median(cpu[op], ROUNDS), op < 2 ? ring[op] : op == 2 ? ring[1] : 0.0);
    fflush(stdout);
    shard_dispatcher_destroy(d);
    return 0;
}

int main(int argc, char **argv)
{
    static const uint32_t sizes[] = { 10, 100, 1000 };
    int n = bench_quick(argc, argv) ? 2 : 3;
    for (int i = 0; i < n; i++)
        if (run(sizes[i]) != 0)
            return 1;
    return 0;
}
