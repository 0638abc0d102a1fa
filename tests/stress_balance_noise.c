/* The balancer on a busy machine, measuring by time (the default): the scheduler's noise is not skew.
 * 4 workers pinned to at most 2 CPUs (more workers than cores, wherever it runs), 4,000 keys of
 * equal popularity, jobs of equal cost (about 3 us of work), a 5 ms interval. A job's time includes
 * the time its thread was preempted, so a key whose job was interrupted looks heavy in one window,
 * and a worker busy in one interval; before the fix the balancer moved hundreds of such keys and
 * isolated a worker for a key "heavier than a share" (left with 4 % of the keys: max / mean of jobs
 * run 1.3 against 1.02 without it). An even load must be left alone: after a few hundred rounds, few
 * moves (counted in the stats, not timed) and no isolation. Then the same machine with a true skew,
 * by time too: three hot keys on one worker are moved apart, and a key heavier than a worker's share
 * is isolated. Every key's jobs run in order throughout. Plain program: runs under ThreadSanitizer. */
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "stress_common.h"

#define KEYS    4000
#define WORKERS 4

static uint64_t         next_seq[KEYS]; /* per key: the job expected next (its worker's alone) */
static uint64_t         seq[KEYS];      /* per key: the next to submit (the main thread's) */
static atomic_long      misordered;
static _Atomic uint64_t sink;           /* keeps work() from being optimised away: every worker's */
static uint64_t         work_per_job;   /* set before the workers start */

