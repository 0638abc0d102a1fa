/* Multi-key jobs (multi.h) on their rare paths, one scenario at a time, each checking what the header
 * promises:
 *   crash-in-job   a multi-key job blocks, and the worker running it crashes (REROUTE, then DROP):
 *                  its keys stay held until it returns (no later job of them runs meanwhile), and
 *                  shard_drain() does not wait for it nor for what waits behind it; for a job queued
 *                  whole (its keys on one worker), run in a batch and taken alone beside a held job,
 *                  and for one run in its last part.
 *   chain          a chain of multi-key jobs, each waiting for the one before through a shared key,
 *                  the first behind a stuck key: drain waits for none of them, however long the chain.
 *   drop-stats     a DROP crash drops a multi-key job whose other part has not come up: on_dropped once,
 *                  and the stats no longer count it as open (nor as waiting).
 *   drop-order     a DROP crash drops a multi-key job holding a key: the key's later job runs after
 *                  on_dropped, as for any dropped job's key.
 *   bounded        a producer hammering shard_try_submit_multi at a key stuck behind a crashed worker's
 *                  job, and at a worker held in a long job: it is refused (-EAGAIN) after a bounded
 *                  number of jobs, it does not queue without bound.
 *   whole-queued  a multi-key job whose keys all live on one worker (queued there whole, as one job)
 *                  waits behind a blocked job when that worker crashes: REROUTE runs it once, in each
 *                  key's order, split over its keys' new owners; DROP hands it to on_dropped once, and
 *                  its keys' next jobs run.
 *   whole-split   such a job comes up while one of its keys is held by another multi-key job: it
 *                  waits for that one, holds its other key meanwhile, and runs after it, before its
 *                  keys' later jobs.
 *   whole-steps   a multi-key job with steps whose keys all live on one worker runs whole; that worker
 *                  crashes (REROUTE, then DROP) during its first step: the steps after it run where
 *                  their keys' jobs run now, before those keys' later jobs, and done after them.
 *   whole-max     the same with SHARD_MULTI_MAX_KEYS keys: every key claimed by the crash, drain
 *                  returns meanwhile, every step runs once, done last, then the keys' later jobs.
 *   whole-peek    a crash hands over a job queued whole behind its worker's running batch job, and
 *                  the job ends elsewhere before that batch goes on: the batch must not read it.
 *   wide          70 workers (parked on their futex), then 133 (parked in an idle hook, on their
 *                  eventfd): every worker parked, then one multi-key job and nothing else that could
 *                  wake a worker, with parts on ring members from the 64th up (two of them; A B A B;
 *                  whole on one; member x beside member 64 + x; 20 keys over ten of them and two below),
 *                  submitted by bytes or hash, with steps or not, from the main thread or from a job on
 *                  a member below or above the 64th: it runs within HANG_S (multi_submit.c's
 *                  wake_owners tells owners apart by a 64-bit mask for the first 64, by runs beyond).
 *                  With those from the 64th not woken, woken once for all, or told apart by one mask
 *                  by index mod 64, its first job of the kind did not run.
 * Drain and the like are run on a helper thread and given a generous time to return (a hang detector,
 * not synchronisation): a drain that does not return is reported, then the stuck jobs are let go.
 *   stress_multi_edges [SCENARIO]   (default: all) */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <string.h>
#include <time.h>

#include "stress_common.h"

#define HANG_S (STRESS_SANITIZED ? 30 : 10)

static shard_dispatcher *make(uint32_t workers, uint32_t capacity, void (*on_dropped)(shard_job_fn, void *, void *))
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = workers, .queue_capacity = capacity, .on_dropped = on_dropped };
    CHECK(shard_dispatcher_create(&d, &cfg) == 0, "create");
    return d;
}

/* The nth key (from 0) that worker `want` owns now, in buf. */
static struct shard_key key_of(shard_dispatcher *d, const char *want, unsigned nth, char buf[32])
{
    shard_ring *r;
    CHECK(shard_dispatcher_ring(d, &r) == 0, "ring");
    for (unsigned i = 0;; i++) {
        size_t n = (size_t)snprintf(buf, 32, "edge-%u", i);
        if (strcmp(shard_ring_owner(r, buf, n), want) == 0 && nth-- == 0) {
            shard_ring_destroy(r);
            return (struct shard_key){ buf, n };
        }
    }
}

/* A job that blocks its worker until its gate is posted. */
struct gate {
    sem_t started, open;
};
static void blocker(shard_worker *w, void *arg)
{
    (void)w;
    struct gate *g = arg;
    sem_post(&g->started);
    sem_wait(&g->open);
}
static void gate_init(struct gate *g)
{
    sem_init(&g->started, 0, 0);
    sem_init(&g->open, 0, 0);
}

static void count(shard_worker *w, void *arg)
{
    (void)w;
    atomic_fetch_add((atomic_int *)arg, 1);
}

/* shard_drain on a helper thread; whether it returned within HANG_S. */
struct drainer {
    shard_dispatcher *d;
    sem_t             done;
    int               rc;
    pthread_t         t;
};
static void *drain_thread(void *arg)
{
    struct drainer *dr = arg;
    dr->rc = shard_drain(dr->d);
    sem_post(&dr->done);
    return NULL;
}
static void drain_start(struct drainer *dr, shard_dispatcher *d)
{
    dr->d = d;
    sem_init(&dr->done, 0, 0);
    pthread_create(&dr->t, NULL, drain_thread, dr);
}
static bool drain_returned(struct drainer *dr)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += HANG_S;
    while (sem_timedwait(&dr->done, &ts) != 0)
        if (errno != EINTR)
            return false;
    return true;
}
static void drain_join(struct drainer *dr)
{
    pthread_join(dr->t, NULL);
    sem_destroy(&dr->done);
}

/* Polls the stats (no sleep: a condition the workers make true soon). */
static void wait_multi_waiting(shard_dispatcher *d, uint64_t n)
{
    struct shard_stats st;
    do
        CHECK(shard_dispatcher_stats(d, &st) == 0, "stats");
    while (st.multi_waiting < n);
}

/* No multi-key job is open or waiting any more (stats). */
static void check_none_open(shard_dispatcher *d, const char *pname)
{
    struct shard_stats st;
    CHECK(shard_dispatcher_stats(d, &st) == 0, "stats");
    CHECK(st.multi_open == 0 && st.multi_waiting == 0, "%s: after it: %llu open, %llu waiting", pname,
          (unsigned long long)st.multi_open, (unsigned long long)st.multi_waiting);
}

