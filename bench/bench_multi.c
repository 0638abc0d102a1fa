/* bench_multi: what an atomic step over two keys on two workers costs, against what a user would do
 * instead, in one run. 2 workers; a producer submits OPS operations, each on a pair of keys (a from
 * 1,024 keys of w0, b from 1,024 of w1, a different pair each time), each doing WORK ns of work a key,
 * as fast as shard takes them; then drains. Modes:
 *   single     one job of one key (half the work of a pair): the unit the others are measured in
 *   two_jobs   two single-key jobs, one a key: the same work, not atomic
 *   multi      shard_submit_multi over a and b: one job, on one worker, with both keys held
 *   each       shard_submit_multi_each: a step on each key's own worker, both held, then done
 *   mutex      one job of a that takes a global mutex and does a's and b's work: atomic by lock,
 *              as a user would without multi-key jobs (every job of those keys must take it)
 *   multi_warm multi over 1,024 pairs only: a key's parts meet the claims of its earlier jobs still
 *              in flight (the producer runs up to a queue ahead), and wait set aside behind them
 *   multi_hot  multi on one and the same pair every time: each job's keys are held by the one
 *              before (the worst case)
 * Meanwhile a probe thread submits a job of an unrelated key every 50 us (alternating workers; it
 * sleeps between) and records its latency, submit to start: what a pair's atomic step costs everyone
 * else.
 *   bench=multi mode=M ops=N ns_per_op=X cpu_ns_per_op=Y x_single_cpu=R submitter_cpu_ns_per_op=S
 *               probe_cpu_ns_per_op=C probe_p50_us=P probe_p99_us=Q
 * With --rate=R the producer offers R operations a second instead (a burst every 100 us, sleeping
 * between), below what every mode but multi_hot sustains, which is left out: the queues stay short,
 * so the probe's latency is what a mode's jobs do to an unrelated key's, not a backlog's length
 * (unpaced, the probe's job queues behind up to a queue of the producer's, and its latency grows with
 * the cost of each). Its lines say bench=multi_paced and rate=R.
 * cpu_ns_per_op is the process's CPU (user + system: producer and workers) over the ops, less the
 * probe thread's own, which is shown apart (probe_cpu_ns_per_op): the probe wakes every 50 us
 * whatever the mode, so its CPU grows with a mode's run time, not with its work, and on this
 * machine's 50 us sleeps it is up to a third of a slow mode's CPU. x_single_cpu is cpu_ns_per_op
 * against single's, in the same round; submitter_cpu_ns_per_op is the part of it that the producer's thread
 * spent (the rest is the workers': what a job costs where it runs, and their idle spinning). Rounds
 * interleave the modes. */
#include <pthread.h>
#include <shard.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench_common.h"

static shard_dispatcher *d;
#define POOL 65536 /* keys a worker: more than a queue holds, so that a pair's keys are rarely held */
#define WARM 1024  /* multi_warm's pairs: each key's jobs meet earlier ones still in flight */
static char key_a[POOL][24], key_b[POOL][24], probe_key[2][24];
static size_t len_a[POOL], len_b[POOL], probe_len[2];
static uint64_t state_a[POOL], state_b[POOL]; /* each touched only by jobs holding its key (or the mutex) */
static pthread_mutex_t pair_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t work_ns = 200;
static long rate; /* --rate: operations offered a second; 0: as fast as shard takes them */

static void spin(void)
{
    uint64_t end = bench_now_ns() + work_ns;
    while (bench_now_ns() < end)
        ;
}

/* arg: the pair's index i: keys a[i % POOL] and b[i * 7 % POOL] (odd: every b once a POOL). */
static size_t ia(void *arg)
{
    return (uintptr_t)arg % POOL;
}
static size_t ib(void *arg)
{
    return (uintptr_t)arg * 7 % POOL;
}
static void job_a(shard_worker *w, void *arg)
{
    (void)w;
    spin();
    state_a[ia(arg)]++;
}
static void job_b(shard_worker *w, void *arg)
{
    (void)w;
    spin();
    state_b[ib(arg)]++;
}
static void job_pair(shard_worker *w, void *arg)
{
    (void)w;
    spin();
    state_a[ia(arg)]++;
    spin();
    state_b[ib(arg)]++;
}
static void step_pair(shard_worker *w, void *arg, size_t i)
{
    (void)w;
    spin();
    if (i == 0)
        state_a[ia(arg)]++;
    else
        state_b[ib(arg)]++;
}
static void job_mutex(shard_worker *w, void *arg)
{
    (void)w;
    pthread_mutex_lock(&pair_lock);
    spin();
    state_a[ia(arg)]++;
    spin();
    state_b[ib(arg)]++;
    pthread_mutex_unlock(&pair_lock);
}

