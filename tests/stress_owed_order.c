/* Owed order: a key's jobs run in submission order while crashes reroute long runs of them and
 * workers lag many ring changes behind. Two producers each flood one key over two workers while a
 * third worker is added and removed, or crashed (REROUTE), back to back. A crash leaves each key a
 * run of owed jobs of one epoch, and the key's next jobs pile up behind it (set aside outside the
 * queues; the producers keep at most IN_FLIGHT a key unrun); workers that lose the key hand those runs on at fences many changes late.
 * The pieces of one run took different paths and ran in the order they reached a worker (fixed by
 * ordering owed jobs by the order they became owed: crash.h). Checked: each key's jobs run exactly
 * once, one at a time, in order. Runs under TSan too.
 *   stress_owed_order [SECONDS]   (default 3) */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "stress_common.h"

#define KEYS 2
/* Jobs of a key submitted and not yet run, at most: enough for long owed runs and piles behind
 * them, while a walk over a worker's held jobs stays short enough for the run to end in seconds. */
#define IN_FLIGHT 16384

static shard_dispatcher *disp;
static atomic_int stop;
static atomic_int running[KEYS];
static uint64_t next_seq[KEYS]; /* touched by the key's jobs only: they form a happens-before chain */
static atomic_ullong done[KEYS]; /* jobs of the key run so far, for the producer's flow control */
static uint64_t submitted[KEYS];

static void job(shard_worker *w, void *arg)
{
    uintptr_t packed = (uintptr_t)arg;
    int key = (int)(packed & 1);
    uint64_t seq = packed >> 1;
    CHECK(atomic_fetch_add(&running[key], 1) == 0, "key %d ran on two workers at once (%s)", key,
          shard_worker_name(w));
    CHECK(seq == next_seq[key], "key %d: ran #%llu on %s, expected #%llu", key, (unsigned long long)seq,
          shard_worker_name(w), (unsigned long long)next_seq[key]);
    next_seq[key] = seq + 1;
    atomic_fetch_sub(&running[key], 1);
    atomic_fetch_add_explicit(&done[key], 1, memory_order_relaxed);
}

static void *producer(void *arg)
{
    int key = (int)(intptr_t)arg;
    char name[16];
    size_t len = (size_t)snprintf(name, sizeof name, "player-%d", key);
    uint64_t seq = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        if (seq - atomic_load_explicit(&done[key], memory_order_relaxed) >= IN_FLIGHT) {
            sched_yield();
            continue;
        }
        int err = shard_submit(disp, name, len, job, (void *)(uintptr_t)(seq << 1 | (uint64_t)key));
        CHECK(err == 0, "submit: %s", shard_strerror(err));
        if (err)
            break;
        seq++;
    }
    submitted[key] = seq; /* read by main after the join */
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 3;
    struct shard_config cfg = { .workers = 2 };
    CHECK(shard_dispatcher_create(&disp, &cfg) == 0, "create");
    if (!disp)
        return stress_result("stress_owed_order");
    pthread_t prod[KEYS];
    for (intptr_t k = 0; k < KEYS; k++)
        pthread_create(&prod[k], NULL, producer, (void *)k);
    /* The third worker comes and goes; every third time it crashes instead of leaving. The pause
     * only paces the changes, as a membership controller would: nothing waits on it. */
    int changes = 0, crashes = 0;
    double start = now();
    for (int i = 0; now() - start < seconds; i++) {
        char extra[32];
        snprintf(extra, sizeof extra, "extra-%d", i);
        CHECK(shard_worker_add(disp, extra, 1) == 0, "add %s", extra);
        stress_pause_ms(1);
        int err = i % 3 == 2 ? shard_worker_crash(disp, extra, SHARD_CRASH_REROUTE) : shard_worker_remove(disp, extra);
        CHECK(err == 0, "%s %s: %s", i % 3 == 2 ? "crash" : "remove", extra, shard_strerror(err));
        crashes += i % 3 == 2;
        changes += 2;
        stress_pause_ms(1);
    }
    atomic_store(&stop, 1);
    for (int k = 0; k < KEYS; k++)
        pthread_join(prod[k], NULL);
    CHECK(shard_drain(disp) == 0, "drain");
    shard_dispatcher_destroy(disp);
    for (int k = 0; k < KEYS; k++)
        CHECK(next_seq[k] == submitted[k], "key %d: %llu of %llu jobs ran", k, (unsigned long long)next_seq[k],
              (unsigned long long)submitted[k]);
    printf("stress_owed_order: %d membership changes (%d crashes), %llu + %llu jobs\n", changes, crashes,
           (unsigned long long)submitted[0], (unsigned long long)submitted[1]);
    return stress_result("stress_owed_order");
}
