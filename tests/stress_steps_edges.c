/* Multi-key jobs with steps (shard_submit_multi_each) on their rare paths, one scenario at a time,
 * each checking what multi.h promises, with the keys' state in worker-local tables that the release
 * hook hands over (as a game server's sessions, tests/sessions.h):
 *   stuck-step     a step blocks and its worker crashes (REROUTE, then DROP), then the same with done:
 *                  its job's keys stay held until it returns (no later job of them runs meanwhile), and
 *                  shard_drain() does not wait for it nor for what waits behind it (a later job of each
 *                  key, a multi-key job behind it through one key holding another), as for any job
 *                  stuck on a crashed worker.
 *   reroute-ahead  a step waits on a worker x that lags (in a long job) while its key moves x -> y ->
 *                  z, y lagging too, and x crashes (REROUTE, then DROP): the step is rerouted where
 *                  the key's state goes next, so the key's job routed to y after the move (which runs
 *                  after the step) sees what the step wrote.
 * Drain is run on a helper thread and given a generous time to return (a hang detector, not
 * synchronisation): a drain that does not return is reported, then the stuck jobs are let go.
 *   stress_steps_edges [SCENARIO]   (default: all) */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <string.h>
#include <time.h>

#include "stress_common.h"

#define HANG_S (STRESS_SANITIZED ? 30 : 10)
#define NKEYS  64

/* ---- worker-local state: one counter a key, handed over by the release hook ---- */

struct local {
    bool has[NKEYS];
    long val[NKEYS];
};

static pthread_mutex_t transit_lock = PTHREAD_MUTEX_INITIALIZER;
static bool            transit_has[NKEYS];
static long            transit_val[NKEYS];
static char            key_names[NKEYS][16];
static size_t          key_lens[NKEYS];

static void keys_init(void)
{
    for (int i = 0; i < NKEYS; i++)
        key_lens[i] = (size_t)snprintf(key_names[i], sizeof key_names[i], "st-%d", i);
    memset(transit_has, 0, sizeof transit_has);
}

static struct shard_key key(int i)
{
    return (struct shard_key){ key_names[i], key_lens[i] };
}

static void local_start(shard_worker *w, void *user)
{
    (void)user;
    shard_worker_set_user(w, calloc(1, sizeof(struct local)));
}

static void local_stop(shard_worker *w, void *user)
{
    (void)user;
    free(shard_worker_user(w));
}

static void local_release(shard_worker *w, const struct shard_handoff *h, void *user)
{
    (void)user;
    struct local *l = shard_worker_user(w);
    for (int i = 0; i < NKEYS; i++) {
        if (!l->has[i] || !shard_handoff_moves(h, key_names[i], key_lens[i]))
            continue;
        pthread_mutex_lock(&transit_lock);
        CHECK(!transit_has[i], "key %d handed over twice", i);
        transit_has[i] = true;
        transit_val[i] = l->val[i];
        pthread_mutex_unlock(&transit_lock);
        l->has[i] = false;
    }
}

/* Key i's counter on w, as its jobs see it: here, or in transit to here, or new (0). */
static long *state(shard_worker *w, int i)
{
    struct local *l = shard_worker_user(w);
    if (!l->has[i]) {
        pthread_mutex_lock(&transit_lock);
        l->has[i] = true;
        l->val[i] = transit_has[i] ? transit_val[i] : 0;
        transit_has[i] = false;
        pthread_mutex_unlock(&transit_lock);
    }
    return &l->val[i];
}

static shard_dispatcher *make(uint32_t workers)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = workers,
                                .queue_capacity = 64,
                                .on_worker_start = local_start,
                                .on_worker_stop = local_stop,
                                .on_release = local_release };
    CHECK(shard_dispatcher_create(&d, &cfg) == 0, "create");
    return d;
}