/* The probe: latencies in ns, submit to start. */
#define PROBES_MAX 200000
static uint64_t probe_lat[PROBES_MAX];
static atomic_long probes_done;
static atomic_int probe_stop;
static void probe_job(shard_worker *w, void *arg)
{
    (void)w;
    uint64_t lat = bench_now_ns() - (uint64_t)(uintptr_t)arg;
    long i = atomic_fetch_add_explicit(&probes_done, 1, memory_order_relaxed);
    if (i < PROBES_MAX)
        probe_lat[i] = lat;
}
static void *probe_main(void *arg)
{
    (void)arg;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (int i = 0; !atomic_load_explicit(&probe_stop, memory_order_relaxed); i++) {
        next.tv_nsec += 50000;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        shard_submit(d, probe_key[i & 1], probe_len[i & 1], probe_job, (void *)(uintptr_t)bench_now_ns());
    }
    return NULL;
}

/* Paces the producer at rate operations a second: before operation i, sleeps until the burst of 100 us
 * it falls in is due (rate / 10,000 operations a burst, at least one). */
static void pace(long i, const struct timespec *start)
{
    long per_burst = rate / 10000 > 0 ? rate / 10000 : 1;
    if (i % per_burst)
        return;
    uint64_t due = (uint64_t)(i / per_burst) * 1000000000u / (uint64_t)(rate / per_burst);
    struct timespec at = { start->tv_sec + (time_t)(due / 1000000000u), start->tv_nsec + (long)(due % 1000000000u) };
    if (at.tv_nsec >= 1000000000L) {
        at.tv_nsec -= 1000000000L;
        at.tv_sec++;
    }
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

enum mode { SINGLE, TWO_JOBS, MULTI, EACH, MUTEX, MULTI_WARM, MULTI_HOT, MODES };
static const char *mode_name[MODES] = { "single", "two_jobs", "multi", "each", "mutex", "multi_warm", "multi_hot" };

static uint64_t cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
}

