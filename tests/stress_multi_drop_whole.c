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

#include "stress_common.h"

#define NK 32
#define NW 4
#define NP 2
#define MAXJOBS 1500
#define MAXK 5

struct key {
    char       name[32];
    size_t     len;
    int        owner;
    atomic_int running;
    int        last_seq[NP];
};

struct job {
    int        p, nk, spin;
    int        k[MAXK];
    int        seq[MAXK];
    int        kind; /* 0 single, 1 multi, 2 steps */
    atomic_int runs, drops, steps_run;
};

static struct key keys[NK];
static struct job jobs[NP][MAXJOBS];
static atomic_int njobs[NP];
static int next_seq[NP][NK];
static shard_dispatcher *disp;
static atomic_bool stop;

static void spin(int n)
{
    for (volatile int i = 0; i < n; i++)
        ;
}

static void key_enter(const struct job *j, int i)
{
    struct key *K = &keys[j->k[i]];
    CHECK(atomic_fetch_add(&K->running, 1) == 0, "key %s: two jobs at once", K->name);
    CHECK(j->seq[i] > K->last_seq[j->p], "key %s p%d: seq %d after %d", K->name, j->p, j->seq[i],
          K->last_seq[j->p]);
    K->last_seq[j->p] = j->seq[i];
}

static void key_leave(const struct job *j, int i)
{
    atomic_fetch_sub(&keys[j->k[i]].running, 1);
}

static void single_fn(shard_worker *w, void *arg)
{
    (void)w;
    struct job *j = arg;
    key_enter(j, 0);
    spin(j->spin);
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "single ran twice");
    key_leave(j, 0);
}

static void multi_fn(shard_worker *w, void *arg)
{
    (void)w;
    struct job *j = arg;
    for (int i = 0; i < j->nk; i++)
        key_enter(j, i);
    spin(j->spin);
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "multi ran twice");
    CHECK(atomic_load(&j->drops) == 0, "multi ran after it was dropped");
    for (int i = 0; i < j->nk; i++)
        key_leave(j, i);
}

static void step_fn(shard_worker *w, void *arg, size_t index)
{
    (void)w;
    struct job *j = arg;
    CHECK((int)index < j->nk, "step index %zu", index);
    key_enter(j, (int)index);
    spin(j->spin);
    atomic_fetch_add(&j->steps_run, 1);
    key_leave(j, (int)index);
}

static void done_fn(shard_worker *w, void *arg)
{
    (void)w;
    struct job *j = arg;
    /* every key still held: none of them may be running anything else */
    for (int i = 0; i < j->nk; i++) {
        CHECK(atomic_fetch_add(&keys[j->k[i]].running, 1) == 0, "done: key %s busy", keys[j->k[i]].name);
        key_leave(j, i);
    }
    CHECK(atomic_load(&j->steps_run) == j->nk, "done after %d of %d steps", atomic_load(&j->steps_run), j->nk);
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "steps job done twice");
    CHECK(atomic_load(&j->drops) == 0, "steps job ran after it was dropped");
}

static void on_dropped(shard_job_fn fn, void *arg, void *user)
{
    (void)user;
    if (fn != single_fn && fn != multi_fn && fn != done_fn)
        return;
    struct job *j = arg;
    CHECK(atomic_fetch_add(&j->drops, 1) == 0, "dropped twice (kind %d)", j->kind);
    CHECK(atomic_load(&j->runs) == 0, "dropped after it ran");
    CHECK(j->kind != 2 || atomic_load(&j->steps_run) == 0, "steps job dropped after a step ran");
}

static bool has(const struct job *j, int n, int k)
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
        struct job *j = &jobs[p][n];
        memset(j, 0, sizeof *j);
        j->p = p;
        uint32_t r = stress_rnd(&seed);
        j->kind = r % 4 == 0 ? 0 : r % 4 == 3 ? 2 : 1;
        j->nk = j->kind == 0 ? 1 : 2 + (int)(stress_rnd(&seed) % (MAXK - 1));
        j->spin = stress_rnd(&seed) % 8 == 0 ? (int)(stress_rnd(&seed) % 20000) : 0;
        /* half the multi-key jobs on one worker's keys (queued whole), preferring w1 and w2 (crashed) */
        bool whole = j->kind != 0 && stress_rnd(&seed) % 2;
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
        int rc;
        if (j->kind == 0) {
            rc = shard_submit(disp, keys[j->k[0]].name, keys[j->k[0]].len, single_fn, j);
        } else {
            struct shard_key sk[MAXK];
            for (int i = 0; i < j->nk; i++)
                sk[i] = (struct shard_key){ keys[j->k[i]].name, keys[j->k[i]].len };
            rc = j->kind == 2 ? shard_submit_multi_each(disp, sk, (size_t)j->nk, step_fn, done_fn, j)
                              : shard_submit_multi(disp, sk, (size_t)j->nk, multi_fn, j);
        }
        CHECK(rc == 0, "submit: %d", rc);
        if (rc)
            atomic_fetch_add(&j->drops, 1);
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
        struct key *K = &keys[got++];
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
    struct job *tail = ctx;
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
    for (int round = 0; round < rounds && atomic_load(&stress_failures) == 0; round++) {
        struct shard_config cfg = { .workers = NW, .queue_capacity = 64, .on_dropped = on_dropped };
        CHECK(shard_dispatcher_create(&disp, &cfg) == 0, "create");
        find_keys();
        memset(next_seq, 0, sizeof next_seq);
        atomic_store(&stop, false);
        pthread_t t[NP];
        for (int p = 0; p < NP; p++) {
            atomic_store(&njobs[p], 0);
            pthread_create(&t[p], NULL, producer, (void *)(uintptr_t)p);
        }
        spin((int)(stress_rnd(&seed) % 200000));
        CHECK(shard_worker_crash(disp, "w1", SHARD_CRASH_DROP) == 0, "crash w1");
        spin((int)(stress_rnd(&seed) % 200000));
        enum shard_crash_policy pol = stress_rnd(&seed) % 3 ? SHARD_CRASH_DROP : SHARD_CRASH_REROUTE;
        CHECK(shard_worker_crash(disp, "w2", pol) == 0, "crash w2");
        spin((int)(stress_rnd(&seed) % 100000));
        atomic_store(&stop, true);
        stress_watchdog("stress_multi_drop_whole", 120); /* a producer waiting for room behind a key held for ever */
        for (int p = 0; p < NP; p++)
            pthread_join(t[p], NULL);
        static struct job tail[NK];
        for (int k = 0; k < NK; k++) {
            memset(&tail[k], 0, sizeof tail[k]);
            tail[k].p = 0;
            tail[k].nk = 1;
            tail[k].k[0] = k;
            tail[k].seq[0] = ++next_seq[0][k];
            CHECK(shard_submit(disp, keys[k].name, keys[k].len, single_fn, &tail[k]) == 0, "tail");
        }
        stress_drain_until(disp, tails_ran, tail);
        alarm(0);
        for (int k = 0; k < NK; k++)
            CHECK(atomic_load(&tail[k].runs) == 1, "round %d: key %s's later job did not run", round, keys[k].name);
        for (int p = 0; p < NP; p++)
            for (int i = 0, n = atomic_load(&njobs[p]); i < n; i++) {
                struct job *j = &jobs[p][i];
                int r = atomic_load(&j->runs), dr = atomic_load(&j->drops);
                CHECK(r + dr == 1, "round %d p%d job %d (kind %d nk %d): runs %d drops %d", round, p, i, j->kind,
                      j->nk, r, dr);
                total_ran += r;
                total_dropped += dr;
            }
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