/* The index of the nth key (from 0) that worker `want` owns now, not among the taken ones. */
static int key_on(shard_dispatcher *d, const char *want, unsigned nth)
{
    shard_ring *r;
    CHECK(shard_dispatcher_ring(d, &r) == 0, "ring");
    for (int i = 0; i < NKEYS; i++) {
        if (strcmp(shard_ring_owner(r, key_names[i], key_lens[i]), want) == 0 && nth-- == 0) {
            shard_ring_destroy(r);
            return i;
        }
    }
    shard_ring_destroy(r);
    fprintf(stderr, "no key on %s\n", want);
    exit(2);
}

/* A job that blocks its worker until its gate is posted. */
struct gate {
    sem_t started, open;
};
static void gate_init(struct gate *g)
{
    sem_init(&g->started, 0, 0);
    sem_init(&g->open, 0, 0);
}
static void blocker(shard_worker *w, void *arg)
{
    (void)w;
    struct gate *g = arg;
    sem_post(&g->started);
    sem_wait(&g->open);
}
static void block_on(shard_dispatcher *d, int k, struct gate *g)
{
    gate_init(g);
    CHECK(shard_submit(d, key_names[k], key_lens[k], blocker, g) == 0, "blocker");
    sem_wait(&g->started);
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

static void wait_multi_waiting(shard_dispatcher *d, uint64_t n)
{
    struct shard_stats st;
    do
        CHECK(shard_dispatcher_stats(d, &st) == 0, "stats");
    while (st.multi_waiting < n);
}

/* ---- the jobs ---- */

/* A multi-key job with steps over keys[0..n): each step adds `add` to its key's counter. */
struct txn {
    int          keys[4];
    size_t       n;
    long         add;
    int          block_key;   /* the key whose step blocks on gate (-1: none) */
    bool         block_done;  /* done blocks on gate instead */
    int          after_step;  /* index of the key whose step waits for the others' (-1: none) */
    struct gate *gate;
    atomic_int   step_runs[4], done_runs;
    atomic_int   in_step;     /* a step is under way (the blocking one) */
};

static void txn_step(shard_worker *w, void *arg, size_t i)
{
    struct txn *t = arg;
    if ((int)i == t->after_step)
        for (size_t o = 0; o < t->n; o++)
            while (o != i && atomic_load(&t->step_runs[o]) < 1)
                sched_yield(); /* the others run on other workers */
    atomic_fetch_add(&t->step_runs[i], 1);
    *state(w, t->keys[i]) += t->add;
    if (t->keys[i] == t->block_key) {
        atomic_store(&t->in_step, 1);
        sem_post(&t->gate->started);
        sem_wait(&t->gate->open);
        atomic_store(&t->in_step, 0);
    }
}

static void txn_done(shard_worker *w, void *arg)
{
    (void)w;
    struct txn *t = arg;
    atomic_fetch_add(&t->done_runs, 1);
    if (t->block_done) {
        atomic_store(&t->in_step, 1);
        sem_post(&t->gate->started);
        sem_wait(&t->gate->open);
        atomic_store(&t->in_step, 0);
    }
}

static int txn_submit(shard_dispatcher *d, struct txn *t)
{
    struct shard_key keys[4];
    for (size_t i = 0; i < t->n; i++)
        keys[i] = key(t->keys[i]);
    return shard_submit_multi_each(d, keys, t->n, txn_step, txn_done, t);
}

/* A single-key job that adds to its key's counter and records what it found. */
struct probe {
    int          k;
    long         add;
    long         seen;
    atomic_int   runs;
    atomic_int  *during;      /* counts runs while this atomic_int is set (NULL: not watched) */
    atomic_int   during_hits;
};

static void probe_fn(shard_worker *w, void *arg)
{
    struct probe *p = arg;
    if (p->during && atomic_load(p->during))
        atomic_fetch_add(&p->during_hits, 1);
    long *v = state(w, p->k);
    p->seen = *v;
    *v += p->add;
    atomic_fetch_add(&p->runs, 1);
}

static void probe_submit(shard_dispatcher *d, struct probe *p)
{
    CHECK(shard_submit(d, key_names[p->k], key_lens[p->k], probe_fn, p) == 0, "probe submit");
}

/* Whether the count n has reached 1 (for stress_drain_until). */
static bool ran_once(void *n)
{
    return atomic_load((atomic_int *)n) >= 1;
}

/* ---- stuck-step ---- */

/* in_done: done blocks (on w1, the worker of the last step), not k1's step. A second multi-key job
 * over k0 and k3 then waits behind the first through k0, holding k3: drain waits for none of them. */
static void stuck_step(enum shard_crash_policy policy, bool in_done)
{
    const char *pname = policy == SHARD_CRASH_REROUTE ? "REROUTE" : "DROP";
    keys_init();
    shard_dispatcher *d = make(3);
    struct gate g;
    gate_init(&g);
    int k0 = key_on(d, "w0", 0), k1 = key_on(d, "w1", 0), k3 = key_on(d, "w2", 0);
    static struct txn t, t2;
    memset(&t, 0, sizeof t);
    memset(&t2, 0, sizeof t2);
    /* in_done: k1's step waits for k0's, so that done runs on w1. */
    t = (struct txn){ .keys = { k0, k1 }, .n = 2, .add = 1, .block_key = in_done ? -1 : k1, .block_done = in_done,
                      .after_step = in_done ? 1 : -1, .gate = &g };
    t2 = (struct txn){ .keys = { k0, k3 }, .n = 2, .add = 100, .block_key = -1, .after_step = -1 };
    CHECK(txn_submit(d, &t) == 0, "submit_multi_each");
    sem_wait(&g.started); /* k1's step, or done, runs on w1 and blocks */
    CHECK(shard_worker_crash(d, "w1", policy) == 0, "crash w1");
    CHECK(txn_submit(d, &t2) == 0, "submit_multi_each behind");
    struct probe later[3] = { { .k = k0, .during = &t.in_step }, { .k = k1, .during = &t.in_step },
                              { .k = k3, .during = &t.in_step } };
    for (int i = 0; i < 3; i++)
        probe_submit(d, &later[i]);
    wait_multi_waiting(d, 1); /* the second holds k3 */
    struct drainer dr;
    drain_start(&dr, d);
    bool returned = drain_returned(&dr);
    CHECK(returned, "%s: shard_drain waited for a %s still running on a crashed worker", pname,
          in_done ? "done" : "step");
    CHECK(atomic_load(&later[0].runs) + atomic_load(&later[1].runs) + atomic_load(&later[2].runs) == 0,
          "%s: a later job of its keys ran while it still ran", pname);
    CHECK(atomic_load(&t2.done_runs) == 0, "%s: the job behind it ran", pname);
    sem_post(&g.open);
    drain_join(&dr);
    CHECK(dr.rc == 0, "drain: %s", shard_strerror(dr.rc));
    for (int i = 0; i < 3; i++)
        stress_drain_until(d, ran_once, &later[i].runs);
    stress_drain_until(d, ran_once, &t2.done_runs);
    CHECK(atomic_load(&t.done_runs) == 1, "%s: done ran %d times", pname, atomic_load(&t.done_runs));
    for (int i = 0; i < 2; i++) {
        CHECK(atomic_load(&t.step_runs[i]) == 1, "%s: step %d ran %d times", pname, i, atomic_load(&t.step_runs[i]));
        CHECK(atomic_load(&t2.step_runs[i]) == 1, "%s: step %d ran %d times", pname, i, atomic_load(&t2.step_runs[i]));
    }
    for (int i = 0; i < 3; i++)
        CHECK(atomic_load(&later[i].during_hits) == 0, "%s: a later job overlapped it", pname);
    /* k0's and k3's state is on live workers: their later jobs saw both jobs' writes. */
    CHECK(later[0].seen == 101, "%s: k0's later job saw %ld, not 101", pname, later[0].seen);
    CHECK(later[2].seen == 100, "%s: k3's later job saw %ld, not 100", pname, later[2].seen);
    /* The later jobs ran once the jobs let their keys go (multi.c's end()), a moment before those stop
     * counting as open; and they ran behind a stuck key, which no drain waits for. */
    stress_drain_until(d, stress_none_open, d);
    shard_dispatcher_destroy(d);
    printf("stuck-%s %s: drain %s\n", in_done ? "done" : "step", pname, returned ? "returned" : "HUNG");
}

/* ---- reroute-ahead ---- */

static void reroute_ahead(enum shard_crash_policy policy)
{
    const char *pname = policy == SHARD_CRASH_REROUTE ? "REROUTE" : "DROP";
    keys_init();
    shard_dispatcher *d = make(4);
    int k = key_on(d, "w1", 0), kb = key_on(d, "w1", 1), k2 = key_on(d, "w0", 0), k0b = key_on(d, "w0", 1),
        kc = key_on(d, "w2", 0);
    static struct txn t;
    memset(&t, 0, sizeof t);
    /* k2 first: steps run in the keys' order, so k2's runs (on w0), then k's goes to w1. */
    t = (struct txn){ .keys = { k2, k }, .n = 2, .add = 1, .block_key = -1, .after_step = -1 };
    struct gate g0, g1, g2;
    /* k's part runs on w1 (it holds k); k2's waits on w0 behind a blocker. */
    block_on(d, k0b, &g0);
    CHECK(txn_submit(d, &t) == 0, "submit_multi_each");
    wait_multi_waiting(d, 1);
    /* w1 lags in a long job; k2's part comes up: k2's step runs, then k's goes to w1 and waits there. */
    block_on(d, kb, &g1);
    sem_post(&g0.open);
    while (atomic_load(&t.step_runs[0]) < 1) /* k2's step: k's is delivered to w1 after it */
        sched_yield();
    /* k moves to w2, which lags too, and gets a job of k there, then on to w3; w1 crashes. */
    block_on(d, kc, &g2);
    CHECK(shard_key_place(d, key_names[k], key_lens[k], "w2") == 0, "place on w2");
    struct probe on_y = { .k = k, .add = 10 };
    probe_submit(d, &on_y);
    CHECK(shard_key_place(d, key_names[k], key_lens[k], "w3") == 0, "place on w3");
    CHECK(shard_worker_crash(d, "w1", policy) == 0, "crash w1");
    sem_post(&g2.open);
    struct drainer dr;
    drain_start(&dr, d);
    bool returned = drain_returned(&dr);
    CHECK(returned, "%s: drain hung", pname);
    drain_join(&dr);
    stress_drain_until(d, ran_once, &on_y.runs);
    struct probe after = { .k = k };
    probe_submit(d, &after);
    stress_drain_until(d, ran_once, &after.runs);
    CHECK(atomic_load(&t.step_runs[1]) == 1 && atomic_load(&t.done_runs) == 1, "%s: step %d, done %d runs", pname,
          atomic_load(&t.step_runs[1]), atomic_load(&t.done_runs));
    CHECK(on_y.seen == 1, "%s: k's job routed to w2 after the step saw %ld, not the step's 1: the step ran "
          "where k's state was not", pname, on_y.seen);
    CHECK(after.seen == 11, "%s: k's counter is %ld at the end, not 11", pname, after.seen);
    sem_post(&g1.open);
    shard_dispatcher_destroy(d);
    printf("reroute-ahead %s: the job after the step saw %ld, the end %ld\n", pname, on_y.seen, after.seen);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *only = argc > 1 ? argv[1] : NULL;
    if (!only || !strcmp(only, "stuck-step")) {
        stuck_step(SHARD_CRASH_REROUTE, false);
        stuck_step(SHARD_CRASH_DROP, false);
        stuck_step(SHARD_CRASH_REROUTE, true);
        stuck_step(SHARD_CRASH_DROP, true);
    }
    if (!only || !strcmp(only, "reroute-ahead")) {
        reroute_ahead(SHARD_CRASH_REROUTE);
        reroute_ahead(SHARD_CRASH_DROP);
    }
    return stress_result("stress_steps_edges");
}
