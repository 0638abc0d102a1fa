/* Multi-key jobs (shard_submit_multi, multi.h): every error before anything is queued; the job runs
 * once, in each of its keys' order with this thread's other jobs, with its keys to itself; only its
 * keys wait for it; DROP and REROUTE crashes; a key stuck behind a crash, and drain; the try
 * variant's refusal; a running job's multi-key submit after its earlier submits; a job to parked
 * workers wakes them (split, whole, with steps). */
#include <criterion/criterion.h>
#include <errno.h>
#include <semaphore.h>
#include <shard.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static shard_dispatcher *make(uint32_t workers, uint32_t capacity, void (*on_dropped)(shard_job_fn, void *, void *))
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = workers, .queue_capacity = capacity, .on_dropped = on_dropped };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    return d;
}

/* The i-th key (from 0) that worker `want` owns. */
static size_t key_of(shard_dispatcher *d, const char *want, unsigned nth, char buf[24])
{
    shard_ring *r;
    cr_assert_eq(shard_dispatcher_ring(d, &r), 0);
    for (unsigned i = 0;; i++) {
        size_t n = (size_t)snprintf(buf, 24, "probe-%u", i);
        if (strcmp(shard_ring_owner(r, buf, n), want) == 0 && nth-- == 0) {
            shard_ring_destroy(r);
            return n;
        }
    }
}

static void count(shard_worker *w, void *arg)
{
    (void)w;
    atomic_fetch_add((atomic_int *)arg, 1);
}

Test(multi, errors_queue_nothing)
{
    shard_dispatcher *d = make(2, 0, NULL);
    struct shard_key keys[SHARD_MULTI_MAX_KEYS + 1];
    for (int i = 0; i <= SHARD_MULTI_MAX_KEYS; i++)
        keys[i] = (struct shard_key){ "k", 1 };
    static atomic_int n;
    cr_assert_eq(shard_submit_multi(NULL, keys, 2, count, &n), -EINVAL);
    cr_assert_eq(shard_submit_multi(d, NULL, 2, count, &n), -EINVAL);
    cr_assert_eq(shard_submit_multi(d, keys, 0, count, &n), -EINVAL);
    cr_assert_eq(shard_submit_multi(d, keys, 2, NULL, &n), -EINVAL);
    cr_assert_eq(shard_try_submit_multi(NULL, keys, 2, count, &n), -EINVAL);
    cr_assert_eq(shard_submit_multi(d, keys, SHARD_MULTI_MAX_KEYS + 1, count, &n), -E2BIG);
    cr_assert_eq(shard_try_submit_multi(d, keys, SHARD_MULTI_MAX_KEYS + 1, count, &n), -E2BIG);
    struct shard_key bad[2] = { { "a", 1 }, { NULL, 3 } };
    cr_assert_eq(shard_submit_multi(d, bad, 2, count, &n), -EINVAL);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&n), 0);
    /* SHARD_MULTI_MAX_KEYS repeats of one key: allowed, one distinct key, a plain job. */
    cr_assert_eq(shard_submit_multi(d, keys, SHARD_MULTI_MAX_KEYS, count, &n), 0);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&n), 1);
    struct shard_stats st;
    cr_assert_eq(shard_dispatcher_stats(d, &st), 0);
    cr_assert_eq(st.multi_open, 0);
    shard_dispatcher_destroy(d);
    cr_assert_eq(shard_submit_multi(NULL, keys, 2, count, &n), -EINVAL);
}

/* Accounts on 4 workers; one thread submits single-key jobs and multi-key jobs over 2-5 keys in one
 * stream. Every job checks, for each key, that it is that key's next job in submission order and that
 * no other job of the key runs meanwhile. */
#define ACCTS 40
#define STEPS 4000
static char acct_name[ACCTS][16];
static int acct_next[ACCTS];      /* the sequence number expected next, per key */
static atomic_int acct_busy[ACCTS];
static atomic_int bad_order, overlaps, steps_run;
struct step {
    int nkeys, key[5], seq[5];
};
static struct step steps[STEPS];

