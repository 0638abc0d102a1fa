/* DROP crashes racing multi-key jobs' parts as they come up (multi.c's hold, arrive and drop, which
 * meet on the job's state word without a lock). Each round: 3 workers; a producer submits single-key
 * jobs and multi-key jobs of 2 or 3 keys (half with steps), each with one key of w1 and the others of
 * w0 and w2, while the main thread crashes w1 (DROP) after a random spin, so that some multi-key jobs
 * lose a part while their other parts are coming up elsewhere. Checked: no two jobs of one key at
 * once; each key's jobs in submission order (dropped ones skipped); each job run once or dropped once,
 * never both nor neither, and on_dropped told of a multi-key job once; drain returns (an alarm: a claim
 * never paid holds its key for ever); a later job of every key runs after (once a job w1 was running
 * when it crashed, stuck until then, has returned); multi_open and
 * multi_waiting are 0 at the end. Written by a review of 02846a8.
 *   stress_drop_race [ROUNDS]   (default 2,000; 300 under a sanitizer) */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "race_jobs.h"

#define NKEYS 12 /* per side */
#define MAXJOBS 3000

static struct race_key keys[2 * NKEYS];
static struct race_job jobs[MAXJOBS];
static atomic_int njobs;
static shard_dispatcher *disp;

static unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

static int next_seq[2 * NKEYS];
static atomic_bool stop;

static void *producer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    for (int n = 0; n < MAXJOBS && !atomic_load(&stop); n++) {
        struct race_job *j = &jobs[n];
        memset(j, 0, sizeof *j);
        unsigned r = rnd(&seed);
        bool multi = r % 4 != 0;
        j->kind = !multi ? RACE_SINGLE : (r / 4) % 2 ? RACE_STEPS : RACE_MULTI;
        j->nk = multi ? 2 + (int)((r / 8) % 2) : 1;
        /* a multi: one key of w1 and the rest of w0/w2 */
        for (int i = 0; i < j->nk; i++) {
            int k;
            bool dup;
            do {
                k = i == 0 && multi ? (int)(rnd(&seed) % NKEYS) : (int)(rnd(&seed) % (2 * NKEYS));
                if (multi && i > 0)
                    k = NKEYS + (int)(rnd(&seed) % NKEYS);
                dup = false;
                for (int q = 0; q < i; q++)
                    dup |= j->k[q] == k;
            } while (dup);
            j->k[i] = k;
            j->seq[i] = ++next_seq[k];
        }
        atomic_store(&njobs, n + 1);
        race_job_submit(disp, j);
    }
    return NULL;
}

static void find_keys(void)
{
    shard_ring *r;
    CHECK(shard_dispatcher_ring(disp, &r) == 0, "ring");
    int b = 0, a = 0;
    for (unsigned i = 0; b < NKEYS || a < NKEYS; i++) {
        char buf[32];
        size_t n = (size_t)snprintf(buf, sizeof buf, "dr-%u", i);
        const char *o = shard_ring_owner(r, buf, n);
        struct race_key *K = NULL;
        if (strcmp(o, "w1") == 0 && b < NKEYS)
            K = &keys[b++];
        else if (strcmp(o, "w1") != 0 && a < NKEYS)
            K = &keys[NKEYS + a++];
        if (K) {
            memcpy(K->name, buf, n + 1);
            K->len = n;
            atomic_store(&K->running, 0);
            memset(K->last_seq, 0, sizeof K->last_seq);
        }
    }
    shard_ring_destroy(r);
}

/* Whether every key's later job (ctx: the 2 * NKEYS of them) has run. */
static bool tails_ran(void *ctx)
{
    struct race_job *tail = ctx;
    for (int k = 0; k < 2 * NKEYS; k++)
        if (atomic_load(&tail[k].runs) == 0)
            return false;
    return true;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : STRESS_SANITIZED ? 300 : 2000;
    unsigned seed = 12345;
    race_keys = keys;
    for (int round = 0; round < rounds && atomic_load(&stress_failures) == 0; round++) {
        struct shard_config cfg = { .workers = 3, .queue_capacity = 128, .on_dropped = race_on_dropped };
        CHECK(shard_dispatcher_create(&disp, &cfg) == 0, "create");
        find_keys();
        memset(next_seq, 0, sizeof next_seq);
        atomic_store(&njobs, 0);
        atomic_store(&stop, false);
        pthread_t t;
        pthread_create(&t, NULL, producer, (void *)(uintptr_t)(rnd(&seed) | 1));
        /* crash w1 at a random moment while jobs flow */
        unsigned delay = rnd(&seed) % 3000;
        for (volatile unsigned i = 0; i < delay * 50; i++)
            ;
        CHECK(shard_worker_crash(disp, "w1", SHARD_CRASH_DROP) == 0, "crash");
        for (volatile unsigned i = 0; i < 20000; i++)
            ;
        atomic_store(&stop, true);
        pthread_join(t, NULL);
        stress_watchdog("stress_drop_race", STRESS_SANITIZED ? 120 : 30); /* a hang: a key held for ever */
        CHECK(shard_drain(disp) == 0, "drain");
        /* every key free again: one more job each */
        int n = atomic_load(&njobs);
        static struct race_job tail[2 * NKEYS];
        for (int k = 0; k < 2 * NKEYS; k++)
            race_tail_submit(disp, &tail[k], k, ++next_seq[k]);
        /* A job w1 was running when it crashed is stuck until it returns, and drain waits neither for it
         * nor for the jobs behind its keys (dispatcher.h): here it is only slow (its thread preempted,
         * 1 round in about 10,000 under ASan with a second run beside it), and its keys' later jobs
         * run once it returns. Drain until every later job has run; a claim never paid holds its key
         * for ever, which the bound (and the watchdog) catch. */
        stress_drain_until(disp, tails_ran, tail);
        alarm(0);
        for (int k = 0; k < 2 * NKEYS; k++)
            CHECK(atomic_load(&tail[k].runs) == 1, "round %d: key %s's later job did not run", round, keys[k].name);
        long ran = 0, dropped = 0;
        race_jobs_check(jobs, n, round, &ran, &dropped);
        struct shard_stats st;
        shard_dispatcher_stats(disp, &st);
        CHECK(st.multi_open == 0 && st.multi_waiting == 0, "round %d: open %llu waiting %llu", round,
              (unsigned long long)st.multi_open, (unsigned long long)st.multi_waiting);
        if (round % 500 == 0)
            printf("round %d: %d jobs, %ld ran, %ld dropped\n", round, n, ran, dropped);
        shard_dispatcher_destroy(disp);
    }
    return stress_result("stress_drop_race");
}
