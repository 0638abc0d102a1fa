/* Allocation failure: every allocation a ring or membership call makes is failed in turn (the N-th
 * allocation made by the calling thread, for N = 1, 2, ...). Each call must then return -ENOMEM and
 * change nothing (same epoch, same ring checksum, the same jobs run), or succeed as usual. The library
 * is linked statically and its allocator calls wrapped (-Wl,--wrap=...), so only the thread that armed
 * the failure sees it. Also a worker's batch submit beyond its own full queue, whose records fail, and
 * jobs that follow their key during a drain with no record for the drain's mark, and shard_flush. */
#include <criterion/criterion.h>
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

#include "dispatcher_internal.h" /* a drain under way (marks_pending), a worker's spare records */

static _Thread_local long fail_countdown; /* 0: off; 1: the next allocation fails */
static _Thread_local long failures_hit;

static int should_fail(void)
{
    if (fail_countdown && --fail_countdown == 0) {
        failures_hit++;
        return 1;
    }
    return 0;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
char *__real_strdup(const char *s);

void *__wrap_malloc(size_t n) { return should_fail() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t a, size_t b) { return should_fail() ? NULL : __real_calloc(a, b); }
void *__wrap_realloc(void *p, size_t n) { return should_fail() ? NULL : __real_realloc(p, n); }
void *__wrap_aligned_alloc(size_t a, size_t n) { return should_fail() ? NULL : __real_aligned_alloc(a, n); }
char *__wrap_strdup(const char *s) { return should_fail() ? NULL : __real_strdup(s); }

static void arm(long n)
{
    fail_countdown = n;
    failures_hit = 0;
}

Test(faults, ring_calls_fail_cleanly)
{
    int saw_enomem = 0;
    for (long n = 1; n < 40; n++) {
        shard_ring *r;
        cr_assert_eq(shard_ring_create(&r, NULL), 0);
        cr_assert_eq(shard_ring_add(r, "a", 1), 0);
        cr_assert_eq(shard_ring_add(r, "b", 2), 0);
        uint64_t sum = shard_ring_checksum(r);
        struct shard_ring_member m[] = { { "c", 1 }, { "d", 1 } };
        arm(n);
        int e1 = shard_ring_add(r, "x", 1);
        int e2 = e1 ? shard_ring_add_many(r, m, 2) : 0;
        arm(0);
        cr_assert(e1 == 0 || e1 == -ENOMEM);
        cr_assert(e2 == 0 || e2 == -ENOMEM);
        if (e1 == -ENOMEM) {
            saw_enomem = 1;
            if (e2 == -ENOMEM)
                cr_assert_eq(shard_ring_checksum(r), sum, "a failed add changed the ring (n=%ld)", n);
        }
        shard_ring *c;
        uint64_t sum2 = shard_ring_checksum(r);
        arm(n);
        int e4 = shard_ring_set_weight(r, "a", 4);
        arm(0);
        cr_assert(e4 == 0 || e4 == -ENOMEM);
        if (e4 == -ENOMEM)
            cr_assert_eq(shard_ring_checksum(r), sum2, "a failed set_weight changed the ring (n=%ld)", n);
        uint64_t sum3 = shard_ring_checksum(r);
        arm(n);
        int e5 = shard_ring_pin(r, 77, "a");
        arm(0);
        cr_assert(e5 == 0 || e5 == -ENOMEM);
        if (e5 == -ENOMEM)
            cr_assert_eq(shard_ring_checksum(r), sum3, "a failed pin changed the ring (n=%ld)", n);
        arm(n);
        int e3 = shard_ring_clone(r, &c);
        arm(0);
        cr_assert(e3 == 0 || e3 == -ENOMEM);
        if (e3 == 0)
            shard_ring_destroy(c);
        shard_ring_destroy(r);
    }
    cr_assert(saw_enomem);
}

static atomic_long ran;
static void count(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    atomic_fetch_add(&ran, 1);
}

enum op { ADD, REMOVE, CRASH, DRAIN, WEIGHT, PLACE, UNPLACE };

static void membership_under_failure(enum op op)
{
    long enomem = 0, ok = 0;
    for (long n = 1; n < 80; n++) {
        shard_dispatcher *d;
        struct shard_config cfg = { .workers = 3, .queue_capacity = 64 };
        cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
        atomic_store(&ran, 0);
        char k[24];
        for (int i = 0; i < 100; i++)
            cr_assert_eq(shard_submit(d, k, (size_t)snprintf(k, sizeof k, "k%d", i), count, NULL), 0);
        /* Placements first, so that a placement copies a path of pins its ring shares. */
        for (int i = 0; (op == PLACE || op == UNPLACE) && i < 50; i++)
            cr_assert_eq(shard_key_place(d, k, (size_t)snprintf(k, sizeof k, "k%d", i), i % 2 ? "w0" : "w2"), 0);
        struct shard_stats before;
        shard_dispatcher_stats(d, &before);
        arm(n);
        int err = op == ADD       ? shard_worker_add(d, "x", 1)
                  : op == REMOVE  ? shard_worker_remove(d, "w1")
                  : op == CRASH   ? shard_worker_crash(d, "w1", SHARD_CRASH_REROUTE)
                  : op == WEIGHT  ? shard_worker_set_weight(d, "w1", 3)
                  : op == PLACE   ? shard_key_place(d, "k70", 3, "w1")
                  : op == UNPLACE ? shard_key_unplace(d, "k7", 2)
                                  : shard_drain(d);
        long hit = failures_hit;
        arm(0);
        struct shard_stats after;
        shard_dispatcher_stats(d, &after);
        if (err == -ENOMEM) {
            enomem++;
            cr_assert_eq(after.epoch, before.epoch, "a failed change published a ring (n=%ld)", n);
            cr_assert_eq(after.ring_checksum, before.ring_checksum);
        } else {
            cr_assert_eq(err, 0, "n=%ld: %s", n, shard_strerror(err));
            ok++;
            if (op != DRAIN)
                cr_assert_eq(after.epoch, before.epoch + 1);
            if (hit == 0) {
                shard_drain(d);
                shard_dispatcher_destroy(d);
                cr_assert_eq(atomic_load(&ran), 100);
                break; /* n is past the last allocation the call makes */
            }
        }
        cr_assert_eq(shard_drain(d), 0);
        /* A crash may find w1 in a job, which drain does not wait for (dispatcher.h): each key has one
         * job, so only that one can be late. Drain again until it has run, 10 s at most. */
        for (int tries = 0; op == CRASH && atomic_load(&ran) < 100 && tries < 10000; tries++) {
            struct timespec ms = { 0, 1000000 };
            nanosleep(&ms, NULL);
            cr_assert_eq(shard_drain(d), 0);
        }
        cr_assert_eq(atomic_load(&ran), 100, "jobs lost after a failed change (n=%ld)", n);
        shard_dispatcher_destroy(d);
    }
    cr_assert_gt(enomem, 0, "no allocation of the call was failed");
    cr_assert_gt(ok, 0);
}

Test(faults, add_fails_cleanly)
{
    membership_under_failure(ADD);
}

Test(faults, remove_fails_cleanly)
{
    membership_under_failure(REMOVE);
}

Test(faults, crash_fails_cleanly)
{
    membership_under_failure(CRASH);
}

Test(faults, drain_fails_cleanly)
{
    membership_under_failure(DRAIN);
}

Test(faults, set_weight_fails_cleanly)
{
    membership_under_failure(WEIGHT);
}

Test(faults, place_fails_cleanly)
{
    membership_under_failure(PLACE);
}

Test(faults, unplace_fails_cleanly)
{
    membership_under_failure(UNPLACE);
}

/* A timer's record comes from a chunk of 16,384 allocated on demand: without memory an arm fails with
 * -ENOMEM and leaves nothing pending. */
Test(faults, arm_without_memory_arms_nothing)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 2 };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    shard_timer t = 5;
    arm(1);
    int rc = shard_submit_after(d, "k", 1, 1000000, count, NULL, &t);
    arm(0);
    cr_assert_eq(rc, -ENOMEM);
    cr_assert_eq(t, 0);
    struct shard_stats st;
    shard_dispatcher_stats(d, &st);
    cr_assert_eq(st.timers, 0);
    cr_assert_eq(shard_submit_after(d, "k", 1, 0, count, NULL, &t), 0, "and works once memory is back");
    shard_dispatcher_destroy(d);
}

