/* Skew: 100,000 keys of Zipf popularity (s = 0.9, 1.1, 1.3) on 8 workers, jobs of equal cost.
 *
 * balance: max / mean of the jobs each worker was given per window of 1,000,000 jobs. The placements that do not depend on time are computed, so 2 cores cannot distort
 * them: shard's ring as it is, hash % N (BookKeeper's OrderedExecutor), consistent hashing with
 * bounded loads c = 1.25 (each job to the first worker clockwise below 1.25 x the mean so far: no
 * per-key order), one shared queue (no order: the bound, 1.00). shard with its balancer is measured
 * live: the stream is submitted a window at a time and drained, so each worker's count of jobs run
 * is what it was given; the balancer places keys as it sees them between and during windows; the
 * run checks that every key's jobs ran in order.
 *
 * latency: jobs that block for 100 us (so cores are not the limit; 8 workers give some 50,000 jobs/s
 * on this VM, where a 100 us sleep takes about 150), offered at 20,000 jobs/s: the p99 wait of cold keys (ranks past 1,000) with the static ring and
 * with the balancer, against the same run with uniform keys.
 *
 * uniform_busy: the balancer must leave an even load alone. 4,000 keys of equal popularity, jobs of
 * equal cost (3 us of work), 4 workers on however few cores the machine has (2 here, shared), interval
 * 5 ms: max / mean of the jobs each worker was given (run and queued) over the second half of the
 * run, with the balancer off, by jobs and by time (the default), its moves and isolations, and the
 * smallest share of the keys a worker was left with (an isolation leaves it about 4 %).
 *
 * Output: key=value lines (bench/run). --quick: shorter windows; uniform: that case alone. */
#include <math.h>
#include <pthread.h>
#include <shard.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "bench_common.h"

#define KEYS    100000
#define WORKERS 8

static double cdf[KEYS];

static void zipf_init(double s)
{
    double sum = 0;
    for (int r = 0; r < KEYS; r++)
        sum += 1.0 / pow(r + 1, s);
    double acc = 0;
    for (int r = 0; r < KEYS; r++) {
        acc += 1.0 / pow(r + 1, s) / sum;
        cdf[r] = acc;
    }
}

