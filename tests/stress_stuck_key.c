/* A stuck key must not eat the process (issue 23, item 1). A job of key S is stuck on worker w0 (a
 * blocked call); w0 is crashed with REROUTE, so S's later jobs wait on w1 behind the stuck job, set
 * aside, out of w1's queue. Producers keep submitting S. The jobs set aside for S count against w1's
 * allowance (queue_capacity): past it S is throttled, shard_try_submit answers -EAGAIN and
 * shard_submit / shard_submit_many wait, while another key of w1 is still served at once. Once the
 * stuck job returns, every job accepted runs once, in order, and the waiting producers finish. The old
 * code took every job (1.1M in 30 s at capacity 64).
 *
 *   stress_stuck_key             the above, with the capacity 64
 *   stress_stuck_key slow        no crash: a job of S runs until released while S moves (a worker
 *                                added), so S's later jobs wait on the new owner for the old one
 *   stress_stuck_key rss [S]     the crash, then for S seconds (default 30) three hostile threads on S:
 *                                try_submit without pause, submit_many, and timers armed due at
 *                                once; the process's resident memory must not grow by more than
 *                                RSS_SLACK_MB (the old code: +237 MB in 30 s from one producer) */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "stress_common.h"

#define CAP       64
#define PRODUCERS 2
#define PER       (40 * CAP) /* jobs each producer submits */
#define RSS_SLACK_MB 16

static shard_dispatcher *disp;
static char stuck_key[32], other_key[32];
static sem_t inside, gate, other_ran;
static struct stress_key skey;
static unsigned next_seq[PRODUCERS + 1];
static struct stress_job jobs[PRODUCERS + 1][PER];
static atomic_int accepted[PRODUCERS + 1], producers_done;

static void blocker(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    sem_post(&inside);
    sem_wait(&gate);
}

static void run_s(shard_worker *w, void *arg)
{
    stress_run(&skey, arg, w);
}

static atomic_long hostile_accepted, hostile_ran;
static atomic_int hostile_stop;

static void count_hostile(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    atomic_fetch_add(&hostile_ran, 1);
}

