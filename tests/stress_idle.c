/* Workers that wait in an idle hook, as a shard-per-core server's network loop does, while workers are
 * added, removed and crashed. Each hook waits on its wake descriptor and on a shared "network"
 * eventfd that a client thread signals; whichever hook reads a signal submits a batch of jobs (to
 * every worker, its own included), as a network loop submits the requests it read, and waits again
 * until wake_fd says it has work. A thread outside
 * submits too. Every job must run once, and the jobs of one key from one submitting thread in order,
 * one at a time; no wake-up may be lost (the run would hang: ctest's timeout). Runs under
 * ThreadSanitizer in CI. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "stress_common.h"

#define KEYS      64
#define BATCH     16
#define PRODUCERS 512 /* the outside thread, then one per worker thread ever started */

static struct stress_key keys[KEYS];
static char              key_name[KEYS][8];
static size_t            key_len[KEYS];
static atomic_int        next_producer = 1;
static _Thread_local int producer;                 /* 0: the outside thread; else a worker's */
static _Thread_local unsigned seq[KEYS];           /* its next sequence number per key */
static atomic_long       submitted, ran, signals_taken;
static int               net_fd;
static _Atomic(shard_dispatcher *) disp;

static void job(shard_worker *w, void *arg)
{
    struct stress_job *j = arg;
    stress_run(&keys[j->key], j, w);
    atomic_fetch_add(&ran, 1);
    free(j);
}

static void submit_one(shard_dispatcher *d, int k)
{
    struct stress_job *j = calloc(1, sizeof *j);
    CHECK(j, "out of memory");
    j->producer = producer, j->key = k, j->seq = seq[k];
    int r = shard_submit(d, key_name[k], key_len[k], job, j);
    CHECK(r == 0, "submit: %d", r);
    if (r == 0) {
        seq[k]++;
        atomic_fetch_add(&submitted, 1);
    } else {
        free(j);
    }
}

static void on_start(shard_worker *w, void *user)
{
    (void)w, (void)user;
    producer = atomic_fetch_add(&next_producer, 1);
    CHECK(producer < PRODUCERS, "more worker threads than the program counts");
    memset(seq, 0, sizeof seq);
}

/* As a network loop: waits on both, takes signals and submits their batches until wake_fd is readable
 * (its own submits make it so) or the time is up. */
static void hook(shard_worker *w, int wake_fd, int timeout_ms, void *user)
{
    (void)w, (void)user;
    for (;;) {
        struct pollfd p[2] = { { .fd = wake_fd, .events = POLLIN }, { .fd = net_fd, .events = POLLIN } };
        if (poll(p, 2, timeout_ms) <= 0 || (p[0].revents & POLLIN) || !(p[1].revents & POLLIN))
            return;
        uint64_t n;
        if (read(net_fd, &n, sizeof n) != sizeof n) /* another hook took it first */
            continue;
        shard_dispatcher *d = atomic_load(&disp); /* set: the client signals once create returned */
        for (uint64_t s = 0; s < n && producer < PRODUCERS; s++)
            for (int b = 0; b < BATCH; b++)
                submit_one(d, (int)((s * 7 + (uint64_t)b * 5 + (uint64_t)producer) % KEYS));
        atomic_fetch_add(&signals_taken, (long)n);
    }
}

struct client {
    int signals;
};

/* Signals the network fd, keeping at most 32 signals outstanding. */
static void *client_main(void *arg)
{
    struct client *c = arg;
    for (int i = 0; i < c->signals; i++) {
        while (i - atomic_load(&signals_taken) > 32)
            sched_yield();
        uint64_t one = 1;
        CHECK(write(net_fd, &one, sizeof one) == sizeof one, "write: %s", strerror(errno));
    }
    return NULL;
}

/* Whether all *(long *)ctx jobs were submitted and have run. */
static bool all_ran(void *ctx)
{
    long s = atomic_load(&submitted);
    return s == *(long *)ctx && atomic_load(&ran) == s;
}

/* Adds, removes and crashes workers, keeping the initial two. */
static void *churn_main(void *arg)
{
    int changes = *(int *)arg;
    shard_dispatcher *d = atomic_load(&disp);
    for (int i = 0; i < changes; i++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", i);
        CHECK(shard_worker_add(d, name, 1) == 0, "add %s", name);
        stress_pause_ms(1); /* pacing, not synchronisation: let jobs reach the new worker */
        int r = i % 3 == 0 ? shard_worker_crash(d, name, SHARD_CRASH_REROUTE) : shard_worker_remove(d, name);
        CHECK(r == 0, "%s %s: %d", i % 3 == 0 ? "crash" : "remove", name, r);
    }
    return NULL;
}

int main(void)
{
    int changes = STRESS_SANITIZED ? 60 : 300, signals = STRESS_SANITIZED ? 3000 : 30000;
    for (int k = 0; k < KEYS; k++) {
        key_len[k] = (size_t)snprintf(key_name[k], sizeof key_name[k], "k%d", k);
        keys[k].next_seq = calloc(PRODUCERS, sizeof *keys[k].next_seq);
    }
    net_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    CHECK(net_fd >= 0, "eventfd");
    struct shard_config cfg = { .workers = 2, .queue_capacity = 64, .on_worker_start = on_start,
                                .on_worker_idle = hook };
    shard_dispatcher *d;
    CHECK(shard_dispatcher_create(&d, &cfg) == 0, "create");
    atomic_store(&disp, d);
    struct client c = { .signals = signals };
    pthread_t ct, ht;
    pthread_create(&ct, NULL, client_main, &c);
    pthread_create(&ht, NULL, churn_main, &changes);
    for (int i = 0; i < signals; i++) /* the outside producer, one job a signal */
        submit_one(d, i % KEYS);
    pthread_join(ct, NULL);
    pthread_join(ht, NULL);
    while (atomic_load(&signals_taken) < signals) /* the hooks take the last signals */
        sched_yield();
    /* Until every job has run (the hooks submit the last signals' batches; a crash may have stuck a
     * job, and the jobs behind its key with it: stress_common.h). */
    long expect = (long)signals * (BATCH + 1);
    stress_drain_until(d, all_ran, &expect);
    CHECK(atomic_load(&ran) == atomic_load(&submitted), "ran %ld of %ld jobs", atomic_load(&ran),
          atomic_load(&submitted));
    CHECK(atomic_load(&submitted) == (long)signals * (BATCH + 1), "submitted %ld, expected %ld",
          atomic_load(&submitted), (long)signals * (BATCH + 1));
    shard_dispatcher_destroy(d);
    close(net_fd);
    for (int k = 0; k < KEYS; k++)
        free(keys[k].next_seq);
    printf("%d signals, %ld jobs, %d changes\n", signals, atomic_load(&ran), changes);
    return stress_result("stress_idle");
}
