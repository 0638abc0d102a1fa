/* Destroy racing multi-key submits (shard_dispatcher_destroy in dispatcher.h, multi.h): a submit already
 * inside shard when destroy is called, or entering while it runs, returns 0, and its job then runs (or
 * is handed to on_dropped) once before destroy returns; or it returns -ESHUTDOWN (a try variant also
 * -EAGAIN), and its job never runs; and it never touches freed memory (AddressSanitizer). A multi-key
 * submit queues its parts under d->multi_lock, unlocks it, then wakes the parts' owners
 * (multi_submit.c's wake_owners): destroy must neither stop the workers under the pushes nor free them
 * under the wake-ups.
 *
 * The library's calls to pthread_mutex_lock, pthread_mutex_unlock and write are wrapped at link time
 * (static library only); d->multi_lock is told apart through dispatcher_internal.h.
 *   window  one multi-key submit (split over two workers, whole on one with steps, split by hash) is
 *           held at one point while the main thread destroys the dispatcher: before it locks
 *           d->multi_lock (past its shutdown check), right after it unlocks it (its parts queued, no
 *           owner woken yet), and inside its wake-up of a parked owner (the write to the owner's
 *           wake_fd; the workers wait in an idle hook that returns every millisecond, so that destroy
 *           does not need that write to stop them). destroy must not return during the hold (HOLD_MS:
 *           a wait that times out is the expected case); the submit returns 0 (or, held before the
 *           lock, -ESHUTDOWN), and its job has run once when destroy returns (never after -ESHUTDOWN).
 *   race    producers submit multi-key jobs of 2-6 of 24 keys (by bytes and by hash, with steps or
 *           not, try or not) to 3 or 70 workers, and jobs submit more from their workers, with one in
 *           three of the library's lock and unlock calls inside those submits sleeping 0-200 us; the
 *           main thread destroys the dispatcher after 0-3 ms, every other round right after a DROP
 *           crash of a worker. Each submit returned 0, -ESHUTDOWN or (a try) -EAGAIN; each job
 *           accepted ran or was dropped once, each refused one neither. A submit that starts after
 *           destroy has returned uses freed memory (dispatcher.h): the workers' stop hooks hold destroy
 *           until every producer has seen -ESHUTDOWN, bounded.
 * Changes it caught: submit_multi's read-side section ended with the pushes, before the unlock (window:
 * destroy returned during the hold after the unlock; then a use of the freed snapshot in wake_owners,
 * which AddressSanitizer reports); the wake-ups outside the section (window: destroy returned during
 * the hold in the wake-up; the same use after free); destroy without the grace period after it sets
 * shutdown (window: the submit held before the lock returned 0 and its job never ran; race: the same,
 * then destroy hung joining a worker, ended by the watchdog).
 *   stress_multi_destroy [window|race]   (default: both) */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "dispatcher_internal.h" /* d->multi_lock, to tell it apart in the wrapped calls */
#include "stress_common.h"

#define HANG_S  (STRESS_SANITIZED ? 30 : 10)
#define HOLD_MS (STRESS_SANITIZED ? 1000 : 250)

int     __real_pthread_mutex_lock(pthread_mutex_t *m);
int     __real_pthread_mutex_unlock(pthread_mutex_t *m);
ssize_t __real_write(int fd, const void *buf, size_t n);

/* Waits for s at most ms. Return: whether it was posted. */
static bool sem_wait_ms(sem_t *s, long ms)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += ms % 1000 * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    while (sem_timedwait(s, &t) != 0)
        if (errno != EINTR)
            return false;
    return true;
}

/* ---- the wrapped calls ---- */

enum hold { NO_HOLD, BEFORE_LOCK, AFTER_UNLOCK, IN_WAKE };
static const char *const hold_name[] = { "", "before it locked d->multi_lock", "after it unlocked d->multi_lock",
                                         "in its wake-up of a parked owner" };

