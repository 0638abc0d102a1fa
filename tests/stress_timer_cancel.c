/* Cancel racing fire: two threads arm keyed timers (one in ten periodic) due within 3 ms, two others
 * cancel two thirds of the one-shots as soon as they are armed (pending, being fired, running or
 * done), and with job-cancels every one-shot's job cancels another one-shot from its worker (where
 * the holding worker unlinks it from its wheel at once); meanwhile the main thread adds, removes,
 * reweights and crashes workers (REROUTE, or DROP with drop). Asserts, per one-shot: exactly one of
 * {it ran once, a cancel returned 0, on_dropped had it once}, and no run nor drop after a cancel
 * returned 0; per periodic timer: its own job's cancel in its fourth run returns -EBUSY and it never
 * runs again, unless on_dropped had it (once) before; REROUTE drops nothing; at the end nothing is
 * pending (stats.timers is 0). A round whose timers have not all ended after a minute is reported as
 * a hang, with the timers still out.
 *
 * Usage: stress_timer_cancel [reroute|drop] [job-cancels] [rounds]. Runs under ThreadSanitizer too
 * (smaller). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <string.h>

#include "stress_common.h"

#define KEYS       500
#define MAX_TIMERS 20000
#define MAX_DELAY  SHARD_MS(3) /* a one-shot falls due within 3 ms of its arm... */
#define FAR_DELAY  SHARD_MS(100) /* ... but one in ten, which a thread's cancel finds pending */
#define LAST_RUN   4           /* a periodic timer cancels itself in its fourth run */
#define CHANGES    30          /* membership changes a round, at least */

static int ntimers = STRESS_SANITIZED ? 4000 : MAX_TIMERS;
static int rounds = STRESS_SANITIZED ? 3 : 10;
static bool drop, job_cancels;

struct tmr {
    /* Set by its armer before `armed`; read by others after it (acquire). id is written by the arm
     * itself before the timer's job can run, so the job may read it too. */
    shard_timer id;
    int         key;
    bool        periodic, arm_failed;
    bool        far; /* due after FAR_DELAY, always cancelled by a thread: some cancel finds a timer
                      * pending, however the threads are scheduled */
    atomic_bool armed;
    atomic_int  runs;      /* runs started */
    atomic_int  dropped;   /* times on_dropped had it */
    atomic_int  cancelled; /* cancels that returned 0 */
};

static struct tmr tms[MAX_TIMERS]; /* static: a hung round's workers may still use them at exit */
static shard_dispatcher *disp;
static atomic_int ended; /* timers that reached their end: ran (a periodic its last run), cancelled, dropped */
static sem_t all_ended, sentinels;
static atomic_int armers_running;
static atomic_int thread_cancels, job_cancels_ok, drops; /* cancels that returned 0, timers dropped */

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static size_t kname(char *buf, int key)
{
    return (size_t)snprintf(buf, 16, "k%d", key);
}

static void end_one(void)
{
    if (atomic_fetch_add(&ended, 1) + 1 == ntimers)
        sem_post(&all_ended);
}

/* Cancels the one-shot t, in whatever state it is. 0 (it will never run) ends it here; -EBUSY (it
 * runs now) and -ENOENT (it ran, was cancelled or dropped) leave it to whoever has it. Return: rc. */
static int cancel(struct tmr *t)
{
    long i = t - tms;
    int rc = shard_timer_cancel(disp, t->id);
    if (rc == 0) {
        CHECK(atomic_fetch_add(&t->cancelled, 1) == 0, "two cancels of timer %ld returned 0", i);
        CHECK(atomic_load(&t->runs) == 0, "a cancel of timer %ld returned 0 after it ran", i);
        CHECK(atomic_load(&t->dropped) == 0, "a cancel of timer %ld returned 0 after on_dropped had it", i);
        end_one();
    } else {
        CHECK(rc == -EBUSY || rc == -ENOENT, "cancel of timer %ld: %s", i, shard_strerror(rc));
    }
    return rc;
}

static void fire(shard_worker *w, void *arg)
{
    (void)w;
    struct tmr *t = arg;
    long i = t - tms;
    CHECK(atomic_load(&t->cancelled) == 0, "timer %ld ran after a cancel returned 0", i);
    CHECK(atomic_load(&t->dropped) == 0, "timer %ld ran after on_dropped had it", i);
    int n = atomic_fetch_add(&t->runs, 1) + 1;
    if (t->periodic) {
        CHECK(n <= LAST_RUN, "periodic timer %ld started run %d after its cancel in run %d", i, n, LAST_RUN);
        if (n == LAST_RUN) {
            int rc = shard_timer_cancel(disp, t->id);
            CHECK(rc == -EBUSY, "periodic timer %ld: its own job's cancel returned %d", i, rc);
            end_one();
        }
        return;
    }
    CHECK(n == 1, "timer %ld ran %d times", i, n);
    if (job_cancels) {
        /* Another one-shot, picked by this one's index: sometimes of this key, so held here. */
        uint64_t x = (uint64_t)i * 2654435761u + 7;
        struct tmr *o = &tms[rnd(&x) % (uint64_t)ntimers];
        if (atomic_load_explicit(&o->armed, memory_order_acquire) && !o->periodic && !o->arm_failed &&
            cancel(o) == 0)
            atomic_fetch_add(&job_cancels_ok, 1);
    }
    end_one();
}

