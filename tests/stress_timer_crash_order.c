/* Overdue timers keep their deadline order through a REROUTE crash (issue 23, item 2). A worker is
 * held in a long job while TIMERS timers of another of its keys fall due behind it; it is then
 * crashed with REROUTE and the job let go. The key's new owner, idle during the crash (the case that
 * failed: the first timer handed over woke it, and it ran what had arrived before the rest, which the
 * crash handed over in the wheel's slot order), must run them in deadline order, each once. Many
 * timers, and a new owner that polls (poll_us), so that the hand-over outlasts the owner's look at its
 * wheel: the old code failed in the first round or two.
 *
 * And a timer the crashed worker's wheel held runs before one armed later by a job the crash rerouted
 * (round_rearmed). The crash used to hand the wheel on after the queue: the rerouted job ran, armed
 * its timer and that one fired while the crash was still sorting the old wheel. Here the old wheel
 * holds FILLERS cancelled timers due before the key's, which the crash must sort and free first; the
 * old code failed every round. player_sessions found it as logouts of sessions already logged out.
 *
 * Each repeated ROUNDS times, on a new dispatcher each time.
 *
 *   stress_timer_crash_order [ROUNDS]   default 20 */
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <string.h>

#include "stress_common.h"

#define TIMERS 2000
#define MS     1000000ull
#define STEP   8000ull /* ns between two deadlines: 2,000 timers fall due over 16 ms */

static sem_t inside, gate;
static atomic_int ran[TIMERS + 1], nran;
static int order[TIMERS];
static uint64_t earliest[TIMERS + 1], latest[TIMERS + 1]; /* timer i's deadline is between the two */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void blocker(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    sem_post(&inside);
    sem_wait(&gate);
}

static void shot(shard_worker *w, void *arg)
{
    (void)w;
    int i = (int)(intptr_t)arg;
    atomic_fetch_add(&ran[i], 1);
    int n = atomic_fetch_add(&nran, 1);
    if (n < TIMERS)
        order[n] = i;
}

/* A key named prefix-N owned by owner in r (N counts up from 0). */
static void key_of(const shard_ring *r, const char *owner, const char *prefix, char *buf)
{
    for (int n = 0;; n++) {
        snprintf(buf, 32, "%s-%d", prefix, n);
        if (strcmp(shard_ring_owner(r, buf, strlen(buf)), owner) == 0)
            return;
    }
}

static void round_once(int round)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 2, .poll_us = 1000000 };
    CHECK(shard_dispatcher_create(&d, &cfg) == 0, "create");
    shard_ring *r;
    CHECK(shard_dispatcher_ring(d, &r) == 0, "ring");
    char held[32], timed[32];
    key_of(r, "w0", "held", held);
    key_of(r, "w0", "timed", timed);
    shard_ring_destroy(r);
    memset(ran, 0, sizeof ran);
    atomic_store(&nran, 0);

    CHECK(shard_submit(d, held, strlen(held), blocker, NULL) == 0, "submit the blocker");
    sem_wait(&inside);
    /* Armed while nothing changes: straight into w0's wheel, which cannot fire them while w0 is
     * in the blocker. Due from 1 ms on, STEP apart; armed last first, so that arm order is not
     * deadline order. */
    uint64_t armed = now_ns();
    for (int i = TIMERS; i >= 1; i--) {
        uint64_t delay = MS + (uint64_t)i * STEP;
        earliest[i] = now_ns() + delay;
        CHECK(shard_submit_after(d, timed, strlen(timed), delay, shot, (void *)(intptr_t)i, NULL) == 0, "arm %d", i);
        latest[i] = now_ns() + delay;
    }
    /* Time passing, not synchronisation: every timer must be overdue at the crash. */
    while (now_ns() < armed + MS + (TIMERS + 1) * STEP + 10 * MS)
        stress_pause_ms(2);
    CHECK(shard_worker_crash(d, "w0", SHARD_CRASH_REROUTE) == 0, "crash w0");
    sem_post(&gate);
    while (atomic_load(&nran) < TIMERS)
        CHECK(shard_drain(d) == 0, "drain");
    CHECK(shard_drain(d) == 0, "drain");
    for (int i = 1; i <= TIMERS; i++)
        CHECK(atomic_load(&ran[i]) == 1, "round %d: timer %d ran %d times", round, i, atomic_load(&ran[i]));
    /* Run n - 1 must not have been due surely later than run n (an arm that was slow to return blurs
     * a deadline by its duration: then either order is right). */
    int wrong = 0, first = -1;
    for (int n = 1; n < TIMERS; n++)
        if (earliest[order[n - 1]] > latest[order[n]] && wrong++ == 0)
            first = n;
    CHECK(!wrong, "round %d: %d timers ran after one due later; the first: run %d was timer %d, after timer %d, due %.3f ms later",
          round, wrong, first, first < 0 ? 0 : order[first], first < 0 ? 0 : order[first - 1],
          first < 0 ? 0.0 : (double)(earliest[order[first - 1]] - latest[order[first]]) / 1e6);
    shard_dispatcher_destroy(d);
}

