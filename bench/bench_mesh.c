/* bench_mesh: the shard-per-core pattern, workers sending each other requests and answers, through
 * shard against a hand-rolled mesh of SPSC rings (Seastar's smp queues), in one process and one run.
 * N workers (1, 2, then 4, 8, ... while the process has that many CPUs), worker i pinned to the i-th
 * CPU it may use (--no-pin: the scheduler places them). Each worker keeps D requests in flight (D =
 * 16, 64, 256) to keys drawn uniformly from 16,384, so with N workers (N-1)/N of them go to another
 * worker; the key's owner runs W of work (none, or about 1 us of a multiply-xorshift chain,
 * calibrated once at start) and answers the origin, whose taking of the answer sends the slot's next
 * request (bench/mesh/mesh.h has the round trip and its checks). The systems, a file each:
 *   shard      mesh/shard.c: a request is a job of its key, shard_submit from the origin's job; the
 *              answer a job of the origin's own key (one the ring gives it); pin_per_core; measured
 *              with poll_us 0 (the default: a short spin, then the worker parks) and with --poll-us
 *              (default 1000: a worker polls that long before it parks, i.e. while traffic flows)
 *   spsc_mesh  mesh/spsc.c: N x N SPSC rings, self -> self included, busy polling; the consumer
 *              publishes a ring's head once per drained batch, the producer each destination's tail
 *              once per pass; owner XXH3(key) % N, computed on every send
 *   ck_mesh    mesh/ck.c: the same mesh over Concurrency Kit's ck_ring (ck_ring_enqueue_spsc and
 *              _dequeue_spsc, one publication each); only when built with libck-dev
 * Each measurement runs the workers for a warm-up, then samples, over a window (0.5 s; --quick 0.03
 * s; --seconds=S), the answers taken, the wall clock, the process's CPU time
 * (CLOCK_PROCESS_CPUTIME_ID: every thread, shard's own included) and its context switches
 * (getrusage), then stops the origins and lets every request in flight come back. Every run is
 * checked: requests sent = requests run = answers taken, every request ran on its key's owner, every
 * (origin, key)'s requests ran once each and in order (stamps), every answer was the one its slot
 * waited for; a failure prints what and exits 1.
 *
 * Output: the calibration, then one line per (work, depth, workers, system), the median of 3
 * repetitions (1 with --quick) interleaved across the systems:
 *   bench=mesh impl=I poll_us=P workers=N depth=D work_ns=W rt=R rt_per_s=X cpu_ns_per_rt=C
 *      csw_per_krt=S scaling=F
 * (poll_us=busy for the meshes; rt: round trips in the window; csw_per_krt: context switches per
 * 1,000 round trips; scaling: rt_per_s over the same system's with 1 worker), and per shard line a
 * ratio line against each mesh:
 *   bench=mesh_ratio impl=shard poll_us=P vs=M workers=N depth=D work_ns=W rate_ratio=A
 *      scaling_ratio=B cpu_ratio=C
 * A: shard's rt_per_s over M's; B: shard's scaling over M's ("-" at 1 worker); C: shard's
 * cpu_ns_per_rt over M's (below 1: shard spends less CPU a round trip). The meshes always spin, so
 * their CPU a round trip is N cores over their rate. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "mesh/mesh.h"

char          mesh_keys[MESH_KEYS][16];
size_t        mesh_key_len[MESH_KEYS];
_Atomic bool  mesh_stop;
_Atomic int   mesh_finished;
uint8_t       mesh_owner[MESH_KEYS];
struct wstate mesh_ws[MESH_MAXW];

static int  cpus[CPU_SETSIZE], ncpus;
static bool pin = true;

void mesh_pin_self(int i)
{
    if (!pin || ncpus == 0)
        return;
    (void)bench_pin_cpu(cpus[i % ncpus]); /* unpinned, it runs where the scheduler puts it */
}

pthread_t mesh_spawn(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    if (pthread_create(&t, NULL, fn, arg) != 0)
        abort();
    return t;
}

/* ---- the systems ---- */

struct system {
    const struct mesh_ops *ops;
    bool                   shard;
    uint32_t               poll_us;
};
enum { SHARD_PARK, SHARD_POLL, SPSC, CK, NSYS };
static struct system systems[NSYS] = {
    [SHARD_PARK] = { &mesh_shard, true, 0 },
    [SHARD_POLL] = { &mesh_shard, true, 1000 },
    [SPSC] = { &mesh_spsc, false, 0 },
#ifdef SHARD_BENCH_HAVE_CK
    [CK] = { &mesh_ck, false, 0 },
#endif
};

/* ---- one measurement ---- */