static void run_step(shard_worker *w, void *arg)
{
    (void)w;
    struct step *s = arg;
    for (int i = 0; i < s->nkeys; i++)
        if (atomic_fetch_add(&acct_busy[s->key[i]], 1) != 0)
            atomic_fetch_add(&overlaps, 1);
    for (int i = 0; i < s->nkeys; i++) {
        if (acct_next[s->key[i]] != s->seq[i])
            atomic_fetch_add(&bad_order, 1);
        acct_next[s->key[i]] = s->seq[i] + 1;
    }
    for (int i = 0; i < s->nkeys; i++)
        atomic_fetch_sub(&acct_busy[s->key[i]], 1);
    atomic_fetch_add(&steps_run, 1);
}

Test(multi, runs_once_in_each_keys_order_with_its_keys_to_itself)
{
    shard_dispatcher *d = make(4, 64, NULL);
    int seq[ACCTS] = { 0 };
    for (int i = 0; i < ACCTS; i++)
        snprintf(acct_name[i], sizeof acct_name[i], "acct-%d", i);
    unsigned x = 12345;
    for (int i = 0; i < STEPS; i++) {
        struct step *s = &steps[i];
        x = x * 1103515245u + 12345u;
        s->nkeys = (x >> 16) % 3 == 0 ? 1 : 2 + (int)((x >> 8) % 4);
        struct shard_key keys[5];
        for (int k = 0; k < s->nkeys; k++) {
            int a;
            bool again;
            do { /* distinct keys within a step: the check counts each key once */
                x = x * 1103515245u + 12345u;
                a = (int)((x >> 10) % ACCTS);
                again = false;
                for (int j = 0; j < k; j++)
                    again |= s->key[j] == a;
            } while (again);
            s->key[k] = a;
            s->seq[k] = seq[a]++;
            keys[k] = (struct shard_key){ acct_name[a], strlen(acct_name[a]) };
        }
        if (s->nkeys == 1)
            cr_assert_eq(shard_submit(d, keys[0].key, keys[0].len, run_step, s), 0);
        else
            cr_assert_eq(shard_submit_multi(d, keys, (size_t)s->nkeys, run_step, s), 0);
    }
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&steps_run), STEPS);
    cr_assert_eq(atomic_load(&bad_order), 0);
    cr_assert_eq(atomic_load(&overlaps), 0);
    struct shard_stats st;
    cr_assert_eq(shard_dispatcher_stats(d, &st), 0);
    cr_assert_eq(st.multi_open, 0);
    cr_assert_eq(st.multi_waiting, 0);
    shard_dispatcher_destroy(d);
}

static sem_t gate, started;
static void blocker(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    sem_post(&started);
    sem_wait(&gate);
}

/* Records the order jobs ran in. */
static atomic_int order_at;
static int order[16];
static void mark(shard_worker *w, void *arg)
{
    (void)w;
    order[atomic_fetch_add(&order_at, 1)] = (int)(intptr_t)arg;
}
static void posted(shard_worker *w, void *arg)
{
    mark(w, arg);
    sem_post(&started);
}

/* M over a (w0) and b (w1), b's part behind a job that blocks w1: a's later job waits, on w0, while
 * w0's other keys go on; then M, then a's job. */
Test(multi, only_its_keys_wait_for_it)
{
    shard_dispatcher *d = make(2, 64, NULL);
    sem_init(&gate, 0, 0);
    sem_init(&started, 0, 0);
    atomic_store(&order_at, 0);
    char a[24], b[24], c[24];
    size_t al = key_of(d, "w0", 0, a), bl = key_of(d, "w1", 0, b), cl = key_of(d, "w0", 1, c);
    cr_assert_eq(shard_submit(d, b, bl, blocker, NULL), 0);
    sem_wait(&started); /* w1 is held */
    struct shard_key keys[2] = { { a, al }, { b, bl } };
    cr_assert_eq(shard_submit_multi(d, keys, 2, mark, (void *)1), 0);
    cr_assert_eq(shard_submit(d, a, al, mark, (void *)2), 0);  /* waits for M */
    cr_assert_eq(shard_submit(d, c, cl, posted, (void *)3), 0); /* queued after it on w0: runs */
    sem_wait(&started);
    cr_assert_eq(atomic_load(&order_at), 1, "a's later job ran before its multi-key job (%d ran)", order[0]);
    cr_assert_eq(order[0], 3);
    struct shard_stats st;
    cr_assert_eq(shard_dispatcher_stats(d, &st), 0);
    cr_assert_eq(st.multi_open, 1);
    cr_assert_eq(st.multi_waiting, 1);
    sem_post(&gate);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&order_at), 3);
    cr_assert_eq(order[1], 1);
    cr_assert_eq(order[2], 2);
    cr_assert_eq(shard_dispatcher_stats(d, &st), 0);
    cr_assert_eq(st.multi_open, 0);
    cr_assert_eq(st.multi_waiting, 0);
    shard_dispatcher_destroy(d);
}

