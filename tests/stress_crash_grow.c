/* The crash table's keymap grows (under every stripe's lock) while workers claim, pay and look, and
 * while crashes and drains walk it: the combination the keymap's growth (2026-12-06) left untested.
 *
 * Key S is stuck on a crashed worker (its job blocks until the end). One thread submits wide jobs,
 * S and 255 keys of a pool of POOL each, once over the whole pool: each part but S's runs and claims
 * its key (crash.h), so POOL claims gather in the table, which grows twice on the way (4,096 buckets
 * to 16,384 at about 8,000 keys, to 65,536 at about 32,000). It then submits SECOND more with
 * shard_try_submit_multi, whose parts are set aside behind the first pass's claims (the held maps
 * grow too). Meanwhile: a thread submits plain jobs of free keys (in no wide job; with the table full
 * of claims most of their buckets are marked, so each takes its stripe's lock and looks in the keymap)
 * and, after the first pass, POOLJOBS of pool keys (set aside behind claims); one submits 2-key jobs
 * of free keys (each part claims and pays at once); one adds a worker, drains, and crashes the last
 * worker it added with REROUTE (every stripe's lock: a crash's rerouted list; a drain's walk through
 * the claims), over and over. Once the keymap has 65,536 buckets and AFTER more changes are made, S's
 * job is let go: every job must then run once, each key's jobs of each thread in submission order,
 * never two of one key at once, and no wide job before S's job returned. While the table is full,
 * plain jobs and pairs of free keys must go on running: what is set aside stays far below the gate's
 * 2 * CAP a worker (throttle.h), past which it would hold back a multi-key job of keys whose buckets
 * the claims mark, such as the pairs', until S returns.
 *
 * It reads d->crash's keymap (dispatcher_internal.h) to know that the table did grow while all this
 * ran: the test is about nothing if it did not. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <string.h>

#include "dispatcher_internal.h"
#include "stress_common.h"

/* The queues' capacity, the throttle's limit: S's holder holds the first pass's FIRST (236) parts of S
 * for good, under limit / 2, so that a throttle a change's set-aside jobs bring on S lifts once they
 * are through (throttle.h). With jobs of 128 keys (473 parts of S) at a limit of 512 it stayed, and
 * the first pass's shard_submit_multi waited for S's job, as throttle.h says it should. */
#define CAP     1024
#define WORKERS 3
#define WIDE    256                      /* keys of a wide job: S and WIDE - 1 of the pool */
#define POOL    60000u                   /* claims of the first pass: past 32,768, so two growths */
#define FREE    4096u                    /* keys in no wide job */
#define NKEYS   (1u + POOL + FREE)       /* 0 is S, then the pool, then the free keys */
#define FIRST   ((POOL + WIDE - 2) / (WIDE - 1)) /* wide jobs of the first pass */
#define SECOND  4                        /* wide jobs set aside whole: 1,020 parts */
#define MAXWIDE (FIRST + SECOND)
#define POOLJOBS 256                     /* plain jobs of pool keys */
#define GROWN   65536u                   /* the keymap's buckets for POOL keys */
#define AFTER   (STRESS_SANITIZED ? 3 : 10) /* changes once grown (each walks 60,000 claims: 4 s under TSan) */
/* Seconds the growth and the changes after it may take: Release 1-3, TSan 20-37 on a busy 2-core
 * machine; under the watchdog's 240 s. */
#define RUN_S   (STRESS_SANITIZED ? 200 : 60)

enum { T_WIDE, T_PLAIN, T_PAIR, THREADS }; /* the submitting threads: order is per thread */

static shard_dispatcher *disp;
static sem_t             inside, gate;
static char              names[NKEYS][16];
static size_t            lens[NKEYS];
static atomic_int        running[NKEYS];
static uint32_t          ran_seq[NKEYS][THREADS];   /* the last that ran, per key and thread (the key's jobs) */
static uint32_t          given_seq[NKEYS][THREADS]; /* the last given (each thread its own column) */
static atomic_long       accepted[THREADS], ran[THREADS];
static atomic_int        stop, s_returned, first_done;
static long              refused; /* the wide thread's tries that the second pass lost */

struct wide_job {
    uint32_t   key[WIDE], seq[WIDE];
    atomic_int runs;
};
static struct wide_job wide[MAXWIDE];

struct small_job { /* a plain job (n 1) or a pair's (n 2); freed by its run */
    int      thread, n;
    uint32_t key[2], seq[2];
};

