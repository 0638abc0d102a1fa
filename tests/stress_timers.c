/* Timer torture: threads arm one-shot and periodic keyed timers and cancel some of them, another
 * submits plain jobs to the same keys, while a control thread adds, removes, reweights and crashes
 * (REROUTE) workers every few milliseconds. Asserts that a timer's job never runs beside another job
 * of its key, that every one-shot runs exactly once unless cancel returned 0 (then never), that no
 * periodic timer starts a run after cancel returned 0 or -EBUSY (after the running one), and that
 * nothing is left pending. Then a DROP crash: every timer either runs or goes to on_dropped, once.
 * Runs under ThreadSanitizer too (smaller). */
#include <pthread.h>
#include <sched.h>
#include <errno.h>
#include <string.h>

#include "stress_common.h"

#define KEYS    48
#define ARMERS  2
#define PERIODS 16 /* periodic timers an armer keeps going */

static int per_armer = STRESS_SANITIZED ? 3000 : 40000;
static shard_dispatcher *disp;
static atomic_int armers_done;
static atomic_int changes_made; /* the armers keep pace with the control thread: arms span changes */

struct key_state {
    atomic_int running; /* jobs of the key running now: at most 1 */
};
static struct key_state keys[KEYS];

struct timer_rec {
    int         key;
    bool        periodic;
    shard_timer id;
    atomic_int  runs;
    atomic_int  frozen_runs; /* runs once cancel answered 0 or -EBUSY; -1: not cancelled */
};

static void enter_key(int key, shard_worker *w)
{
    CHECK(atomic_fetch_add(&keys[key].running, 1) == 0, "key %d ran two jobs at once (%s)", key, shard_worker_name(w));
}

static void leave_key(int key)
{
    atomic_fetch_sub(&keys[key].running, 1);
}

static void timer_job(shard_worker *w, void *arg)
{
    struct timer_rec *t = arg;
    enter_key(t->key, w);
    int frozen = atomic_load(&t->frozen_runs);
    int n = atomic_fetch_add(&t->runs, 1) + 1;
    CHECK(frozen < 0 || n <= frozen, "key %d: a timer started run %d after cancel answered at %d", t->key, n, frozen);
    CHECK(t->periodic || n == 1, "key %d: a one-shot timer ran %d times", t->key, n);
    leave_key(t->key);
}

static void plain_job(shard_worker *w, void *arg)
{
    int key = (int)(intptr_t)arg;
    enter_key(key, w);
    leave_key(key);
}

static size_t kname(char *buf, int key)
{
    return (size_t)snprintf(buf, 24, "tk-%d", key);
}

/* Cancels t and records what its run count may reach: no run starts after cancel answers 0 (the
 * count then is final) or -EBUSY (the running one, counted at its start or about to be, is the last:
 * at most one more than before the call). */
static void cancel_rec(struct timer_rec *t)
{
    int before = atomic_load(&t->runs);
    atomic_store(&t->frozen_runs, before + 1);
    int rc = shard_timer_cancel(disp, t->id);
    if (rc == 0)
        atomic_store(&t->frozen_runs, atomic_load(&t->runs));
    else if (rc == -ENOENT)
        CHECK(!t->periodic, "a periodic timer was not pending");
    else
        CHECK(rc == -EBUSY, "cancel: %s", shard_strerror(rc));
    t->id = (shard_timer)(int64_t)rc; /* the answer, read after the drain */
}

