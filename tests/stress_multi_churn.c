/* Multi-key jobs under everything at once: a deadlock and order hunt. Producers submit multi-key jobs of
 * 2 to 64 keys (repeats included, and pairs of keys of one hash: "a7" and "a7#" are one key to the
 * ring's hash hook) over a small set of accounts, so that nearly every two of them share keys, through
 * shard_submit_multi and shard_try_submit_multi (retried), among single-key jobs; some jobs submit
 * multi-key jobs of their own from the worker; on_dropped submits a dropped job again (from the
 * control thread's hook); meanwhile the control thread adds, removes and crashes workers (REROUTE and
 * DROP), places and unplaces accounts, and drains. Some jobs spin a little, so that crashes find them
 * running and their keys get stuck for a while.
 * Checked: no two jobs of one account overlap (and each account's plain counter, under TSan, is the
 * happens-before check); each producer's jobs of an account run in its submission order (jobs
 * submitted again after a drop aside); every job accepted runs exactly once and is dropped exactly as
 * often as it was submitted again; the stats end at zero; drains return (a watchdog aborts a hang).
 *   stress_multi_churn [SECONDS [ACCOUNTS]]   (default 3 s, 48 accounts; sanitizers 2 s) */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <string.h>
#include <time.h>

#include "stress_common.h"

#define PRODUCERS 4
#define MAX_KEYS SHARD_MULTI_MAX_KEYS
#define MAX_JOBS 200000 /* a producer's, at most */
#define CHILDREN 100000 /* jobs submitted by jobs, at most */
#define MAX_ACCTS 256

struct mjob {
    int16_t    producer; /* -1: a job's child */
    uint8_t    n;        /* distinct accounts */
    uint8_t    nkeys;    /* keys given, repeats and aliases included */
    uint8_t    depth;    /* children: how deep */
    bool       spin;
    uint8_t    acct[MAX_KEYS];
    uint32_t   seq[MAX_KEYS]; /* the producer's number of this job among its jobs of acct[i] */
    uint8_t    key_acct[MAX_KEYS];
    bool       key_alias[MAX_KEYS];
    atomic_int runs, drops, resubmits;
};

static shard_dispatcher *disp;
static int accounts;
static char names[MAX_ACCTS][2][16]; /* [a][0] "aN", [a][1] "aN#": one hash */
static long value[MAX_ACCTS];        /* plain: only the jobs of an account touch it */
static atomic_int busy[MAX_ACCTS];
static uint32_t last_seq[MAX_ACCTS][PRODUCERS];
static struct mjob *jobs[PRODUCERS];
static long njobs[PRODUCERS];
static struct mjob *children;
static atomic_long nchildren, child_refused;
static atomic_int in_run; /* jobs running now: its decrement publishes a job's writes to main */
static atomic_long acct_runs, multi_runs;
static atomic_int stop, control_stop;
static atomic_int changes, drains;

static void run_job(shard_worker *w, void *arg);