static void enter(uint32_t k, int thread, uint32_t seq, shard_worker *w)
{
    CHECK(atomic_fetch_add(&running[k], 1) == 0, "key %u: two jobs at once (%s)", k, shard_worker_name(w));
    CHECK(ran_seq[k][thread] + 1 == seq, "key %u, thread %d: #%u ran after #%u", k, thread, seq, ran_seq[k][thread]);
    ran_seq[k][thread] = seq;
}

static void blocker(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    sem_post(&inside);
    sem_wait(&gate);
    atomic_store(&s_returned, 1);
}

static void run_wide(shard_worker *w, void *arg)
{
    struct wide_job *j = arg;
    CHECK(atomic_load(&s_returned), "a wide job ran while S's job was stuck");
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "a wide job ran twice");
    for (int i = 0; i < WIDE; i++)
        enter(j->key[i], T_WIDE, j->seq[i], w);
    for (int i = 0; i < WIDE; i++)
        atomic_fetch_sub(&running[j->key[i]], 1);
    atomic_fetch_add(&ran[T_WIDE], 1);
}

static void run_small(shard_worker *w, void *arg)
{
    struct small_job *j = arg;
    for (int i = 0; i < j->n; i++)
        enter(j->key[i], j->thread, j->seq[i], w);
    for (int i = 0; i < j->n; i++)
        atomic_fetch_sub(&running[j->key[i]], 1);
    atomic_fetch_add(&ran[j->thread], 1);
    free(j);
}

static void dropped(shard_job_fn fn, void *arg, void *user)
{
    (void)fn, (void)arg, (void)user;
    CHECK(false, "a job was dropped (every crash here is REROUTE)");
}

static struct shard_key key_of(uint32_t k)
{
    return (struct shard_key){ names[k], lens[k] };
}

/* The wide job number i: S, then the pool keys i * (WIDE - 1) on, round the pool. Return: 0 or what
 * the submit returned (try: never waits). */
static int submit_wide(uint32_t i, bool try)
{
    struct wide_job *j = &wide[i];
    struct shard_key keys[WIDE];
    for (uint32_t n = 0; n < WIDE; n++) {
        uint32_t k = n == 0 ? 0 : 1 + (uint32_t)(((uint64_t)i * (WIDE - 1) + n - 1) % POOL);
        j->key[n] = k;
        j->seq[n] = given_seq[k][T_WIDE] + 1;
        keys[n] = key_of(k);
    }
    int rc = try ? shard_try_submit_multi(disp, keys, WIDE, run_wide, j)
                 : shard_submit_multi(disp, keys, WIDE, run_wide, j);
    if (rc == 0) {
        for (int n = 0; n < WIDE; n++)
            given_seq[j->key[n]][T_WIDE] = j->seq[n];
        atomic_fetch_add(&accepted[T_WIDE], 1);
    }
    return rc;
}

static void *wide_thread(void *arg)
{
    (void)arg;
    uint32_t i = 0;
    for (; i < FIRST; i++) { /* the first pass: its parts run and claim; S's are set aside */
        int rc = submit_wide(i, false);
        CHECK(rc == 0, "wide job %u: %s", i, shard_strerror(rc));
        if (rc)
            return NULL;
    }
    atomic_store(&first_done, 1);
    while (!atomic_load(&stop) && i < MAXWIDE) { /* the second: set aside behind the first's claims */
        int rc = submit_wide(i, true);
        CHECK(rc == 0 || rc == -EAGAIN, "wide job %u: %s", i, shard_strerror(rc));
        if (rc == 0) {
            i++;
        } else {
            refused++;
            stress_pause_ms(1); /* refused until S returns: only not to spin */
        }
    }
    return NULL;
}

static struct small_job *small_job(int thread, int n, const uint32_t *keys)
{
    struct small_job *j = malloc(sizeof *j);
    CHECK(j != NULL, "malloc");
    *j = (struct small_job){ .thread = thread, .n = n };
    for (int i = 0; i < n; i++) {
        j->key[i] = keys[i];
        j->seq[i] = given_seq[keys[i]][thread] + 1;
    }
    return j;
}

/* j's keys' sequence numbers given: from a copy taken before the submit (the job frees itself). */
static void given(const struct small_job *j)
{
    for (int i = 0; i < j->n; i++)
        given_seq[j->key[i]][j->thread] = j->seq[i];
    atomic_fetch_add(&accepted[j->thread], 1);
}

