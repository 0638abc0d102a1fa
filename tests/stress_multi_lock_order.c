/* Multi-key jobs over few keys from many threads while the ring changes every few milliseconds, with
 * the window between a multi-key submit's look at the ring and d->multi_lock held open: the order of
 * the multi-key jobs that share keys must stay one order (the lock's, which must also be their rings'
 * epochs' order: multi.c's head), or two of them wait for each other for ever.
 *
 * The window is held open at random: the library's calls to pthread_mutex_lock and
 * pthread_mutex_unlock are wrapped at link time (static library only), and inside this program's
 * submit calls one in three sleeps 0-200 us, before a lock and after an unlock: between the owners'
 * look-up and the lock, and between the unlock and the wake-ups, while the control thread publishes
 * rings (adds, removes, REROUTE and DROP crashes, placements, weights, drains; the balancer runs too).
 * Producers submit single-key jobs and multi-key jobs of 2-4 of 5 keys (by bytes and by hash, with
 * steps or not, try or not, a key repeated now and then); jobs submit more from their workers.
 * Checked: no two jobs of a key at once; a job with steps holds every key from its first step to
 * done; each producer's jobs of a key in its order (gaps only for dropped jobs); each job run or
 * dropped once; no hang (the watchdog). Without the look again under the lock (if the ring changed
 * since the owners were looked up), this hung in 3 runs of 5 s out of 3, and its default run ended in
 * the watchdog; the project's other multi-key stress programs passed so. It holds with it.
 * Written from a hostile review's program (of b0df87a).
 *   stress_multi_lock_order [SECONDS]   (default 3; 2 under a sanitizer) */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#include "stress_common.h"

int __real_pthread_mutex_lock(pthread_mutex_t *m);
int __real_pthread_mutex_unlock(pthread_mutex_t *m);

static _Thread_local bool armed; /* inside one of this program's submits */
static atomic_long delays;

static void delay(void)
{
    if (armed)
        stress_jitter(&delays);
}

int __wrap_pthread_mutex_lock(pthread_mutex_t *m)
{
    delay();
    return __real_pthread_mutex_lock(m);
}

int __wrap_pthread_mutex_unlock(pthread_mutex_t *m)
{
    int r = __real_pthread_mutex_unlock(m);
    delay();
    return r;
}

#define PRODUCERS 6
#define KEYS      5
#define MAX_KEYS  4     /* distinct keys a job */
#define MAX_JOBS  150000 /* a producer's */
#define CHILDREN  200000

enum kind { SINGLE, MULTI, MULTI_HASH, EACH, EACH_HASH, TRY, TRY_EACH_HASH, KINDS };

struct job {
    int        producer; /* -1: a job's */
    int        kind, n, given; /* n distinct keys; given: n, or n + 1 with the first repeated */
    int        key[MAX_KEYS];
    uint32_t   seq[MAX_KEYS];
    bool       child;   /* submits one from its worker */
    atomic_int runs, drops, steps;
};

static shard_dispatcher *d;
static char key_name[KEYS][8];
static uint64_t key_hash[KEYS];
static _Atomic(uintptr_t) holder[KEYS];      /* the job holding the key now, or 0 */
static uint32_t last_seq[PRODUCERS][KEYS];   /* only the key's jobs touch it */
static struct job *jobs[PRODUCERS], *children;
static atomic_long njobs[PRODUCERS], nchildren, children_refused;
static atomic_int stop_producers, stop_control;
static atomic_long ended, changes; /* ended: a job's last write, publishing it to main */

static void take(struct job *j, int i)
{
    uintptr_t none = 0;
    CHECK(atomic_compare_exchange_strong(&holder[j->key[i]], &none, (uintptr_t)j),
          "key %d held by another job when a job of kind %d took it", j->key[i], j->kind);
    if (j->producer >= 0) {
        uint32_t *last = &last_seq[j->producer][j->key[i]];
        CHECK(j->seq[i] > *last, "producer %d key %d: #%u ran after #%u", j->producer, j->key[i], j->seq[i], *last);
        *last = j->seq[i];
    }
}