/* ---- crash-in-job ---- */

static struct gate job_gate;
static atomic_int in_job, job_runs;
static void multi_blocks(shard_worker *w, void *arg)
{
    (void)arg;
    CHECK(strcmp(shard_worker_name(w), "w1") == 0, "crash-in-job: the job ran on %s, not w1", shard_worker_name(w));
    atomic_fetch_add(&job_runs, 1);
    atomic_store(&in_job, 1);
    blocker(w, &job_gate);
    atomic_store(&in_job, 0);
}
static atomic_int later_ran_during;
static void later(shard_worker *w, void *arg)
{
    (void)w;
    if (atomic_load(&in_job))
        atomic_fetch_add(&later_ran_during, 1);
    atomic_fetch_add((atomic_int *)arg, 1);
}

/* w1's stats. */
static struct shard_worker_stats w1_stats(shard_dispatcher *d)
{
    struct shard_worker_stats st[3];
    long n = shard_dispatcher_worker_stats(d, st, 3);
    for (long i = 0; i < n; i++)
        if (strcmp(st[i].name, "w1") == 0)
            return st[i];
    CHECK(false, "no w1 in the stats");
    return st[0];
}

/* SPREAD: keys on w0, w2 and w1, w1 held until the other parts have come up, so that the job runs in
 * its part on w1 (the last); WHOLE: every key on w1, so that it is queued and runs there whole (in a
 * batch, run.c); WHOLE_HELD: the same while w1 holds a job of another key set aside, so that it is
 * taken alone (run.c's take path), not in a batch. */
enum crash_mode { WHOLE, SPREAD, WHOLE_HELD };
static void crash_in_job(enum shard_crash_policy policy, enum crash_mode mode)
{
    static const char *const modes[] = { "whole", "spread", "whole beside a held job" };
    bool spread = mode == SPREAD;
    char pname[64];
    snprintf(pname, sizeof pname, "%s %s", policy == SHARD_CRASH_REROUTE ? "REROUTE" : "DROP", modes[mode]);
    shard_dispatcher *d = make(3, 64, NULL);
    CHECK(shard_drain(d) == 0, "drain"); /* the first ring settled: WHOLE's job runs in a batch */
    gate_init(&job_gate);
    atomic_store(&in_job, 0);
    atomic_store(&job_runs, 0);
    atomic_store(&later_ran_during, 0);
    char a[32], b[32], c[32], z[32];
    struct shard_key keys[3] = { key_of(d, spread ? "w0" : "w1", 0, a), key_of(d, spread ? "w2" : "w1", 1, b),
                                 key_of(d, "w1", 2, c) };
    struct gate hold;
    gate_init(&hold);
    if (spread) {
        struct shard_key kz = key_of(d, "w1", 3, z);
        CHECK(shard_submit(d, kz.key, kz.len, blocker, &hold) == 0, "hold w1");
        sem_wait(&hold.started);
    }
    /* WHOLE_HELD: a 2-key job of x (w1) and y (w0), w0 held so that only x's part comes up and claims
     * x; x's next job, queued before the job under test, is set aside on w1 behind that claim. */
    struct gate hold0;
    gate_init(&hold0);
    atomic_int pair_runs = 0, x_runs = 0;
    if (mode == WHOLE_HELD) {
        char h0[32], x[32], y[32];
        struct shard_key k0 = key_of(d, "w0", 5, h0), pair[2] = { key_of(d, "w1", 5, x), key_of(d, "w0", 6, y) };
        CHECK(shard_submit(d, k0.key, k0.len, blocker, &hold0) == 0, "hold w0");
        sem_wait(&hold0.started);
        CHECK(shard_submit_multi(d, pair, 2, count, &pair_runs) == 0, "the pair");
        CHECK(shard_submit(d, pair[0].key, pair[0].len, count, &x_runs) == 0, "x's job");
    }
    CHECK(shard_submit_multi(d, keys, 3, multi_blocks, NULL) == 0, "submit_multi");
    if (spread) {
        /* The parts on w0 and w2 have come up once a job queued after each has run. */
        char p0[32], p2[32];
        struct shard_key k0 = key_of(d, "w0", 4, p0), k2 = key_of(d, "w2", 4, p2);
        atomic_int probes = 0;
        CHECK(shard_submit(d, k0.key, k0.len, count, &probes) == 0, "probe w0");
        CHECK(shard_submit(d, k2.key, k2.len, count, &probes) == 0, "probe w2");
        while (atomic_load(&probes) < 2)
            sched_yield();
        sem_post(&hold.open);
    }
    sem_wait(&job_gate.started);
    if (mode == WHOLE_HELD) {
        CHECK(w1_stats(d).held == 1, "%s: w1 holds %llu jobs while the job runs, not x's one", pname,
              (unsigned long long)w1_stats(d).held);
        sem_post(&hold0.open);
    }
    CHECK(shard_worker_crash(d, "w1", policy) == 0, "crash w1");
    atomic_int later_runs = 0;
    for (int i = 0; i < 3; i++)
        CHECK(shard_submit(d, keys[i].key, keys[i].len, later, &later_runs) == 0, "submit later");
    struct drainer dr;
    drain_start(&dr, d);
    bool returned = drain_returned(&dr);
    CHECK(returned, "%s: shard_drain waited for a multi-key job still running on a crashed worker", pname);
    CHECK(atomic_load(&later_runs) == 0, "%s: %d later jobs of its keys ran while it still ran", pname,
          atomic_load(&later_runs));
    sem_post(&job_gate.open);
    drain_join(&dr);
    CHECK(dr.rc == 0, "drain: %s", shard_strerror(dr.rc));
    /* It has returned by now or soon: drain until its keys' jobs ran. */
    while (atomic_load(&later_runs) < 3)
        CHECK(shard_drain(d) == 0, "drain");
    CHECK(atomic_load(&later_ran_during) == 0, "%s: a later job of its keys overlapped it", pname);
    CHECK(atomic_load(&job_runs) == 1, "%s: it ran %d times", pname, atomic_load(&job_runs));
    if (mode == WHOLE_HELD) {
        while (atomic_load(&x_runs) < 1 && policy == SHARD_CRASH_REROUTE)
            CHECK(shard_drain(d) == 0, "drain");
        CHECK(atomic_load(&pair_runs) == 1, "%s: the pair ran %d times", pname, atomic_load(&pair_runs));
    }
    /* The job ran on crashed w1, which no drain waits for: it counts as open until it has let its keys
     * go (multi.c's end()), and their later jobs may run, on other workers, just before that. */
    stress_drain_until(d, stress_none_open, d);
    shard_dispatcher_destroy(d);
    printf("crash-in-job %s: drain %s\n", pname, returned ? "returned" : "HUNG");
}