/* A rank by popularity (0 the most popular); s = 0 here means uniform. */
static int draw(uint64_t *x, double s)
{
    double u = (double)(bench_mix(x) >> 11) / (double)(1ull << 53);
    if (s == 0)
        return (int)(u * KEYS);
    int lo = 0, hi = KEYS - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static size_t kname(char *buf, int r)
{
    return (size_t)snprintf(buf, 16, "key-%d", r);
}

static double ratio_of(const double *load, int n)
{
    double max = 0, sum = 0;
    for (int i = 0; i < n; i++) {
        sum += load[i];
        if (load[i] > max)
            max = load[i];
    }
    return max / (sum / n);
}

/* ---- placements that do not depend on time ---- */

static int member_of(const shard_ring *r, const char *name)
{
    for (int i = 0; i < WORKERS; i++)
        if (strcmp(shard_ring_member(r, (size_t)i), name) == 0)
            return i;
    return -1;
}

static void computed(double s, long window, double *ring_ratio, double *mod_ratio, double *bounded_ratio)
{
    shard_ring *r;
    shard_ring_create(&r, NULL);
    for (int i = 0; i < WORKERS; i++) {
        char name[8];
        snprintf(name, sizeof name, "w%d", i);
        shard_ring_add(r, name, 1);
    }
    double ring[WORKERS] = { 0 }, mod[WORKERS] = { 0 }, bounded[WORKERS] = { 0 };
    uint64_t x = 42;
    char k[16];
    for (long j = 0; j < window; j++) {
        size_t n = kname(k, draw(&x, s));
        ring[member_of(r, shard_ring_owner(r, k, n))]++;
        mod[XXH3_64bits(k, n) % WORKERS]++;
        /* Bounded loads: clockwise from the key, the first worker below c x the mean so far. */
        const char *owners[WORKERS];
        size_t no = shard_ring_owners(r, k, n, owners, WORKERS);
        double cap = ceil(1.25 * (double)(j + 1) / WORKERS);
        for (size_t o = 0; o < no; o++) {
            int m = member_of(r, owners[o]);
            if (bounded[m] < cap) {
                bounded[m]++;
                break;
            }
        }
    }
    *ring_ratio = ratio_of(ring, WORKERS);
    *mod_ratio = ratio_of(mod, WORKERS);
    *bounded_ratio = ratio_of(bounded, WORKERS);
    shard_ring_destroy(r);
}

/* ---- shard live, with the balancer ---- */

static uint64_t *next_seq;  /* per key: the job the key expects next (only its worker touches it) */
static atomic_long violations;

static void counted(shard_worker *w, void *arg)
{
    (void)w;
    uint64_t v = (uint64_t)(uintptr_t)arg, key = v % KEYS, seq = v / KEYS;
    if (next_seq[key] != seq)
        atomic_fetch_add(&violations, 1);
    next_seq[key] = seq + 1;
}

static void executed_now(shard_dispatcher *d, double *out)
{
    struct shard_worker_stats st[WORKERS + 8];
    long n = shard_dispatcher_worker_stats(d, st, WORKERS + 8);
    for (long i = 0, k = 0; i < n && k < WORKERS; i++)
        if (st[i].state == SHARD_WORKER_RUNNING)
            out[k++] = (double)st[i].executed;
}

/* Submits `windows` windows of `window` jobs, each drained, so that what each worker ran is what it
 * was given; the ratio reported is the mean over the last half (after the balancer has seen them). */
static void live(double s, int windows, long window, double *ratio, double *moves_per_s, long *violated)
{
    struct shard_config cfg = { .workers = WORKERS, .hot_keys = SHARD_MAX_HOT_KEYS,
                                .balance = { .interval_ms = 100, .rounds = 2, .by_jobs = true } };
    shard_dispatcher *d;
    shard_dispatcher_create(&d, &cfg);
    next_seq = calloc(KEYS, sizeof *next_seq);
    uint64_t *seq = calloc(KEYS, sizeof *seq), x = 42, start = bench_now_ns();
    atomic_store(&violations, 0);
    double before[WORKERS], after[WORKERS], load[WORKERS], sum = 0;
    int counted_windows = 0;
    char k[16];
    executed_now(d, before);
    for (int w = 0; w < windows; w++) {
        for (long j = 0; j < window; j++) {
            int r = draw(&x, s);
            shard_submit(d, k, kname(k, r), counted, (void *)(uintptr_t)(seq[r]++ * KEYS + (uint64_t)r));
        }
        shard_drain(d);
        executed_now(d, after);
        for (int i = 0; i < WORKERS; i++) {
            load[i] = after[i] - before[i];
            before[i] = after[i];
        }
        if (w >= windows / 2) {
            sum += ratio_of(load, WORKERS);
            counted_windows++;
        }
    }
    double elapsed = (double)(bench_now_ns() - start) / 1e9;
    struct shard_stats st;
    shard_dispatcher_stats(d, &st);
    *ratio = sum / counted_windows;
    *moves_per_s = (double)(st.balance_moves + st.balance_weights) / elapsed;
    *violated = atomic_load(&violations);
    shard_dispatcher_destroy(d);
    free(next_seq);
    free(seq);
}

/* ---- latency of cold keys with blocking jobs ---- */

struct sent {
    uint64_t at;
    int      rank;
};

static uint64_t *waits;
static atomic_long nwaits;

static void blocking(shard_worker *w, void *arg)
{
    (void)w;
    struct sent *m = arg;
    if (m->rank >= 1000)
        waits[atomic_fetch_add(&nwaits, 1)] = bench_now_ns() - m->at;
    struct timespec ts = { 0, 100000 }; /* blocks, as I/O would: cores are not the limit */
    nanosleep(&ts, NULL);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double cold_p99_us(double s, bool balance, double seconds)
{
    struct shard_config cfg = { .workers = WORKERS, .queue_capacity = 1u << 16 };
    if (balance)
        cfg.balance = (struct shard_balance_config){ .interval_ms = 100, .rounds = 2 };
    shard_dispatcher *d;
    shard_dispatcher_create(&d, &cfg);
    long total = (long)(20000 * seconds);
    struct sent *msgs = calloc((size_t)total, sizeof *msgs);
    waits = calloc((size_t)total, sizeof *waits);
    atomic_store(&nwaits, 0);
    uint64_t x = 9, start = bench_now_ns();
    char k[16];
    for (long j = 0; j < total; j++) {
        uint64_t due = start + (uint64_t)j * 50000; /* 20,000 a second */
        while (bench_now_ns() < due)
            ;
        msgs[j].rank = draw(&x, s);
        msgs[j].at = bench_now_ns();
        shard_submit(d, k, kname(k, msgs[j].rank), blocking, &msgs[j]);
    }
    shard_drain(d);
    shard_dispatcher_destroy(d);
    long n = atomic_load(&nwaits), skip = n / 2; /* the second half: after the balancer's moves */
    qsort(waits + skip, (size_t)(n - skip), sizeof *waits, cmp_u64);
    double p99 = (double)waits[skip + (n - skip) * 99 / 100] / 1e3;
    free(msgs);
    free(waits);
    return p99;
}

/* ---- an even load on a busy machine ---- */

#define UNIFORM_KEYS    4000
#define UNIFORM_WORKERS 4

static _Atomic uint64_t work_sink; /* keeps work() from being optimised away; every worker stores it */
static uint64_t work_per_job; /* iterations of work() that take about 3 us */

static void work(uint64_t n)
{
    uint64_t x = 88172645463325252ull;
    for (uint64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    atomic_store_explicit(&work_sink, x, memory_order_relaxed);
}

/* The fastest of several tries, so that a try the scheduler interrupted does not make work cheaper. */
static void work_calibrate(void)
{
    uint64_t best = UINT64_MAX, n = 100000;
    for (int i = 0; i < 20; i++) {
        uint64_t t0 = bench_now_ns();
        work(n);
        uint64_t t = bench_now_ns() - t0;
        best = t < best ? t : best;
    }
    work_per_job = n * 3000 / (best ? best : 1);
}

static void equal_job(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    work(work_per_job);
}

/* Jobs given so far: run and queued (a backlog that differs between workers is not a difference in load). */
static void given_now(shard_dispatcher *d, double *out)
{
    struct shard_worker_stats st[UNIFORM_WORKERS + 8];
    long n = shard_dispatcher_worker_stats(d, st, UNIFORM_WORKERS + 8);
    for (long i = 0, k = 0; i < n && k < UNIFORM_WORKERS; i++)
        if (st[i].state == SHARD_WORKER_RUNNING)
            out[k++] = (double)(st[i].executed + st[i].queued);
}

/* mode 0: no balancer; 1: by jobs; 2: by time. */
static void uniform_busy(int mode, double seconds, double *ratio, uint64_t *moves, uint64_t *isolations,
                         double *min_share)
{
    struct shard_config cfg = { .workers = UNIFORM_WORKERS };
    if (mode)
        cfg.balance = (struct shard_balance_config){ .interval_ms = 5, .by_jobs = mode == 1 };
    shard_dispatcher *d;
    shard_dispatcher_create(&d, &cfg);
    double before[UNIFORM_WORKERS] = { 0 }, after[UNIFORM_WORKERS], load[UNIFORM_WORKERS];
    uint64_t x = 11, start = bench_now_ns(), half = start + (uint64_t)(seconds * 0.5e9),
             end = start + (uint64_t)(seconds * 1e9);
    bool measuring = false;
    char k[16];
    for (uint64_t now = start; now < end; now = bench_now_ns()) {
        for (int j = 0; j < 1000; j++) {
            int r = (int)(bench_mix(&x) % UNIFORM_KEYS);
            shard_submit(d, k, (size_t)snprintf(k, sizeof k, "u-%d", r), equal_job, NULL);
        }
        if (!measuring && now >= half) {
            given_now(d, before);
            measuring = true;
        }
    }
    shard_drain(d);
    given_now(d, after);
    for (int i = 0; i < UNIFORM_WORKERS; i++)
        load[i] = after[i] - before[i];
    *ratio = ratio_of(load, UNIFORM_WORKERS);
    struct shard_stats st;
    shard_dispatcher_stats(d, &st);
    *moves = st.balance_moves;
    *isolations = st.balance_weights;
    struct shard_worker_stats ws[UNIFORM_WORKERS + 8];
    long n = shard_dispatcher_worker_stats(d, ws, UNIFORM_WORKERS + 8);
    *min_share = 1;
    for (long i = 0; i < n; i++)
        if (ws[i].state == SHARD_WORKER_RUNNING && ws[i].share < *min_share)
            *min_share = ws[i].share;
    shard_dispatcher_destroy(d);
}

static void uniform_case(bool quick)
{
    work_calibrate();
    double secs = quick ? 1.0 : 4.0;
    static const char *const names[] = { "off", "by_jobs", "by_time" };
    for (int mode = 0; mode < 3; mode++) {
        double ratio, min_share;
        uint64_t moves, isolations;
        uniform_busy(mode, secs, &ratio, &moves, &isolations, &min_share);
        printf("case=uniform_busy keys=%d workers=%d cores=%ld interval_ms=5 balancer=%s max_over_mean=%.2f "
               "moves=%llu isolations_begun_or_ended=%llu min_key_share=%.3f\n", UNIFORM_KEYS, UNIFORM_WORKERS,
               sysconf(_SC_NPROCESSORS_ONLN), names[mode], ratio, (unsigned long long)moves,
               (unsigned long long)isolations, min_share);
    }
}

static bool accept_uniform(const char *arg)
{
    return strcmp(arg, "uniform") == 0;
}

int main(int argc, char **argv)
{
    bool quick = bench_args(argc, argv, accept_uniform, " [uniform]");
    bool only_uniform = false;
    for (int i = 1; i < argc; i++)
        only_uniform |= accept_uniform(argv[i]);
    if (only_uniform) {
        uniform_case(quick);
        return 0;
    }
    static const double s_values[] = { 0.9, 1.1, 1.3 };
    long window = quick ? 200000 : 1000000;
    for (int i = 0; i < 3; i++) {
        double s = s_values[i];
        zipf_init(s);
        double ring, mod, bounded, bal, moves;
        long violated;
        computed(s, window, &ring, &mod, &bounded);
        live(s, quick ? 6 : 12, window, &bal, &moves, &violated);
        double top = cdf[0] * WORKERS;
        printf("case=balance zipf_s=%.1f top_key_x_fair_share=%.2f ring=%.2f hash_mod_n=%.2f bounded_c1.25=%.2f "
               "shared_queue=1.00 shard_balancer=%.2f balancer_moves_per_s=%.1f order_violations=%ld\n",
               s, top, ring, mod, bounded, bal, moves, violated);
    }
    zipf_init(1.1);
    double secs = quick ? 1.0 : 4.0;
    double uniform = cold_p99_us(0, false, secs), fixed = cold_p99_us(1.1, false, secs),
           balanced = cold_p99_us(1.1, true, secs);
    printf("case=cold_latency zipf_s=1.1 uniform_p99_us=%.0f ring_p99_us=%.0f balancer_p99_us=%.0f "
           "balancer_vs_uniform=%.2f\n", uniform, fixed, balanced, balanced / uniform);
    uniform_case(quick);
    return 0;
}
