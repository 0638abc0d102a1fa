/* An application that uses liburcu itself (memb flavour, the one shard uses): it registers its own
 * threads and runs its own read-side sections, and submits from them. shard shares the registration
 * (no second registration, which liburcu refuses with an assertion) and leaves unregistering to the
 * application. Inside the application's read-side section a submit works (and may wait for room);
 * a membership call there would wait for a grace period its own caller holds up: -EDEADLK. And a
 * submit waiting for room inside such a section while the full queue's worker crashes: the crash
 * sends it to the key's new owner instead of waiting for the section to end (it used to hang). */
#define _LGPL_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <string.h>
#include <unistd.h>
#include <urcu.h>

#include "stress_common.h"

#define THREADS 2
#define JOBS 20000

static shard_dispatcher *disp;
static atomic_long ran;
static int *shared_value; /* published with liburcu's own macros */

static void count_job(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    atomic_fetch_add(&ran, 1);
}

static void *app_thread(void *arg)
{
    (void)arg;
    rcu_register_thread();
    for (int i = 0; i < JOBS; i++) {
        rcu_read_lock();
        int *v = rcu_dereference(shared_value);
        int err = shard_submit(disp, &i, sizeof i, count_job, v);
        CHECK(err == 0, "submit inside the application's read-side section: %s", shard_strerror(err));
        if (i == 0) {
            err = shard_worker_add(disp, "inside", 1);
            CHECK(err == -EDEADLK, "membership call inside a read-side section: %s", shard_strerror(err));
            err = shard_drain(disp);
            CHECK(err == -EDEADLK, "drain inside a read-side section: %s", shard_strerror(err));
        }
        rcu_read_unlock();
        err = shard_submit(disp, &i, sizeof i, count_job, NULL);
        CHECK(err == 0, "submit outside: %s", shard_strerror(err));
    }
    rcu_unregister_thread(); /* the application's own, as it registered it */
    return NULL;
}

static void *changer(void *arg)
{
    (void)arg;
    for (int i = 0; i < 40; i++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", i / 2);
        int err = i % 2 ? shard_worker_remove(disp, name) : shard_worker_add(disp, name, 1);
        CHECK(err == 0, "membership change %d: %s", i, shard_strerror(err));
        /* The application's own grace periods, alongside shard's. */
        static int values[2];
        int *old = rcu_xchg_pointer(&shared_value, &values[i % 2]);
        (void)old;
        synchronize_rcu();
    }
    return NULL;
}

static sem_t entered, gate;
static char key[24];
static size_t keylen;
static atomic_int app_tid, app_result = 1;

static void blocker(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    sem_post(&entered);
    sem_wait(&gate);
}

static void *app_waiting_in_section(void *arg)
{
    (void)arg;
    rcu_register_thread();
    atomic_store(&app_tid, (int)gettid());
    rcu_read_lock();
    atomic_store(&app_result, shard_submit(disp, key, keylen, count_job, NULL)); /* the queue is full */
    rcu_read_unlock();
    rcu_unregister_thread();
    return NULL;
}

/* Whether thread tid is asleep (blocked waiting for room): its state in /proc. */
static bool asleep(int tid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] == 'S';
}

static void crash_while_app_section_waits(void)
{
    struct shard_config cfg = { .workers = 2, .queue_capacity = 1 };
    CHECK(shard_dispatcher_create(&disp, &cfg) == 0, "create");
    shard_ring *r;
    CHECK(shard_dispatcher_ring(disp, &r) == 0, "ring");
    for (unsigned i = 0;; i++) {
        keylen = (size_t)snprintf(key, sizeof key, "k%u", i);
        if (strcmp(shard_ring_owner(r, key, keylen), "w0") == 0)
            break;
    }
    shard_ring_destroy(r);
    sem_init(&entered, 0, 0);
    sem_init(&gate, 0, 0);
    CHECK(shard_submit(disp, key, keylen, blocker, NULL) == 0, "submit blocker");
    sem_wait(&entered);
    CHECK(shard_submit(disp, key, keylen, count_job, NULL) == 0, "fill w0's queue");
    pthread_t t;
    pthread_create(&t, NULL, app_waiting_in_section, NULL);
    /* Until the application's thread sleeps in its submit (bounded: 20 s). */
    for (int i = 0; i < 20000 && !(atomic_load(&app_tid) && asleep(atomic_load(&app_tid))); i++)
        stress_pause_ms(1);
    CHECK(shard_worker_crash(disp, "w0", SHARD_CRASH_REROUTE) == 0, "crash");
    pthread_join(t, NULL);
    CHECK(atomic_load(&app_result) == 0, "the waiting submit got %s", shard_strerror(atomic_load(&app_result)));
    sem_post(&gate);
    CHECK(shard_drain(disp) == 0, "drain");
    shard_dispatcher_destroy(disp);
}

int main(void)
{
    alarm(60); /* a hang fails the run with SIGALRM rather than the test's timeout */
    crash_while_app_section_waits();
    atomic_store(&ran, 0);
    struct shard_config cfg = { .workers = 2, .queue_capacity = 64 };
    CHECK(shard_dispatcher_create(&disp, &cfg) == 0, "create");
    pthread_t t[THREADS], c;
    pthread_create(&c, NULL, changer, NULL);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, app_thread, NULL);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_join(c, NULL);
    CHECK(shard_drain(disp) == 0, "drain");
    CHECK(atomic_load(&ran) == 2L * THREADS * JOBS, "%ld of %ld jobs ran", atomic_load(&ran), 2L * THREADS * JOBS);
    shard_dispatcher_destroy(disp);
    printf("app rcu: %d threads registered by the application, %ld jobs\n", THREADS, atomic_load(&ran));
    return stress_result("stress_app_rcu");
}