/* ---- chain ---- */

#ifndef CHAIN
#define CHAIN 12
#endif

static void chain(void)
{
    shard_dispatcher *d = make(3, 64, NULL);
    struct gate g;
    gate_init(&g);
    char names[CHAIN + 1][32];
    /* k0 on w1 (stuck there), the others on w0 and w2. */
    struct shard_key k[CHAIN + 1];
    k[0] = key_of(d, "w1", 0, names[0]);
    for (int i = 1; i <= CHAIN; i++)
        k[i] = key_of(d, i % 2 ? "w0" : "w2", (unsigned)i / 2, names[i]);
    CHECK(shard_submit(d, k[0].key, k[0].len, blocker, &g) == 0, "blocker");
    sem_wait(&g.started);
    CHECK(shard_worker_crash(d, "w1", SHARD_CRASH_REROUTE) == 0, "crash"); /* k0 is stuck */
    atomic_int runs = 0, last = 0;
    /* M_i over k_{i-1} and k_i: each holds k_i and waits for k_{i-1}, which M_{i-1} holds. */
    for (int i = 1; i <= CHAIN; i++) {
        struct shard_key two[2] = { k[i - 1], k[i] };
        CHECK(shard_submit_multi(d, two, 2, count, &runs) == 0, "submit_multi %d", i);
    }
    CHECK(shard_submit(d, k[CHAIN].key, k[CHAIN].len, count, &last) == 0, "submit last");
    wait_multi_waiting(d, CHAIN); /* each holds its second key */
    struct drainer dr;
    drain_start(&dr, d);
    bool returned = drain_returned(&dr);
    CHECK(returned, "shard_drain waited for a chain of %d multi-key jobs behind a stuck key", CHAIN);
    CHECK(atomic_load(&runs) == 0 && atomic_load(&last) == 0, "ran behind a stuck key");
    sem_post(&g.open);
    drain_join(&dr);
    while (atomic_load(&last) < 1)
        CHECK(shard_drain(d) == 0, "drain");
    CHECK(atomic_load(&runs) == CHAIN, "%d of the chain ran", atomic_load(&runs));
    shard_dispatcher_destroy(d);
    printf("chain of %d: drain %s\n", CHAIN, returned ? "returned" : "HUNG");
}

/* ---- drop-stats ---- */

static atomic_int drops;
static void on_dropped_count(shard_job_fn fn, void *arg, void *user)
{
    (void)fn, (void)arg, (void)user;
    atomic_fetch_add(&drops, 1);
}

static void drop_stats(void)
{
    atomic_store(&drops, 0);
    shard_dispatcher *d = make(3, 64, on_dropped_count);
    struct gate g0, g1;
    gate_init(&g0);
    gate_init(&g1);
    char a[32], b[32], a2[32], b2[32];
    struct shard_key ka = key_of(d, "w0", 0, a), kb = key_of(d, "w1", 0, b);
    struct shard_key ka2 = key_of(d, "w0", 1, a2), kb2 = key_of(d, "w1", 1, b2);
    /* Both workers held: neither part comes up. */
    CHECK(shard_submit(d, ka2.key, ka2.len, blocker, &g0) == 0, "blocker w0");
    CHECK(shard_submit(d, kb2.key, kb2.len, blocker, &g1) == 0, "blocker w1");
    sem_wait(&g0.started);
    sem_wait(&g1.started);
    atomic_int runs = 0;
    struct shard_key two[2] = { ka, kb };
    CHECK(shard_submit_multi(d, two, 2, count, &runs) == 0, "submit_multi");
    CHECK(shard_worker_crash(d, "w1", SHARD_CRASH_DROP) == 0, "crash w1"); /* drops the part of b */
    CHECK(atomic_load(&drops) == 1, "on_dropped heard of %d jobs", atomic_load(&drops));
    struct shard_stats st;
    CHECK(shard_dispatcher_stats(d, &st) == 0, "stats");
    CHECK(st.dropped == 1, "dropped %llu", (unsigned long long)st.dropped);
    CHECK(st.multi_open == 0, "a dropped multi-key job still counts as open (%llu)", (unsigned long long)st.multi_open);
    CHECK(st.multi_waiting == 0, "a dropped multi-key job counts as waiting (%llu)",
          (unsigned long long)st.multi_waiting);
    uint64_t open_after_drop = st.multi_open, waiting_after_drop = st.multi_waiting;
    sem_post(&g0.open); /* its part of a comes up now: does nothing */
    sem_post(&g1.open);
    CHECK(shard_drain(d) == 0, "drain");
    CHECK(shard_dispatcher_stats(d, &st) == 0, "stats");
    CHECK(st.multi_open == 0 && st.multi_waiting == 0, "after drain: %llu open, %llu waiting",
          (unsigned long long)st.multi_open, (unsigned long long)st.multi_waiting);
    CHECK(atomic_load(&runs) == 0, "the dropped job ran");
    CHECK(atomic_load(&drops) == 1, "on_dropped heard of %d jobs", atomic_load(&drops));
    shard_dispatcher_destroy(d);
    printf("drop-stats: right after the drop, multi_open %llu, multi_waiting %llu\n",
           (unsigned long long)open_after_drop, (unsigned long long)waiting_after_drop);
}

/* ---- drop-order ---- */

/* A DROP crash drops a multi-key job that holds a key; that key's later job must not run before
 * on_dropped has returned (dispatcher.h: "the key's later jobs run after it"). on_dropped gives the
 * later job a second to show up (none is the expected case). */
static sem_t later_posted;
static atomic_int hook_running, later_in_hook, hook_calls;
static void on_dropped_waits(shard_job_fn fn, void *arg, void *user)
{
    (void)fn, (void)arg, (void)user;
    atomic_fetch_add(&hook_calls, 1);
    atomic_store(&hook_running, 1);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 1;
    while (sem_timedwait(&later_posted, &ts) != 0 && errno == EINTR)
        ;
    atomic_store(&hook_running, 0);
}
static void later_of_held(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    if (atomic_load(&hook_running))
        atomic_fetch_add(&later_in_hook, 1);
    sem_post(&later_posted);
}