static long rss_kb(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Hostile thread kind: 0 try_submit in a loop, 1 submit_many, 2 timers due at once. */
static void *hostile(void *arg)
{
    int kind = (int)(intptr_t)arg;
    size_t len = strlen(stuck_key);
    while (!atomic_load(&hostile_stop)) {
        if (kind == 0) {
            if (shard_try_submit(disp, stuck_key, len, count_hostile, NULL) == 0)
                atomic_fetch_add(&hostile_accepted, 1);
        } else if (kind == 1) {
            struct shard_job batch[16];
            for (int k = 0; k < 16; k++)
                batch[k] = (struct shard_job){ stuck_key, len, count_hostile, NULL };
            int got = shard_submit_many(disp, batch, 16);
            CHECK(got == 16, "submit_many: %d", got);
            atomic_fetch_add(&hostile_accepted, got);
        } else {
            CHECK(shard_submit_after(disp, stuck_key, len, 0, count_hostile, NULL, NULL) == 0, "arm");
            atomic_fetch_add(&hostile_accepted, 1);
        }
    }
    return NULL;
}

static void other(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    sem_post(&other_ran);
}

/* A key named prefix-N owned by owner now and, if before is not NULL, not by w0 in before (so that
 * its jobs wait for nothing). */
static void key_of(const char *owner, const shard_ring *before, const char *prefix, char *buf)
{
    shard_ring *r;
    CHECK(shard_dispatcher_ring(disp, &r) == 0, "ring");
    for (int n = 0;; n++) {
        snprintf(buf, 32, "%s-%d", prefix, n);
        if (strcmp(shard_ring_owner(r, buf, strlen(buf)), owner) == 0 &&
            (!before || strcmp(shard_ring_owner(before, buf, strlen(buf)), "w0") != 0))
            break;
    }
    shard_ring_destroy(r);
}

static struct shard_worker_stats stats_of(const char *name)
{
    struct shard_worker_stats st[8], none = { 0 };
    long n = shard_dispatcher_worker_stats(disp, st, 8);
    for (long i = 0; i < n && i < 8; i++)
        if (strcmp(st[i].name, name) == 0)
            return st[i];
    return none;
}

static uint64_t throttled_keys(void)
{
    struct shard_stats st;
    CHECK(shard_dispatcher_stats(disp, &st) == 0, "stats");
    return st.throttled_keys;
}

/* Producer p submits PER jobs of S: one at a time (p 0) or in batches of 16 (p 1). */
static void *producer(void *arg)
{
    int p = (int)(intptr_t)arg;
    for (unsigned i = 0; i < PER;) {
        if (p == 0) {
            jobs[p][i] = (struct stress_job){ .producer = p, .key = 0, .seq = i };
            CHECK(shard_submit(disp, stuck_key, strlen(stuck_key), run_s, &jobs[p][i]) == 0, "submit");
            atomic_fetch_add(&accepted[p], 1);
            i++;
            continue;
        }
        struct shard_job batch[16];
        unsigned n = PER - i < 16 ? PER - i : 16;
        for (unsigned k = 0; k < n; k++) {
            jobs[p][i + k] = (struct stress_job){ .producer = p, .key = 0, .seq = i + k };
            batch[k] = (struct shard_job){ stuck_key, strlen(stuck_key), run_s, &jobs[p][i + k] };
        }
        int got = shard_submit_many(disp, batch, n);
        CHECK(got == (int)n, "submit_many: %d of %u", got, n);
        atomic_fetch_add(&accepted[p], got);
        i += n;
    }
    atomic_fetch_add(&producers_done, 1);
    return NULL;
}

static void scenario(bool crash, int rss_seconds)
{
    struct shard_config cfg = { .workers = 2, .queue_capacity = CAP };
    CHECK(shard_dispatcher_create(&disp, &cfg) == 0, "create");
    skey.next_seq = next_seq;
    memset(next_seq, 0, sizeof next_seq);
    memset(accepted, 0, sizeof accepted);
    atomic_store(&producers_done, 0);
    static char holder[16];
    snprintf(holder, sizeof holder, "w1");
    shard_ring *before;
    CHECK(shard_dispatcher_ring(disp, &before) == 0, "ring");
    key_of("w0", NULL, "stuck", stuck_key);
    CHECK(shard_submit(disp, stuck_key, strlen(stuck_key), blocker, NULL) == 0, "submit the blocker");
    sem_wait(&inside);
    if (crash) {
        CHECK(shard_worker_crash(disp, "w0", SHARD_CRASH_REROUTE) == 0, "crash w0");
    } else {
        /* Until S moves to w2, it is w0's: add workers until it does (each add moves some keys). */
        char name[16];
        for (int i = 2;; i++) {
            snprintf(name, sizeof name, "w%d", i);
            CHECK(shard_worker_add(disp, name, 8) == 0, "add %s", name);
            shard_ring *r;
            CHECK(shard_dispatcher_ring(disp, &r) == 0, "ring");
            bool moved = strcmp(shard_ring_owner(r, stuck_key, strlen(stuck_key)), name) == 0;
            shard_ring_destroy(r);
            if (moved) {
                snprintf(holder, sizeof holder, "%s", name);
                break;
            }
            CHECK(i < 60, "S never moved");
        }
    }
    key_of(holder, before, "other", other_key);
    shard_ring_destroy(before);

    /* try_submit: accepted until the holder's allowance and its queue are full, then -EAGAIN. */
    int taken = 0, refused = 0;
    for (int tries = 0; tries < 1000 * CAP && !refused; tries++) {
        jobs[PRODUCERS][taken] = (struct stress_job){ .producer = PRODUCERS, .key = 0, .seq = (unsigned)taken };
        int rc = shard_try_submit(disp, stuck_key, strlen(stuck_key), run_s, &jobs[PRODUCERS][taken]);
        if (rc == 0)
            taken++;
        else if (rc == -EAGAIN && throttled_keys() > 0)
            refused = 1;
        else
            CHECK(rc == -EAGAIN, "try_submit: %d", rc);
        CHECK(taken < PER, "try_submit took %d jobs of a stuck key", taken);
        if (taken >= PER)
            break;
        if (rc)
            sched_yield(); /* the queue was full a moment: the worker is setting its jobs aside */
    }
    CHECK(refused, "try_submit never refused a stuck key (%d jobs taken)", taken);
    /* The allowance (CAP) plus what the queue held when S was throttled (CAP) plus the one in the
     * worker's hands. */
    CHECK(taken <= 2 * CAP + 1, "%d jobs of a stuck key taken, allowance %d", taken, CAP);
    CHECK(shard_submit(disp, other_key, strlen(other_key), other, NULL) == 0, "another key of the holder");
    sem_wait(&other_ran);

    if (rss_seconds) {
        long rss_before = rss_kb();
        pthread_t th[3];
        for (int k = 0; k < 3; k++)
            pthread_create(&th[k], NULL, hostile, (void *)(intptr_t)k);
        stress_pause_ms(rss_seconds * 1000); /* the hostile threads' time */
        long grown = rss_kb() - rss_before;
        uint64_t held = stats_of(holder).held;
        printf("stuck key, %d s of hostile submits: %ld accepted, %llu held, resident memory %+ld KiB\n", rss_seconds,
               atomic_load(&hostile_accepted), (unsigned long long)held, grown);
        CHECK(grown < RSS_SLACK_MB * 1024, "resident memory grew by %ld KiB", grown);
        CHECK(held <= 2 * CAP + 1 + 3 * 16, "%s holds %llu jobs set aside", holder, (unsigned long long)held);
        atomic_store(&hostile_stop, 1);
        sem_post(&gate);
        for (int k = 0; k < 3; k++)
            pthread_join(th[k], NULL);
        while (atomic_load(&hostile_ran) < atomic_load(&hostile_accepted))
            CHECK(shard_drain(disp) == 0, "drain");
        CHECK(shard_drain(disp) == 0, "drain");
        CHECK(atomic_load(&hostile_ran) == atomic_load(&hostile_accepted), "%ld of %ld ran", atomic_load(&hostile_ran),
              atomic_load(&hostile_accepted));
        CHECK(next_seq[PRODUCERS] == (unsigned)taken, "try_submit's: %u of %d ran", next_seq[PRODUCERS], taken);
        shard_dispatcher_destroy(disp);
        return;
    }

    pthread_t th[PRODUCERS];
    for (int p = 0; p < PRODUCERS; p++)
        pthread_create(&th[p], NULL, producer, (void *)(intptr_t)p);
    /* Time passing, not synchronisation: a producer that is not held back takes thousands of jobs in
     * this time (the old code: all of them). */
    stress_pause_ms(200);
    uint64_t held = stats_of(holder).held;
    /* And what each producer had checked before S was throttled: one job, or a batch of 16. */
    CHECK(held <= 2 * CAP + 1 + 1 + 16, "%s holds %llu jobs set aside, allowance %d", holder, (unsigned long long)held,
          CAP);
    CHECK(atomic_load(&producers_done) == 0, "a producer finished with the key stuck");
    CHECK(shard_submit(disp, other_key, strlen(other_key), other, NULL) == 0, "another key, producers waiting");
    sem_wait(&other_ran);

    sem_post(&gate);
    for (int p = 0; p < PRODUCERS; p++)
        pthread_join(th[p], NULL);
    CHECK(shard_drain(disp) == 0, "drain");
    for (int p = 0; p < PRODUCERS; p++)
        CHECK(next_seq[p] == PER, "producer %d: %u of %d ran", p, next_seq[p], PER);
    CHECK(next_seq[PRODUCERS] == (unsigned)taken, "try_submit's: %u of %d ran", next_seq[PRODUCERS], taken);
    CHECK(throttled_keys() == 0, "%llu keys still throttled", (unsigned long long)throttled_keys());
    CHECK(stats_of(holder).held == 0, "jobs still set aside");
    shard_dispatcher_destroy(disp);
}

int main(int argc, char **argv)
{
    bool slow = argc > 1 && strcmp(argv[1], "slow") == 0, rss = argc > 1 && strcmp(argv[1], "rss") == 0;
    sem_init(&inside, 0, 0);
    sem_init(&gate, 0, 0);
    sem_init(&other_ran, 0, 0);
    scenario(!slow, rss ? (argc > 2 ? atoi(argv[2]) : 30) : 0);
    return stress_result(slow ? "stress_stuck_key slow" : rss ? "stress_stuck_key rss" : "stress_stuck_key");
}