/* A running job's submits are gathered in its worker's outbox (64 of them) and delivered when it
 * returns. Beyond the worker's own full queue each needs a record: one that cannot be had keeps the
 * gathered jobs, in order, until memory comes back (nothing lost, nothing run twice); a submit that
 * finds the outbox full and still undeliverable returns -ENOMEM, and shard_submit_many how many it
 * gathered before (-ENOMEM with none). Those not accepted never run. */
#define GATHER 64 /* the outbox's size (outbox.h's OUTBOX_MAX) */
static atomic_int noop_ran, batch_ran, seq_next, misordered;
static int rc_one, rc_none, gathered_rc;
static long hits_one, hits_none;
static sem_t batched_all; /* fill_then_batch has submitted everything: a drain after it covers it */

static void noop(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    atomic_fetch_add(&noop_ran, 1);
}

static void batched(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    atomic_fetch_add(&batch_ran, 1);
}

static void in_order(shard_worker *w, void *arg)
{
    (void)w;
    if (atomic_fetch_add(&seq_next, 1) != (int)(intptr_t)arg)
        atomic_fetch_add(&misordered, 1);
}

/* From a job of key "k" on a dispatcher of one worker with queue_capacity 4: fills its queue, so that
 * its next submit needs a record beyond it. */
static void fill_queue(shard_dispatcher *d)
{
    for (int i = 0; i < 4; i++)
        cr_assert_eq(shard_try_submit(d, "k", 1, noop, NULL), 0);
}

