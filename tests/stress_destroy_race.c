/* Destroy racing a submit that has just been given room: the submit leaves the waiters and must still
 * be counted by destroy (inside a read-side section) until it has read the dispatcher for the last
 * time. Before, it left the waiters first and re-entered a section after: destroy, run in between,
 * saw no one and freed the dispatcher under it (AddressSanitizer: heap-use-after-free in submit).
 *
 * The window is held open deterministically: the library's calls to pthread_mutex_unlock and
 * pthread_cond_wait are wrapped at link time (static library only), and the submitting thread, right
 * after it unlocks the waiters' lock on its way out of the wait, posts "left" and waits up to 3 s for
 * destroy to return. destroy must not return then; a wait that times out is the expected case. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <time.h>

#include "stress_common.h"

int __real_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m);
int __real_pthread_mutex_unlock(pthread_mutex_t *m);

static _Thread_local int armed, woken;
static sem_t waiting, left, destroyed, entered, gate;
static atomic_int destroy_returned_early;

int __wrap_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
    if (armed)
        sem_post(&waiting);
    int r = __real_pthread_cond_wait(c, m);
    woken = armed;
    return r;
}

int __wrap_pthread_mutex_unlock(pthread_mutex_t *m)
{
    int r = __real_pthread_mutex_unlock(m);
    if (woken) {
        woken = armed = 0;
        sem_post(&left);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 3;
        while (sem_timedwait(&destroyed, &ts) != 0)
            if (errno != EINTR)
                return r; /* destroy is still waiting for this submit: as it must */
        atomic_store(&destroy_returned_early, 1);
    }
    return r;
}

static shard_dispatcher *d;
static atomic_int result = 1;

static void blocker(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    sem_post(&entered);
    sem_wait(&gate);
}

static void nop(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
}

static void *submitter(void *arg)
{
    (void)arg;
    armed = 1;
    atomic_store(&result, shard_submit(d, "k", 1, nop, NULL)); /* the queue is full: waits */
    return NULL;
}

int main(void)
{
    sem_init(&waiting, 0, 0);
    sem_init(&left, 0, 0);
    sem_init(&destroyed, 0, 0);
    sem_init(&entered, 0, 0);
    sem_init(&gate, 0, 0);
    struct shard_config cfg = { .workers = 1, .queue_capacity = 1 };
    CHECK(shard_dispatcher_create(&d, &cfg) == 0, "create");
    CHECK(shard_submit(d, "k", 1, blocker, NULL) == 0, "submit blocker");
    sem_wait(&entered);
    CHECK(shard_submit(d, "k", 1, nop, NULL) == 0, "fill the queue");
    pthread_t t;
    pthread_create(&t, NULL, submitter, NULL);
    sem_wait(&waiting); /* it waits for room */
    sem_post(&gate);    /* room: it wakes and leaves the waiters */
    sem_wait(&left);
    shard_dispatcher_destroy(d);
    sem_post(&destroyed);
    pthread_join(t, NULL);
    CHECK(!atomic_load(&destroy_returned_early), "destroy returned while a submit was still reading the dispatcher");
    int r = atomic_load(&result);
    CHECK(r == 0 || r == -ESHUTDOWN, "the racing submit got %s", shard_strerror(r));
    printf("destroy race: the racing submit got %s\n", shard_strerror(r));
    return stress_result("stress_destroy_race");
}
