/* bench_peers: keyed dispatch through shard against what a performance-minded C user writes instead,
 * in one process and one run. Every system routes each job by its key to one of N workers and runs it
 * there; the peers keep one queue per worker and route by XXH3_64bits(key) % N, shard by its ring. Each
 * system is a file of bench/peers/, whose top comment says how it queues, wakes and bursts:
 *   ck_ring  ck.c: Concurrency Kit's ck_ring per worker, _spsc or _mpsc enqueue, one entry a dequeue
 *   rte_ring rte.c: DPDK's rte_ring per worker (libdpdk-dev; no EAL), SP or MP enqueue, SC burst dequeue
 *   wfcq     wfcq.c: liburcu's wfcqueue per worker (inline), nodes from per-producer pools; the
 *            consumer splices the whole queue out at once
 *   mutex    mutex.c: a mutex and two condition variables per worker; the consumer takes everything
 *   shard    shard.c: shard_submit (shard_submit_many in the burst cases) to a dispatcher of N
 *            workers, queue_capacity CAP
 * The peers idle and wait for room as shard does, spinning then parking on a futex behind a Dekker
 * pair (bench/peers/peers.h says how), so that no peer is a strawman.
 * Cases (P producers -> N workers; every producer submits the same number of jobs):
 *   1to1_empty, 1to1_real, 2to2_empty, 2to2_real, 1to1_burst, 2to2_burst
 *   empty  the job counts itself and adds its payload to a checksum
 *   real   about 150-200 ns on this machine: the worker finds its key in its own open-addressing table
 *          (2^18 lines of 64 bytes, up to 100k keys, a key inserted on its first job), checks that the
 *          job carries the key's next sequence number (so ordering is checked for every system), bumps
 *          it and the key's counter, and runs WORK_ROUNDS of a multiply-xorshift chain over the key's
 *          state, which stands for the application's own work
 *   burst  empty jobs, the same stream, each producer handing them over BURST (32) per call as each
 *          system's burst user would: shard fills 32 struct shard_job and calls shard_submit_many once;
 *          wfcq splices the 32 per destination worker into its queue at once; mutex takes each
 *          destination's lock once; ck_ring, which has no burst enqueue, loops over the 32; rte_ring
 *          hands each destination's group over with one rte_ring_enqueue_burst. The peers fence and
 *          check for a wake-up once a burst. The consumers are those of the other cases. A stream not
 *          a multiple of 32 ends in a shorter burst. The project's goal puts shard_submit_many at
 *          >= 0.9x DPDK's rte_ring burst.
 *   Plus impl=inline on 1to1_real (inline.c): the producer's loop calling the job itself, no thread, no
 *   queue (the physical limit).
 * Producers draw keys uniformly from 100k (with two, producer p owns the keys k with k % 2 == p, so
 * each key has one sequence); a job is one word, the key's index and its sequence number, passed as
 * shard's arg and as the peers' queue entry. Each run is checked: every job counted exactly once (count
 * and checksum), and for real, no sequence error, every key on one worker only, with the final sequence
 * number its producer gave it. A mismatch prints what failed and exits 1.
 *
 * Pinning: producer i runs on the i-th CPU this process may use and worker i on the (P + i)-th, modulo
 * their number (1to1: producer and worker on two CPUs; 2to2: a producer and a worker on each), the
 * same for every system (shard's workers pin themselves in on_worker_start). --no-pin leaves all
 * placement to the scheduler. --case=NAME and --impl=NAME run one case or one system only (for
 * profiling).
 *
 * Output: one line per (case, system), the median of 3 repetitions (1 with --quick), the repetitions
 * interleaved across the systems:
 *   bench=peers case=C impl=I jobs=N mjobs_per_s=X ns_per_job=T ratio_shard_vs_best=R
 * R, on shard's line ("-" on the others), is shard's rate over the best peer's in that case. Built
 * without Concurrency Kit (libck-dev) or DPDK (libdpdk-dev), the ck_ring or rte_ring lines are missing
 * and a note line says so (./build.sh bench-peers installs both). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peers/peers.h"

char          peers_keys[KEYS][16];
size_t        peers_key_len[KEYS];
struct wstate peers_ws[MAXT];
struct pstate peers_ps[MAXT];

/* ---- placement ---- */

static int cpus[CPU_SETSIZE], ncpus;

void peers_pin_self(int slot)
{
    if (!run.pin || ncpus == 0)
        return;
    (void)bench_pin_cpu(cpus[slot % ncpus]); /* unpinned, it runs where the scheduler puts it */
}

struct thread_arg {
    void *(*fn)(void *);
    void *arg;
    int   slot;
};

static void *thread_main(void *a)
{
    struct thread_arg t = *(struct thread_arg *)a;
    free(a);
    peers_pin_self(t.slot);
    return t.fn(t.arg);
}

