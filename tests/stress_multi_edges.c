/* Multi-key jobs (multi.h) on their rare paths, one scenario at a time, each checking what the header
 * promises:
 *   crash-in-job   a multi-key job blocks, and the worker running it crashes (REROUTE, then DROP):
 *                  its keys stay held until it returns (no later job of them runs meanwhile), and
 *                  shard_drain() does not wait for it nor for what waits behind it.
 *   chain          a chain of multi-key jobs, each waiting for the one before through a shared key,
 *                  the first behind a stuck key: drain waits for none of them, however long the chain.
 *   drop-stats     a DROP crash drops a multi-key job whose other part has not come up: on_dropped once,
 *                  and the stats no longer count it as open (nor as waiting).
 *   drop-order     a DROP crash drops a multi-key job holding a key: the key's later job runs after
 *                  on_dropped, as for any dropped job's key.
 *   bounded        a producer hammering shard_try_submit_multi at a key stuck behind a crashed worker's
 *                  job, and at a worker held in a long job: it is refused (-EAGAIN) after a bounded
 *                  number of jobs, it does not queue without bound.
 * Drain and the like are run on a helper thread and given a generous time to return (a hang detector,
 * not synchronisation): a drain that does not return is reported, then the stuck jobs are let go.
 *   stress_multi_edges [SCENARIO]   (default: all) */
#include <errno.h>
#include <pthread.h>
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

/* ---- crash-in-job ---- */

static struct gate job_gate;
static atomic_int in_job, job_runs;
static void multi_blocks(shard_worker *w, void *arg)
{
    (void)arg;
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

static void crash_in_job(enum shard_crash_policy policy)
{
    const char *pname = policy == SHARD_CRASH_REROUTE ? "REROUTE" : "DROP";
    shard_dispatcher *d = make(3, 64, NULL);
    gate_init(&job_gate);
    atomic_store(&in_job, 0);
    atomic_store(&job_runs, 0);
    atomic_store(&later_ran_during, 0);
    char a[32], b[32], c[32];
    /* Every key on w1: the job runs there, whichever part comes last. */
    struct shard_key keys[3] = { key_of(d, "w1", 0, a), key_of(d, "w1", 1, b), key_of(d, "w1", 2, c) };
    CHECK(shard_submit_multi(d, keys, 3, multi_blocks, NULL) == 0, "submit_multi");
    sem_wait(&job_gate.started);
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
    struct shard_stats st;
    CHECK(shard_dispatcher_stats(d, &st) == 0, "stats");
    CHECK(st.multi_open == 0 && st.multi_waiting == 0, "%s: after it: %llu open, %llu waiting", pname,
          (unsigned long long)st.multi_open, (unsigned long long)st.multi_waiting);
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

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *only = argc > 1 ? argv[1] : NULL;
    if (!only || !strcmp(only, "crash-in-job")) {
        crash_in_job(SHARD_CRASH_REROUTE);
        crash_in_job(SHARD_CRASH_DROP);
    }
    if (!only || !strcmp(only, "chain"))
        chain();
    if (!only || !strcmp(only, "drop-stats"))
        drop_stats();
    if (!only || !strcmp(only, "drop-order"))
        drop_order();
    if (!only || !strcmp(only, "bounded"))
        bounded();
    return stress_result("stress_multi_edges");
}