static void give(struct job *j, int i)
{
    uintptr_t me = (uintptr_t)j;
    CHECK(atomic_compare_exchange_strong(&holder[j->key[i]], &me, 0), "key %d let go by a job not holding it",
          j->key[i]);
}

static void submit_job(struct job *j, bool from_worker);

/* j's n distinct keys, drawn at random. */
static void pick_keys(struct job *j, int n, uint64_t *s)
{
    j->n = n;
    for (int i = 0, used = 0; i < n; i++) {
        int k;
        do
            k = (int)(stress_rnd(s) % KEYS);
        while (used >> k & 1);
        used |= 1 << k;
        j->key[i] = k;
    }
}

/* A job's own multi-key job, submitted from its worker, now and then. */
static void maybe_child(struct job *j)
{
    if (!j->child)
        return;
    long c = atomic_fetch_add(&nchildren, 1);
    if (c >= CHILDREN) {
        atomic_fetch_sub(&nchildren, 1);
        return;
    }
    uint64_t s = (uintptr_t)j * 0x9e3779b97f4a7c15ull | 1;
    struct job *x = &children[c];
    x->producer = -1;
    x->kind = 1 + (int)(stress_rnd(&s) % (KINDS - 1));
    pick_keys(x, 2 + (int)(stress_rnd(&s) % (MAX_KEYS - 1)), &s);
    x->given = x->n;
    submit_job(x, true);
}

static void run_fn(shard_worker *w, void *arg)
{
    (void)w;
    struct job *j = arg;
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "a job ran twice");
    for (int i = 0; i < j->n; i++)
        take(j, i);
    maybe_child(j);
    for (int i = 0; i < j->n; i++)
        give(j, i);
    atomic_fetch_add(&ended, 1);
}

static void step_fn(shard_worker *w, void *arg, size_t key)
{
    (void)w;
    struct job *j = arg;
    int st = atomic_fetch_add(&j->steps, 1);
    CHECK(st == (int)key, "step %zu came as the %d-th", key, st);
    if (st == 0)
        for (int i = 0; i < j->n; i++)
            take(j, i);
    for (int i = 0; i < j->n; i++)
        CHECK(atomic_load(&holder[j->key[i]]) == (uintptr_t)j, "key %d not held by its job at step %d", j->key[i],
              st);
}

static void done_fn(shard_worker *w, void *arg)
{
    (void)w;
    struct job *j = arg;
    CHECK(atomic_load(&j->steps) == j->n, "done after %d of %d steps", atomic_load(&j->steps), j->n);
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "a job's done ran twice");
    maybe_child(j);
    for (int i = 0; i < j->n; i++)
        give(j, i);
    atomic_fetch_add(&ended, 1);
}

static void on_dropped(shard_job_fn fn, void *arg, void *user)
{
    (void)user;
    CHECK(fn == run_fn || fn == done_fn, "on_dropped got a job that is not the program's");
    struct job *j = arg;
    CHECK(atomic_fetch_add(&j->drops, 1) == 0, "a job dropped twice");
    CHECK(atomic_load(&j->runs) == 0 && (fn == run_fn || atomic_load(&j->steps) == 0),
          "a job dropped after it ran or began its steps");
    atomic_fetch_add(&ended, 1);
}

