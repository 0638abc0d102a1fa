/* A job set aside while its worker holds nothing else must run once the owner it waits for moves on,
 * with no further event. Key k moves from w0 to a new worker c; c takes k's job while w0 still runs
 * an older job, so the job waits for w0's fence. If c marks what it waits for before it counts as a
 * worker holding jobs, and w0 passes the fence in between, the fence kicks nobody and c parks with the
 * job held until some later event (a change, a drain). The window is a few hundred nanoseconds: w0 is
 * let go at a random offset around the moment c takes the job, over many trials. Found by a review;
 * this program failed 2 runs of 4 on the code before the fix. A trial fails when the job has not run
 * 5 s after w0 let go. */
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stress_common.h"

static atomic_int release_blocker, blocker_in, job_ran;
static _Atomic uint64_t go_at; /* ns: when w0's job returns, and the spinner's ends */

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* w0's older job: returns at go_at (plus the trial's offset, folded into go_at). */
static void blocker(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    atomic_store(&blocker_in, 1);
    while (!atomic_load(&release_blocker))
        ;
    while (now_ns() < atomic_load(&go_at))
        ;
}

/* Keeps c busy until about go_at, so that c takes k's job close to the moment w0 lets go. */
static void spinner(shard_worker *w, void *arg)
{
    (void)w;
    uint64_t until = (uint64_t)(uintptr_t)arg;
    while (now_ns() < until)
        ;
}

static void job(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    atomic_store(&job_ran, 1);
}

/* A key owned by `from` in before and by `to` in after. */
static size_t find_key(char *buf, const shard_ring *before, const char *from, const shard_ring *after, const char *to)
{
    for (unsigned i = 0;; i++) {
        size_t n = (size_t)snprintf(buf, 24, "k%u", i);
        if (!strcmp(shard_ring_owner(before, buf, n), from) && !strcmp(shard_ring_owner(after, buf, n), to))
            return n;
    }
}

int main(void)
{
    int trials = STRESS_SANITIZED ? 1000 : 12000;
    struct shard_config cfg = { .workers = 2 };
    shard_dispatcher *d;
    CHECK(shard_dispatcher_create(&d, &cfg) == 0, "create");
    shard_ring *before, *after;
    CHECK(shard_dispatcher_ring(d, &before) == 0 && shard_ring_clone(before, &after) == 0 &&
              shard_ring_add(after, "c", 1) == 0, "rings");
    char kb[24], kj[24], ks[24];
    size_t lb = find_key(kb, before, "w0", after, "w0"), lj = find_key(kj, before, "w0", after, "c"),
           ls = find_key(ks, before, "w1", after, "c");
    srand(1);
    int lost = 0;
    for (int t = 0; t < trials && !lost; t++) {
        atomic_store(&release_blocker, 0);
        atomic_store(&blocker_in, 0);
        atomic_store(&job_ran, 0);
        CHECK(shard_submit(d, kb, lb, blocker, NULL) == 0, "submit w0's job");
        while (!atomic_load(&blocker_in))
            ;
        CHECK(shard_worker_add(d, "c", 1) == 0, "add c"); /* k: w0 -> c; w0 is inside its job */
        uint64_t base = now_ns() + 300000;
        atomic_store(&go_at, base + (uint64_t)(rand() % 3000));
        atomic_store(&release_blocker, 1);
        CHECK(shard_submit(d, ks, ls, spinner, (void *)(uintptr_t)base) == 0, "submit c's spinner");
        CHECK(shard_submit(d, kj, lj, job, NULL) == 0, "submit k's job");
        uint64_t deadline = atomic_load(&go_at) + 5000000000u;
        while (!atomic_load(&job_ran) && now_ns() < deadline)
            sched_yield();
        if (!atomic_load(&job_ran)) {
            lost = 1;
            CHECK(0, "trial %d: k's job did not run within 5 s of w0 passing its fence: a lost wake-up", t);
        }
        CHECK(shard_drain(d) == 0, "drain");
        CHECK(shard_worker_remove(d, "c") == 0, "remove c");
    }
    shard_ring_destroy(before);
    shard_ring_destroy(after);
    shard_dispatcher_destroy(d);
    return stress_result("stress_lost_wake");
}
