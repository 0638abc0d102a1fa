/* An application that uses liburcu itself (memb flavour, the one shard uses): it registers its own
 * threads and runs its own read-side sections, and submits from them. shard shares the registration
 * (no second registration, which liburcu refuses with an assertion) and leaves unregistering to the
 * application. Inside the application's read-side section a submit works (and may wait for room);
 * a membership call there would wait for a grace period its own caller holds up: -EDEADLK. */
#define _LGPL_SOURCE
#include <errno.h>
#include <pthread.h>
#include <urcu.h>

#include "stress_common.h"

#define THREADS 2
#define JOBS 20000

static shard_dispatcher *disp;
static atomic_long ran;
static int *_Atomic shared_value;

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

int main(void)
{
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