static uint64_t fnv(const void *key, size_t len, void *ctx)
{
    (void)ctx;
    const unsigned char *p = key;
    if (len && p[len - 1] == '#')
        len--; /* "aN#" is "aN" */
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static void keys_of(const struct mjob *j, struct shard_key *keys)
{
    for (int i = 0; i < j->nkeys; i++) {
        const char *s = names[j->key_acct[i]][j->key_alias[i]];
        keys[i] = (struct shard_key){ s, strlen(s) };
    }
}

static unsigned rnd(unsigned *x)
{
    *x = *x * 1103515245u + 12345u;
    return *x >> 8;
}

/* Random keys for j: nkeys of them over few accounts, repeats and aliases included. */
static void pick(struct mjob *j, unsigned *x)
{
    unsigned r = rnd(x) % 100;
    int nkeys = r < 15 ? 1 : r < 60 ? 2 + (int)(rnd(x) % 3) : r < 85 ? 5 + (int)(rnd(x) % 12) : 17 + (int)(rnd(x) % 48);
    j->nkeys = (uint8_t)nkeys;
    j->n = 0;
    for (int i = 0; i < nkeys; i++) {
        int a = (int)(rnd(x) % (unsigned)accounts);
        j->key_acct[i] = (uint8_t)a;
        j->key_alias[i] = rnd(x) % 4 == 0;
        bool seen = false;
        for (int k = 0; k < j->n; k++)
            seen |= j->acct[k] == a;
        if (!seen)
            j->acct[j->n++] = (uint8_t)a;
    }
    j->spin = rnd(x) % 64 == 0;
}

static int submit_job(struct mjob *j, bool try)
{
    struct shard_key keys[MAX_KEYS];
    keys_of(j, keys);
    return try ? shard_try_submit_multi(disp, keys, j->nkeys, run_job, j)
               : shard_submit_multi(disp, keys, j->nkeys, run_job, j);
}

static void run_job(shard_worker *w, void *arg)
{
    struct mjob *j = arg;
    atomic_fetch_add(&in_run, 1);
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "a job ran twice (%d keys)", j->nkeys);
    for (int i = 0; i < j->n; i++)
        CHECK(atomic_fetch_add(&busy[j->acct[i]], 1) == 0, "account %d: two jobs at once (%s)", j->acct[i],
              shard_worker_name(w));
    bool ordered = j->producer >= 0 && atomic_load(&j->resubmits) == 0;
    for (int i = 0; i < j->n; i++) {
        value[j->acct[i]]++;
        if (ordered) {
            uint32_t *last = &last_seq[j->acct[i]][j->producer];
            CHECK(j->seq[i] >= *last, "account %d producer %d: ran #%u after #%u", j->acct[i], j->producer,
                  j->seq[i], *last - 1);
            *last = j->seq[i] + 1;
        }
    }
    if (j->spin) {
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do
            clock_gettime(CLOCK_MONOTONIC, &t);
        while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 200000);
    }
    atomic_fetch_add_explicit(&acct_runs, j->n, memory_order_relaxed);
    if (j->n > 1)
        atomic_fetch_add_explicit(&multi_runs, 1, memory_order_relaxed);
    /* Some jobs submit a multi-key job from the worker (a chain of at most 3). */
    unsigned x = (unsigned)(uintptr_t)j * 2654435761u + (unsigned)atomic_load(&j->resubmits);
    if (j->depth < 3 && rnd(&x) % 8 == 0) {
        long c = atomic_fetch_add(&nchildren, 1);
        if (c < CHILDREN) {
            struct mjob *k = &children[c];
            k->producer = -1;
            k->depth = (uint8_t)(j->depth + 1);
            pick(k, &x);
            k->spin = false;
            int rc = submit_job(k, rnd(&x) % 2);
            if (rc == -EAGAIN || rc == -ESHUTDOWN) {
                atomic_fetch_add(&child_refused, 1);
                k->nkeys = 0; /* not accepted: not checked */
            } else {
                CHECK(rc == 0, "a job's submit_multi: %s", shard_strerror(rc));
            }
        } else {
            atomic_fetch_sub(&nchildren, 1);
        }
    }
    for (int i = 0; i < j->n; i++)
        atomic_fetch_sub(&busy[j->acct[i]], 1);
    atomic_fetch_sub(&in_run, 1);
}

/* Whether job j is done with: run once, and submitted again as often as it was dropped. */
static bool settled(struct mjob *j)
{
    return atomic_load(&j->runs) == 1 && atomic_load(&j->drops) == atomic_load(&j->resubmits);
}

/* Whether every accepted job, and every child accepted so far, is done with, no job runs (one
 * running may yet submit a child), and no multi-key job is open or waiting: in_run's decrement is a
 * job's last write, but a multi-key job stops counting as open only after its fn has returned and its
 * keys are let go (multi.c's end()), and the last job may be one the drain just returned did not wait
 * for (a child its parent submitted while that drain was under way, or a job a crash stuck): the
 * check after would read it open. */
static bool all_settled(void *ctx)
{
    (void)ctx;
    /* The children counted before no job runs were written by jobs that have ended (a job that starts
     * later takes a later index): their nkeys are read safely. */
    long nc = atomic_load(&nchildren);
    if (atomic_load(&in_run))
        return false;
    for (int p = 0; p < PRODUCERS; p++)
        for (long i = 0; i < njobs[p]; i++)
            if (!settled(&jobs[p][i]))
                return false;
    for (long i = 0; i < nc && i < CHILDREN; i++)
        if (children[i].nkeys && !settled(&children[i]))
            return false;
    /* A job seen settled above may have started during the walk (it was waiting behind a stuck key
     * when in_run was read), and may have taken a child past nc: neither, if no job runs now and no
     * child was taken since. */
    if (atomic_load(&in_run) != 0 || atomic_load(&nchildren) != nc)
        return false;
    return stress_none_open(disp);
}

