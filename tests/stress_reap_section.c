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

#include "dispatcher_internal.h"
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
    /* w0 is finished once its thread, back from on_worker_stop, has marked it under d->lock: wait for
     * that (10 s at most), or the add below reaps nothing and the run passes without testing the reap.
     * Read from the library's own state: no public call tells, and a drain would reap w0 itself. */
    bool finished = false;
    for (int tries = 0; tries < 10000 && !finished; tries++) {
        pthread_mutex_lock(&d->lock);
        for (size_t i = 0; i < d->nworkers; i++)
            if (strcmp(d->workers[i]->name, "w0") == 0)
                finished = d->workers[i]->leaving.finished;
        pthread_mutex_unlock(&d->lock);
        if (!finished)
            stress_pause_ms(1);
    }
    CHECK(finished, "w0 not finished 10 s after its thread's on_worker_stop");
    struct shard_stats st;
    CHECK(shard_dispatcher_stats(d, &st) == 0, "stats");
    epoch0 = st.epoch;
    pthread_t u;
    pthread_create(&u, NULL, user_thread, NULL);
    while (!atomic_load(&in_section))
        sched_yield();
    CHECK(shard_worker_add(d, "w2", 1) == 0, "add"); /* reaps w0 first */
    long listed = shard_dispatcher_worker_stats(d, NULL, 0);
    CHECK(listed == 2, "%ld workers listed after the add: w0 was not reaped", listed);
    pthread_join(u, NULL);
    shard_dispatcher_destroy(d);
    return stress_result("stress_reap_section");
}