static void on_dropped(shard_job_fn fn, void *arg, void *user)
{
    (void)user;
    CHECK(fn == fire, "on_dropped had a job that is not a timer's");
    if (fn != fire)
        return;
    struct tmr *t = arg;
    long i = t - tms;
    CHECK(drop, "a REROUTE crash dropped timer %ld", i);
    CHECK(atomic_fetch_add(&t->dropped, 1) == 0, "timer %ld dropped twice", i);
    CHECK(t->periodic || atomic_load(&t->runs) == 0, "timer %ld dropped after it ran", i);
    CHECK(atomic_load(&t->cancelled) == 0, "timer %ld dropped after a cancel returned 0", i);
    atomic_fetch_add(&drops, 1);
    end_one();
}

static void *armer(void *arg)
{
    int first = (int)(intptr_t)arg;
    uint64_t x = 0x1234567 + (uint64_t)first;
    char k[16];
    for (int i = first; i < ntimers; i += 2) {
        struct tmr *t = &tms[i];
        t->key = (int)(rnd(&x) % KEYS);
        t->periodic = i % 10 == 0;
        t->far = i % 10 == 5;
        uint64_t delay = t->far ? FAR_DELAY : i % 97 == 0 ? 0 : rnd(&x) % MAX_DELAY;
        int err = t->periodic ? shard_submit_every(disp, k, kname(k, t->key), 100000 + delay, fire, t, &t->id)
                              : shard_submit_after(disp, k, kname(k, t->key), delay, fire, t, &t->id);
        CHECK(err == 0, "arm: %s", shard_strerror(err));
        if (err) {
            t->arm_failed = true;
            end_one();
        }
        /* release: a canceller or job that sees armed sees id and the fields above. */
        atomic_store_explicit(&t->armed, true, memory_order_release);
    }
    atomic_fetch_sub(&armers_running, 1);
    return NULL;
}

static void *canceller(void *arg)
{
    int first = (int)(intptr_t)arg;
    uint64_t x = 0x777 + (uint64_t)first;
    for (int i = first; i < ntimers; i += 2) {
        struct tmr *t = &tms[i];
        while (!atomic_load_explicit(&t->armed, memory_order_acquire))
            sched_yield();
        if (t->periodic || t->arm_failed || (!t->far && rnd(&x) % 3 == 0))
            continue;
        if (cancel(t) == 0)
            atomic_fetch_add(&thread_cancels, 1);
    }
    return NULL;
}

/* Membership changes until the armers are done (at least CHANGES): each adds a worker and reweights
 * w0, then removes the new worker, crashes it, or keeps it for three changes. */
static int churn(int round)
{
    char name[32], kept[32] = "";
    int c;
    for (c = 0; c < CHANGES || atomic_load(&armers_running) > 0; c++) {
        snprintf(name, sizeof name, "x%d-%d", round, c);
        int err = shard_worker_add(disp, name, 1 + (uint32_t)c % 3);
        CHECK(err == 0, "add %s: %s", name, shard_strerror(err));
        err = shard_worker_set_weight(disp, "w0", 1 + (uint32_t)c % 4);
        CHECK(err == 0, "set_weight w0: %s", shard_strerror(err));
        if (c % 3 == 0) {
            err = shard_worker_remove(disp, name);
        } else if (c % 3 == 1) {
            err = shard_worker_crash(disp, name, drop ? SHARD_CRASH_DROP : SHARD_CRASH_REROUTE);
        } else {
            err = kept[0] ? shard_worker_remove(disp, kept) : 0;
            memcpy(kept, name, sizeof kept);
        }
        CHECK(err == 0, "remove or crash: %s", shard_strerror(err));
    }
    return c;
}

static void sentinel(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    sem_post(&sentinels);
}

/* Waits for n posts of s, a minute at most (a hang detector, not synchronisation). */
static bool wait_posts(sem_t *s, int n)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 60;
    for (int i = 0; i < n; i++) {
        int rc;
        while ((rc = sem_timedwait(s, &dl)) != 0 && errno == EINTR)
            ;
        if (rc != 0)
            return false;
    }
    return true;
}

static bool timer_ended(const struct tmr *t)
{
    int runs = atomic_load(&t->runs), dropped = atomic_load(&t->dropped);
    if (t->arm_failed)
        return true;
    if (t->periodic)
        return runs >= LAST_RUN || dropped > 0;
    return runs + dropped + atomic_load(&t->cancelled) > 0;
}