static void drop_order(void)
{
    sem_init(&later_posted, 0, 0);
    atomic_store(&hook_running, 0);
    atomic_store(&later_in_hook, 0);
    atomic_store(&hook_calls, 0);
    shard_dispatcher *d = make(3, 64, on_dropped_waits);
    struct gate g;
    gate_init(&g);
    char a[32], b[32], b2[32];
    struct shard_key ka = key_of(d, "w0", 0, a), kb = key_of(d, "w1", 0, b), kb2 = key_of(d, "w1", 1, b2);
    CHECK(shard_submit(d, kb2.key, kb2.len, blocker, &g) == 0, "blocker w1");
    sem_wait(&g.started);
    atomic_int runs = 0;
    struct shard_key two[2] = { ka, kb };
    CHECK(shard_submit_multi(d, two, 2, count, &runs) == 0, "submit_multi");
    wait_multi_waiting(d, 1); /* a is held */
    CHECK(shard_submit(d, ka.key, ka.len, later_of_held, NULL) == 0, "a's later job");
    CHECK(shard_worker_crash(d, "w1", SHARD_CRASH_DROP) == 0, "crash w1");
    sem_post(&g.open);
    CHECK(shard_drain(d) == 0, "drain");
    CHECK(atomic_load(&hook_calls) == 1, "on_dropped called %d times", atomic_load(&hook_calls));
    CHECK(atomic_load(&later_in_hook) == 0, "a's later job ran while on_dropped for the job holding a ran");
    CHECK(atomic_load(&runs) == 0, "the dropped job ran");
    shard_dispatcher_destroy(d);
    printf("drop-order: a's later job ran %s on_dropped\n", atomic_load(&later_in_hook) ? "DURING" : "after");
}

/* ---- bounded ---- */

#define CAP 32
#define TRIES (200 * CAP)

/* try_submit_multi over {fresh key i, pinned} until refused; how many went in. */
static int hammer(shard_dispatcher *d, struct shard_key pinned, atomic_int *runs)
{
    int n = 0;
    for (; n < TRIES; n++) {
        char fresh[32];
        size_t fl = (size_t)snprintf(fresh, sizeof fresh, "fresh-%d", n);
        struct shard_key two[2] = { { fresh, fl }, pinned };
        int rc = shard_try_submit_multi(d, two, 2, count, runs);
        if (rc == -EAGAIN)
            break;
        CHECK(rc == 0, "try_submit_multi: %s", shard_strerror(rc));
    }
    return n;
}

static void bounded(void)
{
    /* A key stuck behind a crashed worker's job: its parts pile up, set aside, on its new owner. */
    shard_dispatcher *d = make(3, CAP, NULL);
    struct gate g;
    gate_init(&g);
    char s[32];
    struct shard_key ks = key_of(d, "w1", 0, s);
    CHECK(shard_submit(d, ks.key, ks.len, blocker, &g) == 0, "blocker");
    sem_wait(&g.started);
    CHECK(shard_worker_crash(d, "w1", SHARD_CRASH_REROUTE) == 0, "crash");
    atomic_int runs = 0;
    int stuck_in = hammer(d, ks, &runs);
    CHECK(stuck_in < TRIES, "behind a stuck key: %d multi-key jobs taken, never refused", stuck_in);
    sem_post(&g.open);
    while (atomic_load(&runs) < stuck_in)
        CHECK(shard_drain(d) == 0, "drain");
    shard_dispatcher_destroy(d);

    /* A worker held in a long job: its queue fills. */
    d = make(3, CAP, NULL);
    gate_init(&g);
    char b[32], b2[32];
    struct shard_key kb = key_of(d, "w1", 0, b), kb2 = key_of(d, "w1", 1, b2);
    CHECK(shard_submit(d, kb2.key, kb2.len, blocker, &g) == 0, "blocker");
    sem_wait(&g.started);
    atomic_store(&runs, 0);
    int slow_in = hammer(d, kb, &runs);
    CHECK(slow_in < TRIES, "at a slow worker: %d multi-key jobs taken, never refused", slow_in);
    sem_post(&g.open);
    CHECK(shard_drain(d) == 0, "drain");
    CHECK(atomic_load(&runs) == slow_in, "%d of %d ran", atomic_load(&runs), slow_in);
    shard_dispatcher_destroy(d);
    printf("bounded: refused after %d jobs behind a stuck key, %d at a slow worker (queue capacity %d)\n", stuck_in,
           slow_in, CAP);
}

/* ---- whole-queued, whole-split ---- */

/* Jobs that take a ticket when they run: a key's jobs must hold rising tickets in submit order. */
static atomic_int ticket, whole_busy, whole_overlaps;
struct stamp {
    atomic_int at; /* ticket + 1 once run; 0: not yet */
    atomic_int runs;
};
static void stamp(struct stamp *st)
{
    atomic_store(&st->at, atomic_fetch_add(&ticket, 1) + 1);
    atomic_fetch_add(&st->runs, 1);
}
/* A job of the scenario's keys (every stamp_job is): none may run while a multi-key job of them does. */
static void stamp_job(shard_worker *w, void *arg)
{
    (void)w;
    if (atomic_load(&whole_busy))
        atomic_fetch_add(&whole_overlaps, 1);
    stamp(arg);
}
/* A job of another key. */
static void stamp_probe(shard_worker *w, void *arg)
{
    (void)w;
    stamp(arg);
}
static void stamp_whole(shard_worker *w, void *arg)
{
    (void)w;
    if (atomic_exchange(&whole_busy, 1))
        atomic_fetch_add(&whole_overlaps, 1);
    stamp(arg);
    atomic_store(&whole_busy, 0);
}

static struct stamp *dropped_stamps[16];
static atomic_int ndropped, whole_dropped;
static void on_dropped_stamp(shard_job_fn fn, void *arg, void *user)
{
    (void)user;
    if (fn == stamp_whole)
        atomic_fetch_add(&whole_dropped, 1);
    int i = atomic_fetch_add(&ndropped, 1);
    if (i < 16)
        dropped_stamps[i] = arg;
}