static void *armer(void *arg)
{
    int me = (int)(intptr_t)arg;
    unsigned x = 2654435761u * (unsigned)(me + 1);
    struct timer_rec *recs = calloc((size_t)per_armer + PERIODS, sizeof *recs);
    struct timer_rec *periodic = recs + per_armer;
    char k[24];
    for (int i = 0; i < PERIODS; i++) {
        periodic[i].key = i % KEYS;
        periodic[i].periodic = true;
        atomic_init(&periodic[i].frozen_runs, -1);
        int err = shard_submit_every(disp, k, kname(k, periodic[i].key), (1 + i % 3) * 1000000ull, timer_job,
                                     &periodic[i], &periodic[i].id);
        CHECK(err == 0, "every: %s", shard_strerror(err));
    }
    for (int i = 0; i < per_armer; i++) {
        while (atomic_load(&changes_made) < i / 200)
            sched_yield();
        x = x * 1103515245u + 12345u;
        struct timer_rec *t = &recs[i];
        t->key = (int)((x >> 8) % KEYS);
        atomic_init(&t->frozen_runs, -1);
        int err = shard_submit_after(disp, k, kname(k, t->key), (x >> 16) % 4000000, timer_job, t, &t->id);
        CHECK(err == 0, "after: %s", shard_strerror(err));
        /* Cancel an earlier one now and then: pending, running or done. */
        if (i > 8 && (x >> 4) % 4 == 0) {
            struct timer_rec *c = &recs[i - 1 - (int)((x >> 12) % 8)];
            if (atomic_load(&c->frozen_runs) < 0)
                cancel_rec(c);
        }
    }
    for (int i = 0; i < PERIODS; i++)
        cancel_rec(&periodic[i]);
    atomic_fetch_add(&armers_done, 1);
    return recs;
}

static void *producer(void *arg)
{
    (void)arg;
    unsigned x = 99;
    char k[24];
    while (atomic_load(&armers_done) < ARMERS) {
        x = x * 1103515245u + 12345u;
        int key = (int)((x >> 8) % KEYS);
        int err = shard_submit(disp, k, kname(k, key), plain_job, (void *)(intptr_t)key);
        CHECK(err == 0, "submit: %s", shard_strerror(err));
    }
    return NULL;
}

static void *control(void *arg)
{
    (void)arg;
    unsigned x = 4242, next = 0, changes = 0;
    while (atomic_load(&armers_done) < ARMERS) {
        stress_pause_ms(2);
        struct shard_worker_stats st[32];
        long n = shard_dispatcher_worker_stats(disp, st, 32);
        char live[32][SHARD_NAME_MAX + 1];
        int nlive = 0, others = 0;
        for (long i = 0; i < n && i < 32; i++) {
            if (st[i].state == SHARD_WORKER_RUNNING)
                memcpy(live[nlive++], st[i].name, sizeof live[0]);
            else
                others++;
        }
        x = x * 1103515245u + 12345u;
        int op = (int)((x >> 8) % 4), err;
        const char *victim = live[(x >> 12) % (unsigned)nlive];
        if (op == 0 && nlive < 5 && others < 8) {
            char name[16];
            snprintf(name, sizeof name, "t%u", next++);
            err = shard_worker_add(disp, name, 1 + (x >> 20) % 2);
        } else if (op == 3) {
            err = shard_worker_set_weight(disp, victim, 1 + (x >> 20) % 3);
        } else if (nlive > 1) {
            err = op == 1 ? shard_worker_remove(disp, victim) : shard_worker_crash(disp, victim, SHARD_CRASH_REROUTE);
        } else {
            continue;
        }
        CHECK(err == 0, "change: %s", shard_strerror(err));
        changes++;
        atomic_fetch_add(&changes_made, 1);
    }
    printf("control: %u membership changes\n", changes);
    CHECK(changes >= 5, "only %u changes", changes);
    return NULL;
}

static void check_records(struct timer_rec *recs, int n)
{
    for (int i = 0; i < n; i++) {
        struct timer_rec *t = &recs[i];
        int runs = atomic_load(&t->runs), frozen = atomic_load(&t->frozen_runs);
        if (frozen < 0) {
            CHECK(runs == 1, "key %d: a one-shot timer never cancelled ran %d times", t->key, runs);
            continue;
        }
        int rc = (int)(int64_t)t->id;
        if (t->periodic) {
            CHECK(runs <= frozen, "key %d: periodic ran %d times after cancel froze it at %d", t->key, runs, frozen);
        } else {
            CHECK(rc == 0 ? runs == 0 : runs == 1, "key %d: one-shot cancel said %d, ran %d times", t->key, rc, runs);
        }
    }
}

static atomic_int drop_seen;
static void on_dropped(shard_job_fn fn, void *arg, void *user)
{
    (void)user;
    CHECK(fn == timer_job, "on_dropped got another job");
    struct timer_rec *t = arg;
    CHECK(atomic_fetch_add(&t->runs, 100) == 0, "a dropped timer had run or was dropped before");
    atomic_fetch_add(&drop_seen, 1);
}