pthread_t peers_spawn(void *(*fn)(void *), void *arg, int slot)
{
    struct thread_arg *t = malloc(sizeof *t);
    pthread_t th;
    if (!t)
        abort();
    *t = (struct thread_arg){ fn, arg, slot };
    if (pthread_create(&th, NULL, thread_main, t) != 0)
        abort();
    return th;
}

/* ---- one run ---- */

enum impl { CK, RTE, WFCQ, MUTEX, SHARD, INLINE, NIMPL };

/* The systems in the order of the output; NULL: built without its library. */
static const struct peer_ops *const impls[NIMPL] = {
#ifdef SHARD_BENCH_HAVE_CK
    [CK] = &peer_ck,
#endif
#ifdef SHARD_BENCH_HAVE_DPDK
    [RTE] = &peer_rte,
#endif
    [WFCQ] = &peer_wfcq,
    [MUTEX] = &peer_mutex,
    [SHARD] = &peer_shard,
    [INLINE] = &peer_inline,
};

static void fail(const char *impl, const char *what, long a, long b)
{
    fprintf(stderr, "bench_peers: %s, P=%d N=%d %s: %s (%ld, expected %ld)\n", impl, run.producers, run.workers,
            run.kind == REAL ? "real" : run.burst > 1 ? "burst" : "empty", what, a, b);
    exit(1);
}

static void reset(void)
{
    for (int i = 0; i < MAXT; i++) {
        peers_ws[i].count = peers_ws[i].sum = peers_ws[i].errors = 0;
        if (run.kind == REAL)
            memset(peers_ws[i].table, 0, sizeof(struct entry) << TABLE_BITS);
        peers_ps[i].rng = 0x5eed0000u + (uint64_t)i; /* every system gets the same job streams */
        peers_ps[i].sum = peers_ps[i].made = 0;
        memset(peers_ps[i].sent, 0, sizeof peers_ps[i].sent);
        memset(peers_ps[i].next_seq, 0, KEYS * sizeof *peers_ps[i].next_seq);
        peers_ps[i].id = i;
    }
}

static void verify(enum impl impl)
{
    const char *name = impls[impl]->name;
    int nw = impl == INLINE ? 1 : run.workers;
    uint64_t count = 0, sum = 0, want_sum = 0, errors = 0;
    for (int i = 0; i < nw; i++) {
        count += peers_ws[i].count;
        sum += peers_ws[i].sum;
        errors += peers_ws[i].errors;
    }
    for (int i = 0; i < run.producers; i++)
        want_sum += peers_ps[i].sum;
    long want = run.per_producer * run.producers;
    if ((long)count != want)
        fail(name, "jobs run", (long)count, want);
    if (sum != want_sum)
        fail(name, "checksum of the jobs run differs from the jobs submitted", 0, 0);
    if (run.kind == EMPTY)
        return;
    if (errors)
        fail(name, "jobs out of order", (long)errors, 0);
    static int8_t owner[KEYS];
    memset(owner, -1, sizeof owner);
    long found = 0, used = 0;
    for (int i = 0; i < nw; i++)
        for (size_t j = 0; j < (size_t)1 << TABLE_BITS; j++) {
            const struct entry *e = &peers_ws[i].table[j];
            if (!e->hash)
                continue;
            if (owner[e->idx] != -1)
                fail(name, "a key ran on two workers", e->idx, -1);
            owner[e->idx] = (int8_t)i;
            uint32_t last = peers_ps[e->idx % (uint32_t)run.producers].next_seq[e->idx];
            if (e->next_seq != last || e->count != last)
                fail(name, "a key's final sequence number", e->next_seq, last);
            found++;
        }
    for (uint32_t k = 0; k < KEYS; k++)
        used += peers_ps[k % (uint32_t)run.producers].next_seq[k] != 0;
    if (found != used)
        fail(name, "keys seen by the workers", found, used);
}

static double run_once(enum impl impl)
{
    const struct peer_ops *peer = impls[impl];
    pthread_t prod[MAXT], cons[MAXT];
    reset();
    int consumers = peer->start(&run, cons);
    void *(*producer)(void *) = run.burst > 1 ? peer->burst_producer : peer->producer;

    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < run.producers; i++)
        prod[i] = peers_spawn(producer, &peers_ps[i], i);
    for (int i = 0; i < run.producers; i++)
        pthread_join(prod[i], NULL);
    peer->close();
    for (int i = 0; i < consumers; i++)
        pthread_join(cons[i], NULL);
    double t = (double)(bench_now_ns() - t0) / 1e9;

    peer->free();
    verify(impl);
    return t;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const struct {
    const char *name;
    int         producers, workers;
    enum kind   kind;
    long        jobs_full, jobs_quick; /* per producer */
    int         burst;
} cases[] = {
    { "1to1_empty", 1, 1, EMPTY, 4000000, 200000, 1 },
    { "1to1_real", 1, 1, REAL, 2000000, 100000, 1 },
    { "2to2_empty", 2, 2, EMPTY, 2000000, 100000, 1 },
    { "2to2_real", 2, 2, REAL, 1000000, 50000, 1 },
    { "1to1_burst", 1, 1, EMPTY, 4000000, 200000, BURST },
    { "2to2_burst", 2, 2, EMPTY, 2000000, 100000, BURST },
};
#define NCASES (sizeof cases / sizeof cases[0])