static void fill_then_batch(shard_worker *w, void *arg)
{
    shard_dispatcher *d = shard_worker_dispatcher(w);
    (void)arg;
    fill_queue(d);
    gathered_rc = 0;
    for (int i = 0; i < GATHER - 1 && !gathered_rc; i++)
        gathered_rc = shard_submit(d, "k", 1, in_order, (void *)(intptr_t)i);
    struct shard_job jobs[3] = { { "k", 1, batched, NULL }, { "k", 1, batched, NULL }, { "k", 1, batched, NULL } };
    arm(1); /* the outbox fills with the first; delivering it then fails its first record */
    rc_one = shard_submit_many(d, jobs, 3);
    hits_one = failures_hit;
    arm(1); /* full again, and its delivery fails again */
    rc_none = shard_submit_many(d, jobs, 3);
    hits_none = failures_hit;
    arm(0);
    sem_post(&batched_all);
}

Test(faults, a_jobs_submits_beyond_a_full_queue_without_memory)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 1, .queue_capacity = 4 };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    sem_init(&batched_all, 0, 0);
    cr_assert_eq(shard_submit(d, "k", 1, fill_then_batch, NULL), 0);
    sem_wait(&batched_all); /* a drain covers only jobs submitted before it */
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(gathered_rc, 0);
    cr_assert_eq(rc_one, 1, "the batch returned %d: the one job gathered before the outbox was full", rc_one);
    cr_assert_eq(rc_none, -ENOMEM);
    cr_assert_eq(atomic_load(&noop_ran), 4);
    cr_assert_eq(atomic_load(&seq_next), GATHER - 1, "every gathered job runs once memory is back");
    cr_assert_eq(atomic_load(&misordered), 0);
    cr_assert_eq(atomic_load(&batch_ran), 1, "only the accepted job runs");
    cr_assert(hits_one == 1 && hits_none == 1, "each full outbox's delivery met the failed allocation: %ld %ld",
              hits_one, hits_none);
    shard_dispatcher_destroy(d);
}

/* A timer armed or moved from a job goes after what the job submitted before (timer.h), so those
 * jobs are delivered first: when they cannot be (a full queue, no memory to go beyond it), the arm
 * and the rearm fail with -ENOMEM and change nothing; the gathered job still runs once memory is
 * back. */
static shard_timer far_timer;
static int rearm_rc, after_rc;
static long rearm_hits;

static void gather_then_time(shard_worker *w, void *arg)
{
    shard_dispatcher *d = shard_worker_dispatcher(w);
    (void)arg;
    fill_queue(d);
    cr_assert_eq(shard_submit(d, "k", 1, batched, NULL), 0);     /* gathered */
    arm(1);
    rearm_rc = shard_timer_rearm(d, far_timer, 1000);
    rearm_hits = failures_hit;
    arm(1);
    shard_timer t = 0;
    after_rc = shard_submit_after(d, "k", 1, 0, batched, NULL, &t);
    arm(0);
    sem_post(&batched_all);
}