/* The CPU thread t has used so far, ns (the probe's, read from another thread, and the submitter's own). */
static uint64_t thread_cpu_ns(pthread_t t)
{
    clockid_t c;
    struct timespec ts;
    if (pthread_getcpuclockid(t, &c) != 0 || clock_gettime(c, &ts) != 0)
        abort();
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct result {
    double ns, cpu, submitter_cpu, probe_cpu, p50, p99;
};

static struct result run(enum mode m, long ops)
{
    atomic_store(&probes_done, 0);
    atomic_store(&probe_stop, 0);
    pthread_t probe;
    pthread_create(&probe, NULL, probe_main, NULL);
    uint64_t c0 = cpu_ns(), t0 = bench_now_ns(), p0 = thread_cpu_ns(probe), s0 = thread_cpu_ns(pthread_self());
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (long i = 0; i < ops; i++) {
        if (rate)
            pace(i, &start);
        uintptr_t p = m == MULTI_HOT ? 0 : m == MULTI_WARM ? (uintptr_t)(i % WARM) : (uintptr_t)i;
        void *arg = (void *)p;
        size_t a = ia(arg), b = ib(arg);
        struct shard_key keys[2] = { { key_a[a], len_a[a] }, { key_b[b], len_b[b] } };
        int err = 0;
        switch (m) {
        case SINGLE: err = shard_submit(d, key_a[a], len_a[a], job_a, arg); break;
        case TWO_JOBS:
            err = shard_submit(d, key_a[a], len_a[a], job_a, arg) || shard_submit(d, key_b[b], len_b[b], job_b, arg);
            break;
        case MULTI:
        case MULTI_WARM:
        case MULTI_HOT: err = shard_submit_multi(d, keys, 2, job_pair, arg); break;
        case EACH: err = shard_submit_multi_each(d, keys, 2, step_pair, NULL, arg); break;
        case MUTEX: err = shard_submit(d, key_a[a], len_a[a], job_mutex, arg); break;
        default: break;
        }
        if (err)
            abort();
    }
    shard_drain(d);
    uint64_t t1 = bench_now_ns(), c1 = cpu_ns(), p1 = thread_cpu_ns(probe), s1 = thread_cpu_ns(pthread_self());
    atomic_store(&probe_stop, 1);
    pthread_join(probe, NULL);
    shard_drain(d);
    long n = atomic_load(&probes_done);
    if (n > PROBES_MAX)
        n = PROBES_MAX;
    qsort(probe_lat, (size_t)n, sizeof *probe_lat, cmp_u64);
    struct result r = { (double)(t1 - t0) / (double)ops, (double)(c1 - c0 - (p1 - p0)) / (double)ops,
                        (double)(s1 - s0) / (double)ops, (double)(p1 - p0) / (double)ops, n ? (double)probe_lat[n / 2] / 1000 : 0, n ? (double)probe_lat[n * 99 / 100] / 1000 : 0 };
    return r;
}

/* A key with prefix that ring r gives worker want. */
static size_t key_on(const shard_ring *r, const char *want, const char *prefix, char buf[24])
{
    for (int i = 0;; i++) {
        size_t n = (size_t)snprintf(buf, 24, "%s%d", prefix, i);
        if (strcmp(shard_ring_owner(r, buf, n), want) == 0)
            return n;
    }
}

static const char *only; /* --only=MODE: that mode alone (a profile of it) */
static bool accept_arg(const char *a)
{
    if (strncmp(a, "--only=", 7) == 0) {
        only = a + 7;
        for (int m = 0; m < MODES; m++)
            if (strcmp(only, mode_name[m]) == 0)
                return true;
        fprintf(stderr, "bench_multi: no mode '%s' (single two_jobs multi each mutex multi_warm multi_hot)\n", only);
        exit(2);
    }
    if (strncmp(a, "--work-ns=", 10) == 0) {
        char *end;
        work_ns = strtoull(a + 10, &end, 10);
        if (end == a + 10 || *end || work_ns > 1000000) {
            fprintf(stderr, "bench_multi: --work-ns= is 0 to 1000000\n");
            exit(2);
        }
        return true;
    }
    if (strncmp(a, "--rate=", 7) == 0) {
        char *end;
        rate = strtol(a + 7, &end, 10);
        if (*end || rate < 1 || rate > 10000000) {
            fprintf(stderr, "bench_multi: --rate= is 1 to 10000000 operations a second\n");
            exit(2);
        }
        return true;
    }
    return false;
}

int main(int argc, char **argv)
{
    bool quick = bench_args(argc, argv, accept_arg, " [--work-ns=N (200)] [--only=MODE] [--rate=OPS_PER_S]");
    if (rate && only && strcmp(only, "multi_hot") == 0) {
        fprintf(stderr, "bench_multi: --rate= leaves multi_hot out (it sustains no fixed rate)\n");
        return 2;
    }
    long ops = quick ? 20000 : rate ? 100000 : 200000;
    int rounds = quick ? 1 : 3;
    struct shard_config cfg = { .workers = 2 };
    if (shard_dispatcher_create(&d, &cfg))
        abort();
    shard_ring *r;
    if (shard_dispatcher_ring(d, &r))
        abort();
    for (int i = 0; i < POOL; i++) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "a%d-", i);
        len_a[i] = key_on(r, "w0", prefix, key_a[i]);
        snprintf(prefix, sizeof prefix, "b%d-", i);
        len_b[i] = key_on(r, "w1", prefix, key_b[i]);
    }
    probe_len[0] = key_on(r, "w0", "p", probe_key[0]);
    probe_len[1] = key_on(r, "w1", "p", probe_key[1]);
    shard_ring_destroy(r);
    printf("# 2 workers, %llu ns of work a key, %ld ops a mode, %d rounds", (unsigned long long)work_ns, ops, rounds);
    if (rate)
        printf(", %ld ops offered a second", rate);
    printf("\n");
    for (int round = 0; round < rounds; round++) {
        struct result res[MODES];
        for (int m = 0; m < MODES; m++)
            res[m] = (!only || m == SINGLE || strcmp(only, mode_name[m]) == 0) && !(rate && m == MULTI_HOT)
                         ? run((enum mode)m, ops)
                         : (struct result){ 0 };
        for (int m = 0; m < MODES; m++) {
            if (res[m].ns == 0)
                continue;
            printf("bench=%s mode=%s", rate ? "multi_paced" : "multi", mode_name[m]);
            if (rate)
                printf(" rate=%ld", rate);
            printf(" ops=%ld ns_per_op=%.0f cpu_ns_per_op=%.0f x_single_cpu=%.2f submitter_cpu_ns_per_op=%.0f "
                   "probe_cpu_ns_per_op=%.0f probe_p50_us=%.1f probe_p99_us=%.1f\n",
                   ops, res[m].ns, res[m].cpu, res[m].cpu / res[SINGLE].cpu, res[m].submitter_cpu, res[m].probe_cpu,
                   res[m].p50, res[m].p99);
        }
    }
    shard_dispatcher_destroy(d);
    return 0;
}
