/* bench_handoff: how long shard_worker_add, shard_worker_remove and shard_worker_crash(REROUTE) take to
 * return (the change is then in force) with 0, 10,000 and 1,000,000 jobs queued, against the same
 * dispatcher's empty-queue add as the baseline. Queues are filled while every worker is held inside
 * a gate job, so the jobs are really queued when the change happens.
 *   bench=handoff op=OP queued=N ms=X ratio_vs_empty_add=R */
#include <pthread.h>
#include <semaphore.h>
#include <shard.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

static sem_t gate, inside;
static void gate_job(shard_worker *w, void *a)
{
    (void)w;
    (void)a;
    sem_post(&inside);
    sem_wait(&gate);
}
static void nop(shard_worker *w, void *a)
{
    (void)w;
    (void)a;
}

enum op { ADD, REMOVE, CRASH };

static double measure(enum op op, long queued)
{
    struct shard_config cfg = { .workers = 2, .queue_capacity = 1000000 };
    shard_dispatcher *d;
    if (shard_dispatcher_create(&d, &cfg) != 0)
        abort();
    sem_init(&gate, 0, 0);
    sem_init(&inside, 0, 0);
    /* One gate job per worker: keys found by asking the ring. */
    shard_ring *r;
    shard_dispatcher_ring(d, &r);
    const char *gated[2] = { NULL, NULL };
    char kbuf[2][24];
    for (int i = 0; i < 10000 && (!gated[0] || !gated[1]); i++) {
        char k[24];
        int len = snprintf(k, sizeof k, "gate-%d", i);
        int w = shard_ring_owner(r, k, (size_t)len)[1] - '0';
        if (!gated[w]) {
            snprintf(kbuf[w], sizeof kbuf[w], "%s", k);
            gated[w] = kbuf[w];
        }
    }
    shard_ring_destroy(r);
    for (int w = 0; w < 2; w++)
        shard_submit(d, gated[w], strlen(gated[w]), gate_job, NULL);
    sem_wait(&inside);
    sem_wait(&inside);
    for (long i = 0; i < queued; i++) {
        char k[24];
        int len = snprintf(k, sizeof k, "key-%ld", i % 100000);
        shard_submit(d, k, (size_t)len, nop, NULL);
    }
    uint64_t t0 = bench_now_ns();
    int rc = op == ADD ? shard_worker_add(d, "new", 1) : op == REMOVE ? shard_worker_remove(d, "w0")
                                                                       : shard_worker_crash(d, "w0", SHARD_CRASH_REROUTE);
    double ms = (double)(bench_now_ns() - t0) / 1e6;
    if (rc != 0)
        abort();
    sem_post(&gate);
    sem_post(&gate);
    shard_drain(d);
    shard_dispatcher_destroy(d);
    return ms;
}

int main(int argc, char **argv)
{
    bool quick = bench_quick(argc, argv);
    static const long sizes[] = { 0, 10000, 1000000 };
    static const char *names[] = { "add", "remove", "crash_reroute" };
    double base = measure(ADD, 0);
    for (int s = 0; s < (quick ? 2 : 3); s++)
        for (int op = 0; op < 3; op++) {
            double ms = measure((enum op)op, sizes[s]);
            printf("bench=handoff op=%s queued=%ld ms=%.3f ratio_vs_empty_add=%.2f\n", names[op], sizes[s], ms, ms / base);
        }
    return 0;
}