static void report_hang(int round, const char *what)
{
    struct shard_stats st;
    shard_dispatcher_stats(disp, &st);
    atomic_fetch_add(&stress_failures, 1);
    fprintf(stderr, "round %d: %s after a minute: %d of %d timers ended, %llu pending\n", round, what,
            atomic_load(&ended), ntimers, (unsigned long long)st.timers);
    for (int i = 0, shown = 0; i < ntimers && shown < 20; i++) {
        struct tmr *t = &tms[i];
        if (timer_ended(t))
            continue;
        shown++;
        fprintf(stderr, "  timer %d (id %#llx, %s, key k%d): %d runs, dropped %d, cancelled %d\n", i,
                (unsigned long long)t->id, t->periodic ? "periodic" : "one-shot", t->key, atomic_load(&t->runs),
                atomic_load(&t->dropped), atomic_load(&t->cancelled));
    }
    struct shard_worker_stats ws[64];
    long n = shard_dispatcher_worker_stats(disp, ws, 64);
    for (long i = 0; i < n && i < 64; i++)
        fprintf(stderr, "  worker %s: state %d, %llu timers\n", ws[i].name, (int)ws[i].state,
                (unsigned long long)ws[i].timers);
}

/* One round on a new dispatcher. Return: false after a hang (the dispatcher is left as it is). */
static bool run_round(int round)
{
    memset(tms, 0, sizeof tms);
    atomic_store(&ended, 0);
    atomic_store(&thread_cancels, 0);
    atomic_store(&job_cancels_ok, 0);
    atomic_store(&drops, 0);
    sem_init(&all_ended, 0, 0);
    sem_init(&sentinels, 0, 0);
    struct shard_config cfg = { .workers = 4, .on_dropped = on_dropped };
    int err = shard_dispatcher_create(&disp, &cfg);
    CHECK(err == 0, "create: %s", shard_strerror(err));
    if (err)
        return false;
    atomic_store(&armers_running, 2);
    pthread_t arm[2], can[2];
    for (intptr_t i = 0; i < 2; i++) {
        pthread_create(&arm[i], NULL, armer, (void *)i);
        pthread_create(&can[i], NULL, canceller, (void *)i);
    }
    int changes = churn(round);
    for (int i = 0; i < 2; i++) {
        pthread_join(arm[i], NULL);
        pthread_join(can[i], NULL);
    }
    /* Periodic timers run on until their fourth run. */
    if (!wait_posts(&all_ended, 1)) {
        report_hang(round, "timers still out");
        return false;
    }
    /* A one-shot cancelled from another thread than its holder keeps its record until its deadline:
     * once a timer of each key due after every one of them has run, their holders freed them (a
     * wheel hands out a key's timers in deadline order), and the drain waits for the jobs in flight. */
    char k[16];
    for (int key = 0; key < KEYS; key++) {
        err = shard_submit_after(disp, k, kname(k, key), FAR_DELAY + SHARD_MS(1), sentinel, NULL, NULL);
        CHECK(err == 0, "sentinel: %s", shard_strerror(err));
    }
    if (!wait_posts(&sentinels, KEYS)) {
        report_hang(round, "sentinels still out");
        return false;
    }
    CHECK(shard_drain(disp) == 0, "drain");
    int ran = 0;
    for (int i = 0; i < ntimers; i++) {
        struct tmr *t = &tms[i];
        int runs = atomic_load(&t->runs), dropped = atomic_load(&t->dropped), cancelled = atomic_load(&t->cancelled);
        if (t->arm_failed)
            continue;
        if (t->periodic)
            CHECK(cancelled == 0 && (dropped == 0 ? runs == LAST_RUN : dropped == 1 && runs < LAST_RUN),
                  "periodic timer %d: %d runs, dropped %d, cancelled %d", i, runs, dropped, cancelled);
        else
            CHECK(runs + dropped + cancelled == 1, "timer %d: %d runs, dropped %d, cancelled %d", i, runs, dropped,
                  cancelled);
        ran += runs > 0;
    }
    struct shard_stats st;
    shard_dispatcher_stats(disp, &st);
    CHECK(st.timers == 0, "round %d: %llu timers still pending at the end", round, (unsigned long long)st.timers);
    printf("round %d: %d changes; %d timers ran, %d cancelled by threads, %d by jobs, %d dropped\n", round, changes,
           ran, atomic_load(&thread_cancels), atomic_load(&job_cancels_ok), atomic_load(&drops));
    CHECK(atomic_load(&thread_cancels) > 0, "round %d: no cancel returned 0", round);
    shard_dispatcher_destroy(disp);
    sem_destroy(&all_ended);
    sem_destroy(&sentinels);
    return true;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "drop") == 0) {
            drop = true;
        } else if (strcmp(argv[i], "reroute") == 0) {
            drop = false;
        } else if (strcmp(argv[i], "job-cancels") == 0) {
            job_cancels = true;
        } else if (atoi(argv[i]) > 0) {
            rounds = atoi(argv[i]);
        } else {
            fprintf(stderr, "usage: stress_timer_cancel [reroute|drop] [job-cancels] [rounds]\n");
            return 2;
        }
    }
    printf("stress_timer_cancel: %s, %s, %d rounds of %d timers\n", drop ? "drop" : "reroute",
           job_cancels ? "job cancels" : "no job cancels", rounds, ntimers);
    for (int r = 0; r < rounds && run_round(r); r++)
        ;
    return stress_result("stress_timer_cancel");
}
