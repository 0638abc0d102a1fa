/* Keyed timers (shard/timer.h) where the timing wheel has its edges, through the public API and the
 * real clock: a cancel on the worker that holds the timer, right after the wheel's advance stopped on
 * a cascade point. */
#include <criterion/criterion.h>
#include <errno.h>
#include <semaphore.h>
#include <shard.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

/* The wheel's tick is 2^16 ns and a level-1 slot spans 64 of them (src/wheel.h). */
#define TICK_SHIFT 16
#define BLOCK      64

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The delay from now to the time at, 0 once it has passed (a stalled test thread). */
static uint64_t until(uint64_t at)
{
    uint64_t now = now_ns();
    return at > now ? at - now : 0;
}

static shard_dispatcher *disp;
static sem_t a_done, b1_done;
static shard_timer b2;
static uint64_t cascade_tick;
static atomic_int in_window, b2_runs, cancel_rc;

/* A's job, on the worker whose wheel holds b1 and b2 (one key, one worker): cancels b2 there, which
 * unlinks it from the wheel at once. */
static void job_a(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    atomic_store(&in_window, (now_ns() >> TICK_SHIFT) == cascade_tick - 1);
    atomic_store(&cancel_rc, shard_timer_cancel(disp, b2));
    sem_post(&a_done);
}

static void job_b1(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    sem_post(&b1_done);
}

static void job_b2(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    atomic_fetch_add(&b2_runs, 1);
}

/* b1 and b2 fall due at tick C + 5, C the first tick of a block of 64 at least one block ahead: they
 * wait at level 1, in the slot that is cascaded when the wheel's cur reaches C. A falls due at tick
 * C - 1. The worker (polling, so on time) fires A within tick C - 1: its advance stops with cur on C.
 * A's job cancels b2 there: the wheel must find b2 where it is. Before the wheel cascaded at once a
 * slot its cur stopped on, the remove looked for b2 at level 0, unlinked the wrong slot and left b2's
 * freed record in the wheel (the count wrapped below 0, the record was later handed out twice). The
 * window is one tick (65.5 us), so the test tries many times; an attempt that missed it (a stalled
 * thread) still checks the contract. */
Test(timer_edges, a_cancel_on_the_holding_worker_right_after_the_wheel_stopped_on_a_cascade_point)
{
    enum { ATTEMPTS = 50 };
    struct shard_config cfg = { .workers = 1, .poll_us = 1000000 };
    cr_assert_eq(shard_dispatcher_create(&disp, &cfg), 0);
    sem_init(&a_done, 0, 0);
    sem_init(&b1_done, 0, 0);
    int hits = 0;
    for (int i = 0; i < ATTEMPTS; i++) {
        cascade_tick = ((now_ns() >> TICK_SHIFT) / BLOCK + 2) * BLOCK;
        uint64_t b_at = ((cascade_tick + 4) << TICK_SHIFT) + 100; /* due at tick C + 5 */
        uint64_t a_at = ((cascade_tick - 2) << TICK_SHIFT) + 100; /* due at tick C - 1 */
        cr_assert_eq(shard_submit_after(disp, "k", 1, until(b_at), job_b1, NULL, NULL), 0);
        cr_assert_eq(shard_submit_after(disp, "k", 1, until(b_at), job_b2, NULL, &b2), 0);
        cr_assert_eq(shard_submit_after(disp, "k", 1, until(a_at), job_a, NULL, NULL), 0);
        sem_wait(&a_done);
        sem_wait(&b1_done);
        cr_assert_eq(shard_drain(disp), 0);
        hits += atomic_load(&in_window);
        int rc = atomic_load(&cancel_rc), runs = atomic_load(&b2_runs);
        if (atomic_load(&in_window))
            cr_assert_eq(rc, 0, "attempt %d: b2 was pending, cancel returned %d", i, rc);
        cr_assert(rc == 0 ? runs == 0 : rc == -ENOENT && runs == 1, "attempt %d: cancel returned %d, b2 ran %d times",
                  i, rc, runs);
        atomic_store(&b2_runs, 0);
        struct shard_stats st;
        shard_dispatcher_stats(disp, &st);
        struct shard_worker_stats ws;
        cr_assert_eq(shard_dispatcher_worker_stats(disp, &ws, 1), 1);
        cr_assert_eq(st.timers, 0, "attempt %d: %llu timers pending after all ended", i,
                     (unsigned long long)st.timers);
        cr_assert_eq(ws.timers, 0, "attempt %d: the wheel counts %llu timers", i, (unsigned long long)ws.timers);
    }
    /* The records went back to the table once each: two new timers are each pending. */
    shard_timer x, y;
    cr_assert_eq(shard_submit_after(disp, "x", 1, SHARD_SECONDS(1), job_b2, NULL, &x), 0);
    cr_assert_eq(shard_submit_after(disp, "y", 1, SHARD_SECONDS(1), job_b2, NULL, &y), 0);
    cr_assert_eq(shard_timer_cancel(disp, x), 0);
    cr_assert_eq(shard_timer_cancel(disp, y), 0);
    printf("cascade point: %d of %d attempts cancelled within the tick before it\n", hits, ATTEMPTS);
    shard_dispatcher_destroy(disp);
    sem_destroy(&a_done);
    sem_destroy(&b1_done);
}