/* A timer of "k" armed after the test's others, due 1 ms after: once it has run, every timer of "k"
 * due before it has (a key's timers run in deadline order, timer.h; ties are not ordered). */
static sem_t last_timer_ran;
static void last_timer(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    sem_post(&last_timer_ran);
}

Test(faults, a_timer_from_a_job_whose_submits_cannot_be_delivered, .timeout = 60)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 1, .queue_capacity = 4 };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    sem_init(&batched_all, 0, 0);
    atomic_store(&batch_ran, 0);
    atomic_store(&noop_ran, 0);
    cr_assert_eq(shard_submit_after(d, "k", 1, 3600ull * 1000000000ull, noop, NULL, &far_timer), 0);
    cr_assert_eq(shard_submit(d, "k", 1, gather_then_time, NULL), 0);
    sem_wait(&batched_all);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(rearm_rc, -ENOMEM);
    cr_assert_eq(rearm_hits, 1, "the delivery before the rearm met the failed allocation");
    cr_assert_eq(after_rc, -ENOMEM);
    /* The refused timer's delay was 0: armed all the same, it would have run by the time a timer of
     * the key armed after it has (a drain does not wait for a timer's job before it is due). */
    sem_init(&last_timer_ran, 0, 0);
    cr_assert_eq(shard_submit_after(d, "k", 1, 1000000, last_timer, NULL, NULL), 0);
    sem_wait(&last_timer_ran);
    cr_assert_eq(atomic_load(&batch_ran), 1, "the gathered job runs, the timer refused does not");
    cr_assert_eq(shard_timer_cancel(d, far_timer), 0, "the rearm changed nothing: still pending");
    shard_dispatcher_destroy(d);
}

/* shard_flush delivers a job's gathered submits now; when one needs a record beyond its full queue and
 * none can be had, it returns -ENOMEM and keeps it (dispatcher.h), delivered by a later flush once
 * memory is back, once. */
static int flush_rc, flush_again_rc;
static long flush_hits;

static void gather_then_flush(shard_worker *w, void *arg)
{
    shard_dispatcher *d = shard_worker_dispatcher(w);
    (void)arg;
    fill_queue(d);
    cr_assert_eq(shard_submit(d, "k", 1, batched, NULL), 0);     /* gathered */
    arm(1);
    flush_rc = shard_flush(w);
    flush_hits = failures_hit;
    arm(0);
    flush_again_rc = shard_flush(w);
    sem_post(&batched_all);
}

Test(faults, a_flush_whose_submits_cannot_be_delivered)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 1, .queue_capacity = 4 };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    sem_init(&batched_all, 0, 0);
    atomic_store(&batch_ran, 0);
    atomic_store(&noop_ran, 0);
    cr_assert_eq(shard_submit(d, "k", 1, gather_then_flush, NULL), 0);
    sem_wait(&batched_all);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(flush_rc, -ENOMEM);
    cr_assert_eq(flush_hits, 1, "the delivery met the failed allocation");
    cr_assert_eq(flush_again_rc, 0, "with memory back the kept job is delivered");
    cr_assert_eq(atomic_load(&noop_ran), 4);
    cr_assert_eq(atomic_load(&batch_ran), 1, "the gathered job runs once");
    shard_dispatcher_destroy(d);
}

/* A job held behind a stuck job (on a crashed worker) on L follows its key when L's release hook hands
 * the key to z, also when a drain is under way and no record can be had for the mark that would keep
 * the drain waiting for it: it must not run on L, where the key's state is no more. */
static struct {
    char   key[24], l[SHARD_NAME_MAX + 1], z[SHARD_NAME_MAX + 1];
    size_t len;
    bool   l_hooked; /* L's hook thread only */
    sem_t  stuck_in, stuck_go, block_in, block_go, hook_in, hook_go, ran_sem;
    atomic_int ran, ran_on_l;
} om;

static void om_stuck(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    sem_post(&om.stuck_in);
    sem_wait(&om.stuck_go);
}

static void om_block(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    sem_post(&om.block_in);
    sem_wait(&om.block_go);
}