/* Plain jobs: free keys, and, once the first pass is in, one job in 64 of a pool key, POOLJOBS in
 * all (set aside behind its claim; by try, as the throttle may refuse it). */
static void *plain_thread(void *arg)
{
    int pooljobs = 0;
    uint64_t rng = (uintptr_t)arg * 0x9e3779b97f4a7c15ull | 1;
    while (!atomic_load(&stop)) {
        uint32_t r = stress_rnd(&rng);
        bool pool = r % 64 == 0 && atomic_load(&first_done) && pooljobs < POOLJOBS;
        uint32_t k = pool ? 1 + r / 64 % POOL : 1 + POOL + r / 64 % FREE;
        struct small_job *j = small_job(T_PLAIN, 1, &k), copy = *j;
        int rc = pool ? shard_try_submit(disp, names[k], lens[k], run_small, j)
                      : shard_submit(disp, names[k], lens[k], run_small, j);
        CHECK(rc == 0 || (pool && rc == -EAGAIN), "plain submit: %s", shard_strerror(rc));
        if (rc == 0) {
            given(&copy);
            pooljobs += pool;
        } else
            free(j);
    }
    return NULL;
}

static void *pair_thread(void *arg)
{
    uint64_t rng = (uintptr_t)arg * 0x9e3779b97f4a7c15ull | 1;
    while (!atomic_load(&stop)) {
        uint32_t k[2] = { 1 + POOL + stress_rnd(&rng) % FREE, 0 };
        do
            k[1] = 1 + POOL + stress_rnd(&rng) % FREE;
        while (k[1] == k[0]);
        struct small_job *j = small_job(T_PAIR, 2, k), copy = *j;
        struct shard_key keys[2] = { key_of(k[0]), key_of(k[1]) };
        int rc = shard_submit_multi(disp, keys, 2, run_small, j);
        CHECK(rc == 0, "pair submit: %s", shard_strerror(rc));
        if (rc == 0)
            given(&copy);
        else
            free(j);
    }
    return NULL;
}

static atomic_int changes;

/* Adds c<n>, drains (it must return while S is stuck), crashes c<n-1> with REROUTE: its queue's jobs
 * and what it holds become the table's entries, made and walked under every stripe's lock. */
static void *churn_thread(void *arg)
{
    (void)arg;
    for (int n = 0; !atomic_load(&stop); n++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", n);
        CHECK(shard_worker_add(disp, name, 100) == 0, "add %s", name);
        CHECK(shard_drain(disp) == 0, "drain");
        if (n > 0) {
            snprintf(name, sizeof name, "c%d", n - 1);
            CHECK(shard_worker_crash(disp, name, SHARD_CRASH_REROUTE) == 0, "crash %s", name);
        }
        atomic_fetch_add(&changes, 1);
    }
    return NULL;
}

/* The crash keymap's buckets; its stripe 0's lock orders the read after a growth (which holds them all). */
static size_t buckets(void)
{
    CHECK(pthread_mutex_lock(&disp->crash.stripe[0].lock) == 0, "lock");
    size_t n = disp->crash.owed.mask + 1;
    CHECK(pthread_mutex_unlock(&disp->crash.stripe[0].lock) == 0, "unlock");
    return n;
}

/* Whether every accepted job has run and the crash table has emptied: an entry is cleared after its
 * job returns (a deferred job's, or the stuck job's of the last crash), and the keymap shrinks after
 * the last entry's lock is let go, so both may trail the counts. */
static bool all_ran(void *ctx)
{
    (void)ctx;
    for (int t = 0; t < THREADS; t++)
        if (atomic_load(&ran[t]) != atomic_load(&accepted[t]))
            return false;
    return stress_none_open(disp) && !shard__crash_any(&disp->crash) && buckets() == KEYMAP_BUCKETS;
}