static _Thread_local int  hold_at;     /* the window's submitter: where it is to be held */
static _Thread_local bool past_unlock; /* IN_WAKE: d->multi_lock unlocked, the wake-ups under way */
static _Thread_local bool jitter;      /* race: inside one of the program's submits */
static pthread_mutex_t *multi_lock;    /* the window's dispatcher's; read by its submitter only */
static sem_t reached, destroyed;       /* the submitter reached its hold point (or returned); destroy returned */
static atomic_int held;                /* where the submitter was held (NO_HOLD: it was not) */
static atomic_long delays;

/* Holds the window's submitter HOLD_MS, or until destroy returns, which it must not meanwhile. */
static void hold(void)
{
    int at = hold_at;
    hold_at = NO_HOLD;
    atomic_store(&held, at);
    sem_post(&reached);
    if (sem_wait_ms(&destroyed, HOLD_MS))
        CHECK(false, "destroy returned while a multi-key submit was held %s", hold_name[at]);
}

static void jitter_delay(void)
{
    if (jitter)
        stress_jitter(&delays);
}

int __wrap_pthread_mutex_lock(pthread_mutex_t *m)
{
    if (hold_at == BEFORE_LOCK && m == multi_lock)
        hold();
    else
        jitter_delay();
    return __real_pthread_mutex_lock(m);
}

int __wrap_pthread_mutex_unlock(pthread_mutex_t *m)
{
    int r = __real_pthread_mutex_unlock(m);
    if (hold_at == AFTER_UNLOCK && m == multi_lock)
        hold();
    else if (hold_at == IN_WAKE && m == multi_lock)
        past_unlock = true;
    else
        jitter_delay();
    return r;
}

ssize_t __wrap_write(int fd, const void *buf, size_t n)
{
    if (hold_at == IN_WAKE && past_unlock) /* the first write after the unlock: a wake-up's */
        hold();
    return __real_write(fd, buf, n);
}

/* ---- window ---- */

enum shape { SPLIT, WHOLE_STEPS, SPLIT_HASH, SHAPES };
static const char *const shape_name[] = { "split", "whole with steps", "split by hash" };

struct window {
    shard_dispatcher *d;
    int               at, shape, rc;
    struct shard_key  keys[3];
    uint64_t          hashes[3];
};
static atomic_int window_runs;

static void window_run(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    atomic_fetch_add(&window_runs, 1);
}

static void window_step(shard_worker *w, void *arg, size_t key)
{
    (void)w, (void)arg, (void)key;
}

/* Waits for work in the hook, a millisecond at most at a time (the worker calls it again). */
static void idle_1ms(shard_worker *w, int wake_fd, int timeout_ms, void *user)
{
    (void)w, (void)user;
    struct pollfd p = { .fd = wake_fd, .events = POLLIN };
    poll(&p, 1, timeout_ms < 0 || timeout_ms > 1 ? 1 : timeout_ms);
}

static void *window_submitter(void *arg)
{
    struct window *x = arg;
    hold_at = x->at;
    switch (x->shape) {
    case SPLIT: x->rc = shard_submit_multi(x->d, x->keys, 2, window_run, NULL); break;
    case WHOLE_STEPS: x->rc = shard_submit_multi_each(x->d, &x->keys[1], 2, window_step, window_run, NULL); break;
    default: x->rc = shard_submit_multi_hash(x->d, x->hashes, 3, window_run, NULL); break;
    }
    hold_at = NO_HOLD;
    past_unlock = false;
    if (atomic_load(&held) == NO_HOLD)
        sem_post(&reached); /* it returned without reaching its hold point */
    return NULL;
}

/* A key owned by worker id, in buf. */
static struct shard_key key_on(shard_dispatcher *d, uint32_t id, unsigned nth, char buf[24])
{
    for (unsigned i = 0;; i++) {
        size_t n = (size_t)snprintf(buf, 24, "win-%u", i);
        uint32_t o;
        CHECK(shard_key_owner(d, buf, n, &o) == 0, "key_owner");
        if (o == id && nth-- == 0)
            return (struct shard_key){ buf, n };
    }
}

