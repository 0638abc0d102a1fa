/* A worker add whose thread does not start, with no memory left for the registry's next view: the
 * worker must not be freed while the published view of the registry (which a crash table payment's
 * kick reads without a lock) still names it. Found by a review of 7951bb5: the undo left the view in
 * force naming the worker, and the next change's grace period freed it; the next kick read freed
 * memory (ASan: heap-use-after-free). Now the undo puts back the view from before the add, which
 * needs no allocation. Linked statically with --wrap=pthread_create,--wrap=malloc: when armed,
 * pthread_create fails once, and the calling thread's next malloc after it fails too.
 * The scenario: w0 is in a job of key b; the add of x fails so; w2 is removed (its change's grace
 * period frees what the registry retired); w0 is crashed (REROUTE) in its job, so that b's next job,
 * on w1 now, is held behind the stuck entry; the job returns and its entry's payment kicks the
 * holders through the view. Checked: the add fails with the thread's error, the held job runs once
 * (and, under ASan, nothing freed is read). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <shard.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Thread_local int fail_create, fail_malloc_next;
int __real_pthread_create(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
void *__real_malloc(size_t n);

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*f)(void *), void *arg)
{
    if (fail_create) {
        fail_create = 0;
        fail_malloc_next = 1;
        return EAGAIN;
    }
    return __real_pthread_create(t, a, f, arg);
}

void *__wrap_malloc(size_t n)
{
    if (fail_malloc_next) {
        fail_malloc_next = 0;
        return NULL;
    }
    return __real_malloc(n);
}

static sem_t inside, gate;
static atomic_int ran;
static int failures;

#define EXPECT(cond, ...)                                                                                  \
    do {                                                                                               \
        if (!(cond)) {                                                                                 \
            fprintf(stderr, "test_view_uaf: " __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                                       \
            failures++;                                                                                \
        }                                                                                              \
    } while (0)

static void blocker(shard_worker *w, void *a)
{
    (void)w, (void)a;
    sem_post(&inside);
    sem_wait(&gate);
}

static void count(shard_worker *w, void *a)
{
    (void)w, (void)a;
    atomic_fetch_add(&ran, 1);
}

static void key_of(const shard_ring *r, const char *owner, const char *prefix, char *buf)
{
    for (int n = 0;; n++) {
        snprintf(buf, 64, "%s-%d", prefix, n);
        if (strcmp(shard_ring_owner(r, buf, strlen(buf)), owner) == 0)
            return;
    }
}

/* Jobs held set aside by the worker named name. */
static uint64_t held_by(shard_dispatcher *d, const char *name)
{
    struct shard_worker_stats st[8];
    long n = shard_dispatcher_worker_stats(d, st, 8);
    for (long i = 0; i < n && i < 8; i++)
        if (strcmp(st[i].name, name) == 0)
            return st[i].held;
    return 0;
}

int main(void)
{
    sem_init(&inside, 0, 0);
    sem_init(&gate, 0, 0);
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 3 };
    if (shard_dispatcher_create(&d, &cfg) != 0)
        return 1;
    shard_ring *r;
    char bkey[64];
    EXPECT(shard_dispatcher_ring(d, &r) == 0, "ring");
    key_of(r, "w0", "block", bkey);
    shard_ring_destroy(r);
    EXPECT(shard_submit(d, bkey, strlen(bkey), blocker, NULL) == 0, "blocker");
    sem_wait(&inside);
    fail_create = 1;
    EXPECT(shard_worker_add(d, "x", 1) == -EAGAIN, "the add must fail with the thread's error");
    EXPECT(!fail_create, "the thread start was not tried");
    fail_create = fail_malloc_next = 0; /* the undo no longer allocates: the armed failure may be left */
    /* The remove's grace period frees what the registry retired: x among it. */
    EXPECT(shard_worker_remove(d, "w2") == 0, "remove");
    EXPECT(shard_worker_crash(d, "w0", SHARD_CRASH_REROUTE) == 0, "crash");
    /* b is w1's now (the only worker left), held there behind w0's stuck job. */
    EXPECT(shard_submit(d, bkey, strlen(bkey), count, NULL) == 0, "submit");
    while (held_by(d, "w1") == 0)
        sched_yield();
    sem_post(&gate); /* the stuck job returns: its entry's payment kicks the holders through the view */
    /* shard_drain does not wait for what waits behind a job still running on a crashed worker
     * (dispatcher.h), and the stuck job may not have returned yet when it is called (under valgrind,
     * which runs one thread at a time, it often has not): drain again until the held job has run,
     * for 10 s at most. */
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        EXPECT(shard_drain(d) == 0, "drain");
        if (atomic_load(&ran))
            break;
        sched_yield();
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec - t0.tv_sec < 10);
    EXPECT(atomic_load(&ran) == 1, "the held job ran %d times", atomic_load(&ran));
    shard_dispatcher_destroy(d);
    printf("test_view_uaf: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
