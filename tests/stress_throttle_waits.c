/* A throttled key (its set-aside jobs fill their worker's allowance, throttle.h) holds back only the
 * submits that may wait for it. Found by review, each a hang of the first version:
 *   - on_dropped resubmits a dropped job of a throttled key with shard_submit, from the thread calling
 *     shard_worker_crash(DROP): the key's held jobs wait for the crashed worker to count by epochs no
 *     more, which it does once the crash's on_dropped calls are done. The submit must go ahead;
 *   - a thread that uses liburcu itself submits inside its own read-side section, begun before a
 *     change published its ring: the change's fences wait for that section's end, the moved key's
 *     jobs for those fences. The submit must go ahead;
 *   - threads waiting for a throttled key must not be woken by every job that frees queue room (they
 *     were, and unrelated keys' throughput halved): their wake-ups are counted.
 * A watchdog fails the run on a hang.
 *
 *   stress_throttle_waits [dropped|section|storm]   default: all three */
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <urcu.h>

#include "stress_common.h"

#define CAP        64
#define WATCHDOG_S 120

static shard_dispatcher *d;
static sem_t inside, gate;
static char kkey[64];
static atomic_long resubmitted;

static void blocker(shard_worker *w, void *a)
{
    (void)w;
    (void)a;
    sem_post(&inside);
    sem_wait(&gate);
}

static void nothing(shard_worker *w, void *a)
{
    (void)w;
    (void)a;
}

static uint64_t throttled(void)
{
    struct shard_stats st;
    CHECK(shard_dispatcher_stats(d, &st) == 0, "stats");
    return st.throttled_keys;
}

/* A key prefix-N owned by owner in r and by was in before. */
static void key_owned(const shard_ring *r, const char *owner, const shard_ring *before, const char *was,
                      const char *prefix, char *buf)
{
    for (int n = 0;; n++) {
        snprintf(buf, 64, "%s-%d", prefix, n);
        if (strcmp(shard_ring_owner(r, buf, strlen(buf)), owner) == 0 &&
            (!before || strcmp(shard_ring_owner(before, buf, strlen(buf)), was) == 0))
            return;
    }
}

/* K: w0's now, w2's once w2 (weight 2) is added. */
static void moving_key(void)
{
    shard_ring *before, *probe;
    CHECK(shard_dispatcher_ring(d, &before) == 0, "ring");
    CHECK(shard_ring_clone(before, &probe) == 0, "clone");
    CHECK(shard_ring_add(probe, "w2", 2) == 0, "probe add");
    key_owned(probe, "w2", before, "w0", "k", kkey);
    shard_ring_destroy(probe);
    shard_ring_destroy(before);
}

/* Until K is throttled: its jobs set aside on w2 for w0, which is held in a job. */
static void throttle_k(void)
{
    /* Until it is, however long w2 takes to run on a loaded machine (a count of tries ran out while w2
     * was starved: the queue stays full until w2 runs and sets the jobs aside); the watchdog bounds
     * it. */
    while (throttled() == 0)
        if (shard_try_submit(d, kkey, strlen(kkey), nothing, NULL) != 0)
            sched_yield(); /* the queue was full a moment */
}

static void on_dropped(shard_job_fn fn, void *arg, void *user)
{
    (void)user;
    if (fn == nothing && shard_submit(d, kkey, strlen(kkey), fn, arg) == 0)
        atomic_fetch_add(&resubmitted, 1);
}

static void dropped(void)
{
    struct shard_config cfg = { .workers = 2, .queue_capacity = CAP, .on_dropped = on_dropped };
    CHECK(shard_dispatcher_create(&d, &cfg) == 0, "create");
    char bkey[64];
    shard_ring *r;
    CHECK(shard_dispatcher_ring(d, &r) == 0, "ring");
    key_owned(r, "w0", NULL, NULL, "block", bkey);
    shard_ring_destroy(r);
    moving_key();
    CHECK(shard_submit(d, bkey, strlen(bkey), blocker, NULL) == 0, "blocker");
    sem_wait(&inside);
    for (int i = 0; i < 10; i++) /* in w0's queue, behind the blocker: the crash drops them */
        CHECK(shard_submit(d, kkey, strlen(kkey), nothing, NULL) == 0, "before the add");
    CHECK(shard_worker_add(d, "w2", 2) == 0, "add");
    throttle_k();
    CHECK(shard_worker_crash(d, "w0", SHARD_CRASH_DROP) == 0, "crash");
    CHECK(atomic_load(&resubmitted) == 10, "on_dropped resubmitted %ld of 10", atomic_load(&resubmitted));
    sem_post(&gate);
    CHECK(shard_drain(d) == 0, "drain");
    CHECK(throttled() == 0, "%llu keys still throttled", (unsigned long long)throttled());
    shard_dispatcher_destroy(d);
}

static atomic_int in_section;
static atomic_long accepted;

static void *user_thread(void *a)
{
    (void)a;
    rcu_register_thread();
    rcu_read_lock();
    atomic_store(&in_section, 1);
    struct shard_stats st;
    do /* the add has published its ring, and its grace period waits for this section */
        CHECK(shard_dispatcher_stats(d, &st) == 0, "stats");
    while (st.epoch < 2 && !sched_yield());
    for (int i = 0; i < 4 * CAP; i++) {
        CHECK(shard_submit(d, kkey, strlen(kkey), nothing, NULL) == 0, "submit in the section");
        atomic_fetch_add(&accepted, 1);
    }
    rcu_read_unlock();
    rcu_unregister_thread();
    return NULL;
}

