/* bench_host: what the machine charges for the two things every 2-worker figure depends on, measured
 * now, so that a run's figures can be read against the state the host was in (bench/run prints it
 * first, bench/kv_vs_redis before and after its rounds):
 *   line_ns   one cache line handed from the first CPU this process may use to the second: two
 *             threads pinned there pass a counter back and forth (each waits for the other's store,
 *             then stores), and a round trip is two transfers. Every cross-worker path pays it (a
 *             job handed to another worker, a multi-key job's claim paid by another), and on a VM it
 *             changes with where the host puts the vCPUs (on one core complex, or on two): the
 *             2-worker figures of docs/performance.md came in two levels, about 2x apart
 *   shared    a fixed amount of multiply-adds in eight independent chains (enough to keep a core's
 *             multipliers busy), on the first CPU alone, then on both at once: the two's mean time
 *             over the time alone. 1.0: two cores of their own; near 2: the two vCPUs share one core's
 *             units (hyperthreads), or one CPU's time (a host that overcommits, or another busy
 *             process here), and no program gets 2x from a second worker then
 * No shard code is measured: this is the floor under the others. Anything else busy on these CPUs
 * raises both figures: run it, as every benchmark, on an otherwise idle machine.
 * The ping-pong stops after 0.1 s (--quick) or 1 s whatever it made, trips (round trips) says how many.
 *   bench=host cpus=A,B trips=N line_ns=X shared=R */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "bench_common.h"

static _Alignas(64) _Atomic uint64_t ball;
static int cpu[2];
static long rounds, chain;
static uint64_t limit_ns; /* the ping-pong stops after this long, however few rounds it made */

/* Values of ball past any round's: the ping-pong is over, or the second CPU could not be pinned. */
#define BALL_STOP     (UINT64_MAX - 1)
#define BALL_UNPINNED UINT64_MAX

static _Atomic bool pinned_other;

/* The second CPU's half of the ping-pong: waits for each odd value, answers with the next. */
static void *pong(void *arg)
{
    if (!bench_pin_cpu(cpu[1])) {
        atomic_store(&ball, BALL_UNPINNED); /* tells the ping it cannot be measured */
        return arg;
    }
    atomic_store(&pinned_other, true);
    for (uint64_t want = 1;; want += 2) {
        uint64_t b;
        while ((b = atomic_load_explicit(&ball, memory_order_acquire)) != want && b != BALL_STOP)
            continue;
        if (b == BALL_STOP)
            return arg;
        atomic_store_explicit(&ball, want + 1, memory_order_release);
    }
}

static _Atomic uint64_t sink; /* the chains' result, so that they are computed (both threads write it) */

/* The chains' time, ns: eight independent multiply-add chains, in registers, so that a core's
 * multipliers are what bounds it, and a thread beside it on the same core halves its share. */
static uint64_t run_chain(void)
{
    uint64_t x[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, t0 = bench_now_ns();
    for (long i = 0; i < chain; i++)
        for (int k = 0; k < 8; k++)
            x[k] = x[k] * 6364136223846793005u + 1442695040888963407u;
    atomic_store_explicit(&sink, x[0] ^ x[1] ^ x[2] ^ x[3] ^ x[4] ^ x[5] ^ x[6] ^ x[7], memory_order_relaxed);
    return bench_now_ns() - t0;
}

static void *busy(void *arg)
{
    (void)bench_pin_cpu(cpu[1]); /* unpinned, it runs where the scheduler puts it */
    *(uint64_t *)arg = run_chain();
    return arg;
}

int main(int argc, char **argv)
{
    bool quick = bench_quick(argc, argv);
    rounds = quick ? 100000 : 2000000;
    limit_ns = quick ? 100000000u : 1000000000u; /* a busy neighbour makes a transfer a time slice */
    chain = quick ? 5000000 : 50000000;
    cpu_set_t mine;
    if (sched_getaffinity(0, sizeof mine, &mine) != 0 || CPU_COUNT(&mine) < 2) {
        printf("bench=host note=one_cpu reason=fewer_than_two_cpus_to_pin\n");
        return 0;
    }
    for (int c = 0, k = 0; k < 2; c++)
        if (CPU_ISSET(c, &mine))
            cpu[k++] = c;
    if (!bench_pin_cpu(cpu[0])) {
        printf("bench=host note=not_pinned reason=setaffinity_failed\n");
        return 0;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, pong, NULL) != 0) {
        fprintf(stderr, "bench_host: no thread\n");
        return 1;
    }
    /* Starts once the other thread is pinned (or has said it cannot be). */
    while (!atomic_load(&pinned_other) && atomic_load(&ball) != BALL_UNPINNED)
        continue;
    if (atomic_load(&ball) == BALL_UNPINNED) {
        pthread_join(t, NULL);
        printf("bench=host note=not_pinned reason=setaffinity_failed\n");
        return 0;
    }
    uint64_t t0 = bench_now_ns(), trips = 0;
    while (trips < (uint64_t)rounds) {
        atomic_store_explicit(&ball, 2 * trips + 1, memory_order_release);
        while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * trips + 2)
            continue;
        trips++;
        if (trips % 256 == 0 && bench_now_ns() - t0 > limit_ns)
            break;
    }
    uint64_t trip = bench_now_ns() - t0;
    atomic_store_explicit(&ball, BALL_STOP, memory_order_release);
    pthread_join(t, NULL);
    run_chain(); /* warms the core up, as the ping-pong may not have */
    uint64_t alone = run_chain(), other = 0;
    if (pthread_create(&t, NULL, busy, &other) != 0) {
        fprintf(stderr, "bench_host: no thread\n");
        return 1;
    }
    uint64_t beside = run_chain();
    pthread_join(t, NULL);
    printf("bench=host cpus=%d,%d trips=%llu line_ns=%.0f shared=%.2f\n", cpu[0], cpu[1], (unsigned long long)trips,
           (double)trip / (2.0 * (double)trips), (double)(beside + other) / (2.0 * (double)alone));
    return 0;
}