static const char *only_impl, *only_case;

/* The options beside --quick (bench_args). */
static bool accept_option(const char *arg)
{
    if (strcmp(arg, "--no-pin") == 0)
        run.pin = false;
    else if (strncmp(arg, "--impl=", 7) == 0)
        only_impl = arg + 7;
    else if (strncmp(arg, "--case=", 7) == 0)
        only_case = arg + 7;
    else
        return false;
    return true;
}

/* An --impl or --case that names nothing would run nothing and say nothing: an error instead. */
static void check_names(void)
{
    bool impl_ok = !only_impl, case_ok = !only_case;
    for (int i = 0; i < NIMPL && !impl_ok; i++)
        impl_ok = impls[i] && strcmp(only_impl, impls[i]->name) == 0;
    for (size_t c = 0; c < NCASES && !case_ok; c++)
        case_ok = strcmp(only_case, cases[c].name) == 0;
    if (impl_ok && case_ok)
        return;
    if (!impl_ok) {
        fprintf(stderr, "bench_peers: no system '%s' in this build; the systems:", only_impl);
        for (int i = 0; i < NIMPL; i++)
            if (impls[i])
                fprintf(stderr, " %s", impls[i]->name);
        fputs(" (ck_ring needs libck-dev, rte_ring libdpdk-dev)\n", stderr);
    }
    if (!case_ok) {
        fprintf(stderr, "bench_peers: no case '%s'; the cases:", only_case);
        for (size_t c = 0; c < NCASES; c++)
            fprintf(stderr, " %s", cases[c].name);
        fputc('\n', stderr);
    }
    exit(2);
}

int main(int argc, char **argv)
{
    run.pin = true;
    bool quick = bench_args(argc, argv, accept_option, " [--no-pin] [--impl=SYSTEM] [--case=CASE]");
    check_names();
    int reps = quick ? 1 : 3;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &allowed))
                cpus[ncpus++] = c;
    for (int k = 0; k < KEYS; k++)
        peers_key_len[k] = (size_t)snprintf(peers_keys[k], sizeof peers_keys[k], "user:%d", k);
    for (int i = 0; i < MAXT; i++) {
        peers_ws[i].table = aligned_alloc(64, sizeof(struct entry) << TABLE_BITS);
        peers_ps[i].next_seq = calloc(KEYS, sizeof *peers_ps[i].next_seq);
        if (!peers_ws[i].table || !peers_ps[i].next_seq)
            abort();
    }
    if (!impls[CK])
        puts("bench=peers note=no_ck_ring reason=built_without_libck-dev");
    if (!impls[RTE])
        puts("bench=peers note=no_rte_ring reason=built_without_libdpdk-dev");
    for (size_t c = 0; c < NCASES; c++) {
        if (only_case && strcmp(only_case, cases[c].name) != 0)
            continue;
        run.kind = cases[c].kind;
        run.producers = cases[c].producers;
        run.workers = cases[c].workers;
        run.per_producer = quick ? cases[c].jobs_quick : cases[c].jobs_full;
        run.burst = cases[c].burst;
        bool with[NIMPL];
        for (int i = 0; i < NIMPL; i++)
            with[i] = impls[i] && (!only_impl || strcmp(only_impl, impls[i]->name) == 0);
        with[INLINE] &= run.kind == REAL && run.producers == 1;
        double t[NIMPL][3];
        for (int r = 0; r < reps; r++)
            for (int i = 0; i < NIMPL; i++)
                if (with[i])
                    t[i][r] = run_once((enum impl)i);
        long jobs = run.per_producer * run.producers;
        double rate[NIMPL] = { 0 }, best_peer = 0;
        for (int i = 0; i < NIMPL; i++) {
            if (!with[i])
                continue;
            qsort(t[i], (size_t)reps, sizeof t[i][0], cmp_double);
            rate[i] = (double)jobs / t[i][reps / 2];
            if (i != SHARD && i != INLINE && rate[i] > best_peer)
                best_peer = rate[i];
        }
        for (int i = 0; i < NIMPL; i++) {
            if (!with[i])
                continue;
            printf("bench=peers case=%s impl=%s jobs=%ld mjobs_per_s=%.2f ns_per_job=%.1f ratio_shard_vs_best=",
                   cases[c].name, impls[i]->name, jobs, rate[i] / 1e6, 1e9 / rate[i]);
            if (i == SHARD && best_peer > 0)
                printf("%.2f\n", rate[i] / best_peer);
            else
                puts("-");
            fflush(stdout);
        }
    }
    for (int i = 0; i < MAXT; i++) {
        free(peers_ws[i].table);
        free(peers_ps[i].next_seq);
    }
    return 0;
}