static void whole_queued(enum shard_crash_policy policy)
{
    const char *pname = policy == SHARD_CRASH_REROUTE ? "REROUTE" : "DROP";
    atomic_store(&ticket, 0);
    atomic_store(&whole_overlaps, 0);
    atomic_store(&ndropped, 0);
    atomic_store(&whole_dropped, 0);
    shard_dispatcher *d = make(3, 64, on_dropped_stamp);
    struct gate g;
    gate_init(&g);
    char z[32], names[3][32];
    struct shard_key kz = key_of(d, "w1", 0, z), keys[3];
    for (unsigned i = 0; i < 3; i++)
        keys[i] = key_of(d, "w1", i + 1, names[i]);
    CHECK(shard_submit(d, kz.key, kz.len, blocker, &g) == 0, "blocker");
    sem_wait(&g.started);
    static struct stamp before[3], after[3], whole;
    memset(before, 0, sizeof before);
    memset(after, 0, sizeof after);
    memset(&whole, 0, sizeof whole);
    for (int i = 0; i < 3; i++)
        CHECK(shard_submit(d, keys[i].key, keys[i].len, stamp_job, &before[i]) == 0, "before");
    CHECK(shard_submit_multi(d, keys, 3, stamp_whole, &whole) == 0, "submit_multi");
    for (int i = 0; i < 3; i++)
        CHECK(shard_submit(d, keys[i].key, keys[i].len, stamp_job, &after[i]) == 0, "after");
    CHECK(shard_worker_crash(d, "w1", policy) == 0, "crash w1");
    sem_post(&g.open);
    CHECK(shard_drain(d) == 0, "drain");
    if (policy == SHARD_CRASH_REROUTE) {
        CHECK(atomic_load(&whole.runs) == 1, "REROUTE: the whole job ran %d times", atomic_load(&whole.runs));
        for (int i = 0; i < 3; i++) {
            int bi = atomic_load(&before[i].at), wi = atomic_load(&whole.at), ai = atomic_load(&after[i].at);
            CHECK(atomic_load(&before[i].runs) == 1 && atomic_load(&after[i].runs) == 1, "REROUTE: key %d's jobs", i);
            CHECK(bi < wi && wi < ai, "REROUTE: key %d: before %d, the multi-key job %d, after %d", i, bi, wi, ai);
        }
        CHECK(atomic_load(&ndropped) == 0, "REROUTE dropped %d", atomic_load(&ndropped));
    } else {
        /* Everything was queued on w1: all of it is dropped, the multi-key job once. */
        CHECK(atomic_load(&whole_dropped) == 1, "DROP: on_dropped heard of the multi-key job %d times",
              atomic_load(&whole_dropped));
        CHECK(atomic_load(&ndropped) == 7, "DROP: on_dropped called %d times, not 7", atomic_load(&ndropped));
        CHECK(atomic_load(&whole.runs) == 0, "DROP: the dropped job ran");
        bool saw_whole = false;
        for (int i = 0; i < 7 && i < 16; i++)
            saw_whole |= dropped_stamps[i] == &whole;
        CHECK(saw_whole, "DROP: on_dropped never got the multi-key job's own arg");
        /* Its keys are free: their next jobs run. */
        static struct stamp next[3];
        memset(next, 0, sizeof next);
        for (int i = 0; i < 3; i++)
            CHECK(shard_submit(d, keys[i].key, keys[i].len, stamp_job, &next[i]) == 0, "next");
        CHECK(shard_drain(d) == 0, "drain");
        for (int i = 0; i < 3; i++)
            CHECK(atomic_load(&next[i].runs) == 1, "DROP: key %d's next job ran %d times", i,
                  atomic_load(&next[i].runs));
    }
    CHECK(atomic_load(&whole_overlaps) == 0, "%s: a job of its keys ran during the multi-key job", pname);
    check_none_open(d, pname);
    shard_dispatcher_destroy(d);
    printf("whole-queued %s: ran %d, dropped %d\n", pname, atomic_load(&whole.runs), atomic_load(&whole_dropped));
}

static void whole_split(void)
{
    atomic_store(&ticket, 0);
    atomic_store(&whole_overlaps, 0);
    shard_dispatcher *d = make(3, 64, NULL);
    struct gate g;
    gate_init(&g);
    char a[32], b[32], c[32], c2[32], p[32];
    struct shard_key ka = key_of(d, "w0", 0, a), kb = key_of(d, "w0", 1, b), kp = key_of(d, "w0", 2, p);
    struct shard_key kc = key_of(d, "w2", 0, c), kc2 = key_of(d, "w2", 1, c2);
    CHECK(shard_submit(d, kc2.key, kc2.len, blocker, &g) == 0, "blocker w2");
    sem_wait(&g.started);
    static struct stamp first, second, later_b, probe;
    memset(&first, 0, sizeof first);
    memset(&second, 0, sizeof second);
    memset(&later_b, 0, sizeof later_b);
    memset(&probe, 0, sizeof probe);
    /* first holds a (its part on w0 comes up) and waits for c, behind w2's blocker. */
    struct shard_key ac[2] = { ka, kc }, ab[2] = { ka, kb };
    CHECK(shard_submit_multi(d, ac, 2, stamp_whole, &first) == 0, "first");
    wait_multi_waiting(d, 1);
    /* second's keys are both w0's: queued whole; a is held, so it must wait, holding b. */
    CHECK(shard_submit_multi(d, ab, 2, stamp_whole, &second) == 0, "second");
    CHECK(shard_submit(d, kb.key, kb.len, stamp_job, &later_b) == 0, "b's later job");
    /* w0 has taken both once the probe, queued after them, has run. */
    CHECK(shard_submit(d, kp.key, kp.len, stamp_probe, &probe) == 0, "probe");
    while (!atomic_load(&probe.runs))
        sched_yield();
    CHECK(atomic_load(&second.runs) == 0, "whole-split: the job ran while one of its keys was held by another");
    CHECK(atomic_load(&later_b.runs) == 0, "whole-split: b's later job ran while the job holding b waited");
    sem_post(&g.open);
    CHECK(shard_drain(d) == 0, "drain");
    CHECK(atomic_load(&first.runs) == 1 && atomic_load(&second.runs) == 1 && atomic_load(&later_b.runs) == 1,
          "whole-split: runs %d %d %d", atomic_load(&first.runs), atomic_load(&second.runs),
          atomic_load(&later_b.runs));
    CHECK(atomic_load(&first.at) < atomic_load(&second.at) && atomic_load(&second.at) < atomic_load(&later_b.at),
          "whole-split: order first %d, second %d, b's later %d", atomic_load(&first.at), atomic_load(&second.at),
          atomic_load(&later_b.at));
    CHECK(atomic_load(&whole_overlaps) == 0, "whole-split: a job of its keys ran during a multi-key job");
    shard_dispatcher_destroy(d);
    printf("whole-split: ran in order (first %d, second %d, b's later %d)\n", atomic_load(&first.at),
           atomic_load(&second.at), atomic_load(&later_b.at));
}