static atomic_int dropped_calls;
static void *dropped_arg;
static shard_job_fn dropped_fn;
static void on_dropped(shard_job_fn fn, void *arg, void *user)
{
    (void)user;
    if (fn == mark && (intptr_t)arg == 1) {
        dropped_fn = fn;
        dropped_arg = arg;
    }
    atomic_fetch_add(&dropped_calls, 1);
}

/* DROP of the worker holding M's part of b: on_dropped hears of M once, with M's own fn and arg; M
 * never runs; a (held by M's claim) is let go at once. */
Test(multi, drop_crash_drops_the_whole_job_once, .timeout = 60)
{
    shard_dispatcher *d = make(3, 64, on_dropped);
    sem_init(&gate, 0, 0);
    sem_init(&started, 0, 0);
    atomic_store(&order_at, 0);
    char a[24], b[24], b2[24];
    size_t al = key_of(d, "w0", 0, a), bl = key_of(d, "w1", 0, b), b2l = key_of(d, "w1", 1, b2);
    cr_assert_eq(shard_submit(d, b, bl, blocker, NULL), 0);
    sem_wait(&started);
    /* Two keys on w1: both parts are dropped, on_dropped still hears of M once. */
    struct shard_key keys[3] = { { a, al }, { b, bl }, { b2, b2l } };
    cr_assert_eq(shard_submit_multi(d, keys, 3, mark, (void *)1), 0);
    cr_assert_eq(shard_submit(d, a, al, posted, (void *)2), 0);
    /* a's part has come up (w0 is idle) before its later job: wait for the claim to be seen. */
    struct shard_stats st;
    do
        cr_assert_eq(shard_dispatcher_stats(d, &st), 0);
    while (st.multi_waiting == 0);
    cr_assert_eq(atomic_load(&order_at), 0);
    cr_assert_eq(shard_worker_crash(d, "w1", SHARD_CRASH_DROP), 0);
    cr_assert_eq(atomic_load(&dropped_calls), 1);
    cr_assert_eq(dropped_fn, mark);
    cr_assert_eq(dropped_arg, (void *)1);
    sem_wait(&started); /* a's job runs though w1's blocker still runs */
    cr_assert_eq(atomic_load(&order_at), 1);
    cr_assert_eq(order[0], 2);
    sem_post(&gate);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&order_at), 1, "the dropped multi-key job ran");
    cr_assert_eq(shard_dispatcher_stats(d, &st), 0);
    cr_assert_eq(st.dropped, 1);
    cr_assert_eq(st.multi_open, 0);
    cr_assert_eq(st.multi_waiting, 0);
    shard_dispatcher_destroy(d);
}

/* REROUTE of the worker holding M's part of b while its job of b2 (another key) blocks it: the part
 * goes to b's new owner, M runs once, then a's later job. */
Test(multi, reroute_crash_keeps_it_whole_and_in_order)
{
    shard_dispatcher *d = make(3, 64, on_dropped);
    sem_init(&gate, 0, 0);
    sem_init(&started, 0, 0);
    atomic_store(&order_at, 0);
    atomic_store(&dropped_calls, 0);
    char a[24], b[24], b2[24];
    size_t al = key_of(d, "w0", 0, a), bl = key_of(d, "w1", 0, b), b2l = key_of(d, "w1", 1, b2);
    cr_assert_eq(shard_submit(d, b2, b2l, blocker, NULL), 0);
    sem_wait(&started);
    struct shard_key keys[2] = { { a, al }, { b, bl } };
    cr_assert_eq(shard_submit_multi(d, keys, 2, mark, (void *)1), 0);
    cr_assert_eq(shard_submit(d, a, al, mark, (void *)2), 0);
    cr_assert_eq(shard_submit(d, b, bl, mark, (void *)3), 0);
    cr_assert_eq(shard_worker_crash(d, "w1", SHARD_CRASH_REROUTE), 0);
    cr_assert_eq(shard_drain(d), 0); /* b2's job is stuck on w1: drain does not wait for b2 */
    cr_assert_eq(atomic_load(&order_at), 3);
    cr_assert_eq(order[0], 1);
    cr_assert(order[1] == 2 || order[1] == 3);
    cr_assert(order[2] == 2 || order[2] == 3);
    cr_assert_eq(atomic_load(&dropped_calls), 0);
    sem_post(&gate);
    shard_dispatcher_destroy(d);
}

