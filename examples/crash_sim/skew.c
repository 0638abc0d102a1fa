/* Table 6: skew on the real dispatcher, with and without its balancer. 8 workers, 20,000 sessions whose
 * popularity is Zipf 0.8 (table 4's); a window is 100,000 jobs submitted and drained, so each worker's
 * count of jobs run is the work it was given. The balancer (shard_config.balance, by jobs) places hot
 * sessions on less busy workers as it sees them; every session's jobs must still run in order. Fixed
 * size: it shows the dispatcher, not the hash. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "crash_sim.h"

#define SKEW_WORKERS  8
#define SKEW_SESSIONS 20000
#define SKEW_WINDOW   100000
#define SKEW_MEASURED 5  /* windows measured, after the balancer has had 30 rounds (or 200 windows) */

static double   skew_cdf[SKEW_SESSIONS];
static uint64_t next_seq[SKEW_SESSIONS]; /* touched only by the session's current worker */
static atomic_long out_of_order;

static void skew_job(shard_worker *w, void *arg)
{
    (void)w;
    uint64_t v = (uint64_t)(uintptr_t)arg, session = v % SKEW_SESSIONS, seq = v / SKEW_SESSIONS;
    if (next_seq[session] != seq)
        atomic_fetch_add_explicit(&out_of_order, 1, memory_order_relaxed);
    next_seq[session] = seq + 1;
}

static int skew_draw(uint64_t *x)
{
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    double u = (double)(*x >> 11) / (double)(1ull << 53);
    int lo = 0, hi = SKEW_SESSIONS - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (skew_cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void executed(shard_dispatcher *d, double *out)
{
    struct shard_worker_stats st[SKEW_WORKERS];
    long n = shard_dispatcher_worker_stats(d, st, SKEW_WORKERS);
    for (long i = 0; i < n && i < SKEW_WORKERS; i++)
        out[i] = (double)st[i].executed;
}

/* The mean max / mean over the measured windows; *placed: keys the balancer placed. */
static double skew_run(bool balance, uint64_t *placed)
{
    struct shard_config cfg = { .workers = SKEW_WORKERS, .hot_keys = SHARD_MAX_HOT_KEYS };
    if (balance)
        cfg.balance = (struct shard_balance_config){ .interval_ms = 50, .rounds = 2, .max_moves = 16, .by_jobs = true };
    shard_dispatcher *d;
    if (shard_dispatcher_create(&d, &cfg) != 0)
        return NAN;
    memset(next_seq, 0, sizeof next_seq);
    uint64_t *seq = calloc(SKEW_SESSIONS, sizeof *seq), x = 11;
    double before[SKEW_WORKERS] = { 0 }, after[SKEW_WORKERS], sum = 0;
    char k[24];
    struct shard_stats st;
    int measured = 0, windows = 0;
    while (measured < SKEW_MEASURED) {
        for (int j = 0; j < SKEW_WINDOW; j++) {
            int s = skew_draw(&x);
            size_t n = (size_t)snprintf(k, sizeof k, "session-%d", s);
            shard_submit(d, k, n, skew_job, (void *)(uintptr_t)(seq[s]++ * SKEW_SESSIONS + (uint64_t)s));
        }
        shard_drain(d);
        executed(d, after);
        double max = 0, total = 0;
        for (int i = 0; i < SKEW_WORKERS; i++) {
            double given = after[i] - before[i];
            before[i] = after[i];
            total += given;
            max = fmax(max, given);
        }
        shard_dispatcher_stats(d, &st);
        /* Measured once the balancer has had its rounds: it acts on what it saw, a round or two late. */
        if (!balance || st.balance_rounds >= 30 || ++windows > 200) {
            sum += max / (total / SKEW_WORKERS);
            measured++;
        }
    }
    *placed = st.balance_moves;
    shard_dispatcher_destroy(d);
    free(seq);
    return sum / SKEW_MEASURED;
}

void skew_run_table(void)
{
    double total = 0, acc = 0;
    for (int r = 0; r < SKEW_SESSIONS; r++)
        total += pow(r + 1, -0.8);
    for (int r = 0; r < SKEW_SESSIONS; r++)
        skew_cdf[r] = (acc += pow(r + 1, -0.8) / total);
    char title[160];
    snprintf(title, sizeof title, "6. Skew, live: %d workers, %d sessions of Zipf 0.8 popularity, windows of %d jobs",
             SKEW_WORKERS, SKEW_SESSIONS, SKEW_WINDOW);
    report_table("skew", title, "max/mean", "keys placed", "out of order");
    atomic_store(&out_of_order, 0);
    uint64_t none, placed;
    double fixed = skew_run(false, &none);
    long fixed_bad = atomic_exchange(&out_of_order, 0);
    double balanced = skew_run(true, &placed);
    long balanced_bad = atomic_load(&out_of_order);
    report_row("static ring", fixed, 0, (double)fixed_bad);
    report_row("with the balancer", balanced, (double)placed, (double)balanced_bad);
    report_check(fixed_bad == 0 && balanced_bad == 0, "every session's jobs ran in order, with and without the balancer");
    report_check(balanced < fixed && balanced <= 1.25,
                 "the balancer brings max/mean down (%.2f -> %.2f; its goal is 1.15, checked here with a margin)",
                 fixed, balanced);
}
