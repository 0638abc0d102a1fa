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
 *                                RSS_SLACK_MB (the old code: +237 MB in 30 s from one producer)
 *   stress_stuck_key fresh       no crash: a job of S runs until released while a worker is added,
 *                                and a producer submits FRESH distinct keys that move, one job
 *                                each, then a second round of them; a second one arms a timer for
 *                                each of FRESH_TIMERS other such keys, a third submits FRESH_BATCHED
 *                                more with shard_submit_many. Each key's first job waits
 *                                for S's old owner, on the new one: the throttle alone let one job
 *                                of every key in (400,000 keys: 106 MB). The new owner's set-aside
 *                                jobs must stay within 3 * CAP and a little (the gate, throttle.h),
 *                                resident memory within RSS_SLACK_MB, a key of the new owner that
 *                                waits for nothing must still be served, and once S's job returns
 *                                every job runs once, each key's two in order, and every timer */
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

#if STRESS_SANITIZED
#define FRESH 40000u
#else
#define FRESH 400000u
#endif
#define FRESH_TIMERS 20000u
#define FRESH_BATCHED 20000u /* keys after the timers' submitted by shard_submit_many, 16 a call */
/* The gate's bound with capacity CAP (throttle.h): twice the allowance, the queue, and what each
 * producer checked just before (a job, a timer's arm job, a chunk of 16), with a little to spare. */
#define FRESH_BOUND (3 * CAP + 32)

static unsigned *fresh_ids;              /* fresh-<id>: keys that moved from w0 to the holder */
static _Atomic unsigned char *fresh_seq; /* per key: its jobs run so far, checked in order */
static atomic_uint fresh_round1, fresh_timers_armed, fresh_timers_ran, fresh_batched, fresh_batched_ran;
static atomic_long fresh_ran;

static int fresh_key(unsigned i, char *buf)
{
    return snprintf(buf, 32, "fresh-%u", fresh_ids[i]);
}

static void fresh_job(shard_worker *w, void *arg)
{
    (void)w;
    uintptr_t a = (uintptr_t)arg;
    unsigned i = (unsigned)(a >> 1), seq = (unsigned)(a & 1);
    /* The key's jobs run one at a time in a happens-before chain: relaxed would do; plain counters of
     * stress_run are not used for 400,000 keys. */
    unsigned ran = atomic_load_explicit(&fresh_seq[i], memory_order_relaxed);
    CHECK(ran == seq, "fresh key %u: ran job %u after %u of its jobs", i, seq, ran);
    atomic_store_explicit(&fresh_seq[i], (unsigned char)(ran + 1), memory_order_relaxed);
    atomic_fetch_add(&fresh_ran, 1);
}

static void fresh_timer(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    atomic_fetch_add(&fresh_timers_ran, 1);
}

/* Submits every fresh key's job 0 (round 1: during the handoff), then every key's job 1. */
static void *fresh_producer(void *arg)
{
    (void)arg;
    char key[32];
    for (unsigned round = 0; round < 2; round++) {
        for (unsigned i = 0; i < FRESH; i++) {
            int len = fresh_key(i, key);
            CHECK(shard_submit(disp, key, (size_t)len, fresh_job, (void *)(uintptr_t)(i << 1 | round)) == 0,
                  "submit fresh %u", i);
        }
        if (round == 0)
            atomic_store(&fresh_round1, 1);
    }
    return NULL;
}

/* Arms a timer due at once for each of the FRESH_TIMERS keys after the FRESH ones. */
static void *fresh_armer(void *arg)
{
    (void)arg;
    char key[32];
    for (unsigned i = FRESH; i < FRESH + FRESH_TIMERS; i++) {
        int len = fresh_key(i, key);
        CHECK(shard_submit_after(disp, key, (size_t)len, 0, fresh_timer, NULL, NULL) == 0, "arm fresh %u", i);
        atomic_fetch_add(&fresh_timers_armed, 1);
    }
    return NULL;
}

static void fresh_batched_job(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    atomic_fetch_add(&fresh_batched_ran, 1);
}

