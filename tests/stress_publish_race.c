/* A submit waiting for room inside the application's RCU read-side section, routed with the ring a
 * crash is replacing: it found the crashed worker's queue full just before the crash published the
 * new ring and sent waiters back, and registered as a waiter just after. The crash's grace period
 * waits for the application's section; the submit must not wait for room that the crashed worker
 * will never make (it did: both waited for ever). The window is held open by a link-time wrap of the
 * library's waiter registration (static library only): the submitter, once its push found the queue
 * full, waits until the new ring is published before it goes on to register. Found by a review. */
#define _LGPL_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <string.h>
#include <time.h>
#include <urcu.h>

#include "stress_common.h"

struct shard_worker;
uint64_t __real_shard__space_register(shard_dispatcher *d, struct shard_worker *w);

static shard_dispatcher *d;
static _Thread_local int hold_window;
static sem_t in_window, started, gate, crashed;
static atomic_int app_result = 1;

static uint64_t epoch_now(void)
{
    struct shard_stats st;
    shard_dispatcher_stats(d, &st);
    return st.epoch;
}

/* Called by a submit whose push found the queue full, before it registers as a waiter. */
uint64_t __wrap_shard__space_register(shard_dispatcher *dd, struct shard_worker *w)
{
    if (hold_window) {
        hold_window = 0;
        uint64_t e = epoch_now();
        sem_post(&in_window);
        /* Until the crash has published its ring (bounded: 20 s). */
        for (long i = 0; i < 20000000 && epoch_now() == e; i++)
            sched_yield();
    }
    return __real_shard__space_register(dd, w);
}

static void blocker(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    sem_post(&started);
    sem_wait(&gate);
}

static void noop(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
}

static char key[24];
static size_t keylen;

static void *app_thread(void *arg)
{
    (void)arg;
    rcu_register_thread();
    rcu_read_lock();
    hold_window = 1;
    atomic_store(&app_result, shard_submit(d, key, keylen, noop, NULL));
    rcu_read_unlock();
    rcu_unregister_thread();
    return NULL;
}

static void *crasher(void *arg)
{
    (void)arg;
    CHECK(shard_worker_crash(d, "w0", SHARD_CRASH_REROUTE) == 0, "crash");
    sem_post(&crashed);
    return NULL;
}

int main(void)
{
    sem_init(&in_window, 0, 0);
    sem_init(&started, 0, 0);
    sem_init(&gate, 0, 0);
    sem_init(&crashed, 0, 0);
    struct shard_config cfg = { .workers = 2, .queue_capacity = 2 };
    CHECK(shard_dispatcher_create(&d, &cfg) == 0, "create");
    shard_ring *r;
    CHECK(shard_dispatcher_ring(d, &r) == 0, "ring");
    for (unsigned i = 0;; i++) {
        keylen = (size_t)snprintf(key, sizeof key, "k%u", i);
        if (strcmp(shard_ring_owner(r, key, keylen), "w0") == 0)
            break;
    }
    shard_ring_destroy(r);
    CHECK(shard_submit(d, key, keylen, blocker, NULL) == 0, "blocker");
    sem_wait(&started);
    while (shard_try_submit(d, key, keylen, noop, NULL) == 0) /* fills w0's queue */
        ;
    pthread_t app, c;
    pthread_create(&app, NULL, app_thread, NULL);
    sem_wait(&in_window);
    pthread_create(&c, NULL, crasher, NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 20;
    bool ok = sem_timedwait(&crashed, &ts) == 0;
    CHECK(ok, "the crash waited for the application's section, whose submit waited for room in the crashed worker");
    if (!ok) {
        stress_result("stress_publish_race");
        _exit(1); /* both threads wait for ever: nothing to clean up */
    }
    pthread_join(app, NULL);
    CHECK(atomic_load(&app_result) == 0, "the waiting submit got %s", shard_strerror(atomic_load(&app_result)));
    sem_post(&gate);
    pthread_join(c, NULL);
    CHECK(shard_drain(d) == 0, "drain");
    shard_dispatcher_destroy(d);
    return stress_result("stress_publish_race");
}
