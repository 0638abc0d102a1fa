/* Due timers never shut outside submitters out (issue 23, item 3). TIMERS periodic timers fall due
 * every wheel tick (65.5 us) on 2 workers, far more than they can run: each worker keeps firing
 * timers into its own queue. A thread that is not a worker then submits JOBS jobs with shard_submit,
 * each waiting for room; every one must be admitted and run. The old code: the worker's own submits
 * (which never wait) took every slot freed, the queue was never half free, and the first waiting
 * submit never returned (25-300 s before the run was stopped, 5 runs of 5). A watchdog fails the
 * run if the jobs take longer than WATCHDOG_S.
 *
 *   stress_timer_flood [TIMERS]   default 50,000 (10,000 under a sanitizer) */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "stress_common.h"

#define JOBS       200
#define PERIOD_NS  65536u
#define WATCHDOG_S 120

static atomic_int ran, fired;

static void tick(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    atomic_fetch_add_explicit(&fired, 1, memory_order_relaxed);
}

static void job(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    atomic_fetch_add(&ran, 1);
}

static void *watchdog(void *arg)
{
    (void)arg;
    for (int s = 0; s < WATCHDOG_S; s++) {
        sleep(1);
        if (atomic_load(&ran) == JOBS)
            return NULL;
    }
    fprintf(stderr, "stress_timer_flood: %d of %d jobs admitted and run in %d s: submitters shut out\n",
            atomic_load(&ran), JOBS, WATCHDOG_S);
    printf("0 passed, 1 failed\n");
    fflush(stdout);
    _exit(1);
}

int main(int argc, char **argv)
{
    int ntimers = argc > 1 ? atoi(argv[1]) : STRESS_SANITIZED ? 10000 : 50000;
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 2 };
    CHECK(shard_dispatcher_create(&d, &cfg) == 0, "create");
    shard_timer *ids = calloc((size_t)ntimers, sizeof *ids);
    char key[32];
    for (int i = 0; i < ntimers; i++) {
        int n = snprintf(key, sizeof key, "timer-%d", i);
        CHECK(shard_submit_every(d, key, (size_t)n, PERIOD_NS, tick, NULL, &ids[i]) == 0, "arm %d", i);
    }
    /* Until the flood is on: both workers firing (a wait for progress, not for time). */
    while (atomic_load_explicit(&fired, memory_order_relaxed) < 2 * ntimers)
        stress_pause_ms(1);
    pthread_t dog;
    pthread_create(&dog, NULL, watchdog, NULL);
    for (int i = 0; i < JOBS; i++) {
        int n = snprintf(key, sizeof key, "job-%d", i);
        CHECK(shard_submit(d, key, (size_t)n, job, NULL) == 0, "submit %d", i);
    }
    while (atomic_load(&ran) < JOBS)
        CHECK(shard_drain(d) == 0, "drain");
    pthread_join(dog, NULL);
    printf("stress_timer_flood: %d timers, %d jobs admitted among %d timer runs\n", ntimers, JOBS,
           atomic_load(&fired));
    for (int i = 0; i < ntimers; i++)
        shard_timer_cancel(d, ids[i]);
    shard_dispatcher_destroy(d);
    free(ids);
    return stress_result("stress_timer_flood");
}