static void om_job(shard_worker *w, void *arg)
{
    (void)arg;
    if (strcmp(shard_worker_name(w), om.l) == 0)
        atomic_fetch_add(&om.ran_on_l, 1);
    atomic_fetch_add(&om.ran, 1);
    sem_post(&om.ran_sem);
}

static void om_release(shard_worker *w, const struct shard_handoff *h, void *user)
{
    (void)user;
    if (om.l_hooked || strcmp(shard_worker_name(w), om.l) != 0 || !shard_handoff_moves(h, om.key, om.len))
        return;
    om.l_hooked = true;
    sem_post(&om.hook_in);
    sem_wait(&om.hook_go);
    shard__worker_drop_spares(w); /* L's next record comes from calloc, */
    arm(1);                       /* which fails: the drain mark's, in the follow walk after this hook */
}

static void *om_drain(void *d)
{
    cr_assert_eq(shard_drain(d), 0);
    return NULL;
}

Test(faults, a_job_follows_its_key_without_memory_for_a_drain_mark)
{
    sem_t *sems[] = { &om.stuck_in, &om.stuck_go, &om.block_in, &om.block_go,
                      &om.hook_in,  &om.hook_go,  &om.ran_sem };
    for (size_t i = 0; i < sizeof sems / sizeof sems[0]; i++)
        sem_init(sems[i], 0, 0);
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 3, .on_release = om_release };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    om.len = (size_t)snprintf(om.key, sizeof om.key, "g");
    shard_ring *r;
    cr_assert_eq(shard_dispatcher_ring(d, &r), 0);
    char u[SHARD_NAME_MAX + 1];
    snprintf(u, sizeof u, "%s", shard_ring_owner(r, om.key, om.len));
    shard_ring_destroy(r);
    cr_assert_eq(shard_submit(d, om.key, om.len, om_stuck, NULL), 0);
    sem_wait(&om.stuck_in);
    cr_assert_eq(shard_worker_crash(d, u, SHARD_CRASH_REROUTE), 0);
    cr_assert_eq(shard_dispatcher_ring(d, &r), 0);
    snprintf(om.l, sizeof om.l, "%s", shard_ring_owner(r, om.key, om.len));
    /* x, the third worker, runs a job that keeps the drain waiting; z takes g from L, not x's key. */
    char xk[24], x[SHARD_NAME_MAX + 1];
    size_t xl;
    for (unsigned i = 0;; i++) {
        xl = (size_t)snprintf(xk, sizeof xk, "x%u", i);
        if (strcmp(shard_ring_owner(r, xk, xl), om.l) != 0)
            break;
    }
    snprintf(x, sizeof x, "%s", shard_ring_owner(r, xk, xl));
    for (unsigned i = 0;; i++) {
        snprintf(om.z, sizeof om.z, "z%u", i);
        cr_assert_eq(shard_ring_add(r, om.z, 1), 0);
        bool takes = strcmp(shard_ring_owner(r, om.key, om.len), om.z) == 0;
        bool keeps_x = strcmp(shard_ring_owner(r, xk, xl), x) == 0;
        shard_ring_remove(r, om.z);
        if (takes && keeps_x)
            break;
    }
    shard_ring_destroy(r);
    cr_assert_eq(shard_submit(d, om.key, om.len, om_job, NULL), 0); /* held on L behind the stuck job */
    cr_assert_eq(shard_submit(d, xk, xl, om_block, NULL), 0);
    sem_wait(&om.block_in);
    cr_assert_eq(shard_worker_add(d, om.z, 1), 0);
    sem_wait(&om.hook_in);
    pthread_t drainer;
    pthread_create(&drainer, NULL, om_drain, d);
    for (bool under_way = false; !under_way; sched_yield()) { /* x's mark waits for om_block */
        pthread_mutex_lock(&d->lock);
        under_way = d->marks_pending > 0;
        pthread_mutex_unlock(&d->lock);
    }
    sem_post(&om.stuck_go);
    sem_post(&om.hook_go);
    sem_wait(&om.ran_sem);
    sem_post(&om.block_go);
    pthread_join(drainer, NULL);
    cr_assert_eq(atomic_load(&om.ran), 1);
    cr_assert_eq(atomic_load(&om.ran_on_l), 0, "the job ran on %s, which had handed its key to %s", om.l, om.z);
    shard_dispatcher_destroy(d);
}

