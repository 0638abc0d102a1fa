/* A change must not wait for a grace period before it publishes its ring while an application's own
 * read-side section waits for that ring (the pattern of stress_throttle_waits' section): here with a
 * worker to reap at the change's start. Found by a review of 7951bb5, whose reap waited a grace period
 * whenever it took a worker out of the registry: the add below hung every time. Setup: w0 crashes
 * while in a job; two drains let the snapshots that named it go; its job returns and its thread
 * exits (on_worker_stop); then a thread inside its own read-side section waits for the epoch to move
 * while shard_worker_add, which reaps w0 first, runs. A watchdog fails the run on a hang. */
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <urcu.h>

#include "stress_common.h"

static shard_dispatcher *d;
static sem_t inside, gate, stopped;
static atomic_int in_section;
static uint64_t epoch0;

static void on_stop(shard_worker *w, void *user)
{
    (void)user;
    if (strcmp(shard_worker_name(w), "w0") == 0)
        sem_post(&stopped);
}

static void blocker(shard_worker *w, void *a)
{
    (void)w, (void)a;
    sem_post(&inside);
    sem_wait(&gate);
}

static void *user_thread(void *a)
{
    (void)a;
    rcu_register_thread();
    rcu_read_lock();
    atomic_store(&in_section, 1);
    struct shard_stats st;
    do /* the add's ring: its publication comes before any grace period it waits */
        CHECK(shard_dispatcher_stats(d, &st) == 0, "stats");
    while (st.epoch <= epoch0 && !sched_yield());
    rcu_read_unlock();
    rcu_unregister_thread();
    return NULL;
}

int main(void)
{
    stress_watchdog("stress_reap_section", STRESS_SANITIZED ? 120 : 30);
    sem_init(&inside, 0, 0);
    sem_init(&gate, 0, 0);
    sem_init(&stopped, 0, 0);
    struct shard_config cfg = { .workers = 2, .on_worker_stop = on_stop };
    CHECK(shard_dispatcher_create(&d, &cfg) == 0, "create");
    shard_ring *r;
    char bkey[64];
    CHECK(shard_dispatcher_ring(d, &r) == 0, "ring");
    for (int n = 0;; n++) {
        snprintf(bkey, sizeof bkey, "b-%d", n);
        if (strcmp(shard_ring_owner(r, bkey, strlen(bkey)), "w0") == 0)
            break;
    }
    shard_ring_destroy(r);
    CHECK(shard_submit(d, bkey, strlen(bkey), blocker, NULL) == 0, "blocker");
    sem_wait(&inside);
    CHECK(shard_worker_crash(d, "w0", SHARD_CRASH_REROUTE) == 0, "crash");
    CHECK(shard_drain(d) == 0, "drain"); /* settled moves past w0's epochs */
    CHECK(shard_drain(d) == 0, "drain"); /* its start lets go of the snapshots naming w0 */
    sem_post(&gate);                     /* w0's job returns: its thread exits */
    sem_wait(&stopped);
    /* w0 is finished once its thread, back from on_worker_stop, has marked it under d->lock, which
     * stats takes: a few rounds of it let that happen (if not, the add below reaps nothing, and the
     * run passes without testing the reap). */
    struct shard_stats st;
    for (int i = 0; i < 100; i++) {
        CHECK(shard_dispatcher_stats(d, &st) == 0, "stats");
        sched_yield();
    }
    epoch0 = st.epoch;
    pthread_t u;
    pthread_create(&u, NULL, user_thread, NULL);
    while (!atomic_load(&in_section))
        sched_yield();
    CHECK(shard_worker_add(d, "w2", 1) == 0, "add"); /* reaps w0 first */
    pthread_join(u, NULL);
    shard_dispatcher_destroy(d);
    return stress_result("stress_reap_section");
}
