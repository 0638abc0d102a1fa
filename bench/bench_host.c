/* bench_host: what the machine charges for the two things every 2-worker figure depends on, measured
 * now, so that a run's figures can be read against the state the host was in (bench/run prints it
 * first, bench/kv_vs_redis before and after its rounds):
 *   line_ns   one cache line handed from the first CPU this process may use to the second: two
 *             threads pinned there pass a counter back and forth (each waits for the other's store,
 *             then stores), and a round trip is two transfers. Every cross-worker path pays it (a
 *             job handed to another worker, a multi-key job's claim paid by another), and on a VM it
 *             changes with where the host puts the vCPUs (on one core complex, or on two): the
 *             2-worker figures of docs/performance.md came in two levels, about 2x apart
 *   shared    a fixed chain of multiply-adds on the first CPU, alone and then while the second runs
 *             the same chain: their time's ratio. 1.0: two cores of their own; near 2: the two vCPUs
 *             share one core (hyperthreads), and no program gets 2x from a second worker there
 * No shard code is measured: this is the floor under the others.
 *   bench=host cpus=A,B line_ns=X shared=R */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "bench_common.h"

static _Alignas(64) _Atomic uint64_t ball;
static int cpu[2];
static long rounds, chain;

static void pin(int c)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(c, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* The second CPU's half of the ping-pong: waits for each odd value, answers with the next. */
static void *pong(void *arg)
{
    pin(cpu[1]);
    for (uint64_t i = 1; i < 2 * (uint64_t)rounds; i += 2) {
        while (atomic_load_explicit(&ball, memory_order_acquire) != i)
            continue;
        atomic_store_explicit(&ball, i + 1, memory_order_release);
    }
    return arg;
}

static volatile uint64_t sink;

/* The chain's time, ns: each step depends on the one before, so it runs at one step a few cycles
 * whatever the memory does. */
static uint64_t run_chain(void)
{
    uint64_t x = 1, t0 = bench_now_ns();
    for (long i = 0; i < chain; i++)
        x = x * 6364136223846793005u + 1442695040888963407u;
    sink = x;
    return bench_now_ns() - t0;
}

static void *busy(void *arg)
{
    pin(cpu[1]);
    *(uint64_t *)arg = run_chain();
    return arg;
}

int main(int argc, char **argv)
{
    bool quick = bench_quick(argc, argv);
    rounds = quick ? 100000 : 2000000;
    chain = quick ? 20000000 : 200000000;
    cpu_set_t mine;
    if (sched_getaffinity(0, sizeof mine, &mine) != 0 || CPU_COUNT(&mine) < 2) {
        printf("bench=host note=one_cpu reason=fewer_than_two_cpus_to_pin\n");
        return 0;
    }
    for (int c = 0, k = 0; k < 2; c++)
        if (CPU_ISSET(c, &mine))
            cpu[k++] = c;
    pin(cpu[0]);
    pthread_t t;
    if (pthread_create(&t, NULL, pong, NULL) != 0) {
        fprintf(stderr, "bench_host: no thread\n");
        return 1;
    }
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < 2 * (uint64_t)rounds; i += 2) {
        atomic_store_explicit(&ball, i + 1, memory_order_release);
        while (atomic_load_explicit(&ball, memory_order_acquire) != i + 2)
            continue;
    }
    uint64_t trip = bench_now_ns() - t0;
    pthread_join(t, NULL);
    uint64_t alone = run_chain(), other = 0;
    if (pthread_create(&t, NULL, busy, &other) != 0) {
        fprintf(stderr, "bench_host: no thread\n");
        return 1;
    }
    uint64_t beside = run_chain();
    pthread_join(t, NULL);
    printf("bench=host cpus=%d,%d line_ns=%.0f shared=%.2f\n", cpu[0], cpu[1], (double)trip / (2.0 * (double)rounds),
           (double)beside / (double)alone);
    return 0;
}