static void on_dropped(shard_job_fn fn, void *arg, void *user)
{
    (void)user;
    CHECK(fn == run_job, "on_dropped got a job that is not the user's");
    struct mjob *j = arg;
    atomic_fetch_add(&j->drops, 1);
    /* Submitted again, from the hook (the control thread, holding the dispatcher's control). */
    atomic_fetch_add(&j->resubmits, 1);
    int rc = submit_job(j, false);
    CHECK(rc == 0, "submit again from on_dropped: %s", shard_strerror(rc));
}

static void *producer(void *arg)
{
    int p = (int)(intptr_t)arg;
    uint32_t seq[MAX_ACCTS] = { 0 };
    unsigned x = 2654435761u * (unsigned)(p + 1);
    long n = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed) && n < MAX_JOBS) {
        struct mjob *j = &jobs[p][n];
        j->producer = (int16_t)p;
        pick(j, &x);
        for (int i = 0; i < j->n; i++)
            j->seq[i] = seq[j->acct[i]]++;
        bool try = rnd(&x) % 3 == 0;
        int rc;
        while ((rc = submit_job(j, try)) == -EAGAIN)
            sched_yield(); /* a retry loop, as a user's */
        CHECK(rc == 0, "submit: %s", shard_strerror(rc));
        n++;
    }
    njobs[p] = n;
    return NULL;
}

static void *control(void *arg)
{
    (void)arg;
    unsigned next = 0, oldest = 0, round = 0;
    while (!atomic_load(&control_stop)) {
        char name[16];
        snprintf(name, sizeof name, "c%u", next++);
        int err = shard_worker_add(disp, name, 1);
        CHECK(err == 0, "add %s: %s", name, shard_strerror(err));
        atomic_fetch_add(&changes, 1);
        if (next - oldest > 2) {
            snprintf(name, sizeof name, "c%u", oldest);
            int how = oldest++ % 3;
            err = how == 0   ? shard_worker_remove(disp, name)
                  : how == 1 ? shard_worker_crash(disp, name, SHARD_CRASH_REROUTE)
                             : shard_worker_crash(disp, name, SHARD_CRASH_DROP);
            CHECK(err == 0, "remove/crash %s: %s", name, shard_strerror(err));
            atomic_fetch_add(&changes, 1);
        }
        int a = (int)(round * 7u) % accounts;
        err = shard_key_place(disp, names[a][0], strlen(names[a][0]), round % 2 ? "w0" : "w1");
        CHECK(err == 0, "place: %s", shard_strerror(err));
        if (round >= 3) {
            int b = (int)((round - 3) * 7u) % accounts;
            err = shard_key_unplace(disp, names[b][1], strlen(names[b][1])); /* by its alias */
            CHECK(err == 0 || err == -ENOENT, "unplace: %s", shard_strerror(err));
        }
        if (round % 8 == 7) {
            CHECK(shard_drain(disp) == 0, "drain");
            atomic_fetch_add(&drains, 1);
        }
        round++;
        stress_pause_ms(2); /* the pace of the churn, not synchronisation */
    }
    return NULL;
}