/* One round. Return: whether the submit was held where it was to be. */
static bool window_round(int at, int shape)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 3, .on_worker_idle = idle_1ms };
    CHECK(shard_dispatcher_create(&d, &cfg) == 0, "create");
    static char names[4][24];
    struct window x = { .d = d, .at = at, .shape = shape };
    x.keys[0] = key_on(d, 0, 0, names[0]); /* split: w0 and w1 */
    x.keys[1] = key_on(d, 1, 0, names[1]); /* whole: w1 twice */
    x.keys[2] = key_on(d, shape == WHOLE_STEPS ? 1 : 2, shape == WHOLE_STEPS ? 1 : 0, names[2]);
    for (int i = 0; i < 3; i++)
        x.hashes[i] = shard_dispatcher_key_hash(d, x.keys[i].key, x.keys[i].len);
    multi_lock = &d->multi_lock;
    atomic_store(&held, NO_HOLD);
    atomic_store(&window_runs, 0);
    sem_init(&reached, 0, 0);
    sem_init(&destroyed, 0, 0);
    pthread_t t;
    pthread_create(&t, NULL, window_submitter, &x);
    CHECK(sem_wait_ms(&reached, HANG_S * 1000L), "%s: the submit neither reached its hold point nor returned",
          shape_name[shape]);
    bool was_held = atomic_load(&held) == at;
    shard_dispatcher_destroy(d);
    int runs = atomic_load(&window_runs); /* every worker joined: no run comes later */
    sem_post(&destroyed);
    pthread_join(t, NULL);
    multi_lock = NULL;
    CHECK(x.rc == 0 || x.rc == -ESHUTDOWN, "%s, held %s: the submit returned %s", shape_name[shape], hold_name[at],
          shard_strerror(x.rc));
    if (was_held && at != BEFORE_LOCK) /* its parts were queued: on error nothing is (multi.h) */
        CHECK(x.rc == 0, "%s, held %s: the submit returned %s", shape_name[shape], hold_name[at],
              shard_strerror(x.rc));
    CHECK(runs == (x.rc == 0), "%s, held %s: the submit returned %s and its job ran %d times before destroy returned",
          shape_name[shape], hold_name[at], shard_strerror(x.rc), runs);
    sem_destroy(&reached);
    sem_destroy(&destroyed);
    return was_held;
}

static void window(void)
{
    for (int at = BEFORE_LOCK; at <= IN_WAKE; at++)
        for (int shape = 0; shape < SHAPES; shape++) {
            /* In the wake-up only if an owner was parked when it was woken: else again. */
            int tries = 0;
            while (!window_round(at, shape) && ++tries < 50)
                ;
            CHECK(tries < 50, "%s: held %s in none of 50 tries", shape_name[shape], hold_name[at]);
            printf("window: %s, held %s (%d tries)\n", shape_name[shape], hold_name[at], tries + 1);
        }
}

/* ---- race ---- */

#define PRODUCERS 4
#define NKEYS     24
#define POOL      8192  /* a producer's jobs in a round (a refused try is tried again in its record) */
#define CHILDREN  16384 /* jobs' jobs in a round */

enum kind { MULTI, MULTI_HASH, EACH, EACH_HASH, TRY_MULTI, TRY_EACH_HASH, KINDS };

struct rjob {
    int        kind, rc;  /* rc: what its submit returned, written by its submitter after */
    bool       child;     /* submits one from its worker */
    atomic_int runs, drops;
};

static shard_dispatcher *rd;
static char key_name[NKEYS][8];
static uint64_t key_hash[NKEYS];
static struct rjob *pool[PRODUCERS], *children;
static long njobs[PRODUCERS];
static atomic_long nchildren, eagains;
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static int producers_done;
static atomic_int stops_timed_out;

static int submit_rjob(struct rjob *j, uint64_t *s);

static void run_fn(shard_worker *w, void *arg)
{
    (void)w;
    struct rjob *j = arg;
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "a job ran twice");
    CHECK(atomic_load(&j->drops) == 0, "a job ran after it was dropped");
    if (!j->child)
        return;
    long c = atomic_fetch_add(&nchildren, 1);
    if (c >= CHILDREN) {
        atomic_fetch_sub(&nchildren, 1);
        return;
    }
    uint64_t s = (uintptr_t)j * 0x9e3779b97f4a7c15ull | 1;
    struct rjob *x = &children[c];
    x->kind = (int)(stress_rnd(&s) % KINDS);
    x->rc = submit_rjob(x, &s); /* from a worker: never waits */
}

