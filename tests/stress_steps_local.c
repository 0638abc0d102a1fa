/* Steps against worker-local state under churn: each account's balance lives in the table of the worker
 * that owns it (shard_worker_user), and the release hook hands a moved account over through a shared
 * transit area, as a game server's sessions (tests/sessions.h). Producers (plain and try submits, and
 * jobs that submit) send transfers as multi-key jobs with steps (each step changes its account on
 * its own worker) and single-key deposits of 0, while a control thread adds, removes and reweighs
 * workers, places and unplaces accounts, and drains. Every job of an account checks that it finds
 * the account's state where it runs (here, or in transit to here: never missing once made, never
 * stale: each account's version, kept in its state and in a global mirror, agrees), that no other job
 * of the account runs at once, and each step and done once, done after every step. At the end one
 * multi-key job with steps over all accounts sums them: the transfers conserve the total (0).
 *   stress_steps_local [SECONDS [ACCOUNTS]]   (default 3 s, 64 accounts) */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "stress_common.h"

#define MAXACC    256
#define PRODUCERS 2

struct acct {
    bool     has;
    long     balance;
    unsigned version;
};
struct local {
    struct acct a[MAXACC];
};

static int              accounts = 64, seconds = 3;
static char             names[MAXACC][16];
static size_t           lens[MAXACC];
static pthread_mutex_t  transit_lock = PTHREAD_MUTEX_INITIALIZER;
static struct acct      transit[MAXACC];
static atomic_uint      version[MAXACC];  /* the version each account's state must carry */
static atomic_int       running[MAXACC];
static atomic_bool      made[MAXACC];     /* its state exists somewhere */
static atomic_int       lost, stale, handoffs;
static atomic_long      steps_run, dones_run, deposits_run, submitted_multi, submitted_single;
static shard_dispatcher *disp;
static atomic_bool      stop_producers;

static void local_start(shard_worker *w, void *user)
{
    (void)user;
    shard_worker_set_user(w, calloc(1, sizeof(struct local)));
}

static void local_stop(shard_worker *w, void *user)
{
    (void)user;
    free(shard_worker_user(w));
}

static void local_release(shard_worker *w, const struct shard_handoff *h, void *user)
{
    (void)user;
    struct local *l = shard_worker_user(w);
    for (int i = 0; i < accounts; i++) {
        if (!l->a[i].has || !shard_handoff_moves(h, names[i], lens[i]))
            continue;
        pthread_mutex_lock(&transit_lock);
        CHECK(!transit[i].has, "account %d handed over while already in transit", i);
        transit[i] = l->a[i];
        pthread_mutex_unlock(&transit_lock);
        l->a[i].has = false;
        atomic_fetch_add(&handoffs, 1);
    }
}

/* Account i's state on w, for a job of it: enters the account (no other job of it may be running). */
static struct acct *enter(shard_worker *w, int i)
{
    CHECK(atomic_fetch_add(&running[i], 1) == 0, "account %d: two of its jobs at once", i);
    struct local *l = shard_worker_user(w);
    struct acct *a = &l->a[i];
    if (!a->has) {
        pthread_mutex_lock(&transit_lock);
        if (transit[i].has) {
            *a = transit[i];
            transit[i].has = false;
        }
        pthread_mutex_unlock(&transit_lock);
    }
    if (!a->has) {
        if (atomic_load(&made[i]) && atomic_fetch_add(&lost, 1) < 10)
            fprintf(stderr, "account %d: its state is not on %s, nor in transit\n", i, shard_worker_name(w));
        *a = (struct acct){ .has = true, .version = atomic_load(&version[i]) };
        atomic_store(&made[i], true);
    }
    if (a->version != atomic_load(&version[i]) && atomic_fetch_add(&stale, 1) < 10)
        fprintf(stderr, "account %d on %s: version %u, not %u (stale state)\n", i, shard_worker_name(w), a->version,
                atomic_load(&version[i]));
    a->version++;
    atomic_store(&version[i], a->version);
    return a;
}

static void leave(int i)
{
    atomic_fetch_sub(&running[i], 1);
}

/* ---- jobs ---- */

struct transfer {
    int         acc[4];
    size_t      n;
    long        amount;
    bool        audit;     /* sums every account (acc unused) */
    atomic_int  steps[MAXACC];
    atomic_int  done;
    atomic_long sum;
    int         depth;     /* submitted by a job: how deep */
};

static void submit_transfer(unsigned *seed, bool try_, int depth);