/* ---- whole-steps ---- */

static struct gate steps_gate;
static char step_on[2][32], done_on[32], later_on[32];
static atomic_int step_at[2], done_at, later_at, step_runs;
static void each_step(shard_worker *w, void *arg, size_t i)
{
    (void)arg;
    snprintf(step_on[i], 32, "%s%s", shard_worker_name(w), shard_worker_crashed(w) ? "(crashed)" : "");
    if (i == 0)
        blocker(w, &steps_gate);
    atomic_store(&step_at[i], atomic_fetch_add(&ticket, 1) + 1);
    atomic_fetch_add(&step_runs, 1);
}
static void each_done(shard_worker *w, void *arg)
{
    (void)arg;
    snprintf(done_on, 32, "%s%s", shard_worker_name(w), shard_worker_crashed(w) ? "(crashed)" : "");
    atomic_store(&done_at, atomic_fetch_add(&ticket, 1) + 1);
}
static void later_of_b(shard_worker *w, void *arg)
{
    (void)arg;
    snprintf(later_on, 32, "%s", shard_worker_name(w));
    atomic_store(&later_at, atomic_fetch_add(&ticket, 1) + 1);
}

static void whole_steps(enum shard_crash_policy policy)
{
    const char *pname = policy == SHARD_CRASH_REROUTE ? "REROUTE" : "DROP";
    atomic_store(&ticket, 0);
    atomic_store(&step_runs, 0);
    atomic_store(&done_at, 0);
    atomic_store(&later_at, 0);
    memset(step_on, 0, sizeof step_on);
    gate_init(&steps_gate);
    shard_dispatcher *d = make(3, 64, NULL);
    char a[32], b[32];
    struct shard_key keys[2] = { key_of(d, "w0", 0, a), key_of(d, "w0", 1, b) };
    CHECK(shard_submit_multi_each(d, keys, 2, each_step, each_done, NULL) == 0, "submit_multi_each");
    sem_wait(&steps_gate.started);
    CHECK(shard_worker_crash(d, "w0", policy) == 0, "crash w0");
    shard_ring *r;
    CHECK(shard_dispatcher_ring(d, &r) == 0, "ring");
    char b_owner[32];
    snprintf(b_owner, sizeof b_owner, "%s", shard_ring_owner(r, b, keys[1].len));
    shard_ring_destroy(r);
    CHECK(shard_submit(d, keys[1].key, keys[1].len, later_of_b, NULL) == 0, "b's later job");
    sem_post(&steps_gate.open);
    CHECK(shard_drain(d) == 0, "drain");
    while (!atomic_load(&later_at)) /* the stuck step returned; its successors may still be under way */
        CHECK(shard_drain(d) == 0, "drain");
    CHECK(atomic_load(&step_runs) == 2, "%s: %d steps ran", pname, atomic_load(&step_runs));
    CHECK(strcmp(step_on[1], b_owner) == 0, "%s: b's step ran on %s, not where b's jobs run (%s)", pname, step_on[1],
          b_owner);
    CHECK(strstr(done_on, "(crashed)") == NULL, "%s: done ran on the crashed worker (%s)", pname, done_on);
    CHECK(atomic_load(&step_at[0]) < atomic_load(&step_at[1]) && atomic_load(&step_at[1]) < atomic_load(&done_at) &&
              atomic_load(&done_at) < atomic_load(&later_at),
          "%s: order step a %d, step b %d, done %d, b's later job %d", pname, atomic_load(&step_at[0]),
          atomic_load(&step_at[1]), atomic_load(&done_at), atomic_load(&later_at));
    check_none_open(d, pname);
    shard_dispatcher_destroy(d);
    printf("whole-steps %s: step a on %s, step b on %s, done on %s, b's later job on %s\n", pname, step_on[0],
           step_on[1], done_on, later_on);
}

/* ---- whole-max ---- */

static atomic_int max_steps, max_done, max_later_early;
static struct gate max_gate;
static void max_step(shard_worker *w, void *arg, size_t i)
{
    (void)arg;
    if (i == 0)
        blocker(w, &max_gate);
    atomic_fetch_add(&max_steps, 1);
}
static void max_done_fn(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    atomic_store(&max_done, 1);
}
static void max_later(shard_worker *w, void *arg)
{
    (void)w;
    if (!atomic_load(&max_done))
        atomic_fetch_add(&max_later_early, 1);
    atomic_fetch_add((atomic_int *)arg, 1);
}

static void whole_max(void)
{
    enum { N = SHARD_MULTI_MAX_KEYS };
    atomic_store(&max_steps, 0);
    atomic_store(&max_done, 0);
    atomic_store(&max_later_early, 0);
    gate_init(&max_gate);
    shard_dispatcher *d = make(3, 64, NULL);
    static char names[N][24];
    static struct shard_key keys[N];
    shard_ring *r;
    CHECK(shard_dispatcher_ring(d, &r) == 0, "ring");
    for (unsigned i = 0, n = 0; n < N; i++) {
        size_t len = (size_t)snprintf(names[n], sizeof names[n], "max-%u", i);
        if (strcmp(shard_ring_owner(r, names[n], len), "w1") == 0)
            keys[n] = (struct shard_key){ names[n], len }, n++;
    }
    shard_ring_destroy(r);
    CHECK(shard_submit_multi_each(d, keys, N, max_step, max_done_fn, NULL) == 0, "submit %d keys", N);
    sem_wait(&max_gate.started);
    CHECK(shard_worker_crash(d, "w1", SHARD_CRASH_REROUTE) == 0, "crash w1");
    atomic_int later = 0;
    for (int i = 0; i < N; i += N / 4)
        CHECK(shard_submit(d, keys[i].key, keys[i].len, max_later, &later) == 0, "later");
    struct drainer dr;
    drain_start(&dr, d);
    bool returned = drain_returned(&dr);
    CHECK(returned, "whole-max: shard_drain waited for a %d-key job stuck on a crashed worker", N);
    CHECK(atomic_load(&later) == 0, "whole-max: %d later jobs ran while its first step was stuck", atomic_load(&later));
    sem_post(&max_gate.open);
    drain_join(&dr);
    while (atomic_load(&later) < 4)
        CHECK(shard_drain(d) == 0, "drain");
    CHECK(atomic_load(&max_steps) == N && atomic_load(&max_done) == 1, "whole-max: %d steps, done %d",
          atomic_load(&max_steps), atomic_load(&max_done));
    CHECK(atomic_load(&max_later_early) == 0, "whole-max: a later job ran before done");
    /* Done's job lets the keys go (multi.c's end()) before the job stops counting as open: a later job
     * may run between the two, and done's job, after a first step stuck on a crashed worker, may be
     * one no drain waited for. */
    stress_drain_until(d, stress_none_open, d);
    shard_dispatcher_destroy(d);
    printf("whole-max: %d steps after a crash in the first, drain %s\n", atomic_load(&max_steps),
           returned ? "returned" : "HUNG");
}