/* M over a and b, b stuck behind a crashed worker's job of b: M waits, holding a, and drain returns
 * (it does not wait for what waits behind a stuck key); once the stuck job returns, M, then a's. */
Test(multi, a_stuck_key_holds_its_job_and_drain_returns, .timeout = 60)
{
    shard_dispatcher *d = make(3, 64, NULL);
    sem_init(&gate, 0, 0);
    sem_init(&started, 0, 0);
    atomic_store(&order_at, 0);
    char a[24], b[24];
    size_t al = key_of(d, "w0", 0, a), bl = key_of(d, "w1", 0, b);
    cr_assert_eq(shard_submit(d, b, bl, blocker, NULL), 0);
    sem_wait(&started);
    cr_assert_eq(shard_worker_crash(d, "w1", SHARD_CRASH_REROUTE), 0); /* b is stuck */
    struct shard_key keys[2] = { { a, al }, { b, bl } };
    cr_assert_eq(shard_submit_multi(d, keys, 2, mark, (void *)1), 0);
    cr_assert_eq(shard_submit(d, a, al, mark, (void *)2), 0);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&order_at), 0, "ran behind a stuck key");
    struct shard_stats st;
    cr_assert_eq(shard_dispatcher_stats(d, &st), 0);
    cr_assert_eq(st.multi_waiting, 1);
    sem_post(&gate);
    /* The stuck job returns on its own time: drain now waits for nothing stuck. */
    do
        cr_assert_eq(shard_drain(d), 0);
    while (atomic_load(&order_at) < 2);
    /* mark counts itself before it stores its place: mark(2) may still run, on a live worker now that
     * nothing is stuck, so this drain waits for it. */
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(order[0], 1);
    cr_assert_eq(order[1], 2);
    shard_dispatcher_destroy(d);
}

/* The try variant refuses, queueing nothing, when one key's queue is full. */
Test(multi, try_refuses_whole_when_a_queue_is_full)
{
    shard_dispatcher *d = make(2, 4, NULL);
    sem_init(&gate, 0, 0);
    sem_init(&started, 0, 0);
    atomic_store(&order_at, 0);
    char a[24], b[24];
    size_t al = key_of(d, "w0", 0, a), bl = key_of(d, "w1", 0, b);
    cr_assert_eq(shard_submit(d, b, bl, blocker, NULL), 0);
    sem_wait(&started);
    static atomic_int fill;
    while (shard_try_submit(d, b, bl, count, &fill) == 0)
        ;
    struct shard_key keys[2] = { { a, al }, { b, bl } };
    cr_assert_eq(shard_try_submit_multi(d, keys, 2, mark, (void *)1), -EAGAIN);
    struct shard_stats st;
    cr_assert_eq(shard_dispatcher_stats(d, &st), 0);
    cr_assert_eq(st.multi_open, 0);
    sem_post(&gate);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&order_at), 0);
    cr_assert_eq(shard_try_submit_multi(d, keys, 2, mark, (void *)1), 0);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&order_at), 1);
    shard_dispatcher_destroy(d);
}

/* A running job submits a, then M over a and b, then b: M after a's job and before b's, though the
 * job's plain submits are gathered until its batch ends. */
static char ja[24], jb[24];
static size_t jal, jbl;
static shard_dispatcher *jd;
static void fan_out(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    cr_assert_eq(shard_submit(jd, ja, jal, mark, (void *)1), 0);
    struct shard_key keys[2] = { { ja, jal }, { jb, jbl } };
    cr_assert_eq(shard_submit_multi(jd, keys, 2, mark, (void *)2), 0);
    cr_assert_eq(shard_submit(jd, jb, jbl, posted, (void *)3), 0);
}