static void transfer_step(shard_worker *w, void *arg, size_t i)
{
    struct transfer *t = arg;
    int a = t->audit ? (int)i : t->acc[i];
    CHECK(atomic_fetch_add(&t->steps[i], 1) == 0, "a step of account %d ran twice", a);
    CHECK(atomic_load(&t->done) == 0, "a step of account %d ran after done", a);
    struct acct *s = enter(w, a);
    if (t->audit)
        atomic_fetch_add(&t->sum, s->balance);
    else
        s->balance += i == 0 ? -t->amount * (long)(t->n - 1) : t->amount;
    leave(a);
    atomic_fetch_add(&steps_run, 1);
}

static void transfer_done(shard_worker *w, void *arg)
{
    (void)w;
    struct transfer *t = arg;
    size_t n = t->audit ? (size_t)accounts : t->n;
    for (size_t i = 0; i < n; i++) {
        int a = t->audit ? (int)i : t->acc[i];
        CHECK(atomic_load(&t->steps[i]) == 1, "done ran with account %d's step run %d times", a,
              atomic_load(&t->steps[i]));
        CHECK(atomic_load(&running[a]) == 0, "account %d: a job of it runs during done", a);
    }
    CHECK(atomic_fetch_add(&t->done, 1) == 0, "done ran twice");
    atomic_fetch_add(&dones_run, 1);
    if (!t->audit && t->depth < 2 && !atomic_load(&stop_producers)) {
        unsigned seed = (unsigned)(uintptr_t)t ^ (unsigned)t->amount;
        submit_transfer(&seed, t->depth & 1, t->depth + 1); /* from a job */
    }
    if (!t->audit)
        free(t);
}

struct deposit {
    int a;
};

static void deposit_fn(shard_worker *w, void *arg)
{
    struct deposit *dp = arg;
    enter(w, dp->a);
    leave(dp->a);
    atomic_fetch_add(&deposits_run, 1);
    free(dp);
}

static void submit_transfer(unsigned *seed, bool try_, int depth)
{
    struct transfer *t = calloc(1, sizeof *t);
    t->n = 2 + (size_t)(rand_r(seed) % 3);
    for (size_t i = 0; i < t->n; i++) {
        bool again;
        do { /* distinct accounts: one step an account */
            t->acc[i] = rand_r(seed) % accounts;
            again = false;
            for (size_t j = 0; j < i; j++)
                again |= t->acc[j] == t->acc[i];
        } while (again);
    }
    t->amount = 1 + rand_r(seed) % 100;
    t->depth = depth;
    struct shard_key keys[5];
    for (size_t i = 0; i < t->n; i++)
        keys[i] = (struct shard_key){ names[t->acc[i]], lens[t->acc[i]] };
    size_t nk = t->n;
    if (rand_r(seed) % 4 == 0)
        keys[nk++] = keys[0]; /* a repeat: still one step for it */
    int err;
    do
        err = try_ ? shard_try_submit_multi_each(disp, keys, nk, transfer_step, transfer_done, t)
                   : shard_submit_multi_each(disp, keys, nk, transfer_step, transfer_done, t);
    while (err == -EAGAIN && depth == 0 && (sched_yield(), true));
    if (err == -EAGAIN) {
        free(t);
        return;
    }
    CHECK(err == 0, "submit_multi_each: %s", shard_strerror(err));
    atomic_fetch_add(&submitted_multi, 1);
}