/* Submits one job for each of the FRESH_BATCHED keys after the timers' ones, 16 a call. */
static void *fresh_batcher(void *arg)
{
    (void)arg;
    static char keys[16][32];
    for (unsigned i = FRESH + FRESH_TIMERS; i < FRESH + FRESH_TIMERS + FRESH_BATCHED; i += 16) {
        struct shard_job batch[16];
        for (unsigned k = 0; k < 16; k++)
            batch[k] = (struct shard_job){ keys[k], (size_t)fresh_key(i + k, keys[k]), fresh_batched_job, NULL };
        int got = shard_submit_many(disp, batch, 16);
        CHECK(got == 16, "submit_many of fresh keys: %d", got);
        atomic_fetch_add(&fresh_batched, (unsigned)got);
    }
    return NULL;
}

static uint64_t full_waits(void)
{
    struct shard_stats st;
    CHECK(shard_dispatcher_stats(disp, &st) == 0, "stats");
    return st.held_full_waits;
}

/* Follows the holder's set-aside jobs until done() or the gate has held a submitter back more than
 * `waits` times; returns the most it saw held. Polling a state, not waiting for time: each poll
 * yields. */
static uint64_t watch_held(const char *holder, bool (*done)(void), uint64_t waits)
{
    uint64_t most = 0;
    while (!done() && full_waits() <= waits) {
        uint64_t held = stats_of(holder).held;
        most = held > most ? held : most;
        sched_yield();
    }
    uint64_t held = stats_of(holder).held;
    return held > most ? held : most;
}

static bool round1_done(void)
{
    return atomic_load(&fresh_round1) != 0;
}

static bool armer_done(void)
{
    return atomic_load(&fresh_timers_armed) == FRESH_TIMERS;
}

static bool batcher_done(void)
{
    return atomic_load(&fresh_batched) == FRESH_BATCHED;
}