/* Destroy while a job that has gathered a submit (its worker's outbox open) waits for a thread that
 * waits for room in that worker's queue: the waiter is sent back (-ESHUTDOWN), the job returns, its
 * gathered submit runs, and destroy ends (a review feared destroy's wait for the outbox, then before
 * sending waiters back, could hang here; this run did not show it, but the order is now the safe
 * one). */
static sem_t dw_gathered, dw_waiter_back;
static atomic_int dw_ran, dw_waiter_rc = 1;
static shard_dispatcher *dw_d;

static void dw_noop(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    atomic_fetch_add(&dw_ran, 1);
}

static void dw_gather_then_wait(shard_worker *w, void *arg)
{
    (void)arg;
    cr_assert_eq(shard_submit(shard_worker_dispatcher(w), "other", 5, dw_noop, NULL), 0); /* gathered */
    sem_post(&dw_gathered);
    sem_wait(&dw_waiter_back); /* until the waiting producer was sent back */
}

static void *dw_producer(void *arg)
{
    (void)arg;
    int rc;
    /* The worker runs dw_gather_then_wait: its queue of 4 fills and the fifth submit waits. */
    while ((rc = shard_submit(dw_d, "k", 1, dw_noop, NULL)) == 0)
        ;
    atomic_store(&dw_waiter_rc, rc);
    sem_post(&dw_waiter_back);
    return NULL;
}

Test(dispatcher, destroy_sends_waiters_back_before_it_waits_for_gathered_submits, .timeout = 60)
{
    struct shard_config cfg = { .workers = 1, .queue_capacity = 4 };
    cr_assert_eq(shard_dispatcher_create(&dw_d, &cfg), 0);
    sem_init(&dw_gathered, 0, 0);
    sem_init(&dw_waiter_back, 0, 0);
    cr_assert_eq(shard_submit(dw_d, "k", 1, dw_gather_then_wait, NULL), 0);
    sem_wait(&dw_gathered);
    pthread_t p;
    cr_assert_eq(pthread_create(&p, NULL, dw_producer, NULL), 0);
    while (atomic_load(&dw_d->space_waiters) == 0) /* the producer waits for room */
        sched_yield();
    shard_dispatcher_destroy(dw_d);
    pthread_join(p, NULL);
    cr_assert_eq(atomic_load(&dw_waiter_rc), -ESHUTDOWN);
    cr_assert_eq(atomic_load(&dw_ran), 5, "the 4 queued jobs and the gathered one ran");
}

/* A job's submits are gathered and delivered when its batch ends, sooner when a destination is parked
 * (an early delivery, which leaves what the batch's returned jobs submitted sealed); when the worker is
 * crashed, the crash delivers what its returned jobs submitted, and a job stuck on it what it
 * submitted itself when it returns (dispatcher.h, shard_submit). Here the two rare paths meet: J1, the
 * batch's first job, submits A to X, a worker held in a job with its queue full; J2, the next, submits
 * B to the parked P, whose early delivery finds no record for A beyond X's full queue and keeps it;
 * then J2 is stuck and W crashed. The crash must deliver A (sealed: J1 returned), before J2 returns,
 * and A must run once, not again when J2's worker delivers what is left. */
static struct {
    char   w[24], x[24], p[24];
    size_t wl, xl, pl;
    sem_t  w_in, w_go, x_in, x_go, j2_in, j2_go, a_ran_sem;
    atomic_int a_ran, b_ran;
    long   j2_hits;
} ek;

static void ek_wait(sem_t *in, sem_t *go)
{
    sem_post(in);
    sem_wait(go);
}

static void ek_block_w(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    ek_wait(&ek.w_in, &ek.w_go);
}

static void ek_block_x(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    ek_wait(&ek.x_in, &ek.x_go);
}

static void ek_a(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    atomic_fetch_add(&ek.a_ran, 1);
    sem_post(&ek.a_ran_sem);
}

static void ek_b(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    atomic_fetch_add(&ek.b_ran, 1);
}

static void ek_j1(shard_worker *w, void *arg)
{
    (void)arg;
    cr_assert_eq(shard_submit(shard_worker_dispatcher(w), ek.x, ek.xl, ek_a, NULL), 0); /* gathered */
}