static void step_fn(shard_worker *w, void *arg, size_t key)
{
    (void)w, (void)arg, (void)key;
}

static void on_dropped(shard_job_fn fn, void *arg, void *user)
{
    (void)user;
    CHECK(fn == run_fn, "on_dropped got a job that is not the program's");
    struct rjob *j = arg;
    CHECK(atomic_fetch_add(&j->drops, 1) == 0, "a job dropped twice");
    CHECK(atomic_load(&j->runs) == 0, "a job dropped after it ran");
}

/* Holds destroy, in the workers' stop hooks, until every producer has seen -ESHUTDOWN: no submit
 * starts after destroy returns. Not on the crashed worker: the crash waits for nothing of it. */
static void on_stop(shard_worker *w, void *user)
{
    (void)user;
    if (shard_worker_crashed(w))
        return;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += HANG_S;
    pthread_mutex_lock(&done_lock);
    int rc = 0;
    while (producers_done < PRODUCERS && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&done_cond, &done_lock, &t);
    bool all = producers_done == PRODUCERS;
    pthread_mutex_unlock(&done_lock);
    if (!all && atomic_fetch_add(&stops_timed_out, 1) == 0)
        CHECK(false, "a stop hook waited %d s for the producers to see -ESHUTDOWN", HANG_S);
}

/* Submits j over 2-6 keys drawn at random (repeats allowed). Return: the submit's. */
static int submit_rjob(struct rjob *j, uint64_t *s)
{
    struct shard_key ks[6];
    uint64_t hs[6];
    size_t n = 2 + stress_rnd(s) % 5;
    for (size_t i = 0; i < n; i++) {
        int k = (int)(stress_rnd(s) % NKEYS);
        ks[i] = (struct shard_key){ key_name[k], strlen(key_name[k]) };
        hs[i] = key_hash[k];
    }
    int rc;
    jitter = true;
    switch (j->kind) {
    case MULTI: rc = shard_submit_multi(rd, ks, n, run_fn, j); break;
    case MULTI_HASH: rc = shard_submit_multi_hash(rd, hs, n, run_fn, j); break;
    case EACH: rc = shard_submit_multi_each(rd, ks, n, step_fn, run_fn, j); break;
    case EACH_HASH: rc = shard_submit_multi_each_hash(rd, hs, n, step_fn, run_fn, j); break;
    case TRY_MULTI: rc = shard_try_submit_multi(rd, ks, n, run_fn, j); break;
    default: rc = shard_try_submit_multi_each_hash(rd, hs, n, step_fn, run_fn, j); break;
    }
    jitter = false;
    return rc;
}

static void *producer(void *arg)
{
    int p = (int)((intptr_t)arg % PRODUCERS); /* arg: p + PRODUCERS * round */
    uint64_t s = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
    long n = 0;
    for (;;) {
        if (n == POOL) {
            CHECK(false, "producer %d: more than %d jobs in a round", p, POOL);
            break;
        }
        struct rjob *j = &pool[p][n];
        j->kind = (int)(stress_rnd(&s) % KINDS);
        j->child = stress_rnd(&s) % 8 == 0;
        int rc;
        /* A refused try is tried again in the same record: had it run, the record would show it. */
        while ((rc = submit_rjob(j, &s)) == -EAGAIN) {
            atomic_fetch_add(&eagains, 1);
            sched_yield();
        }
        j->rc = rc;
        n++;
        if (rc != 0) {
            CHECK(rc == -ESHUTDOWN, "producer %d: a submit returned %s", p, shard_strerror(rc));
            break;
        }
    }
    njobs[p] = n;
    pthread_mutex_lock(&done_lock);
    producers_done++;
    pthread_cond_broadcast(&done_cond);
    pthread_mutex_unlock(&done_lock);
    return NULL;
}

