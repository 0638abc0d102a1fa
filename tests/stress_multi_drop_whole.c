/* DROP and REROUTE crashes of two workers racing multi-key jobs of every shape, from two producers:
 * parts of one job on a crashed worker (the first drop pays the claims made so far while other parts
 * still come up and claim: multi.c's release_claims_racing; the end pays the rest by reading the flags:
 * release_claims_at_end), jobs queued whole (all keys on one worker, some slow) that a crash finds
 * running (shard__multi_whole_crashed, then shard__multi_whole_end), jobs with steps crashed between
 * steps. Each round: 4 workers, queues of 64; w1 crashed with DROP after a random spin, then w2 with
 * DROP or REROUTE. Checked: no two jobs of a key at once; each (producer, key) in order; every job run
 * once or dropped once, never both nor neither; done only after every step; a later job of every key
 * runs after (a claim never paid holds its key for ever: the watchdog); a claim paid twice faults
 * (crash.c's payment of an entry owed to nothing); multi_open and multi_waiting 0 at the end. Written
 * by a review of 5882ea2, which it caught when the drop read its flags instead of exchanging them
 * (a claim paid twice) and when the end skipped a dropped job's claims (a key held for ever).
 *   stress_multi_drop_whole [ROUNDS]   (default 2,000; 300 under a sanitizer) */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "race_jobs.h"

#define NK 32
#define NW 4
#define NP RACE_PRODUCERS
#define MAXJOBS 1500
#define MAXK RACE_MAXK

static struct race_key keys[NK];
static struct race_job jobs[NP][MAXJOBS];
static atomic_int njobs[NP];
static int next_seq[NP][NK];
static shard_dispatcher *disp;
static atomic_bool stop;

static bool has(const struct race_job *j, int n, int k)
{
    for (int q = 0; q < n; q++)
        if (j->k[q] == k)
            return true;
    return false;
}

static void *producer(void *arg)
{
    int p = (int)(uintptr_t)arg;
    uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(p + 1) ^ (uint64_t)time(NULL);
    for (int n = 0; n < MAXJOBS && !atomic_load(&stop); n++) {
        struct race_job *j = &jobs[p][n];
        memset(j, 0, sizeof *j);
        j->p = p;
        uint32_t r = stress_rnd(&seed);
        j->kind = r % 4 == 0 ? RACE_SINGLE : r % 4 == 3 ? RACE_STEPS : RACE_MULTI;
        j->nk = j->kind == RACE_SINGLE ? 1 : 2 + (int)(stress_rnd(&seed) % (MAXK - 1));
        j->spin = stress_rnd(&seed) % 8 == 0 ? (int)(stress_rnd(&seed) % 20000) : 0;
        /* half the multi-key jobs on one worker's keys (queued whole), preferring w1 and w2 (crashed) */
        bool whole = j->kind != RACE_SINGLE && stress_rnd(&seed) % 2;
        int want = (int)(stress_rnd(&seed) % 3); /* 0: w1, 1: w2, 2: any */
        want = want == 0 ? 1 : want == 1 ? 2 : (int)(stress_rnd(&seed) % NW);
        int avail = 0;
        for (int k = 0; k < NK; k++)
            avail += keys[k].owner == want;
        if (avail < j->nk)
            whole = false;
        if (whole && stress_rnd(&seed) % 3 == 0)
            j->spin = (int)(stress_rnd(&seed) % 300000); /* long: a crash finds it running */
        for (int i = 0; i < j->nk; i++) {
            int k;
            do
                k = (int)(stress_rnd(&seed) % NK);
            while (has(j, i, k) || (whole && keys[k].owner != want));
            j->k[i] = k;
            j->seq[i] = ++next_seq[p][k];
        }
        atomic_store(&njobs[p], n + 1);
        race_job_submit(disp, j);
    }
    return NULL;
}

static void find_keys(void)
{
    shard_ring *r;
    CHECK(shard_dispatcher_ring(disp, &r) == 0, "ring");
    int per[NW] = { 0 }, got = 0;
    for (unsigned i = 0; got < NK; i++) {
        char buf[32];
        size_t n = (size_t)snprintf(buf, sizeof buf, "hk-%u", i);
        const char *o = shard_ring_owner(r, buf, n);
        int w = o[1] - '0';
        if (per[w] >= NK / NW)
            continue;
        per[w]++;
        struct race_key *K = &keys[got++];
        memcpy(K->name, buf, n + 1);
        K->len = n;
        K->owner = w;
        atomic_store(&K->running, 0);
        memset(K->last_seq, 0, sizeof K->last_seq);
    }
    shard_ring_destroy(r);
}

static bool tails_ran(void *ctx)
{
    struct race_job *tail = ctx;
    for (int k = 0; k < NK; k++)
        if (atomic_load(&tail[k].runs) == 0)
            return false;
    return stress_none_open(disp);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : STRESS_SANITIZED ? 300 : 2000;
    setvbuf(stdout, NULL, _IOLBF, 0);
    uint64_t seed = 88172645463325252ull ^ (uint64_t)time(NULL);
    long total_ran = 0, total_dropped = 0;
    race_keys = keys;
    for (int round = 0; round < rounds && atomic_load(&stress_failures) == 0; round++) {
        struct shard_config cfg = { .workers = NW, .queue_capacity = 64, .on_dropped = race_on_dropped };
        CHECK(shard_dispatcher_create(&disp, &cfg) == 0, "create");
        find_keys();
        memset(next_seq, 0, sizeof next_seq);
        atomic_store(&stop, false);
        pthread_t t[NP];
        for (int p = 0; p < NP; p++) {
            atomic_store(&njobs[p], 0);
            pthread_create(&t[p], NULL, producer, (void *)(uintptr_t)p);
        }
        race_spin((int)(stress_rnd(&seed) % 200000));
        CHECK(shard_worker_crash(disp, "w1", SHARD_CRASH_DROP) == 0, "crash w1");
        race_spin((int)(stress_rnd(&seed) % 200000));
        enum shard_crash_policy pol = stress_rnd(&seed) % 3 ? SHARD_CRASH_DROP : SHARD_CRASH_REROUTE;
        CHECK(shard_worker_crash(disp, "w2", pol) == 0, "crash w2");
        race_spin((int)(stress_rnd(&seed) % 100000));
        atomic_store(&stop, true);
        stress_watchdog("stress_multi_drop_whole", 120); /* a producer waiting for room behind a key held for ever */
        for (int p = 0; p < NP; p++)
            pthread_join(t[p], NULL);
        static struct race_job tail[NK];
        for (int k = 0; k < NK; k++)
            race_tail_submit(disp, &tail[k], k, ++next_seq[0][k]);
        stress_drain_until(disp, tails_ran, tail);
        alarm(0);
        for (int k = 0; k < NK; k++)
            CHECK(atomic_load(&tail[k].runs) == 1, "round %d: key %s's later job did not run", round, keys[k].name);
        for (int p = 0; p < NP; p++)
            race_jobs_check(jobs[p], atomic_load(&njobs[p]), round, &total_ran, &total_dropped);
        struct shard_stats st;
        shard_dispatcher_stats(disp, &st);
        CHECK(st.multi_open == 0 && st.multi_waiting == 0, "round %d: open %llu waiting %llu", round,
              (unsigned long long)st.multi_open, (unsigned long long)st.multi_waiting);
        shard_dispatcher_destroy(disp);
        if (round % 50 == 0)
            printf("round %d: ran %ld dropped %ld so far\n", round, total_ran, total_dropped);
    }
    printf("ran %ld dropped %ld\n", total_ran, total_dropped);
    return stress_result("stress_multi_drop_whole");
}