static void submit_job(struct job *j, bool from_worker)
{
    struct shard_key ks[MAX_KEYS + 1];
    uint64_t hs[MAX_KEYS + 1];
    for (int i = 0; i < j->given; i++) {
        int k = j->key[i < j->n ? i : 0];
        ks[i] = (struct shard_key){ key_name[k], strlen(key_name[k]) };
        hs[i] = key_hash[k];
    }
    size_t n = (size_t)j->given;
    int rc;
    armed = true;
    do {
        switch (j->kind) {
        case SINGLE: rc = shard_submit(d, ks[0].key, ks[0].len, run_fn, j); break;
        case MULTI: rc = shard_submit_multi(d, ks, n, run_fn, j); break;
        case MULTI_HASH: rc = shard_submit_multi_hash(d, hs, n, run_fn, j); break;
        case EACH: rc = shard_submit_multi_each(d, ks, n, step_fn, done_fn, j); break;
        case EACH_HASH: rc = shard_submit_multi_each_hash(d, hs, n, step_fn, done_fn, j); break;
        case TRY: rc = shard_try_submit_multi(d, ks, n, run_fn, j); break;
        default: rc = shard_try_submit_multi_each_hash(d, hs, n, step_fn, done_fn, j); break;
        }
    } while (rc == -EAGAIN && !from_worker && (sched_yield(), true));
    armed = false;
    if (rc == -EAGAIN && from_worker) {
        atomic_fetch_add(&children_refused, 1); /* a job's try found a queue full: not accepted */
        return;
    }
    CHECK(rc == 0, "submit of kind %d: %s", j->kind, shard_strerror(rc));
}

static void *producer(void *arg)
{
    int p = (int)(intptr_t)arg;
    uint64_t s = 0x1234567ull * (uint64_t)(p + 1) + 77;
    uint32_t seq[KEYS] = { 0 };
    for (long n = 0; !atomic_load(&stop_producers) && n < MAX_JOBS; n++) {
        struct job *j = &jobs[p][n];
        j->producer = p;
        j->kind = (int)(stress_rnd(&s) % KINDS);
        pick_keys(j, j->kind == SINGLE ? 1 : 2 + (int)(stress_rnd(&s) % (MAX_KEYS - 1)), &s);
        for (int i = 0; i < j->n; i++)
            j->seq[i] = ++seq[j->key[i]];
        j->given = j->n + (j->kind != SINGLE && stress_rnd(&s) % 4 == 0);
        j->child = stress_rnd(&s) % 16 == 0;
        atomic_store(&njobs[p], n + 1);
        submit_job(j, false);
    }
    return NULL;
}

static void *control(void *arg)
{
    (void)arg;
    char members[16][16];
    int live = 4, next = 0;
    for (int i = 0; i < live; i++)
        snprintf(members[i], sizeof members[i], "w%d", i);
    uint64_t s = 0xabcdef12345ull;
    while (!atomic_load(&stop_control)) {
        stress_pause_ms(1 + (int)(stress_rnd(&s) % 4)); /* the pace of the churn, not synchronisation */
        int op = (int)(stress_rnd(&s) % 9), rc = 0, k = (int)(stress_rnd(&s) % KEYS);
        const char *some = members[stress_rnd(&s) % (uint32_t)live];
        if (op == 0 && live < 8) {
            snprintf(members[live], sizeof members[live], "x%d", next++);
            rc = shard_worker_add(d, members[live], 1 + stress_rnd(&s) % 3);
            live += rc == 0;
        } else if (op <= 3 && live > 2) {
            int i = (int)(stress_rnd(&s) % (uint32_t)live);
            rc = op == 1   ? shard_worker_remove(d, members[i])
                 : op == 2 ? shard_worker_crash(d, members[i], SHARD_CRASH_REROUTE)
                           : shard_worker_crash(d, members[i], SHARD_CRASH_DROP);
            if (rc == 0)
                memmove(members[i], members[i + 1], sizeof members[0] * (size_t)(--live - i));
        } else if (op == 4 || op == 5) {
            rc = shard_key_place(d, key_name[k], strlen(key_name[k]), some);
        } else if (op == 6) {
            rc = shard_key_unplace(d, key_name[k], strlen(key_name[k]));
            rc = rc == -ENOENT ? 0 : rc;
        } else if (op == 7) {
            rc = shard_worker_set_weight(d, some, 1 + stress_rnd(&s) % 4);
        } else {
            rc = shard_drain(d);
        }
        CHECK(rc == 0 || rc == -ENOENT, "change %d: %s", op, shard_strerror(rc));
        atomic_fetch_add(&changes, 1);
    }
    return NULL;
}