/* What the promise asks of one job after destroy. Return: whether it was accepted. */
static bool check_rjob(const struct rjob *j, const char *who, long i, int round)
{
    bool try = j->kind == TRY_MULTI || j->kind == TRY_EACH_HASH;
    int r = atomic_load(&j->runs), dr = atomic_load(&j->drops);
    CHECK(j->rc == 0 || j->rc == -ESHUTDOWN || (try && j->rc == -EAGAIN),
          "round %d, %s job %ld: its submit returned %s", round, who, i, shard_strerror(j->rc));
    CHECK(r + dr == (j->rc == 0), "round %d, %s job %ld (kind %d): its submit returned %s, then it ran %d and was "
          "dropped %d times", round, who, i, j->kind, shard_strerror(j->rc), r, dr);
    return j->rc == 0;
}

static void race(int rounds)
{
    for (int k = 0; k < NKEYS; k++)
        snprintf(key_name[k], sizeof key_name[k], "k%d", k);
    for (int p = 0; p < PRODUCERS; p++)
        pool[p] = calloc(POOL, sizeof *pool[p]);
    children = calloc(CHILDREN, sizeof *children);
    long accepted = 0, refused = 0, dropped = 0, by_jobs = 0;
    for (int r = 0; r < rounds; r++) {
        uint32_t workers = r / 2 % 2 ? 70 : 3;
        struct shard_config cfg = { .workers = workers, .queue_capacity = 16, .on_dropped = on_dropped,
                                    .on_worker_stop = on_stop };
        CHECK(shard_dispatcher_create(&rd, &cfg) == 0, "create");
        for (int k = 0; k < NKEYS; k++)
            key_hash[k] = shard_dispatcher_key_hash(rd, key_name[k], strlen(key_name[k]));
        for (int p = 0; p < PRODUCERS; p++)
            memset(pool[p], 0, POOL * sizeof *pool[p]);
        memset(children, 0, CHILDREN * sizeof *children);
        atomic_store(&nchildren, 0);
        producers_done = 0;
        pthread_t t[PRODUCERS];
        for (int p = 0; p < PRODUCERS; p++)
            pthread_create(&t[p], NULL, producer, (void *)(intptr_t)(p + r * PRODUCERS));
        struct timespec ts = { 0, (long)(r % 4) * 1000000L + 100000L };
        nanosleep(&ts, NULL); /* when destroy comes, not synchronisation */
        if (r % 2)
            CHECK(shard_worker_crash(rd, "w1", SHARD_CRASH_DROP) == 0, "crash w1");
        shard_dispatcher_destroy(rd);
        for (int p = 0; p < PRODUCERS; p++)
            pthread_join(t[p], NULL);
        for (int p = 0; p < PRODUCERS; p++) {
            CHECK(njobs[p] > 0 && pool[p][njobs[p] - 1].rc == -ESHUTDOWN,
                  "round %d: producer %d did not end on -ESHUTDOWN", r, p);
            for (long i = 0; i < njobs[p]; i++) {
                bool acc = check_rjob(&pool[p][i], "a producer's", i, r);
                accepted += acc;
                refused += !acc;
                dropped += atomic_load(&pool[p][i].drops);
            }
        }
        long nc = atomic_load(&nchildren);
        for (long i = 0; i < nc; i++) {
            bool acc = check_rjob(&children[i], "a job's", i, r);
            accepted += acc;
            refused += !acc;
            dropped += atomic_load(&children[i].drops);
        }
        by_jobs += nc;
    }
    printf("race: %d rounds, %ld jobs accepted (%ld by jobs, %ld dropped), %ld refused, %ld tries again, %ld delays\n",
           rounds, accepted, by_jobs, dropped, refused, atomic_load(&eagains), atomic_load(&delays));
    for (int p = 0; p < PRODUCERS; p++)
        free(pool[p]);
    free(children);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *only = argc > 1 ? argv[1] : NULL;
    if (only && strcmp(only, "window") && strcmp(only, "race")) {
        fprintf(stderr, "usage: stress_multi_destroy [window|race]\n");
        return 2;
    }
    stress_watchdog("stress_multi_destroy", STRESS_SANITIZED ? 240 : 90);
    if (!only || !strcmp(only, "window"))
        window();
    if (!only || !strcmp(only, "race"))
        race(STRESS_SANITIZED ? 30 : 100);
    stress_watchdog("stress_multi_destroy", 0);
    return stress_result("stress_multi_destroy");
}