static void fresh_scenario(void)
{
    struct shard_config cfg = { .workers = 2, .queue_capacity = CAP };
    CHECK(shard_dispatcher_create(&disp, &cfg) == 0, "create");
    shard_ring *before;
    CHECK(shard_dispatcher_ring(disp, &before) == 0, "ring");
    key_of("w0", NULL, "stuck", stuck_key);
    CHECK(shard_submit(disp, stuck_key, strlen(stuck_key), blocker, NULL) == 0, "submit the slow job");
    sem_wait(&inside);
    /* w2 (weight 8) takes most of w0's keys while S's job runs on w0: w0 passes the change's fence
     * only once that job returns, so the first job of every key that moved from w0 to w2 waits on w2
     * until then (whether S moved or not). */
    CHECK(shard_worker_add(disp, "w2", 8) == 0, "add w2");
    shard_ring *now;
    CHECK(shard_dispatcher_ring(disp, &now) == 0, "ring");
    fresh_ids = malloc((FRESH + FRESH_TIMERS + FRESH_BATCHED) * sizeof *fresh_ids);
    fresh_seq = calloc(FRESH, sizeof *fresh_seq);
    CHECK(fresh_ids && fresh_seq, "memory");
    char key[32];
    for (unsigned id = 0, n = 0; n < FRESH + FRESH_TIMERS + FRESH_BATCHED; id++) {
        int len = snprintf(key, sizeof key, "fresh-%u", id);
        if (strcmp(shard_ring_owner(before, key, (size_t)len), "w0") == 0 &&
            strcmp(shard_ring_owner(now, key, (size_t)len), "w2") == 0)
            fresh_ids[n++] = id;
    }
    shard_ring_destroy(now);
    key_of("w2", before, "other", other_key); /* w2's, not w0's before: it waits for nothing */
    shard_ring_destroy(before);

    long rss_before = rss_kb();
    pthread_t prod, armer, batcher;
    pthread_create(&prod, NULL, fresh_producer, NULL);
    uint64_t most = watch_held("w2", round1_done, 0);
    CHECK(!round1_done(), "all %u fresh keys were taken during the slow handoff", FRESH);
    /* Now the armer: its arm jobs wait for w0 too, and for room among w2's set-aside jobs. */
    uint64_t waits = full_waits();
    pthread_create(&armer, NULL, fresh_armer, NULL);
    uint64_t most2 = watch_held("w2", armer_done, waits);
    most = most2 > most ? most2 : most;
    CHECK(!armer_done(), "all %u timers of fresh keys were armed during the slow handoff", FRESH_TIMERS);
    /* And a batch producer: its chunk stops before the first job held back, which then waits. */
    waits = full_waits();
    pthread_create(&batcher, NULL, fresh_batcher, NULL);
    most2 = watch_held("w2", batcher_done, waits);
    most = most2 > most ? most2 : most;
    CHECK(!batcher_done(), "all %u batched fresh keys were taken during the slow handoff", FRESH_BATCHED);
    long grown = rss_kb() - rss_before;
    uint64_t held = stats_of("w2").held;
    printf("fresh keys during a slow handoff: w2 holds %llu (at most %llu seen, bound %d), %u of %u "
           "timers armed, %u of %u batched, %llu submits held back, resident memory %+ld KiB\n",
           (unsigned long long)held, (unsigned long long)most, FRESH_BOUND, atomic_load(&fresh_timers_armed),
           FRESH_TIMERS, atomic_load(&fresh_batched), FRESH_BATCHED, (unsigned long long)full_waits(), grown);
    CHECK(most <= FRESH_BOUND, "w2 held %llu jobs set aside, bound %d", (unsigned long long)most, FRESH_BOUND);
    CHECK(held >= 2 * CAP, "w2 holds %llu: below the gate's %d, yet submitters wait", (unsigned long long)held,
          2 * CAP);
    CHECK(grown < RSS_SLACK_MB * 1024, "resident memory grew by %ld KiB", grown);
    char fk[32];
    int fl = fresh_key(0, fk);
    CHECK(shard_try_submit(disp, fk, (size_t)fl, count_hostile, NULL) == -EAGAIN, "try_submit of a fresh key");
    struct shard_job one = { fk, (size_t)fl, count_hostile, NULL };
    CHECK(shard_try_submit_many(disp, &one, 1) == 0, "try_submit_many of a fresh key");
    /* A key of w2 that waits for nothing is served at once, submitters held back or not. */
    CHECK(shard_submit(disp, other_key, strlen(other_key), other, NULL) == 0, "a key of w2 that runs");
    sem_wait(&other_ran);

    sem_post(&gate); /* S's job returns: w0 passes its fence, the change settles */
    pthread_join(prod, NULL);
    pthread_join(armer, NULL);
    pthread_join(batcher, NULL);
    while (atomic_load(&fresh_timers_ran) < FRESH_TIMERS)
        CHECK(shard_drain(disp) == 0, "drain");
    CHECK(shard_drain(disp) == 0, "drain");
    CHECK(atomic_load(&fresh_ran) == 2 * (long)FRESH, "%ld of %u fresh jobs ran", atomic_load(&fresh_ran), 2 * FRESH);
    unsigned short_keys = 0;
    for (unsigned i = 0; i < FRESH; i++)
        short_keys += atomic_load_explicit(&fresh_seq[i], memory_order_relaxed) != 2;
    CHECK(short_keys == 0, "%u fresh keys did not run both their jobs", short_keys);
    CHECK(atomic_load(&fresh_timers_ran) == FRESH_TIMERS, "%u of %u timers ran", atomic_load(&fresh_timers_ran),
          FRESH_TIMERS);
    CHECK(atomic_load(&fresh_batched_ran) == FRESH_BATCHED, "%u of %u batched jobs ran",
          atomic_load(&fresh_batched_ran), FRESH_BATCHED);
    CHECK(stats_of("w2").held == 0, "jobs still set aside");
    shard_dispatcher_destroy(disp);
    free(fresh_ids);
    free(fresh_seq);
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
    bool fresh = argc > 1 && strcmp(argv[1], "fresh") == 0;
    sem_init(&inside, 0, 0);
    sem_init(&gate, 0, 0);
    sem_init(&other_ran, 0, 0);
    if (fresh) {
        fresh_scenario();
        return stress_result("stress_stuck_key fresh");
    }
    scenario(!slow, rss ? (argc > 2 ? atoi(argv[2]) : 30) : 0);
    return stress_result(slow ? "stress_stuck_key slow" : rss ? "stress_stuck_key rss" : "stress_stuck_key");
}