/* ---- whole-peek ---- */

/* A crash hands over a multi-key job queued whole behind the job its worker runs in a batch, and
 * the job ends elsewhere (run on its keys' new owner, or dropped) while the batch's job still runs;
 * then that job returns and the batch looks at its next position: it must not read the job there,
 * whose block is gone (20 keys: more than a pooled block holds, so it is freed, which
 * AddressSanitizer sees). */
static atomic_int peek_runs;
static void peek_count(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    atomic_fetch_add(&peek_runs, 1);
}

static void whole_peek(enum shard_crash_policy policy)
{
    enum { N = 20 };
    const char *pname = policy == SHARD_CRASH_REROUTE ? "REROUTE" : "DROP";
    atomic_store(&drops, 0);
    atomic_store(&peek_runs, 0);
    shard_dispatcher *d = make(2, 64, on_dropped_count);
    CHECK(shard_drain(d) == 0, "drain"); /* the first ring settled: an idle worker's job runs in a batch */
    static char names[N][32];
    char ka[32];
    struct shard_key a = key_of(d, "w1", 0, ka), keys[N];
    for (unsigned i = 0; i < N; i++)
        keys[i] = key_of(d, "w1", i + 1, names[i]);
    struct gate g;
    gate_init(&g);
    CHECK(shard_submit(d, a.key, a.len, blocker, &g) == 0, "a");
    sem_wait(&g.started);
    CHECK(shard_submit_multi(d, keys, N, peek_count, NULL) == 0, "the whole job");
    CHECK(shard_worker_crash(d, "w1", policy) == 0, "crash w1");
    CHECK(shard_drain(d) == 0, "drain"); /* not waiting for a, stuck on the crashed worker */
    CHECK(atomic_load(&peek_runs) + atomic_load(&drops) == 1, "%s: the whole job ran %d times, dropped %d", pname,
          atomic_load(&peek_runs), atomic_load(&drops));
    sem_post(&g.open); /* a returns: the crashed worker's batch looks at the next position */
    shard_dispatcher_destroy(d);
    printf("whole-peek %s: ran %d, dropped %d\n", pname, atomic_load(&peek_runs), atomic_load(&drops));
}

/* ---- wide ---- */

#define WIDE_MAX 133
#define WIDE_PER 4 /* keys a member: 3 for the jobs, 1 for a job that submits from it */
static char wide_key[WIDE_MAX][WIDE_PER][24];
static int wide_members;
static sem_t wide_ran;
static shard_dispatcher *wide_d;

/* WIDE_PER keys owned by each ring member, by the member's index in the ring in force (name order:
 * the index by which multi_submit.c's owners are counted). */
static void wide_map(shard_dispatcher *d)
{
    shard_ring *r;
    CHECK(shard_dispatcher_ring(d, &r) == 0, "ring");
    wide_members = (int)shard_ring_member_count(r);
    int have[WIDE_MAX] = { 0 }, need = wide_members * WIDE_PER;
    for (unsigned i = 0; need > 0; i++) {
        char buf[24];
        size_t n = (size_t)snprintf(buf, sizeof buf, "wide-%u", i);
        const char *owner = shard_ring_owner(r, buf, n);
        int m = 0;
        while (m < wide_members && strcmp(shard_ring_member(r, (size_t)m), owner) != 0)
            m++;
        if (m < wide_members && have[m] < WIDE_PER) {
            memcpy(wide_key[m][have[m]++], buf, n + 1);
            need--;
        }
    }
    shard_ring_destroy(r);
}

/* Waits until every worker is parked: not running, parked since it last ran, and its counts still
 * for a millisecond (a worker just out of a job reads as not running before they move). seen: each
 * worker's executed and parked counts when last found parked. Polls the stats, bounded. */
static bool wide_all_parked(shard_dispatcher *d, uint64_t (*seen)[2])
{
    static struct shard_worker_stats ws[WIDE_MAX], was[WIDE_MAX];
    memset(was, 0, sizeof was);
    for (int tries = 0; tries < HANG_S * 1000; tries++) {
        long n = shard_dispatcher_worker_stats(d, ws, WIDE_MAX);
        CHECK(n == wide_members, "wide: %ld workers in the stats, %d members", n, wide_members);
        long parked = 0;
        for (long i = 0; i < n; i++)
            parked += !ws[i].running && ws[i].parked > 0 &&
                      (ws[i].executed == seen[i][0] || ws[i].parked > seen[i][1]) &&
                      ws[i].executed == was[i].executed && ws[i].parked == was[i].parked && ws[i].woken == was[i].woken;
        if (parked == n) {
            for (long i = 0; i < n; i++)
                seen[i][0] = ws[i].executed, seen[i][1] = ws[i].parked;
            return true;
        }
        memcpy(was, ws, sizeof ws);
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL); /* polling the stats for a state, bounded above */
    }
    CHECK(false, "wide: the workers did not all park in %d s", HANG_S);
    return false;
}

static void wide_ran_fn(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    sem_post(&wide_ran);
}
static void wide_step(shard_worker *w, void *arg, size_t i)
{
    (void)w, (void)arg, (void)i;
}

struct wide_job {
    int              kind, n, member[24]; /* member: the ring member owning keys[i] */
    struct shard_key keys[24];
    uint64_t         hashes[24];
};
static struct wide_job wide_cur; /* the job a job submits: written before that job is submitted */

static int wide_submit(const struct wide_job *q)
{
    switch (q->kind) {
    case 0: return shard_submit_multi(wide_d, q->keys, (size_t)q->n, wide_ran_fn, NULL);
    case 1: return shard_submit_multi_hash(wide_d, q->hashes, (size_t)q->n, wide_ran_fn, NULL);
    case 2: return shard_submit_multi_each(wide_d, q->keys, (size_t)q->n, wide_step, wide_ran_fn, NULL);
    default: return shard_submit_multi_each_hash(wide_d, q->hashes, (size_t)q->n, wide_step, wide_ran_fn, NULL);
    }
}