static void ek_j2(shard_worker *w, void *arg)
{
    (void)arg;
    shard__worker_drop_spares(w); /* W's next record comes from calloc, */
    arm(1);                       /* which fails: A's, beyond X's full queue, in the early delivery */
    cr_assert_eq(shard_submit(shard_worker_dispatcher(w), ek.p, ek.pl, ek_b, NULL), 0);
    ek.j2_hits = failures_hit;
    arm(0);
    ek_wait(&ek.j2_in, &ek.j2_go);
}

static size_t ek_key_of(shard_dispatcher *d, const char *owner, const char *prefix, char out[24])
{
    shard_ring *r;
    cr_assert_eq(shard_dispatcher_ring(d, &r), 0);
    size_t len = 0;
    for (int i = 0; !len; i++) {
        size_t n = (size_t)snprintf(out, 24, "%s%d", prefix, i);
        if (strcmp(shard_ring_owner(r, out, n), owner) == 0)
            len = n;
    }
    shard_ring_destroy(r);
    return len;
}

static bool ek_parked(shard_dispatcher *d, const char *name)
{
    struct shard_worker_stats st[3];
    long n = shard_dispatcher_worker_stats(d, st, 3);
    for (long i = 0; i < n; i++)
        if (strcmp(st[i].name, name) == 0)
            return st[i].parked > 0 && st[i].executed == 0;
    return false;
}

Test(faults, a_crash_delivers_what_an_early_delivery_kept_for_want_of_memory, .timeout = 60)
{
    sem_t *sems[] = { &ek.w_in, &ek.w_go, &ek.x_in, &ek.x_go, &ek.j2_in, &ek.j2_go, &ek.a_ran_sem };
    for (size_t i = 0; i < sizeof sems / sizeof sems[0]; i++)
        sem_init(sems[i], 0, 0);
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 3, .queue_capacity = 4 };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    ek.wl = ek_key_of(d, "w0", "w", ek.w);
    ek.xl = ek_key_of(d, "w1", "x", ek.x);
    ek.pl = ek_key_of(d, "w2", "p", ek.p);
    while (!ek_parked(d, "w2"))
        sched_yield(); /* its first park: it has had nothing to do, so it stays parked until B */
    /* X held, its queue of 4 full behind it. */
    cr_assert_eq(shard_submit(d, ek.x, ek.xl, ek_block_x, NULL), 0);
    sem_wait(&ek.x_in);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(shard_try_submit(d, ek.x, ek.xl, noop, NULL), 0);
    cr_assert_eq(shard_try_submit(d, ek.x, ek.xl, noop, NULL), -EAGAIN, "X's queue is full");
    /* J1 and J2 queued behind a job that holds W: one batch once it returns. */
    cr_assert_eq(shard_submit(d, ek.w, ek.wl, ek_block_w, NULL), 0);
    sem_wait(&ek.w_in);
    cr_assert_eq(shard_submit(d, ek.w, ek.wl, ek_j1, NULL), 0);
    cr_assert_eq(shard_submit(d, ek.w, ek.wl, ek_j2, NULL), 0);
    sem_post(&ek.w_go);
    sem_wait(&ek.j2_in);
    cr_assert_eq(ek.j2_hits, 1, "the early delivery met the failed allocation");
    cr_assert_eq(atomic_load(&ek.a_ran), 0);
    cr_assert_eq(shard_worker_crash(d, "w0", SHARD_CRASH_REROUTE), 0);
    sem_post(&ek.x_go);
    struct timespec by;
    clock_gettime(CLOCK_REALTIME, &by);
    by.tv_sec += 20;
    int got = sem_timedwait(&ek.a_ran_sem, &by);
    sem_post(&ek.j2_go); /* J2 returns: its worker delivers what is left, A no more */
    cr_assert_eq(got, 0, "A, the returned J1's submit, was not delivered by the crash while J2 was stuck");
    cr_assert_eq(shard_drain(d), 0);
    shard_dispatcher_destroy(d); /* which waits for J2's worker to deliver what it still held */
    cr_assert_eq(atomic_load(&ek.a_ran), 1, "A ran %d times", atomic_load(&ek.a_ran));
    cr_assert_eq(atomic_load(&ek.b_ran), 1);
}
