/* bench_handoff: how long shard_worker_add, shard_worker_remove and shard_worker_crash(REROUTE) take to
 * return (the change is then in force) with 0, 10,000 and 1,000,000 jobs queued, against the same
 * dispatcher's empty-queue add as the baseline. Queues are filled while every worker is held inside
 * a gate job, so the jobs are really queued when the change happens.
 *   bench=handoff op=OP queued=N ms=X ratio_vs_empty_add=R
 * Then the pause keys see while a worker is added under a paced load (1 M jobs/s): the latency
 * (submit to run) of jobs submitted around the change, for keys that moved to the new worker against
 * keys that did not.
 *   bench=pause keys=moved|unmoved jobs=N p50_us=X p99_us=Y max_us=Z */
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

/* ---- pause of moved and unmoved keys ---- */

#define PAUSE_KEYS 2000

struct timed {
    uint64_t submitted, ran;
    int      key;
};

static void timed_job(shard_worker *w, void *arg)
{
    (void)w;
    ((struct timed *)arg)->ran = bench_now_ns();
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void report(const char *which, uint64_t *lat, long n)
{
    qsort(lat, (size_t)n, sizeof *lat, cmp_u64);
    printf("bench=pause keys=%s jobs=%ld p50_us=%.1f p99_us=%.1f max_us=%.1f\n", which, n, n ? lat[n / 2] / 1e3 : 0,
           n ? lat[n * 99 / 100] / 1e3 : 0, n ? lat[n - 1] / 1e3 : 0);
}

static void pause_around_add(long rounds)
{
    struct shard_config cfg = { .workers = 2 };
    shard_dispatcher *d;
    if (shard_dispatcher_create(&d, &cfg) != 0)
        abort();
    long n = rounds * PAUSE_KEYS;
    struct timed *t = calloc((size_t)n, sizeof *t);
    char keys[PAUSE_KEYS][16];
    size_t len[PAUSE_KEYS];
    for (int k = 0; k < PAUSE_KEYS; k++)
        len[k] = (size_t)snprintf(keys[k], sizeof keys[k], "k%d", k);
    shard_ring *before;
    shard_dispatcher_ring(d, &before);
    uint64_t changed_at = 0;
    /* Paced at one round of PAUSE_KEYS jobs every 2 ms (1 M jobs/s), so queues stay short and a
     * latency shows waiting for a handoff rather than a backlog. */
    uint64_t next_round = bench_now_ns();
    for (long r = 0, i = 0; r < rounds; r++) {
        while (bench_now_ns() < next_round)
            ;
        next_round += 2000000;
        for (int k = 0; k < PAUSE_KEYS; k++, i++) {
            t[i].key = k;
            t[i].submitted = bench_now_ns();
            shard_submit(d, keys[k], len[k], timed_job, &t[i]);
        }
        if (r == rounds / 2) {
            shard_worker_add(d, "new", 1); /* returns once the new ring is in force */
            changed_at = bench_now_ns();
        }
    }
    shard_drain(d);
    shard_ring *after;
    shard_dispatcher_ring(d, &after);
    uint64_t *moved = malloc((size_t)n * sizeof *moved), *still = malloc((size_t)n * sizeof *still);
    long nm = 0, ns = 0;
    for (long i = 0; i < n; i++) {
        /* jobs submitted from 5 ms before the change to 20 ms after it */
        if (t[i].submitted + 5000000 < changed_at || t[i].submitted > changed_at + 20000000)
            continue;
        int k = t[i].key;
        bool m = strcmp(shard_ring_owner(before, keys[k], len[k]), shard_ring_owner(after, keys[k], len[k])) != 0;
        if (m)
            moved[nm++] = t[i].ran - t[i].submitted;
        else
            still[ns++] = t[i].ran - t[i].submitted;
    }
    report("moved", moved, nm);
    report("unmoved", still, ns);
    free(moved);
    free(still);
    free(t);
    shard_ring_destroy(before);
    shard_ring_destroy(after);
    shard_dispatcher_destroy(d);
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
    pause_around_add(quick ? 20 : 100);
    return 0;
}
