/* Crashes that land inside a worker's batch (run.c: ring jobs run back to back without the worker's
 * lock, each position taken before its job runs): the crash takes the batch back at one position, and
 * whatever the worker took runs there once, the rest goes to the key's next owner once. A producer
 * streams jobs of a few bytes of work over KEYS keys, so that a worker is almost always inside a batch
 * with more to take; the control thread crashes a random worker (REROUTE) CRASHES times at random
 * moments, adding a fresh one each time. Checked: every job ran exactly once, never two of a key at
 * once, each key's in the order the producer submitted them. With the worker's CAS on its batch word
 * (run.c) made a plain store, this failed every run (a job run twice, here and at its key's next
 * owner, or a hang); so did an experiment that took positions with a store and settled with the crash
 * through a membarrier, with the crash's stop flag left out.
 *   stress_batch_crash [CRASHES]  (default 300, 100 under sanitizers) */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "stress_common.h"

#define KEYS    64
#define JOBS    (1u << 22) /* ids the producer may use; it stops when the crashes are done */
#define WORKERS 2

static shard_dispatcher *disp;
static atomic_uchar runs[JOBS];
static atomic_int running[KEYS];
static uint32_t last[KEYS]; /* the id of the key's last job to run, + 1: written by that job alone */
static atomic_int stop;
static atomic_uint submitted;

static void job(shard_worker *w, void *arg)
{
    (void)w;
    uint32_t id = (uint32_t)(uintptr_t)arg, k = id % KEYS;
    CHECK(atomic_fetch_add(&running[k], 1) == 0, "key %u: two jobs at once", k);
    CHECK(atomic_fetch_add(&runs[id], 1) == 0, "job %u ran twice", id);
    CHECK(last[k] < id + 1, "key %u: job %u ran after job %u", k, id, last[k] - 1);
    last[k] = id + 1;
    atomic_fetch_sub(&running[k], 1);
}

static void *producer(void *arg)
{
    (void)arg;
    for (uint32_t id = 0; id < JOBS && !atomic_load(&stop); id++) {
        char key[16];
        int len = snprintf(key, sizeof key, "k%u", id % KEYS);
        int rc = shard_submit(disp, key, (size_t)len, job, (void *)(uintptr_t)id);
        CHECK(rc == 0, "submit: %s", shard_strerror(rc));
        if (rc)
            break;
        atomic_store(&submitted, id + 1);
    }
    return NULL;
}

static bool all_ran(void *ctx)
{
    (void)ctx;
    for (uint32_t id = 0; id < atomic_load(&submitted); id++)
        if (!atomic_load(&runs[id]))
            return false;
    return true;
}

int main(int argc, char **argv)
{
    int crashes = argc > 1 ? atoi(argv[1]) : STRESS_SANITIZED ? 100 : 300;
    stress_watchdog("stress_batch_crash", 300);
    struct shard_config cfg = { .workers = WORKERS, .queue_capacity = 1024 };
    CHECK(shard_dispatcher_create(&disp, &cfg) == 0, "create");
    pthread_t th;
    CHECK(pthread_create(&th, NULL, producer, NULL) == 0, "thread");
    char names[WORKERS][24];
    for (int i = 0; i < WORKERS; i++)
        snprintf(names[i], sizeof names[i], "w%d", i);
    uint64_t seed = 0x9e3779b97f4a7c15u;
    int done = 0;
    for (; done < crashes && atomic_load(&submitted) < JOBS - JOBS / 8; done++) {
        /* A random moment: up to 200 µs of the producer's stream and the workers' batches. */
        struct timespec ts = { 0, (long)(stress_rnd(&seed) % 200000) };
        nanosleep(&ts, NULL);
        int v = (int)(stress_rnd(&seed) % WORKERS);
        CHECK(shard_worker_crash(disp, names[v], SHARD_CRASH_REROUTE) == 0, "crash %s", names[v]);
        snprintf(names[v], sizeof names[v], "c%d", done);
        CHECK(shard_worker_add(disp, names[v], 1) == 0, "add %s", names[v]);
    }
    atomic_store(&stop, 1);
    CHECK(pthread_join(th, NULL) == 0, "join");
    stress_drain_until(disp, all_ran, NULL);
    uint32_t n = atomic_load(&submitted);
    for (uint32_t id = 0; id < n; id++)
        CHECK(atomic_load(&runs[id]) == 1, "job %u ran %u times", id, (unsigned)atomic_load(&runs[id]));
    shard_dispatcher_destroy(disp);
    printf("stress_batch_crash: %d crashes inside a stream of %u jobs\n", done, n);
    return stress_result("stress_batch_crash");
}