static void *producer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
    bool try_ = (uintptr_t)arg % 2;
    while (!atomic_load(&stop_producers)) {
        if (rand_r(&seed) % 3) {
            submit_transfer(&seed, try_, 0);
        } else {
            struct deposit *dp = malloc(sizeof *dp);
            dp->a = rand_r(&seed) % accounts;
            CHECK(shard_submit(disp, names[dp->a], lens[dp->a], deposit_fn, dp) == 0, "submit");
            atomic_fetch_add(&submitted_single, 1);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 1)
        seconds = atoi(argv[1]);
    if (argc > 2)
        accounts = atoi(argv[2]);
    if (seconds < 1 || accounts < 4 || accounts > MAXACC) {
        fprintf(stderr, "usage: stress_steps_local [SECONDS >= 1 [4 <= ACCOUNTS <= %d]]\n", MAXACC);
        return 2;
    }
    for (int i = 0; i < accounts; i++)
        lens[i] = (size_t)snprintf(names[i], sizeof names[i], "acct-%d", i);
    struct shard_config cfg = { .workers = 3,
                                .queue_capacity = 64,
                                .on_worker_start = local_start,
                                .on_worker_stop = local_stop,
                                .on_release = local_release };
    CHECK(shard_dispatcher_create(&disp, &cfg) == 0, "create");
    pthread_t prod[PRODUCERS];
    for (uintptr_t p = 0; p < PRODUCERS; p++)
        pthread_create(&prod[p], NULL, producer, (void *)p);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    unsigned seed = 12345, changes = 0, drains = 0;
    int extra = 0; /* workers x0.. added */
    do {
        int what = rand_r(&seed) % 6;
        char name[16];
        int err = 0;
        if (what == 0 || (what == 1 && extra == 0)) {
            snprintf(name, sizeof name, "x%u", changes);
            err = shard_worker_add(disp, name, 1 + rand_r(&seed) % 3);
            extra += err == 0;
        } else if (what == 1) {
            /* The newest added is the easiest to name: remove one of x*, found in the ring. */
            shard_ring *r;
            CHECK(shard_dispatcher_ring(disp, &r) == 0, "ring");
            const char *victim = NULL;
            for (size_t i = 0; i < shard_ring_member_count(r) && !victim; i++)
                if (shard_ring_member(r, i)[0] == 'x')
                    victim = shard_ring_member(r, i);
            if (victim) {
                snprintf(name, sizeof name, "%s", victim);
                err = shard_worker_remove(disp, name);
                extra -= err == 0;
            }
            shard_ring_destroy(r);
        } else if (what == 2) {
            int a = rand_r(&seed) % accounts;
            snprintf(name, sizeof name, "w%d", rand_r(&seed) % 3);
            err = shard_key_place(disp, names[a], lens[a], name);
        } else if (what == 3) {
            int a = rand_r(&seed) % accounts;
            err = shard_key_unplace(disp, names[a], lens[a]);
            if (err == -ENOENT)
                err = 0;
        } else if (what == 4) {
            snprintf(name, sizeof name, "w%d", rand_r(&seed) % 3);
            err = shard_worker_set_weight(disp, name, 1 + rand_r(&seed) % 4);
        } else {
            err = shard_drain(disp);
            drains++;
        }
        CHECK(err == 0, "control %d: %s", what, shard_strerror(err));
        changes++;
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec - start.tv_sec < seconds);
    atomic_store(&stop_producers, true);
    for (int p = 0; p < PRODUCERS; p++)
        pthread_join(prod[p], NULL);
    CHECK(shard_drain(disp) == 0, "drain");
    /* The audit: one step an account, summing. */
    static struct transfer audit;
    audit.audit = true;
    struct shard_key all[MAXACC];
    for (int i = 0; i < accounts; i++)
        all[i] = (struct shard_key){ names[i], lens[i] };
    CHECK(shard_submit_multi_each(disp, all, (size_t)accounts, transfer_step, transfer_done, &audit) == 0, "audit");
    CHECK(shard_drain(disp) == 0, "drain");
    CHECK(atomic_load(&audit.done) == 1, "the audit's done ran %d times", atomic_load(&audit.done));
    CHECK(atomic_load(&audit.sum) == 0, "the accounts sum to %ld, not 0", atomic_load(&audit.sum));
    CHECK(atomic_load(&lost) == 0, "%d jobs found their account's state missing", atomic_load(&lost));
    CHECK(atomic_load(&stale) == 0, "%d jobs found their account's state stale", atomic_load(&stale));
    struct shard_stats st;
    CHECK(shard_dispatcher_stats(disp, &st) == 0, "stats");
    CHECK(st.multi_open == 0 && st.multi_waiting == 0, "after drain: %llu open, %llu waiting",
          (unsigned long long)st.multi_open, (unsigned long long)st.multi_waiting);
    shard_dispatcher_destroy(disp);
    printf("%u control calls (%u drains), %d hand-overs; %ld multi-key jobs with steps (%ld steps, %ld dones), "
           "%ld deposits\n",
           changes, drains, atomic_load(&handoffs), atomic_load(&submitted_multi), atomic_load(&steps_run),
           atomic_load(&dones_run), atomic_load(&deposits_run));
    CHECK(atomic_load(&dones_run) == atomic_load(&submitted_multi) + 1, "%ld dones for %ld jobs",
          atomic_load(&dones_run), atomic_load(&submitted_multi) + 1);
    return stress_result("stress_steps_local");
}