static void wide_from_job(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    CHECK(wide_submit(&wide_cur) == 0, "wide: a job's multi-key submit");
}

static void wide_add(struct wide_job *q, int member, int which)
{
    const char *k = wide_key[member][which];
    q->keys[q->n] = (struct shard_key){ k, strlen(k) };
    q->hashes[q->n] = shard_dispatcher_key_hash(wide_d, k, strlen(k));
    q->member[q->n++] = member;
}

static void wide_idle(shard_worker *w, int wake_fd, int timeout_ms, void *user)
{
    (void)w, (void)user;
    struct pollfd p = { .fd = wake_fd, .events = POLLIN };
    poll(&p, 1, timeout_ms);
}

enum { WIDE_SHAPES = 6, WIDE_VIA = 3 };
static const char *const wide_shape_name[WIDE_SHAPES] = {
    "split over two members from the 64th", "A B A B over two members from the 64th",
    "whole on a member from the 64th",      "member x beside member 64 + x",
    "20 keys over ten members from the 64th and two below", "B A B A B over two members from the 64th",
};
static const char *const wide_via_name[WIDE_VIA] = { "the main thread", "a job below the 64th",
                                                     "a job from the 64th up" };

/* Returns false after a job that did not run (reported): the rest would only wait as long again. */
static bool wide(uint32_t workers, bool hook)
{
    struct shard_config cfg = { .workers = workers, .on_worker_idle = hook ? wide_idle : NULL };
    CHECK(shard_dispatcher_create(&wide_d, &cfg) == 0, "create %u workers", workers);
    wide_map(wide_d);
    sem_init(&wide_ran, 0, 0);
    static uint64_t seen[WIDE_MAX][2];
    memset(seen, 0, sizeof seen);
    int hi = wide_members - 64, rounds = 0;
    bool ok = true;
    for (int r = 0; ok && r < WIDE_SHAPES * 4 * WIDE_VIA; r++) {
        int shape = r % WIDE_SHAPES, kind = r / WIDE_SHAPES % 4, via = r / (WIDE_SHAPES * 4);
        int a = 64 + r * 7 % hi, b = 64 + (r * 7 + 1 + r % (hi - 1)) % hi, lo = r * 5 % 64;
        struct wide_job q = { .kind = kind };
        switch (shape) {
        case 0: wide_add(&q, a, 0), wide_add(&q, b, 0); break;
        case 1: wide_add(&q, a, 0), wide_add(&q, b, 0), wide_add(&q, a, 1), wide_add(&q, b, 1); break;
        case 2: wide_add(&q, a, 0), wide_add(&q, a, 1), wide_add(&q, a, 2); break;
        case 3: {
            int x = r % (hi < 64 ? hi : 64); /* below 64, and 64 + x is a member */
            wide_add(&q, x, 0), wide_add(&q, 64 + x, 0), wide_add(&q, x, 1), wide_add(&q, 64 + x, 1);
            break;
        }
        case 4:
            for (int i = 0; i < 18; i++)
                wide_add(&q, 64 + (a - 64 + i / 2) % hi, i % 2);
            wide_add(&q, lo, 2), wide_add(&q, (lo + 1) % 64, 2);
            break;
        default:
            wide_add(&q, b, 0), wide_add(&q, a, 0), wide_add(&q, b, 1), wide_add(&q, a, 1), wide_add(&q, b, 2);
            break;
        }
        if (!wide_all_parked(wide_d, seen))
            break;
        int rc;
        if (via == 0) {
            rc = wide_submit(&q);
        } else {
            wide_cur = q;
            const char *k = wide_key[via == 1 ? lo : a][3];
            rc = shard_submit(wide_d, k, strlen(k), wide_from_job, NULL);
        }
        CHECK(rc == 0, "wide: submit: %s", shard_strerror(rc));
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += HANG_S;
        int w;
        while ((w = sem_timedwait(&wide_ran, &until)) != 0 && errno == EINTR)
            ;
        if (w != 0) {
            char members[24 * 5] = "";
            for (int i = 0; i < q.n; i++)
                snprintf(members + strlen(members), sizeof members - strlen(members), " %d", q.member[i]);
            CHECK(false, "wide, %u workers%s: a multi-key job to parked workers (%s, kind %d, from %s; its keys' "
                         "members:%s) did not run in %d s: a wake-up was lost", workers, hook ? " in an idle hook" : "",
                  wide_shape_name[shape], kind, wide_via_name[via], members, HANG_S);
            CHECK(shard_drain(wide_d) == 0, "drain"); /* wakes every worker: the job runs */
            sem_wait(&wide_ran);
            ok = false;
        }
        rounds++;
    }
    shard_dispatcher_destroy(wide_d);
    sem_destroy(&wide_ran);
    printf("wide: %u workers%s, %d multi-key jobs to parked members from the 64th up\n", workers,
           hook ? " in an idle hook" : "", rounds);
    return ok;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *only = argc > 1 ? argv[1] : NULL;
    if (!only || !strcmp(only, "crash-in-job")) {
        for (enum crash_mode m = WHOLE; m <= WHOLE_HELD; m++) {
            crash_in_job(SHARD_CRASH_REROUTE, m);
            crash_in_job(SHARD_CRASH_DROP, m);
        }
    }
    if (!only || !strcmp(only, "chain"))
        chain();
    if (!only || !strcmp(only, "drop-stats"))
        drop_stats();
    if (!only || !strcmp(only, "drop-order"))
        drop_order();
    if (!only || !strcmp(only, "bounded"))
        bounded();
    if (!only || !strcmp(only, "whole-queued")) {
        whole_queued(SHARD_CRASH_REROUTE);
        whole_queued(SHARD_CRASH_DROP);
    }
    if (!only || !strcmp(only, "whole-split"))
        whole_split();
    if (!only || !strcmp(only, "whole-max"))
        whole_max();
    if (!only || !strcmp(only, "whole-steps")) {
        whole_steps(SHARD_CRASH_REROUTE);
        whole_steps(SHARD_CRASH_DROP);
    }
    if (!only || !strcmp(only, "whole-peek")) {
        whole_peek(SHARD_CRASH_REROUTE);
        whole_peek(SHARD_CRASH_DROP);
    }
    if (!only || !strcmp(only, "wide")) {
        if (wide(70, false))
            wide(133, true);
    }
    return stress_result("stress_multi_edges");
}