/* Whether every job accepted has ended (run to its end, or dropped): a child counts from when its
 * parent takes its slot until it is refused, so the count waits for a parent still submitting. And
 * whether no multi-key job is open or waiting: `ended` is a job's last write, but a multi-key job
 * stops counting as open only after its fn has returned and its keys are let go (multi.c's end()),
 * and the last job may be one the drain just returned did not wait for (a child its parent submitted
 * while that drain was under way, or a job a crash stuck): the check after would read it open. */
static bool all_ended(void *ctx)
{
    (void)ctx;
    long nc = atomic_load(&nchildren), accepted = nc - atomic_load(&children_refused);
    for (int p = 0; p < PRODUCERS; p++)
        accepted += atomic_load(&njobs[p]);
    if (atomic_load(&ended) < accepted || atomic_load(&nchildren) != nc)
        return false;
    return stress_none_open(d);
}

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : STRESS_SANITIZED ? 2 : 3;
    if (seconds < 1) {
        fprintf(stderr, "usage: stress_multi_lock_order [SECONDS >= 1]\n");
        return 2;
    }
    stress_watchdog("stress_multi_lock_order", (unsigned)seconds + (STRESS_SANITIZED ? 240 : 90));
    struct shard_config cfg = { .workers = 4, .queue_capacity = 16, .on_dropped = on_dropped,
                                .balance = { .interval_ms = 5, .threshold = 1.01, .rounds = 1, .by_jobs = true } };
    CHECK(shard_dispatcher_create(&d, &cfg) == 0, "create");
    for (int k = 0; k < KEYS; k++) {
        snprintf(key_name[k], sizeof key_name[k], "k%d", k);
        key_hash[k] = shard_dispatcher_key_hash(d, key_name[k], strlen(key_name[k]));
    }
    for (int p = 0; p < PRODUCERS; p++)
        jobs[p] = calloc(MAX_JOBS, sizeof *jobs[p]);
    children = calloc(CHILDREN, sizeof *children);
    pthread_t prod[PRODUCERS], ctl;
    pthread_create(&ctl, NULL, control, NULL);
    for (int p = 0; p < PRODUCERS; p++)
        pthread_create(&prod[p], NULL, producer, (void *)(intptr_t)p);
    stress_pause_ms(seconds * 1000); /* how long the test runs, not synchronisation */
    atomic_store(&stop_producers, 1);
    for (int p = 0; p < PRODUCERS; p++)
        pthread_join(prod[p], NULL);
    atomic_store(&stop_control, 1);
    pthread_join(ctl, NULL);
    /* Until every job has ended: a crash may have stuck one, and the jobs behind its keys with it. */
    stress_drain_until(d, all_ended, NULL);
    long total = 0, ran = 0, dropped = 0;
    for (int p = 0; p < PRODUCERS; p++)
        for (long i = 0; i < njobs[p]; i++, total++) {
            int r = atomic_load(&jobs[p][i].runs), dr = atomic_load(&jobs[p][i].drops);
            CHECK(r + dr == 1, "producer %d job %ld (kind %d): ran %d, dropped %d", p, i, jobs[p][i].kind, r, dr);
            ran += r;
            dropped += dr;
        }
    shard_dispatcher_destroy(d);
    stress_watchdog("stress_multi_lock_order", 0);
    printf("stress_multi_lock_order: %ld jobs (ran %ld, dropped %ld), %ld by jobs, %ld changes, %ld delays\n", total,
           ran, dropped, atomic_load(&nchildren), atomic_load(&changes), atomic_load(&delays));
    for (int p = 0; p < PRODUCERS; p++)
        free(jobs[p]);
    free(children);
    return stress_result("stress_multi_lock_order");
}