Test(multi, a_jobs_multi_key_submit_keeps_its_order)
{
    jd = make(2, 64, NULL);
    sem_init(&started, 0, 0);
    jal = key_of(jd, "w0", 0, ja);
    jbl = key_of(jd, "w1", 0, jb);
    for (int round = 0; round < 50; round++) {
        atomic_store(&order_at, 0);
        cr_assert_eq(shard_submit(jd, round % 2 ? ja : jb, round % 2 ? jal : jbl, fan_out, NULL), 0);
        sem_wait(&started); /* b's job, the last of the three (drain does not wait for a job's submits) */
        cr_assert_eq(atomic_load(&order_at), 3);
        cr_assert_eq(order[0], 1);
        cr_assert_eq(order[1], 2);
        cr_assert_eq(order[2], 3);
    }
    shard_dispatcher_destroy(jd);
}

/* Steps (shard_submit_multi_each): one a distinct key, each on its key's own worker, in the keys'
 * order, then done; the keys stay held from the first step to done's end. */
static shard_dispatcher *sd;
static struct shard_key skeys[6];
static atomic_int steps_seen[6], step_wrong_worker, done_runs, steps_at_done, step_out_of_order;
static atomic_int step_next; /* the index of the key whose step comes next, in a round */
static const int step_order[5] = { 0, 1, 2, 3, -1 };
static void step_fn(shard_worker *w, void *arg, size_t i)
{
    (void)arg;
    int at = atomic_fetch_add(&step_next, 1);
    if (at > 3 || step_order[at] != (int)i)
        atomic_fetch_add(&step_out_of_order, 1);
    shard_ring *r;
    cr_assert_eq(shard_dispatcher_ring(sd, &r), 0);
    if (strcmp(shard_ring_owner(r, skeys[i].key, skeys[i].len), shard_worker_name(w)) != 0)
        atomic_fetch_add(&step_wrong_worker, 1);
    shard_ring_destroy(r);
    atomic_fetch_add(&steps_seen[i], 1);
}
static void done_fn(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    int n = 0;
    for (int i = 0; i < 6; i++)
        n += atomic_load(&steps_seen[i]);
    atomic_store(&steps_at_done, n);
    atomic_fetch_add(&done_runs, 1);
    mark(w, (void *)1);
}

Test(multi, steps_run_once_a_key_on_its_worker_then_done)
{
    sd = make(3, 64, NULL);
    atomic_store(&order_at, 0);
    static char k[4][24];
    size_t l0 = key_of(sd, "w0", 0, k[0]), l1 = key_of(sd, "w1", 0, k[1]), l2 = key_of(sd, "w2", 0, k[2]),
           l3 = key_of(sd, "w0", 1, k[3]);
    /* keys 0 1 2 3, and 0 and 2 again: four distinct, each stepped once, at its first index */
    skeys[0] = (struct shard_key){ k[0], l0 };
    skeys[1] = (struct shard_key){ k[1], l1 };
    skeys[2] = (struct shard_key){ k[2], l2 };
    skeys[3] = (struct shard_key){ k[3], l3 };
    skeys[4] = skeys[0];
    skeys[5] = skeys[2];
    cr_assert_eq(shard_submit_multi_each(sd, skeys, 6, NULL, done_fn, NULL), -EINVAL);
    for (int round = 0; round < 20; round++) {
        atomic_store(&order_at, 0);
        atomic_store(&step_next, 0);
        cr_assert_eq(shard_submit_multi_each(sd, skeys, 6, step_fn, done_fn, NULL), 0);
        cr_assert_eq(shard_submit(sd, k[1], l1, mark, (void *)2), 0); /* after done */
        cr_assert_eq(shard_drain(sd), 0);
        cr_assert_eq(atomic_load(&order_at), 2);
        cr_assert_eq(order[0], 1);
        cr_assert_eq(order[1], 2);
    }
    cr_assert_eq(atomic_load(&done_runs), 20);
    cr_assert_eq(atomic_load(&steps_at_done), 4 * 20);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(atomic_load(&steps_seen[i]), 20, "key %d stepped %d times", i, atomic_load(&steps_seen[i]));
    cr_assert_eq(atomic_load(&steps_seen[4]) + atomic_load(&steps_seen[5]), 0);
    cr_assert_eq(atomic_load(&step_wrong_worker), 0);
    cr_assert_eq(atomic_load(&step_out_of_order), 0, "steps ran out of their keys' order");
    /* One distinct key: one step, then done. */
    atomic_store(&step_next, 0);
    cr_assert_eq(shard_submit_multi_each(sd, skeys, 1, step_fn, NULL, NULL), 0);
    cr_assert_eq(shard_drain(sd), 0);
    cr_assert_eq(atomic_load(&steps_seen[0]), 21);
    struct shard_stats st;
    cr_assert_eq(shard_dispatcher_stats(sd, &st), 0);
    cr_assert_eq(st.multi_open, 0);
    shard_dispatcher_destroy(sd);
}

