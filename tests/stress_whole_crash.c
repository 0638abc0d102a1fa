/* Multi-key jobs queued whole (all their keys on one worker, so run there as one job, in a batch when
 * they may) and single-key jobs of the same accounts from two producers, while a worker is crashed
 * (REROUTE or DROP, at random) and replaced every 1-4 ms, with drains between: a crash lands before,
 * during and after such jobs in a batch, and on its steps (shard_submit_multi_each). Some jobs spin up
 * to 1 ms; a tenth of the multi-key jobs have 17-23 keys (their blocks are not pooled but freed).
 * Checked: no job of an account overlaps another job holding it (a busy count; last_seq is plain, so
 * ThreadSanitizer checks the happens-before); each producer's jobs of an account start in the order
 * submitted; each job runs once or is dropped once; nothing hangs (watchdog); no multi-key job is
 * left open. Written by the hostile review of whole jobs in batches (its first AddressSanitizer run
 * found a batch reading a whole job a crash had handed over and ended).
 *   stress_whole_crash [SECONDS [BIGPCT]] */
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include "stress_common.h"

#define PRODUCERS 2
#define ACCTS 96
#define MAXK 24
#define MAX_JOBS 200000

enum kind { SINGLE, WHOLE, EACH };
struct rjob {
    uint8_t    kind, producer, n, spin;
    uint8_t    acct[MAXK];
    uint32_t   seq[MAXK];
    atomic_int runs, drops, started, steps;
};

static shard_dispatcher *disp;
static char names[ACCTS][16];
static atomic_int busy[ACCTS];
static uint32_t last_seq[ACCTS][PRODUCERS]; /* plain: only holders of the account touch it */
static struct rjob *jobs[PRODUCERS];
static long njobs[PRODUCERS];
static atomic_int stop_producers;
static atomic_long crashes, adds, nwhole, neach, nsingle;
static int bigpct = 10;

static void spin_us(int us)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

static void take(struct rjob *j, const char *what)
{
    for (int i = 0; i < j->n; i++) {
        int a = j->acct[i];
        CHECK(atomic_fetch_add(&busy[a], 1) == 0, "%s: account %d already held", what, a);
        CHECK(last_seq[a][j->producer] < j->seq[i], "%s: account %d producer %d: #%u after #%u", what, a,
              j->producer, j->seq[i], last_seq[a][j->producer]);
        last_seq[a][j->producer] = j->seq[i];
    }
}
static void give(struct rjob *j)
{
    for (int i = 0; i < j->n; i++)
        atomic_fetch_sub(&busy[j->acct[i]], 1);
}

/* A single-key job, or a multi-key one without steps. */
static void run_job(shard_worker *w, void *arg)
{
    (void)w;
    struct rjob *j = arg;
    const char *what = j->kind == SINGLE ? "single" : "multi";
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "%s ran twice", what);
    take(j, what);
    if (j->spin)
        spin_us(j->spin * 20);
    give(j);
}
static void each_step(shard_worker *w, void *arg, size_t key)
{
    (void)w;
    struct rjob *j = arg;
    CHECK(key < j->n, "step key %zu", key);
    if (atomic_fetch_add(&j->started, 1) == 0)
        take(j, "each");
    else
        for (int i = 0; i < j->n; i++)
            CHECK(atomic_load(&busy[j->acct[i]]) == 1, "each: account %d not held in a step", j->acct[i]);
    atomic_fetch_add(&j->steps, 1);
    if (j->spin && key == 0)
        spin_us(j->spin * 20);
}
static void each_done(shard_worker *w, void *arg)
{
    (void)w;
    struct rjob *j = arg;
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "each done twice");
    CHECK(atomic_load(&j->steps) == j->n, "each: done after %d of %d steps", atomic_load(&j->steps), j->n);
    give(j);
}
static void on_dropped(shard_job_fn fn, void *arg, void *user)
{
    (void)fn, (void)user;
    struct rjob *j = arg;
    CHECK(atomic_fetch_add(&j->drops, 1) == 0, "dropped twice");
}

static uint32_t next_seq[PRODUCERS][ACCTS];