/* A hang detector: aborts, with the stats, if the run is not over by its deadline. */
static sem_t finished;
static int deadline_s;
static void *watchdog(void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += deadline_s;
    while (sem_timedwait(&finished, &ts) != 0)
        if (errno != EINTR) {
            struct shard_stats st;
            shard_dispatcher_stats(disp, &st);
            fprintf(stderr, "stress_multi_churn: HUNG (multi_open %llu, multi_waiting %llu, epoch %llu)\n",
                    (unsigned long long)st.multi_open, (unsigned long long)st.multi_waiting,
                    (unsigned long long)st.epoch);
            abort();
        }
    return NULL;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int seconds = argc > 1 ? atoi(argv[1]) : STRESS_SANITIZED ? 2 : 3;
    accounts = argc > 2 ? atoi(argv[2]) : 48;
    if (seconds < 1 || accounts < 2 || accounts > MAX_ACCTS) {
        fprintf(stderr, "usage: stress_multi_churn [SECONDS >= 1 [2 <= ACCOUNTS <= %d]]\n", MAX_ACCTS);
        return 2;
    }
    for (int a = 0; a < accounts; a++) {
        snprintf(names[a][0], sizeof names[a][0], "a%d", a);
        snprintf(names[a][1], sizeof names[a][1], "a%d#", a);
    }
    for (int p = 0; p < PRODUCERS; p++)
        jobs[p] = calloc(MAX_JOBS, sizeof *jobs[p]);
    children = calloc(CHILDREN, sizeof *children);
    struct shard_config cfg = { .workers = 3, .queue_capacity = 128, .on_dropped = on_dropped,
                                .ring = { .hash = fnv } };
    CHECK(shard_dispatcher_create(&disp, &cfg) == 0, "create");
    CHECK(shard_dispatcher_key_hash(disp, "a1", 2) == shard_dispatcher_key_hash(disp, "a1#", 3), "alias hash");
    sem_init(&finished, 0, 0);
    deadline_s = seconds + (STRESS_SANITIZED ? 240 : 120);
    pthread_t wd, prod[PRODUCERS], ctl;
    pthread_create(&wd, NULL, watchdog, NULL);
    for (int p = 0; p < PRODUCERS; p++)
        pthread_create(&prod[p], NULL, producer, (void *)(intptr_t)p);
    pthread_create(&ctl, NULL, control, NULL);
    stress_pause_ms(seconds * 1000); /* how long the test runs, not synchronisation */
    atomic_store(&stop, 1);
    for (int p = 0; p < PRODUCERS; p++)
        pthread_join(prod[p], NULL);
    /* The changes are what is under test: a loaded machine (a sanitizer beside other builds) makes
     * them slower, not fewer, so the churn goes on until ten were made; changes that stall for good
     * end in the watchdog. */
    while (atomic_load(&changes) < 10)
        stress_pause_ms(10); /* a poll of the count above, not synchronisation */
    atomic_store(&control_stop, 1);
    pthread_join(ctl, NULL);
    /* Until every job and every child (jobs submit them, and their children more) has run: a crash may
     * also have stuck a job, and the jobs behind its keys with it (stress_common.h). */
    stress_drain_until(disp, all_settled, NULL);

    long submitted = 0, checked_runs = 0, dropped = 0, big = 0;
    for (int p = 0; p < PRODUCERS; p++)
        for (long i = 0; i < njobs[p]; i++) {
            struct mjob *j = &jobs[p][i];
            int r = atomic_load(&j->runs), dr = atomic_load(&j->drops), rs = atomic_load(&j->resubmits);
            submitted++;
            big += j->nkeys > 16;
            dropped += dr;
            checked_runs += r;
            CHECK(r == 1 && dr == rs, "producer %d job %ld (%d keys, %d accounts): ran %d times, dropped %d, again %d",
                  p, i, j->nkeys, j->n, r, dr, rs);
        }
    long nc = atomic_load(&nchildren), accepted_children = 0;
    for (long i = 0; i < nc && i < CHILDREN; i++) {
        struct mjob *j = &children[i];
        if (!j->nkeys)
            continue;
        accepted_children++;
        int r = atomic_load(&j->runs), dr = atomic_load(&j->drops), rs = atomic_load(&j->resubmits);
        dropped += dr;
        checked_runs += r;
        CHECK(r == 1 && dr == rs, "child %ld (%d keys): ran %d times, dropped %d, again %d", i, j->nkeys, r, dr, rs);
    }
    long sum = 0;
    for (int a = 0; a < accounts; a++)
        sum += value[a];
    CHECK(sum == atomic_load(&acct_runs), "accounts counted %ld runs, jobs %ld", sum, atomic_load(&acct_runs));
    struct shard_stats st;
    CHECK(shard_dispatcher_stats(disp, &st) == 0, "stats");
    CHECK((long)st.dropped == dropped, "stats count %llu dropped, on_dropped heard of %ld",
          (unsigned long long)st.dropped, dropped);
    CHECK(atomic_load(&changes) >= 10, "only %d membership changes", atomic_load(&changes));
    printf("multi churn: %ld jobs (%ld of over 16 keys), %ld by jobs (%ld refused), %ld runs (%ld multi-key), "
           "%ld drops submitted again; %d changes, %d drains\n",
           submitted, big, accepted_children, atomic_load(&child_refused), checked_runs, atomic_load(&multi_runs),
           dropped, atomic_load(&changes), atomic_load(&drains));
    shard_dispatcher_destroy(disp);
    sem_post(&finished);
    pthread_join(wd, NULL);
    for (int p = 0; p < PRODUCERS; p++)
        free(jobs[p]);
    free(children);
    return stress_result("stress_multi_churn");
}