static sem_t ran_sem;
static void ran_post(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    sem_post(&ran_sem);
}
static void ran_step(shard_worker *w, void *arg, size_t key)
{
    (void)w, (void)arg, (void)key;
}

/* Waits (10 s at most) until every one of d's n workers is parked: it has parked since it last ran a
 * job (seen[i]: its executed and parked counts when it was last found parked, from 0), runs none, and
 * its executed, parked and woken counts stayed as they were over a poll 1 ms before (a worker that
 * has just returned from a job reads as not running before its executed count moves); then records
 * them. Each is then asleep, with nothing to wake it. */
static void all_parked(shard_dispatcher *d, uint64_t (*seen)[2], size_t n)
{
    struct shard_worker_stats ws[3], was[3];
    cr_assert_leq(n, 3);
    memset(was, 0, sizeof was);
    for (int tries = 0; tries < 10000; tries++) {
        cr_assert_eq(shard_dispatcher_worker_stats(d, ws, n), (long)n);
        size_t parked = 0;
        for (size_t i = 0; i < n; i++)
            parked += !ws[i].running && ws[i].parked > 0 &&
                      (ws[i].executed == seen[i][0] || ws[i].parked > seen[i][1]) &&
                      ws[i].executed == was[i].executed && ws[i].parked == was[i].parked &&
                      ws[i].woken == was[i].woken;
        if (parked == n) {
            for (size_t i = 0; i < n; i++) {
                seen[i][0] = ws[i].executed;
                seen[i][1] = ws[i].parked;
            }
            return;
        }
        memcpy(was, ws, sizeof ws);
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL); /* polling the stats for a state, bounded above */
    }
    cr_assert_fail("the workers did not all park in 10 s");
}

/* The job must run with nothing else submitted: within 10 s, or the wake-up was lost. */
static void runs_alone(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    cr_assert_eq(sem_timedwait(&ran_sem, &until), 0, "a multi-key job to parked workers did not run in 10 s");
}

/* Every worker parked, then a multi-key job alone: split over two workers, whole on one, and with
 * steps over two. Each runs with no other submit, drain or change to wake a worker for it. */
Test(multi, a_job_to_parked_workers_wakes_them)
{
    shard_dispatcher *d = make(3, 0, NULL);
    sem_init(&ran_sem, 0, 0);
    uint64_t after[3][2] = { { 0 } };
    char a[24], b[24], c[24], e[24];
    size_t al = key_of(d, "w0", 0, a), bl = key_of(d, "w1", 0, b), cl = key_of(d, "w2", 0, c),
           el = key_of(d, "w2", 1, e);
    struct shard_key split[2] = { { a, al }, { b, bl } }, whole[2] = { { c, cl }, { e, el } },
                     each[2] = { { b, bl }, { c, cl } };
    all_parked(d, after, 3);
    cr_assert_eq(shard_submit_multi(d, split, 2, ran_post, NULL), 0);
    runs_alone();
    all_parked(d, after, 3);
    cr_assert_eq(shard_submit_multi(d, whole, 2, ran_post, NULL), 0);
    runs_alone();
    all_parked(d, after, 3);
    cr_assert_eq(shard_submit_multi_each(d, each, 2, ran_step, ran_post, NULL), 0);
    runs_alone();
    shard_dispatcher_destroy(d);
    sem_destroy(&ran_sem);
}