struct result {
    double rate, cpu_ns, csw; /* round trips a second; CPU ns and context switches per round trip */
    uint64_t rt;
};

static double seconds = 0.5, warm = 0.1;
static bool   seconds_given;

static void sleep_s(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static uint64_t process_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t context_switches(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw;
}

static uint64_t answers(int n)
{
    uint64_t a = 0;
    for (int i = 0; i < n; i++)
        a += atomic_load_explicit(&mesh_ws[i].answered_pub, memory_order_relaxed);
    return a;
}

static void reset(int n, int depth)
{
    for (int i = 0; i < n; i++) {
        struct wstate *s = &mesh_ws[i];
        s->id = (uint32_t)i;
        s->finished = false;
        s->rng = 0x6d657368u + (uint64_t)i; /* every system gets the same streams */
        s->issued = s->answered = s->served = 0;
        s->bad_owner = s->bad_order = s->bad_answer = s->sink = 0;
        memset(s->sent, 0, MESH_KEYS * sizeof *s->sent);
        memset(s->recv, 0, (size_t)n * MESH_KEYS * sizeof *s->recv);
        memset(s->slot_seq, 0, MESH_MAXD * sizeof *s->slot_seq);
        for (int slot = 0; slot < depth; slot++)
            s->msgs[slot] = (struct msg){ .origin = (uint32_t)i, .slot = (uint32_t)slot };
        atomic_store_explicit(&s->answered_pub, 0, memory_order_relaxed);
    }
    atomic_store(&mesh_stop, false);
    atomic_store(&mesh_finished, 0);
}

static void fail(const struct system *sys, const struct mesh_run *r, const char *what, unsigned long long a,
                 unsigned long long b)
{
    fprintf(stderr, "bench_mesh: %s poll_us=%u workers=%d depth=%d: %s (%llu, expected %llu)\n", sys->ops->name,
            sys->poll_us, r->workers, r->depth, what, a, b);
    exit(1);
}

/* After the run's threads are gone. */
static void verify(const struct system *sys, const struct mesh_run *r)
{
    uint64_t issued = 0, answered = 0, served = 0, bad_owner = 0, bad_order = 0, bad_answer = 0;
    for (int i = 0; i < r->workers; i++) {
        const struct wstate *s = &mesh_ws[i];
        issued += s->issued;
        answered += s->answered;
        served += s->served;
        bad_owner += s->bad_owner;
        bad_order += s->bad_order;
        bad_answer += s->bad_answer;
    }
    if (answered != issued)
        fail(sys, r, "answers taken != requests sent", answered, issued);
    if (served != issued)
        fail(sys, r, "requests run != requests sent", served, issued);
    if (bad_owner)
        fail(sys, r, "requests run on a worker not owning their key", bad_owner, 0);
    if (bad_order)
        fail(sys, r, "requests of an (origin, key) out of order or run twice", bad_order, 0);
    if (bad_answer)
        fail(sys, r, "answers not the one their slot waited for", bad_answer, 0);
    for (int o = 0; o < r->workers; o++)
        for (uint32_t k = 0; k < MESH_KEYS; k++) {
            uint32_t got = mesh_ws[mesh_owner[k]].recv[(size_t)o * MESH_KEYS + k];
            if (got != mesh_ws[o].sent[k])
                fail(sys, r, "an (origin, key)'s last request run", got, mesh_ws[o].sent[k]);
        }
}

static struct result run_once(const struct system *sys, int workers, int depth, uint32_t rounds)
{
    struct mesh_run r = { .workers = workers, .depth = depth, .rounds = rounds, .poll_us = sys->poll_us, .pin = pin };
    reset(workers, depth);
    sys->ops->start(&r);
    sleep_s(warm);
    uint64_t a0 = answers(workers), c0 = process_cpu_ns(), s0 = context_switches(), t0 = bench_now_ns();
    sleep_s(seconds);
    uint64_t a1 = answers(workers), c1 = process_cpu_ns(), s1 = context_switches(), t1 = bench_now_ns();
    /* A window without a round trip (a loaded machine's stall) has no rate: it runs on until one. */
    while (a1 == a0 && t1 - t0 < 10000000000u) {
        sleep_s(0.001);
        a1 = answers(workers), c1 = process_cpu_ns(), s1 = context_switches(), t1 = bench_now_ns();
    }
    atomic_store_explicit(&mesh_stop, true, memory_order_relaxed);
    sys->ops->finish();
    verify(sys, &r);
    uint64_t rt = a1 - a0;
    if (rt == 0)
        fail(sys, &r, "no round trip in the window", 0, 1);
    return (struct result){ .rate = (double)rt * 1e9 / (double)(t1 - t0), .cpu_ns = (double)(c1 - c0) / (double)rt,
                            .csw = (double)(s1 - s0) / (double)rt, .rt = rt };
}

/* ---- calibration: rounds of mesh_work for work_ns ---- */

static volatile uint64_t calibrate_sink; /* the chain's result goes somewhere: not optimised away */

static uint32_t calibrate(double work_ns)
{
    const uint32_t n = 1000000;
    double best = 1e18;
    for (int t = 0; t < 7; t++) {
        uint64_t t0 = bench_now_ns();
        calibrate_sink += mesh_work(t0, n);
        double ns = (double)(bench_now_ns() - t0) / n;
        if (ns < best)
            best = ns;
    }
    uint32_t rounds = (uint32_t)(work_ns / best + 0.5);
    printf("bench=mesh_calibrate work_ns=%.0f rounds=%u ns_per_round=%.3f\n", work_ns, rounds, best);
    return rounds;
}

/* ---- main ---- */

static const char *only_impl;
static int only_depth, only_workers, only_work = -1; /* 0 (-1 for the work): every one */

static bool int_option(const char *arg, const char *name, long lo, long hi, int *out)
{
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0)
        return false;
    char *end;
    long v = strtol(arg + n, &end, 10);
    if (end == arg + n || *end || v < lo || v > hi) {
        fprintf(stderr, "bench_mesh: %s takes a number from %ld to %ld\n", name, lo, hi);
        exit(2);
    }
    *out = (int)v;
    return true;
}

