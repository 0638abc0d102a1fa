/* Destroy racing membership calls (drain, add, remove, crash, a weight, a placement): a call that
 * looked at the dispatcher before destroy began, and then waits for the control lock that destroy
 * holds while it stops everything, takes that lock once destroy lets it go, and must find the
 * dispatcher still there and answer -ESHUTDOWN. Before, destroy freed it meanwhile (a review's
 * program, under AddressSanitizer: heap-use-after-free in shard__ctl_lock, from shard_drain,
 * shard_worker_add, shard_key_place and shard_worker_crash).
 *
 * The window is held open deterministically: the library's pthread_mutex_lock and
 * pthread_mutex_unlock are wrapped at link time (static library only). The calling thread's first
 * lock is the control lock: the wrapper posts "at_lock" and waits for "go" before it locks. Meanwhile
 * destroy is started, and a job it must run keeps it holding the control lock; the call is let go
 * once destroy has begun (a try-submit answers -ESHUTDOWN), then the job ends. When the call lets the
 * control lock go, destroy must not have returned: its thread still holds the dispatcher. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <string.h>

#include "stress_common.h"

int __real_pthread_mutex_lock(pthread_mutex_t *m);
int __real_pthread_mutex_unlock(pthread_mutex_t *m);

static _Thread_local int armed;  /* the calling thread, until its first lock and unlock */
static _Thread_local int locked; /* it took that first lock */
static sem_t at_lock, go, job_started, job_gate;
static atomic_int destroy_returned, returned_early;

int __wrap_pthread_mutex_lock(pthread_mutex_t *m)
{
    if (armed && !locked) {
        sem_post(&at_lock);
        sem_wait(&go);
        locked = 1;
    }
    return __real_pthread_mutex_lock(m);
}

int __wrap_pthread_mutex_unlock(pthread_mutex_t *m)
{
    if (armed && locked) {
        armed = 0;
        if (atomic_load(&destroy_returned))
            atomic_store(&returned_early, 1);
    }
    return __real_pthread_mutex_unlock(m);
}

static shard_dispatcher *d;

static void blocker(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    sem_post(&job_started);
    sem_wait(&job_gate);
}

static void nop(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
}

enum call { DRAIN, ADD, REMOVE, CRASH, WEIGHT, PLACE, CALLS };
static const char *const call_name[CALLS] = { "shard_drain", "shard_worker_add", "shard_worker_remove",
                                              "shard_worker_crash", "shard_worker_set_weight",
                                              "shard_key_place" };
static atomic_int result;

static void *caller(void *arg)
{
    enum call c = (enum call)(intptr_t)arg;
    armed = 1;
    locked = 0;
    int r;
    switch (c) {
    case DRAIN: r = shard_drain(d); break;
    case ADD: r = shard_worker_add(d, "late", 1); break;
    case REMOVE: r = shard_worker_remove(d, "w1"); break;
    case CRASH: r = shard_worker_crash(d, "w1", SHARD_CRASH_REROUTE); break;
    case WEIGHT: r = shard_worker_set_weight(d, "w1", 3); break;
    default: r = shard_key_place(d, "k", 1, "w0"); break;
    }
    armed = 0;
    atomic_store(&result, r);
    return NULL;
}

static void *destroyer(void *arg)
{
    (void)arg;
    shard_dispatcher_destroy(d);
    atomic_store(&destroy_returned, 1);
    return NULL;
}

int main(void)
{
    sem_init(&at_lock, 0, 0);
    sem_init(&go, 0, 0);
    sem_init(&job_started, 0, 0);
    sem_init(&job_gate, 0, 0);
    for (int c = 0; c < CALLS; c++) {
        atomic_store(&destroy_returned, 0);
        atomic_store(&returned_early, 0);
        struct shard_config cfg = { .workers = 2 };
        CHECK(shard_dispatcher_create(&d, &cfg) == 0, "create");
        CHECK(shard_submit(d, "held", 4, blocker, NULL) == 0, "submit the job destroy waits for");
        sem_wait(&job_started);
        pthread_t ct, dt;
        pthread_create(&ct, NULL, caller, (void *)(intptr_t)c);
        sem_wait(&at_lock); /* it looked at the dispatcher: not shut down yet */
        pthread_create(&dt, NULL, destroyer, NULL);
        /* Destroy has begun once a submit is refused; it holds the control lock until the job ends.
         * (Polling a call whose answer changes once: destroy cannot return while the job runs.) */
        int r;
        while ((r = shard_try_submit(d, "other", 5, nop, NULL)) != -ESHUTDOWN)
            CHECK(r == 0 || r == -EAGAIN, "try_submit while destroy begins: %s", shard_strerror(r));
        sem_post(&go);       /* the call waits for the control lock now */
        sem_post(&job_gate); /* destroy goes on, lets the lock go and frees the dispatcher */
        pthread_join(dt, NULL);
        pthread_join(ct, NULL);
        r = atomic_load(&result);
        CHECK(r == -ESHUTDOWN, "%s racing destroy: %s, expected -ESHUTDOWN", call_name[c], shard_strerror(r));
        CHECK(!atomic_load(&returned_early), "%s racing destroy: destroy returned while the call held the dispatcher",
              call_name[c]);
        printf("destroy race: %s got %s\n", call_name[c], shard_strerror(r));
    }
    return stress_result("stress_destroy_membership");
}