/* The rerouted job's and the old wheel's timer, in the order they ran: 1 the old, 2 the new. */
static atomic_int rearmed_order[2], rearmed_runs;
static char probe[32];
static shard_dispatcher *probe_d;

static void probe_shot(shard_worker *w, void *arg)
{
    (void)w;
    int n = atomic_fetch_add(&rearmed_runs, 1);
    if (n < 2)
        atomic_store(&rearmed_order[n], (int)(intptr_t)arg);
}

/* Runs on the new owner after the crash rerouted it: arms the key's second timer, due at once. */
static void probe_job(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    CHECK(shard_submit_after(probe_d, probe, strlen(probe), 0, probe_shot, (void *)(intptr_t)2, NULL) == 0,
          "arm the second timer");
}

static void round_rearmed(int round)
{
    const int fillers = STRESS_SANITIZED ? 30000 : 100000;
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 2, .poll_us = 1000000 };
    CHECK(shard_dispatcher_create(&d, &cfg) == 0, "create");
    probe_d = d;
    shard_ring *r;
    CHECK(shard_dispatcher_ring(d, &r) == 0, "ring");
    char held[32], filler[32];
    key_of(r, "w0", "held", held);
    key_of(r, "w0", "filler", filler);
    key_of(r, "w0", "probe", probe);
    shard_ring_destroy(r);
    atomic_store(&rearmed_runs, 0);

    CHECK(shard_submit(d, held, strlen(held), blocker, NULL) == 0, "submit the blocker");
    sem_wait(&inside);
    /* Cancelled from this thread, not w0's: each stays in w0's wheel until its deadline, which w0,
     * held, never reaches. All due before the probe's first timer, so sorted ahead of it. */
    for (int i = 0; i < fillers; i++) {
        shard_timer t;
        CHECK(shard_submit_after(d, filler, strlen(filler), MS, probe_shot, NULL, &t) == 0, "arm filler %d", i);
        CHECK(shard_timer_cancel(d, t) == 0, "cancel filler %d", i);
    }
    CHECK(shard_submit_after(d, probe, strlen(probe), 2 * MS, probe_shot, (void *)(intptr_t)1, NULL) == 0,
          "arm the first timer");
    uint64_t due = now_ns() + 2 * MS; /* its deadline is no later, however long the arm took */
    CHECK(shard_submit(d, probe, strlen(probe), probe_job, NULL) == 0, "submit the probe job");
    /* Time passing, not synchronisation: the first timer must be overdue at the crash, so due before
     * the second, which the probe job arms after it. */
    while (now_ns() < due + 2 * MS)
        stress_pause_ms(1);
    CHECK(shard_worker_crash(d, "w0", SHARD_CRASH_REROUTE) == 0, "crash w0");
    sem_post(&gate);
    while (atomic_load(&rearmed_runs) < 2)
        CHECK(shard_drain(d) == 0, "drain");
    CHECK(shard_drain(d) == 0, "drain");
    CHECK(atomic_load(&rearmed_runs) == 2, "round %d: the key's timers ran %d times, not 2", round,
          atomic_load(&rearmed_runs));
    CHECK(atomic_load(&rearmed_order[0]) == 1 && atomic_load(&rearmed_order[1]) == 2,
          "round %d: the timer armed by the rerouted job ran before the crashed wheel's, due earlier", round);
    shard_dispatcher_destroy(d);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    sem_init(&inside, 0, 0);
    sem_init(&gate, 0, 0);
    for (int i = 0; i < rounds && !atomic_load(&stress_failures); i++) {
        round_once(i);
        round_rearmed(i);
    }
    return stress_result("stress_timer_crash_order");
}