static bool accept_option(const char *arg)
{
    char *end;
    if (strcmp(arg, "--no-pin") == 0) {
        pin = false;
    } else if (strncmp(arg, "--impl=", 7) == 0) {
        only_impl = arg + 7;
    } else if (strncmp(arg, "--poll-us=", 10) == 0) {
        long v = strtol(arg + 10, &end, 10);
        if (end == arg + 10 || *end || v < 1 || v > 1000000) {
            /* 0 is the other system, which every run measures beside this one. */
            fprintf(stderr, "bench_mesh: --poll-us= is 1 to 1000000 (poll_us 0 is measured in every run)\n");
            exit(2);
        }
        systems[SHARD_POLL].poll_us = (uint32_t)v;
    } else if (int_option(arg, "--depth=", 16, 256, &only_depth)) {
        if (only_depth != 16 && only_depth != 64 && only_depth != 256) {
            fprintf(stderr, "bench_mesh: --depth= is 16, 64 or 256\n");
            exit(2);
        }
    } else if (int_option(arg, "--work-ns=", 0, 1000, &only_work)) {
        if (only_work != 0 && only_work != 1000) {
            fprintf(stderr, "bench_mesh: --work-ns= is 0 or 1000\n");
            exit(2);
        }
    } else if (int_option(arg, "--workers=", 1, MESH_MAXW, &only_workers)) {
        /* checked against the counts this machine runs in main */
    } else if (strncmp(arg, "--seconds=", 10) == 0) {
        double v = strtod(arg + 10, &end);
        if (end == arg + 10 || *end || !(v >= 0.001 && v <= 60))
            return false;
        seconds = v;
        seconds_given = true;
    } else {
        return false;
    }
    return true;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static void print_line(int s, int workers, int depth, double work_ns, const struct result *m, double rate1)
{
    const struct system *sys = &systems[s];
    char poll[16] = "busy";
    if (sys->shard)
        snprintf(poll, sizeof poll, "%u", sys->poll_us);
    printf("bench=mesh impl=%s poll_us=%s workers=%d depth=%d work_ns=%.0f rt=%llu rt_per_s=%.0f cpu_ns_per_rt=%.1f "
           "csw_per_krt=%.2f scaling=%.2f\n",
           sys->ops->name, poll, workers, depth, work_ns, (unsigned long long)m->rt, m->rate, m->cpu_ns, m->csw * 1000,
           m->rate / rate1);
}

int main(int argc, char **argv)
{
    bool quick = bench_args(argc, argv, accept_option,
                            " [--no-pin] [--impl=shard|spsc_mesh|ck_mesh] [--poll-us=US] [--seconds=S]\n"
                            "       [--workers=N] [--depth=16|64|256] [--work-ns=0|1000] (one configuration)");
    bool with[NSYS];
    bool named = !only_impl;
    for (int s = 0; s < NSYS; s++) {
        with[s] = systems[s].ops && (!only_impl || strcmp(only_impl, systems[s].ops->name) == 0);
        named |= with[s];
    }
    if (!named) {
        fprintf(stderr, "bench_mesh: no system '%s' in this build; the systems: shard spsc_mesh%s\n", only_impl,
                systems[CK].ops ? " ck_mesh" : " (ck_mesh needs libck-dev)");
        exit(2);
    }
    int reps = quick ? 1 : 3;
    if (quick) {
        if (!seconds_given)
            seconds = 0.03;
        warm = 0.01;
    }
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &allowed))
                cpus[ncpus++] = c;
    int counts[8], ncounts = 0;
    for (int n = 1; n <= MESH_MAXW && (n <= 2 || n <= ncpus); n *= 2)
        counts[ncounts++] = n;
    for (int k = 0; k < MESH_KEYS; k++)
        mesh_key_len[k] = (size_t)snprintf(mesh_keys[k], sizeof mesh_keys[k], "key:%d", k);
    bool counted = !only_workers;
    for (int ci = 0; ci < ncounts; ci++)
        counted |= counts[ci] == only_workers;
    if (!counted) {
        fprintf(stderr, "bench_mesh: --workers=%d: this machine runs 1, 2 and powers of 2 up to its %d CPUs\n",
                only_workers, ncpus);
        exit(2);
    }
    int maxw = counts[ncounts - 1];
    for (int i = 0; i < maxw; i++) {
        struct wstate *s = &mesh_ws[i];
        s->sent = calloc(MESH_KEYS, sizeof *s->sent);
        s->recv = calloc((size_t)maxw * MESH_KEYS, sizeof *s->recv);
        s->slot_seq = calloc(MESH_MAXD, sizeof *s->slot_seq);
        s->msgs = aligned_alloc(64, MESH_MAXD * sizeof *s->msgs);
        if (!s->sent || !s->recv || !s->slot_seq || !s->msgs)
            abort();
    }
    if (!systems[CK].ops)
        puts("bench=mesh note=no_ck_mesh reason=built_without_libck-dev");
    const double works[] = { 0, 1000 };
    const int depths[] = { 16, 64, 256 };
    uint32_t rounds[2] = { 0, calibrate(works[1]) };
    for (int wk = 0; wk < 2; wk++)
        for (size_t di = 0; di < sizeof depths / sizeof depths[0]; di++) {
            int depth = depths[di];
            if ((only_work >= 0 && only_work != (int)works[wk]) || (only_depth && only_depth != depth))
                continue;
            double rate1[NSYS] = { 0 };
            for (int ci = 0; ci < ncounts; ci++) {
                int workers = counts[ci];
                if (only_workers && only_workers != workers && workers != 1)
                    continue; /* 1 worker still runs: the scaling is over it */
                double rate[NSYS][3], cpu[NSYS][3], csw[NSYS][3];
                uint64_t rt[NSYS] = { 0 };
                for (int rep = 0; rep < reps; rep++)
                    for (int s = 0; s < NSYS; s++) {
                        if (!with[s])
                            continue;
                        struct result res = run_once(&systems[s], workers, depth, rounds[wk]);
                        rate[s][rep] = res.rate;
                        cpu[s][rep] = res.cpu_ns;
                        csw[s][rep] = res.csw;
                        rt[s] += res.rt;
                    }
                struct result med[NSYS];
                for (int s = 0; s < NSYS; s++) {
                    if (!with[s])
                        continue;
                    med[s] = (struct result){ median(rate[s], reps), median(cpu[s], reps), median(csw[s], reps),
                                              rt[s] / (uint64_t)reps };
                    if (workers == 1)
                        rate1[s] = med[s].rate;
                    print_line(s, workers, depth, works[wk], &med[s], rate1[s]);
                }
                for (int s = 0; s < NSYS; s++) {
                    if (!with[s] || !systems[s].shard)
                        continue;
                    for (int p = SPSC; p < NSYS; p++) {
                        if (!with[p])
                            continue;
                        printf("bench=mesh_ratio impl=shard poll_us=%u vs=%s workers=%d depth=%d work_ns=%.0f "
                               "rate_ratio=%.2f scaling_ratio=",
                               systems[s].poll_us, systems[p].ops->name, workers, depth, works[wk],
                               med[s].rate / med[p].rate);
                        if (workers == 1)
                            printf("-");
                        else
                            printf("%.2f", (med[s].rate / rate1[s]) / (med[p].rate / rate1[p]));
                        printf(" cpu_ratio=%.2f\n", med[s].cpu_ns / med[p].cpu_ns);
                    }
                }
                fflush(stdout);
            }
        }
    for (int i = 0; i < maxw; i++) {
        free(mesh_ws[i].sent);
        free(mesh_ws[i].recv);
        free(mesh_ws[i].slot_seq);
        free(mesh_ws[i].msgs);
    }
    return 0;
}