static void *producer(void *arg)
{
    int p = (int)(intptr_t)arg;
    unsigned seed = 12345u + (unsigned)p * 7919u;
    while (!atomic_load(&stop_producers) && njobs[p] < MAX_JOBS) {
        struct rjob *j = &jobs[p][njobs[p]];
        j->producer = (uint8_t)p;
        int r = rand_r(&seed) % 100;
        j->spin = rand_r(&seed) % 8 == 0 ? (uint8_t)(1 + rand_r(&seed) % 50) : 0;
        struct shard_key keys[MAXK];
        int rc;
        if (r < 55) {
            j->kind = SINGLE;
            j->n = 1;
            j->acct[0] = (uint8_t)(rand_r(&seed) % ACCTS);
            j->seq[0] = ++next_seq[p][j->acct[0]];
            rc = shard_submit(disp, names[j->acct[0]], strlen(names[j->acct[0]]), run_job, j);
            atomic_fetch_add(&nsingle, 1);
        } else {
            /* Keys all of one worker under the current ring (the ring may change before the submit). */
            shard_ring *ring;
            if (shard_dispatcher_ring(disp, &ring) != 0)
                continue;
            int start = rand_r(&seed) % ACCTS;
            const char *owner = shard_ring_owner(ring, names[start], strlen(names[start]));
            int want = rand_r(&seed) % 100 < bigpct ? 17 + rand_r(&seed) % (MAXK - 17) : 2 + rand_r(&seed) % 5;
            j->n = 0;
            for (int k = 0; k < ACCTS && j->n < want; k++) {
                int a = (start + k) % ACCTS;
                if (strcmp(shard_ring_owner(ring, names[a], strlen(names[a])), owner) == 0)
                    j->acct[j->n++] = (uint8_t)a;
            }
            shard_ring_destroy(ring);
            if (j->n < 2)
                continue;
            for (int i = 0; i < j->n; i++) {
                keys[i] = (struct shard_key){ names[j->acct[i]], strlen(names[j->acct[i]]) };
                j->seq[i] = ++next_seq[p][j->acct[i]];
            }
            j->kind = r < 80 ? WHOLE : EACH;
            if (j->kind == WHOLE) {
                rc = shard_submit_multi(disp, keys, j->n, run_job, j);
                atomic_fetch_add(&nwhole, 1);
            } else {
                rc = shard_submit_multi_each(disp, keys, j->n, each_step, each_done, j);
                atomic_fetch_add(&neach, 1);
            }
        }
        CHECK(rc == 0, "submit: %d", rc);
        if (rc == 0)
            njobs[p]++;
        else
            for (int i = 0; i < j->n; i++)
                --next_seq[p][j->acct[i]];
    }
    return NULL;
}

/* Whether every job ran or was dropped and no multi-key job is open or waiting. */
static bool all_ended(void *ctx)
{
    (void)ctx;
    for (int p = 0; p < PRODUCERS; p++)
        for (long i = 0; i < njobs[p]; i++)
            if (atomic_load(&jobs[p][i].runs) + atomic_load(&jobs[p][i].drops) == 0)
                return false;
    return stress_none_open(disp);
}

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : 5;
    if (argc > 2)
        bigpct = atoi(argv[2]);
    setvbuf(stdout, NULL, _IOLBF, 0);
    stress_watchdog("stress_whole_crash", (unsigned)seconds + 120);
    for (int a = 0; a < ACCTS; a++)
        snprintf(names[a], sizeof names[a], "acct-%d", a);
    for (int p = 0; p < PRODUCERS; p++)
        jobs[p] = calloc(MAX_JOBS, sizeof(struct rjob));
    struct shard_config cfg = { .workers = 3, .queue_capacity = 128, .on_dropped = on_dropped };
    CHECK(shard_dispatcher_create(&disp, &cfg) == 0, "create");
    char live[3][16] = { "w0", "w1", "w2" };
    int next_name = 3;
    pthread_t t[PRODUCERS];
    for (int p = 0; p < PRODUCERS; p++)
        pthread_create(&t[p], NULL, producer, (void *)(intptr_t)p);
    unsigned seed = 99;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        stress_pause_ms(1 + rand_r(&seed) % 4);
        int v = rand_r(&seed) % 3;
        enum shard_crash_policy pol = rand_r(&seed) % 2 ? SHARD_CRASH_REROUTE : SHARD_CRASH_DROP;
        CHECK(shard_worker_crash(disp, live[v], pol) == 0, "crash %s", live[v]);
        atomic_fetch_add(&crashes, 1);
        snprintf(live[v], sizeof live[v], "w%d", next_name++);
        CHECK(shard_worker_add(disp, live[v], 1) == 0, "add %s", live[v]);
        atomic_fetch_add(&adds, 1);
        if (rand_r(&seed) % 8 == 0)
            CHECK(shard_drain(disp) == 0, "drain");
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec - t0.tv_sec < seconds);
    atomic_store(&stop_producers, 1);
    for (int p = 0; p < PRODUCERS; p++)
        pthread_join(t[p], NULL);
    /* Every job ends: drain until each ran or was dropped, and no multi-key job is open (a job counts
     * as run when it starts; one a crash stuck may still be running, past a drain: stress_common.h). */
    stress_drain_until(disp, all_ended, NULL);
    long ran = 0, dropped = 0;
    for (int p = 0; p < PRODUCERS; p++)
        for (long i = 0; i < njobs[p]; i++) {
            struct rjob *j = &jobs[p][i];
            int r = atomic_load(&j->runs), d = atomic_load(&j->drops);
            CHECK(r + d == 1, "job p%d #%ld kind %d: ran %d, dropped %d", p, i, j->kind, r, d);
            ran += r;
            dropped += d;
        }
    shard_dispatcher_destroy(disp);
    stress_watchdog("stress_whole_crash", 0);
    printf("stress_whole_crash: %ld jobs (%ld single, %ld whole, %ld each), ran %ld, dropped %ld, %ld crashes; %d failures\n",
           njobs[0] + njobs[1], atomic_load(&nsingle), atomic_load(&nwhole), atomic_load(&neach), ran, dropped,
           atomic_load(&crashes), atomic_load(&stress_failures));
    return atomic_load(&stress_failures) != 0;
}