/* The DROP round's holding job: names its worker, and keeps it from its timers until released. */
static _Atomic(const char *) held_on;
static atomic_bool hold_released;

static void hold_job(shard_worker *w, void *arg)
{
    (void)arg;
    atomic_store(&held_on, shard_worker_name(w));
    while (!atomic_load(&hold_released))
        sched_yield();
}

int main(void)
{
    struct shard_config cfg = { .workers = 3, .queue_capacity = 256, .on_dropped = on_dropped };
    int err = shard_dispatcher_create(&disp, &cfg);
    CHECK(err == 0, "create: %s", shard_strerror(err));
    pthread_t arm[ARMERS], prod, ctl;
    pthread_create(&ctl, NULL, control, NULL);
    pthread_create(&prod, NULL, producer, NULL);
    for (intptr_t a = 0; a < ARMERS; a++)
        pthread_create(&arm[a], NULL, armer, (void *)a);
    struct timer_rec *recs[ARMERS];
    for (int a = 0; a < ARMERS; a++)
        pthread_join(arm[a], (void **)&recs[a]);
    pthread_join(prod, NULL);
    pthread_join(ctl, NULL);
    /* Every one-shot was due within 4 ms of its arm: once they all ran, nothing is pending. */
    struct shard_stats st;
    for (int tries = 0;; tries++) {
        CHECK(shard_drain(disp) == 0, "drain");
        shard_dispatcher_stats(disp, &st);
        if (st.timers == 0 || tries == 5000)
            break;
        stress_pause_ms(1); /* waiting for deadlines to pass, not for a thread */
    }
    CHECK(st.timers == 0, "%llu timers still pending", (unsigned long long)st.timers);
    for (int a = 0; a < ARMERS; a++) {
        check_records(recs[a], per_armer + PERIODS);
        free(recs[a]);
    }

    /* DROP: timers held by the crashed worker go to on_dropped, the others run; each once. The victim
     * is held in a job from before the arms until after the crash, so its timers cannot fall due and
     * run first, however slowly this thread gets from the arms to the crash. */
    enum { N = 400 };
    static struct timer_rec late[N];
    char k[24];
    CHECK(shard_submit(disp, "hold", 4, hold_job, NULL) == 0, "submit the holding job");
    while (!atomic_load(&held_on))
        sched_yield(); /* until the holding job runs: it names the victim */
    const char *victim = atomic_load(&held_on);
    for (int i = 0; i < N; i++) {
        late[i].key = i % KEYS;
        atomic_init(&late[i].frozen_runs, -1);
        CHECK(shard_submit_after(disp, k, kname(k, late[i].key), 30000000, timer_job, &late[i], NULL) == 0, "arm");
    }
    struct shard_worker_stats ws[32];
    long n = shard_dispatcher_worker_stats(disp, ws, 32);
    int live = 0;
    long victim_timers = -1;
    for (long i = 0; i < n && i < 32; i++) {
        live += ws[i].state == SHARD_WORKER_RUNNING;
        if (strcmp(ws[i].name, victim) == 0)
            victim_timers = (long)ws[i].timers;
    }
    CHECK(victim_timers > 0, "the held worker %s holds no timer (%ld)", victim, victim_timers);
    if (live < 2)
        CHECK(shard_worker_add(disp, "spare", 1) == 0, "add");
    CHECK(shard_worker_crash(disp, victim, SHARD_CRASH_DROP) == 0, "crash");
    atomic_store(&hold_released, true);
    for (int tries = 0;; tries++) {
        CHECK(shard_drain(disp) == 0, "drain");
        shard_dispatcher_stats(disp, &st);
        if (st.timers == 0 || tries == 5000)
            break;
        stress_pause_ms(1);
    }
    int ran = 0, dropped = 0;
    for (int i = 0; i < N; i++) {
        int r = atomic_load(&late[i].runs);
        CHECK(r == 1 || r == 100, "timer %d: %d (1: ran, 100: dropped)", i, r);
        ran += r == 1;
        dropped += r == 100;
    }
    printf("drop: %d ran, %d dropped\n", ran, dropped);
    CHECK(dropped > 0 && dropped == atomic_load(&drop_seen), "dropped %d, on_dropped saw %d", dropped, atomic_load(&drop_seen));
    shard_dispatcher_destroy(disp);
    return stress_result("stress_timers");
}