int main(void)
{
    stress_watchdog("stress_crash_grow", 240);
    sem_init(&inside, 0, 0);
    sem_init(&gate, 0, 0);
    for (uint32_t k = 0; k < NKEYS; k++)
        lens[k] = (size_t)snprintf(names[k], sizeof names[k], "g:%u", k);
    struct shard_config cfg = { .workers = WORKERS, .queue_capacity = CAP, .on_dropped = dropped };
    CHECK(shard_dispatcher_create(&disp, &cfg) == 0, "create");
    CHECK(buckets() == KEYMAP_BUCKETS, "the crash keymap starts with %zu buckets", buckets());

    /* S: a key of w0, its job stuck; w0 crashed, so S's stuck entry is the table's first. */
    uint32_t owner = 1;
    for (uint32_t i = 0; owner != 0; i++) {
        lens[0] = (size_t)snprintf(names[0], sizeof names[0], "s:%u", i);
        CHECK(shard_key_owner(disp, names[0], lens[0], &owner) == 0, "owner");
    }
    CHECK(shard_submit(disp, names[0], lens[0], blocker, NULL) == 0, "blocker");
    sem_wait(&inside);
    CHECK(shard_worker_crash(disp, "w0", SHARD_CRASH_REROUTE) == 0, "crash w0");

    pthread_t th[4];
    CHECK(pthread_create(&th[0], NULL, wide_thread, NULL) == 0, "thread");
    CHECK(pthread_create(&th[1], NULL, plain_thread, (void *)1) == 0, "thread");
    CHECK(pthread_create(&th[2], NULL, pair_thread, (void *)2) == 0, "thread");
    CHECK(pthread_create(&th[3], NULL, churn_thread, NULL) == 0, "thread");
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* Until the first pass is in and the table has grown, and then AFTER more changes: crashes and
     * drains over the full table, while the second pass and the plain jobs of pool keys are set aside
     * behind its claims. A look every 10 ms; nothing waits on it. */
    int changes_then = -1;
    do {
        stress_pause_ms(10);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (changes_then < 0 && atomic_load(&first_done) && buckets() >= GROWN)
            changes_then = atomic_load(&changes);
    } while ((changes_then < 0 || atomic_load(&changes) < changes_then + AFTER) && t.tv_sec - t0.tv_sec < RUN_S);
    size_t grown = buckets();
    long plain_before = atomic_load(&ran[T_PLAIN]), pairs_before = atomic_load(&ran[T_PAIR]);
    stress_pause_ms(100); /* while full: free keys still run (checked below) */
    CHECK(grown >= GROWN && changes_then >= 0, "after %d s: the crash keymap has %zu buckets (claims of %u keys),"
          " the first pass %s", RUN_S, grown, POOL, atomic_load(&first_done) ? "in" : "not in");
    CHECK(atomic_load(&changes) >= changes_then + AFTER, "%d changes while the table was full",
          atomic_load(&changes) - changes_then);

    atomic_store(&stop, 1);
    CHECK(pthread_join(th[0], NULL) == 0, "join");
    CHECK(pthread_join(th[3], NULL) == 0, "join");
    CHECK(atomic_load(&ran[T_PLAIN]) > plain_before && atomic_load(&ran[T_PAIR]) > pairs_before,
          "free keys did not run while the table was full (plain %ld, pairs %ld since)",
          atomic_load(&ran[T_PLAIN]) - plain_before, atomic_load(&ran[T_PAIR]) - pairs_before);
    sem_post(&gate);
    CHECK(pthread_join(th[1], NULL) == 0, "join");
    CHECK(pthread_join(th[2], NULL) == 0, "join");
    stress_drain_until(disp, all_ran, NULL);
    for (int i = 0; i < THREADS; i++)
        CHECK(atomic_load(&ran[i]) == atomic_load(&accepted[i]), "thread %d: ran %ld of %ld", i,
              atomic_load(&ran[i]), atomic_load(&accepted[i]));
    for (uint32_t i = 0; i < atomic_load(&accepted[T_WIDE]); i++)
        CHECK(atomic_load(&wide[i].runs) == 1, "wide job %u ran %d times", i, atomic_load(&wide[i].runs));
    /* Every claim paid (each before its worker took the drain's mark): the table is empty, and its
     * keymap back to its first buckets. */
    CHECK(!shard__crash_any(&disp->crash), "the crash table holds entries after the drain");
    CHECK(buckets() == KEYMAP_BUCKETS, "the emptied crash table kept %zu buckets", buckets());
    shard_dispatcher_destroy(disp);
    printf("crash keymap grown to %zu buckets; wide jobs %ld, plain %ld, pairs %ld; %d changes, %ld refused\n", grown,
           atomic_load(&accepted[T_WIDE]), atomic_load(&accepted[T_PLAIN]), atomic_load(&accepted[T_PAIR]),
           atomic_load(&changes), refused);
    return stress_result("stress_crash_grow");
}