static void section(void)
{
    struct shard_config cfg = { .workers = 2, .queue_capacity = CAP };
    CHECK(shard_dispatcher_create(&d, &cfg) == 0, "create");
    moving_key();
    pthread_t u;
    pthread_create(&u, NULL, user_thread, NULL);
    while (!atomic_load(&in_section))
        sched_yield();
    CHECK(shard_worker_add(d, "w2", 2) == 0, "add"); /* returns once the section has ended */
    pthread_join(u, NULL);
    CHECK(atomic_load(&accepted) == 4 * CAP, "%ld accepted", atomic_load(&accepted));
    CHECK(shard_drain(d) == 0, "drain");
    CHECK(throttled() == 0, "%llu keys still throttled", (unsigned long long)throttled());
    shard_dispatcher_destroy(d);
}

#define WAITERS 4
#define UNRELATED 200000

static long waiter_switches[WAITERS];
static atomic_long unrelated_ran;
static atomic_int waiting, admitted;

static void count_unrelated(shard_worker *w, void *a)
{
    (void)w;
    (void)a;
    atomic_fetch_add_explicit(&unrelated_ran, 1, memory_order_relaxed);
}

/* Submits one job of K, counting its own voluntary switches while it waits. */
static void *key_waiter(void *a)
{
    int i = (int)(intptr_t)a;
    struct rusage before, after;
    getrusage(RUSAGE_THREAD, &before);
    atomic_fetch_add(&waiting, 1);
    CHECK(shard_submit(d, kkey, strlen(kkey), nothing, NULL) == 0, "waiter's submit");
    atomic_fetch_add(&admitted, 1);
    getrusage(RUSAGE_THREAD, &after);
    waiter_switches[i] = after.ru_nvcsw - before.ru_nvcsw;
    return NULL;
}

/* Threads wait on a throttled key while another thread submits unrelated keys' jobs, each of which
 * frees room when it runs: the waiters must sleep through them. */
static void storm(void)
{
    struct shard_config cfg = { .workers = 2, .queue_capacity = CAP };
    CHECK(shard_dispatcher_create(&d, &cfg) == 0, "create");
    char bkey[64];
    shard_ring *r;
    CHECK(shard_dispatcher_ring(d, &r) == 0, "ring");
    key_owned(r, "w0", NULL, NULL, "block", bkey);
    shard_ring_destroy(r);
    moving_key();
    CHECK(shard_submit(d, bkey, strlen(bkey), blocker, NULL) == 0, "blocker");
    sem_wait(&inside);
    CHECK(shard_worker_add(d, "w2", 2) == 0, "add");
    throttle_k();
    pthread_t th[WAITERS];
    for (int i = 0; i < WAITERS; i++)
        pthread_create(&th[i], NULL, key_waiter, (void *)(intptr_t)i);
    while (atomic_load(&waiting) < WAITERS) /* each has called shard_submit */
        sched_yield();
    /* Unrelated: w1's before and after the add (w0 is held: its keys would wait). */
    static char others[64][64];
    CHECK(shard_dispatcher_ring(d, &r) == 0, "ring");
    for (int i = 0; i < 64; i++) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "other%d", i);
        key_owned(r, "w1", NULL, NULL, prefix, others[i]);
    }
    shard_ring_destroy(r);
    for (int i = 0; i < UNRELATED; i++)
        CHECK(shard_submit(d, others[i % 64], strlen(others[i % 64]), count_unrelated, NULL) == 0, "unrelated");
    while (atomic_load(&unrelated_ran) < UNRELATED) /* not a drain: K's jobs wait for w0 */
        sched_yield();
    /* Still held back after the flood: the counts below are of waiters that waited through it. */
    CHECK(atomic_load(&admitted) == 0, "%d waiters were let through a throttled key", atomic_load(&admitted));
    sem_post(&gate); /* w0 passes its fence, K's jobs run on w2, K is released */
    for (int i = 0; i < WAITERS; i++)
        pthread_join(th[i], NULL);
    /* A waiter sleeps once, and again for each spurious wake-up (a change, a room broadcast): woken by
     * every job that freed room, each slept thousands of times. */
    for (int i = 0; i < WAITERS; i++) {
        printf("storm: waiter %d slept %ld times during %d unrelated jobs\n", i, waiter_switches[i], UNRELATED);
        CHECK(waiter_switches[i] < 100, "waiter %d woke %ld times", i, waiter_switches[i]);
    }
    CHECK(shard_drain(d) == 0, "drain");
    CHECK(throttled() == 0, "%llu keys still throttled", (unsigned long long)throttled());
    shard_dispatcher_destroy(d);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    stress_watchdog("stress_throttle_waits", WATCHDOG_S);
    sem_init(&inside, 0, 0);
    sem_init(&gate, 0, 0);
    const char *only = argc > 1 ? argv[1] : "";
    if (!*only || strcmp(only, "dropped") == 0)
        dropped();
    if (!*only || strcmp(only, "section") == 0)
        section();
    if (!*only || strcmp(only, "storm") == 0)
        storm();
    return stress_result("stress_throttle_waits");
}