static void work(uint64_t n)
{
    uint64_t x = 88172645463325252ull;
    for (uint64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    atomic_store_explicit(&sink, x, memory_order_relaxed);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The fastest of several tries: a try the scheduler interrupted would make work look cheaper. */
static void calibrate(void)
{
    uint64_t best = UINT64_MAX, n = 100000;
    for (int i = 0; i < 20; i++) {
        uint64_t t0 = now_ns();
        work(n);
        uint64_t t = now_ns() - t0;
        best = t < best ? t : best;
    }
    work_per_job = n * 3000 / (best ? best : 1);
}

static void job(shard_worker *w, void *arg)
{
    (void)w;
    uintptr_t v = (uintptr_t)arg;
    unsigned key = (unsigned)(v % KEYS);
    if (next_seq[key] != v / KEYS)
        atomic_fetch_add(&misordered, 1);
    next_seq[key] = v / KEYS + 1;
    work(work_per_job);
}

static size_t kname(char *buf, unsigned i)
{
    return (size_t)snprintf(buf, 16, "u-%u", i);
}

/* 4 workers on the first (at most) 2 CPUs this process may use. */
static int cpus[2];
static size_t ncpus;

static void pick_cpus(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE && ncpus < 2; c++)
            if (CPU_ISSET(c, &set))
                cpus[ncpus++] = c;
}

static shard_dispatcher *create(uint32_t interval_ms, uint32_t rounds)
{
    struct shard_config cfg = { .workers = WORKERS, .cpus = ncpus ? cpus : NULL, .ncpus = ncpus,
                                .balance = { .interval_ms = interval_ms, .rounds = rounds } };
    shard_dispatcher *d;
    int err = shard_dispatcher_create(&d, &cfg);
    CHECK(err == 0, "create: %d", err);
    if (err) {
        printf("0 passed, 1 failed\n");
        exit(1);
    }
    memset(next_seq, 0, sizeof next_seq);
    memset(seq, 0, sizeof seq);
    return d;
}

/* n jobs: with probability hot_share one of hot (nhot of them), else any key. */
static void submit(shard_dispatcher *d, const unsigned *hot, int nhot, double hot_share, uint64_t *x, int n)
{
    char k[16];
    for (int i = 0; i < n; i++) {
        *x = *x * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(*x >> 11) / (double)(1ull << 53);
        unsigned key = nhot && u < hot_share ? hot[(*x >> 3) % (unsigned)nhot] : (unsigned)((*x >> 20) % KEYS);
        int err = shard_submit(d, k, kname(k, key), job, (void *)(uintptr_t)(seq[key]++ * KEYS + key));
        CHECK(err == 0, "submit: %d", err);
    }
}

/* The jobs each worker was given so far (run and waiting) and the smallest share of the keys. */
static void given(shard_dispatcher *d, double *out, double *min_share)
{
    struct shard_worker_stats st[WORKERS + 4];
    long n = shard_dispatcher_worker_stats(d, st, WORKERS + 4), k = 0;
    *min_share = 1;
    for (long i = 0; i < n && k < WORKERS; i++) {
        if (st[i].state != SHARD_WORKER_RUNNING)
            continue;
        out[k++] = (double)(st[i].executed + st[i].queued);
        if (st[i].share < *min_share)
            *min_share = st[i].share;
    }
}

static void uniform_is_left_alone(void)
{
    shard_dispatcher *d = create(5, 0);
    uint64_t x = 11, start = now_ns();
    struct shard_stats st;
    double before[WORKERS] = { 0 }, after[WORKERS], share;
    bool half = false;
    /* 400 rounds (2 s at 5 ms), or 20 s on a machine too loaded to give the balancer its rounds. */
    do {
        submit(d, NULL, 0, 0, &x, 1000);
        shard_dispatcher_stats(d, &st);
        if (!half && st.balance_rounds >= 200) {
            given(d, before, &share);
            half = true;
        }
    } while (st.balance_rounds < 400 && now_ns() - start < 20000000000ull);
    CHECK(shard_drain(d) == 0, "drain");
    shard_dispatcher_stats(d, &st);
    given(d, after, &share);
    double max = 0, sum = 0;
    for (int i = 0; i < WORKERS; i++) {
        double l = after[i] - before[i];
        sum += l;
        max = l > max ? l : max;
    }
    double ratio = sum > 0 ? max / (sum / WORKERS) : 0;
    printf("uniform: %llu rounds, %llu moves, %llu isolations begun or ended, smallest key share %.3f, "
           "max / mean of jobs given over the second half %.2f\n", (unsigned long long)st.balance_rounds,
           (unsigned long long)st.balance_moves, (unsigned long long)st.balance_weights, share, ratio);
    CHECK(st.balance_rounds >= 100, "the balancer had only %llu rounds", (unsigned long long)st.balance_rounds);
    /* Before the fix: 300 moves and more, and an isolation, in every run. */
    CHECK(st.balance_moves <= 24, "an even load: %llu keys moved", (unsigned long long)st.balance_moves);
    CHECK(st.balance_weights == 0, "an even load: a worker was isolated (%llu changes of weights)",
          (unsigned long long)st.balance_weights);
    CHECK(share > 0.15, "an even load: a worker was left with %.3f of the keys", share);
    CHECK(ratio < 1.15, "an even load: max / mean of jobs given %.2f", ratio);
    CHECK(atomic_load(&misordered) == 0, "%ld jobs out of order", atomic_load(&misordered));
    shard_dispatcher_destroy(d);
}

/* Three keys the ring puts on one worker. */
static void hot_on_one(shard_dispatcher *d, unsigned hot[3])
{
    shard_ring *r;
    CHECK(shard_dispatcher_ring(d, &r) == 0, "ring");
    char k[16], first[SHARD_NAME_MAX + 1];
    snprintf(first, sizeof first, "%s", shard_ring_owner(r, k, kname(k, 0)));
    for (unsigned i = 0, n = 0; n < 3 && i < KEYS; i++)
        if (strcmp(shard_ring_owner(r, k, kname(k, i)), first) == 0)
            hot[n++] = i;
    shard_ring_destroy(r);
}

/* Submits until the balancer has done what done() wants (or 20 s). Return: the stats read last. */
static struct shard_stats drive(shard_dispatcher *d, const unsigned *hot, int nhot, double hot_share,
                                bool (*done)(const struct shard_stats *))
{
    uint64_t x = 7, start = now_ns();
    struct shard_stats st;
    do {
        submit(d, hot, nhot, hot_share, &x, 2000);
        shard_dispatcher_stats(d, &st);
    } while (!done(&st) && now_ns() - start < 20000000000ull);
    return st;
}

static bool moved(const struct shard_stats *st)
{
    return st->balance_moves > 0 && st->balance_rounds >= 20;
}

static bool isolated(const struct shard_stats *st)
{
    return st->balance_weights > 0;
}

/* Whether the ring now puts the three hot keys on more than one worker. */
static bool hot_apart(shard_dispatcher *d, const unsigned hot[3])
{
    shard_ring *r;
    CHECK(shard_dispatcher_ring(d, &r) == 0, "ring");
    char k0[16], k1[16], k2[16];
    const char *o0 = shard_ring_owner(r, k0, kname(k0, hot[0])), *o1 = shard_ring_owner(r, k1, kname(k1, hot[1])),
               *o2 = shard_ring_owner(r, k2, kname(k2, hot[2]));
    bool apart = strcmp(o0, o1) != 0 || strcmp(o1, o2) != 0;
    shard_ring_destroy(r);
    return apart;
}

static void hot_keys_are_still_moved(void)
{
    shard_dispatcher *d = create(20, 2);
    unsigned hot[3];
    hot_on_one(d, hot);
    /* Until the hot keys are apart: the first moves may be cold keys (under ASan on a loaded machine,
     * 5 moves in 20 rounds left all three together once), and a later round still has to part them.
     * By time, with more workers than cores, one of them is often isolated (a worker that runs one
     * always looks busy): the other two must still leave its worker (CI once saw all three together
     * after 652 rounds, the isolated worker holding them; test_balance's two_keys_... checks that
     * case alone). */
    uint64_t start = now_ns();
    struct shard_stats st;
    do
        st = drive(d, hot, 3, 0.6, moved);
    while (!hot_apart(d, hot) && now_ns() - start < 20000000000ull);
    CHECK(shard_drain(d) == 0, "drain");
    printf("three hot keys on one worker: %llu rounds, %llu moves, %llu isolations begun or ended, ratio %.2f\n",
           (unsigned long long)st.balance_rounds, (unsigned long long)st.balance_moves,
           (unsigned long long)st.balance_weights, st.balance_ratio);
    CHECK(st.balance_moves > 0, "three hot keys on one worker, by time: none moved (ratio %.2f)", st.balance_ratio);
    CHECK(hot_apart(d, hot), "all three hot keys still on one worker after 20 s");
    CHECK(atomic_load(&misordered) == 0, "%ld jobs out of order", atomic_load(&misordered));
    shard_dispatcher_destroy(d);
}

static void a_heavy_key_is_still_isolated(void)
{
    shard_dispatcher *d = create(20, 2);
    unsigned hot[3];
    hot_on_one(d, hot);
    struct shard_stats st = drive(d, hot, 1, 0.6, isolated);
    CHECK(shard_drain(d) == 0, "drain");
    printf("a key with 60 %% of the jobs: %llu rounds, %llu isolations begun or ended\n",
           (unsigned long long)st.balance_rounds, (unsigned long long)st.balance_weights);
    CHECK(st.balance_weights > 0, "a key with 60 %% of the jobs, by time: not isolated");
    CHECK(atomic_load(&misordered) == 0, "%ld jobs out of order", atomic_load(&misordered));
    shard_dispatcher_destroy(d);
}

int main(void)
{
    alarm(200); /* a hang fails the run with SIGALRM rather than the test's timeout */
    pick_cpus();
    calibrate();
    uniform_is_left_alone();
    hot_keys_are_still_moved();
    a_heavy_key_is_still_isolated();
    return stress_result("stress_balance_noise");
}
