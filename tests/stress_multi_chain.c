/* Chains of multi-key jobs behind a stuck key (a hostile review's two findings, 2026-12-06). M1 over
 * the stuck key S and a fresh key F1, M2 over F1 and F2, M3 over F2 and F3, ...: each waits for the one
 * before, so each holds its fresh key and sets one part aside behind the claim of the one before, on
 * a key that need never be submitted again.
 *
 *   stress_multi_chain          S's job is stuck on w0, which is crashed with REROUTE. One thread
 *                               grows the chain with shard_try_submit_multi: each worker's set-aside
 *                               jobs must stay within 5 * CAP and a little (throttle.h's gate; the
 *                               per-key throttle let every job in: 26,573 in 10 s at CAP 64), and the
 *                               gate must be what refused (held_full_waits). Then a second thread goes
 *                               on with shard_submit_multi: it waits (held_full_waits moves again) and
 *                               sets no more aside; a key that waits for nothing is still served on
 *                               each live worker. Once S's job returns, the waiting thread finishes,
 *                               and every job runs once, each key's in submission order, none two at
 *                               once, and no multi-key job stays open.
 *   stress_multi_chain live     the same with S's job only slow, on a live worker (no crash)
 *   stress_multi_chain gate     what the gate holds back: S stuck as above, a job on another worker
 *                               submits S's jobs (a worker never waits) until S's owner X holds
 *                               2 * CAP and a few: a multi-key job of two keys of X that run at once
 *                               still goes in and runs, one over S and another key is refused
 *                               (-EAGAIN); at 4 * CAP and a few, the first is refused too, until S's
 *                               job returns (include/shard/multi.h)
 *   stress_multi_chain drain    ROUNDS (30) rounds: a chain of 3 to 10 jobs behind a key stuck on a
 *                               crashed worker, then shard_drain at once. Drain must return while S
 *                               is stuck (multi.h: it waits for no job behind a stuck key, through any
 *                               chain): it waited for the stuck job in 6 of 20 runs of a chain of 3,
 *                               when a claim that linked the chain to S was made after the drain mark
 *                               had looked at the chain (nothing told it to look again).
 *   stress_multi_chain destroy  a thread waits in shard_submit_multi for S's owner X, which holds
 *                               4 * CAP and a few set aside; shard_dispatcher_destroy then sends it
 *                               back with -ESHUTDOWN while S's job is still stuck (destroy waits for
 *                               that job, not the waiter for destroy), and every job accepted runs.
 *   stress_multi_chain crash_drop | crash_reroute   the same waiter; X is crashed. DROP: S's jobs that
 *                               X held go to on_dropped, and the waiter gets in and its job runs while
 *                               S is still stuck (nothing full is left to wait for); REROUTE: they
 *                               follow S to its next owner, set-aside jobs stay bounded on every
 *                               worker, and the waiter finishes once S's job returns. Either way each
 *                               job runs or is dropped once, in order. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "stress_common.h"

#define CAP     64
#define WORKERS 3
#define MAXK    (1u << 16)   /* keys: 0 is S, 1.. the chain's */
#define BLOCKING 600         /* jobs the blocking thread adds to the chain */
#define RUN_S   5            /* seconds the try phase may take */

static shard_dispatcher *disp;
static sem_t inside, gate;
static atomic_int running[MAXK];
static uint32_t next_seq[MAXK], given_seq[MAXK]; /* what ran last / was given last, per key (+1) */
static atomic_long accepted, ran;
static char names[MAXK][24];
static size_t lens[MAXK];

struct chain_job {
    uint32_t   key[2], seq[2];
    atomic_int runs;
};

static void blocker(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    sem_post(&inside);
    sem_wait(&gate);
}

static void run_chain(shard_worker *w, void *arg)
{
    struct chain_job *j = arg;
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "a job of keys %u, %u ran twice", j->key[0], j->key[1]);
    for (int i = 0; i < 2; i++)
        CHECK(atomic_fetch_add(&running[j->key[i]], 1) == 0, "key %u: two jobs at once (%s)", j->key[i],
              shard_worker_name(w));
    for (int i = 0; i < 2; i++) {
        CHECK(next_seq[j->key[i]] + 1 == j->seq[i], "key %u: ran #%u after #%u", j->key[i], j->seq[i],
              next_seq[j->key[i]]);
        next_seq[j->key[i]] = j->seq[i];
    }
    for (int i = 0; i < 2; i++)
        atomic_fetch_sub(&running[j->key[i]], 1);
    atomic_fetch_add(&ran, 1);
}

static atomic_int probe_runs;

static void probe(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    atomic_fetch_add(&probe_runs, 1);
}

/* The name of a key whose owner is the worker numbered id, or, id UINT32_MAX, of any worker but
 * avoid (one whose queue S's job holds up). Return: its index. */
static uint32_t key_on(uint32_t *next, uint32_t id, uint32_t avoid)
{
    for (;;) {
        uint32_t k = (*next)++;
        CHECK(k < MAXK, "out of keys");
        if (k >= MAXK)
            return 0;
        lens[k] = (size_t)snprintf(names[k], sizeof names[k], "chain:%u", k);
        uint32_t owner;
        CHECK(shard_key_owner(disp, names[k], lens[k], &owner) == 0, "owner");
        if (id == UINT32_MAX ? owner != avoid : owner == id)
            return k;
    }
}

static struct chain_job jobs[MAXK];
static uint32_t njobs; /* the submitting thread's: one at a time */

/* The job of keys a and b, next in their orders (its slot is taken only once it is accepted). */
static struct chain_job *chain_job(uint32_t a, uint32_t b)
{
    CHECK(njobs < MAXK, "out of jobs");
    struct chain_job *j = &jobs[njobs < MAXK ? njobs : 0];
    *j = (struct chain_job){ .key = { a, b }, .seq = { given_seq[a] + 1, given_seq[b] + 1 } };
    return j;
}

static int submit_chain(struct chain_job *j, bool wait)
{
    struct shard_key keys[2] = { { names[j->key[0]], lens[j->key[0]] }, { names[j->key[1]], lens[j->key[1]] } };
    int rc = wait ? shard_submit_multi(disp, keys, 2, run_chain, j) : shard_try_submit_multi(disp, keys, 2, run_chain, j);
    if (rc == 0) {
        njobs++;
        given_seq[j->key[0]] = j->seq[0];
        given_seq[j->key[1]] = j->seq[1];
        atomic_fetch_add(&accepted, 1);
    }
    return rc;
}

static uint64_t full_waits(void)
{
    struct shard_stats st;
    CHECK(shard_dispatcher_stats(disp, &st) == 0, "stats");
    return st.held_full_waits;
}

/* Each worker's set-aside jobs: within the gate's bound (throttle.h: 4 * CAP, what its queue held
 * when it got there, at most CAP, and one job of a thread that checked just before). Return: their
 * sum. */
static uint64_t check_held(const char *when)
{
    struct shard_worker_stats ws[WORKERS + 1];
    long n = shard_dispatcher_worker_stats(disp, ws, WORKERS + 1);
    CHECK(n > 0, "worker stats");
    uint64_t sum = 0;
    for (long i = 0; i < n && i <= WORKERS; i++) {
        CHECK(ws[i].held <= 5 * CAP + 2, "%s: %s holds %llu set-aside jobs (bound %d)", when, ws[i].name,
              (unsigned long long)ws[i].held, 5 * CAP + 2);
        sum += ws[i].held;
    }
    return sum;
}

static uint32_t chain_head, key_next = 1;

/* The blocking thread: BLOCKING more jobs on the chain (their fresh keys found by main before it
 * starts), each waiting for a full holder to ease. */
static uint32_t blocking_keys[BLOCKING];
static atomic_int blocking_done;

static void *blocking(void *arg)
{
    (void)arg;
    for (int i = 0; i < BLOCKING; i++) {
        struct chain_job *j = chain_job(chain_head, blocking_keys[i]);
        int rc = submit_chain(j, true);
        CHECK(rc == 0, "shard_submit_multi: %s", shard_strerror(rc));
        if (rc)
            break;
        chain_head = blocking_keys[i];
    }
    atomic_store(&blocking_done, 1);
    return NULL;
}

/* A job of a fresh key of w1 and of w2 runs, whatever the chain holds (w0 is crashed, or busy in S's
 * job). Its run is waited for by looking, 10 s at most: a drain would wait for w0's slow job in the
 * live mode. */
static void probe_workers(void)
{
    for (uint32_t id = 1; id < WORKERS; id++) {
        uint32_t k = key_on(&key_next, id, UINT32_MAX);
        int before = atomic_load(&probe_runs);
        CHECK(shard_submit(disp, names[k], lens[k], probe, NULL) == 0, "probe submit");
        for (int t = 0; t < 10000 && atomic_load(&probe_runs) == before; t++)
            stress_pause_ms(1);
        CHECK(atomic_load(&probe_runs) > before, "a key of w%u that waits for nothing did not run in 10 s", id);
    }
}

static bool all_ran(void *ctx)
{
    (void)ctx;
    return atomic_load(&ran) == atomic_load(&accepted) && stress_none_open(disp);
}

static void dropped(shard_job_fn fn, void *arg, void *user);

/* A dispatcher whose key S (key 0, one of w0's) has a job that blocks until gate is posted; w0
 * crashed with REROUTE, so that S's later jobs wait on S's new owner, unless !crash. */
static void stuck_start(bool crash)
{
    struct shard_config cfg = { .workers = WORKERS, .queue_capacity = CAP, .on_dropped = dropped };
    CHECK(shard_dispatcher_create(&disp, &cfg) == 0, "create");
    uint32_t s = key_on(&key_next, 0, UINT32_MAX);
    memcpy(names[0], names[s], sizeof names[0]);
    lens[0] = lens[s];
    CHECK(shard_submit(disp, names[0], lens[0], blocker, NULL) == 0, "blocker");
    sem_wait(&inside);
    if (crash)
        CHECK(shard_worker_crash(disp, "w0", SHARD_CRASH_REROUTE) == 0, "crash");
}

static void bound(bool crash)
{
    stuck_start(crash);
    /* The chain's fresh keys avoid w0: alive, its queue is held up behind S's job (a part there waits
     * in the queue, bounded by it, not set aside). */
    uint64_t waits0 = full_waits();
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long refused = 0, in_a_row = 0;
    for (uint32_t f = key_on(&key_next, UINT32_MAX, 0); key_next < MAXK - 2 * BLOCKING;) {
        int rc = submit_chain(chain_job(chain_head, f), false);
        if (rc == 0) {
            chain_head = f;
            f = key_on(&key_next, UINT32_MAX, 0);
        } else {
            CHECK(rc == -EAGAIN, "shard_try_submit_multi: %s", shard_strerror(rc));
            refused++;
        }
        in_a_row = rc ? in_a_row + 1 : 0;
        clock_gettime(CLOCK_MONOTONIC, &t);
        /* Done once the gate has refused and 100,000 refusals came in a row (it holds for good: nothing
         * runs behind S; a full queue refuses too, for a while), or after RUN_S seconds whatever
         * happened (the checks below then fail if the gate never refused). */
        if (t.tv_sec - t0.tv_sec >= RUN_S || (rc && rc != -EAGAIN) ||
            (in_a_row >= 100000 && in_a_row % 100000 == 0 && full_waits() > waits0))
            break;
    }
    uint64_t held = check_held("the try phase");
    CHECK(full_waits() > waits0, "the gate refused nothing: the chain never filled a worker (%ld accepted)",
          atomic_load(&accepted));
    CHECK(atomic_load(&accepted) <= (long)(WORKERS * (5 * CAP + 2)), "%ld multi-key jobs accepted behind S",
          atomic_load(&accepted));
    printf("try: %ld accepted, %ld refused, %llu set aside\n", atomic_load(&accepted), refused,
           (unsigned long long)held);
    probe_workers();

    for (int i = 0; i < BLOCKING; i++)
        blocking_keys[i] = key_on(&key_next, UINT32_MAX, 0);
    uint64_t waits1 = full_waits();
    pthread_t th;
    CHECK(pthread_create(&th, NULL, blocking, NULL) == 0, "thread");
    for (int i = 0; i < 10000 && full_waits() == waits1; i++)
        stress_pause_ms(1);
    CHECK(full_waits() > waits1, "shard_submit_multi did not wait for the full holder in 10 s");
    CHECK(!atomic_load(&blocking_done), "the blocking thread finished while S was stuck");
    check_held("while a submit waits");
    probe_workers();

    sem_post(&gate);
    CHECK(pthread_join(th, NULL) == 0, "join");
    stress_drain_until(disp, all_ran, NULL);
    CHECK(atomic_load(&ran) == atomic_load(&accepted), "ran %ld of %ld", atomic_load(&ran), atomic_load(&accepted));
    shard_dispatcher_destroy(disp);
}

static atomic_int s_runs;
static int s_to_submit;

static void count_s(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    atomic_fetch_add(&s_runs, 1);
}

/* On a worker other than S's owner: s_to_submit jobs of S, which a worker's submits never wait for. */
static void submit_s(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    for (int i = 0; i < s_to_submit; i++)
        CHECK(shard_submit(disp, names[0], lens[0], count_s, NULL) == 0, "a worker's submit of S");
}

static uint64_t held_of(uint32_t id)
{
    struct shard_worker_stats ws[WORKERS + 1];
    long n = shard_dispatcher_worker_stats(disp, ws, WORKERS + 1);
    char name[16];
    snprintf(name, sizeof name, "w%u", id); /* create's workers: w0, w1, ... numbered alike */
    for (long i = 0; i < n && i <= WORKERS; i++)
        if (strcmp(ws[i].name, name) == 0)
            return ws[i].held;
    return 0;
}

/* Has a worker other than x submit n more jobs of S, and waits, looking 10 s at most, until x holds at
 * least want set aside. Not a drain: the filler's submits reach x's queue after drain's mark there, so
 * a drain may return before x has taken them (seen under TSan). */
static void fill(uint32_t x, int n, uint64_t want)
{
    uint32_t k = key_on(&key_next, x == 1 ? 2 : 1, UINT32_MAX);
    s_to_submit = n;
    CHECK(shard_submit(disp, names[k], lens[k], submit_s, NULL) == 0, "the filler");
    for (int t = 0; t < 10000 && held_of(x) < want; t++)
        stress_pause_ms(1);
    CHECK(held_of(x) >= want, "w%u holds %llu set aside, not %llu", x, (unsigned long long)held_of(x),
          (unsigned long long)want);
}

/* try_submit_multi of a and b: its return; accepted, the job must have run once a drain returns. */
static int try_pair(uint32_t a, uint32_t b)
{
    long before = atomic_load(&ran);
    int rc = submit_chain(chain_job(a, b), false);
    CHECK(rc != 0 || shard_drain(disp) == 0, "drain");
    CHECK(rc != 0 || atomic_load(&ran) > before, "a multi-key job of keys that run at once did not run");
    return rc;
}

static void gate_mode(void)
{
    stuck_start(true);
    uint32_t x;
    CHECK(shard_key_owner(disp, names[0], lens[0], &x) == 0, "S's owner");
    fill(x, 2 * CAP + 8, 2 * CAP + 8);
    uint32_t a = key_on(&key_next, x, UINT32_MAX), b = key_on(&key_next, x, UINT32_MAX);
    uint32_t y = key_on(&key_next, x == 1 ? 2 : 1, UINT32_MAX);
    CHECK(try_pair(a, b) == 0, "a multi-key job of two keys that run at once, on a worker holding %llu, refused",
          (unsigned long long)held_of(x));
    CHECK(try_pair(0, y) == -EAGAIN, "a multi-key job over the stuck key went in on a full worker");
    fill(x, 2 * CAP, 4 * CAP + 8);
    CHECK(try_pair(a, b) == -EAGAIN, "past 4 * CAP set aside, a multi-key job went in (w%u holds %llu)", x,
          (unsigned long long)held_of(x));
    sem_post(&gate);
    int want = 4 * CAP + 8;
    for (int t = 0; t < 10000 && atomic_load(&s_runs) < want; t++)
        CHECK(shard_drain(disp) == 0, "drain");
    CHECK(atomic_load(&s_runs) == want, "%d of S's %d jobs ran", atomic_load(&s_runs), want);
    CHECK(try_pair(a, b) == 0, "once S's job returned, a multi-key job was still refused");
    stress_drain_until(disp, all_ran, NULL);
    shard_dispatcher_destroy(disp);
    printf("gate: keys that run at once go in beside 2 * CAP set aside, not beside 4 * CAP\n");
}

/* A waiter in shard_submit_multi, on a thread of its own, for a pair of keys of a worker past 4 * CAP. */
struct waiter {
    pthread_t         th;
    struct chain_job *job;
    int               rc;
    atomic_int        done;
};

static void *wait_pair(void *arg)
{
    struct waiter *wt = arg;
    wt->rc = submit_chain(wt->job, true);
    atomic_store(&wt->done, 1);
    return NULL;
}

/* Waits, looking 10 s at most, for wt to return. Return: whether it did. */
static bool waiter_returned(struct waiter *wt)
{
    for (int t = 0; t < 10000 && !atomic_load(&wt->done); t++)
        stress_pause_ms(1);
    return atomic_load(&wt->done);
}

/* S stuck on its owner X (w0 crashed), X filled past 4 * CAP, and wt waiting for X with a pair of X's
 * keys. Return: X. */
static uint32_t waiter_start(struct waiter *wt)
{
    stuck_start(true);
    uint32_t x;
    CHECK(shard_key_owner(disp, names[0], lens[0], &x) == 0, "S's owner");
    int want = 4 * CAP + 8;
    fill(x, want, (uint64_t)want);
    uint32_t a = key_on(&key_next, x, UINT32_MAX), b = key_on(&key_next, x, UINT32_MAX);
    wt->job = chain_job(a, b);
    uint64_t waits = full_waits();
    CHECK(pthread_create(&wt->th, NULL, wait_pair, wt) == 0, "thread");
    for (int t = 0; t < 10000 && full_waits() == waits; t++)
        stress_pause_ms(1);
    CHECK(full_waits() > waits, "shard_submit_multi did not wait for w%u, holding %llu, in 10 s", x,
          (unsigned long long)held_of(x));
    CHECK(!atomic_load(&wt->done), "shard_submit_multi returned beside a worker past 4 * CAP");
    return x;
}

static void *destroy_thread(void *arg)
{
    (void)arg;
    shard_dispatcher_destroy(disp);
    return NULL;
}

static void waiter_destroyed(void)
{
    struct waiter wt = { 0 };
    waiter_start(&wt);
    pthread_t d;
    CHECK(pthread_create(&d, NULL, destroy_thread, NULL) == 0, "thread");
    CHECK(waiter_returned(&wt), "destroy left a gate waiter waiting for S's stuck job");
    CHECK(wt.rc == -ESHUTDOWN, "the waiter got %s, not -ESHUTDOWN", shard_strerror(wt.rc));
    CHECK(atomic_load(&s_runs) == 0, "S's jobs ran while S's job was stuck");
    sem_post(&gate);
    CHECK(pthread_join(d, NULL) == 0 && pthread_join(wt.th, NULL) == 0, "join");
    CHECK(atomic_load(&s_runs) == 4 * CAP + 8, "destroy ran %d of S's %d jobs", atomic_load(&s_runs), 4 * CAP + 8);
    CHECK(atomic_load(&ran) == atomic_load(&accepted), "destroy ran %ld of %ld multi-key jobs", atomic_load(&ran),
          atomic_load(&accepted));
    printf("destroy: the gate waiter returned -ESHUTDOWN while S was stuck; every job ran\n");
}

static atomic_int s_dropped, multi_dropped;

static void dropped(shard_job_fn fn, void *arg, void *user)
{
    (void)arg, (void)user;
    if (fn == count_s)
        atomic_fetch_add(&s_dropped, 1);
    else if (fn == run_chain)
        atomic_fetch_add(&multi_dropped, 1);
    else
        CHECK(false, "a job of neither kind was dropped");
}

static bool s_done(void *ctx)
{
    (void)ctx;
    return atomic_load(&s_runs) + atomic_load(&s_dropped) == 4 * CAP + 8 && all_ran(NULL);
}

static void waiter_crash(enum shard_crash_policy policy)
{
    struct waiter wt = { 0 };
    uint32_t x = waiter_start(&wt);
    char name[16];
    snprintf(name, sizeof name, "w%u", x);
    CHECK(shard_worker_crash(disp, name, policy) == 0, "crash %s", name);
    if (policy == SHARD_CRASH_DROP) {
        CHECK(waiter_returned(&wt), "a gate waiter still waits after its full worker crashed with DROP");
        CHECK(wt.rc == 0, "the waiter got %s", shard_strerror(wt.rc));
        for (int t = 0; t < 10000 && atomic_load(&ran) < atomic_load(&accepted); t++)
            stress_pause_ms(1);
        CHECK(atomic_load(&ran) == atomic_load(&accepted), "the waiter's job did not run in 10 s while S was stuck");
        CHECK(atomic_load(&s_dropped) > 0, "none of S's jobs that %s held went to on_dropped", name);
    } else {
        check_held("after the full worker's crash");
    }
    CHECK(atomic_load(&s_runs) == 0, "S's jobs ran while S's job was stuck");
    sem_post(&gate);
    CHECK(pthread_join(wt.th, NULL) == 0, "join");
    CHECK(wt.rc == 0, "the waiter got %s", shard_strerror(wt.rc));
    stress_drain_until(disp, s_done, NULL);
    CHECK(atomic_load(&s_runs) + atomic_load(&s_dropped) == 4 * CAP + 8, "S's jobs: %d ran, %d dropped of %d",
          atomic_load(&s_runs), atomic_load(&s_dropped), 4 * CAP + 8);
    CHECK(atomic_load(&multi_dropped) == 0, "the waiter's job was dropped");
    shard_dispatcher_destroy(disp);
    printf("%s: S's jobs %d ran, %d dropped; the waiter's job ran\n", policy == SHARD_CRASH_DROP ? "crash_drop" :
           "crash_reroute", atomic_load(&s_runs), atomic_load(&s_dropped));
}

static void drain(int rounds)
{
    for (int r = 0; r < rounds; r++) {
        atomic_store(&accepted, 0);
        atomic_store(&ran, 0);
        key_next = 1;
        njobs = 0;
        memset(next_seq, 0, sizeof next_seq);
        memset(given_seq, 0, sizeof given_seq);
        stuck_start(true);
        /* After the crash every key is w1's or w2's: the chain's alternate between them. */
        chain_head = 0;
        int len = 3 + r % 8;
        for (int i = 1; i <= len; i++) {
            uint32_t f = key_on(&key_next, 1 + (uint32_t)(i % 2), UINT32_MAX);
            CHECK(submit_chain(chain_job(chain_head, f), true) == 0, "submit_multi");
            chain_head = f;
        }
        CHECK(shard_drain(disp) == 0, "drain"); /* the watchdog: drain waited for S's stuck job */
        CHECK(atomic_load(&ran) == 0, "round %d: %ld of the chain ran while S was stuck", r, atomic_load(&ran));
        sem_post(&gate);
        stress_drain_until(disp, all_ran, NULL);
        shard_dispatcher_destroy(disp);
    }
    printf("drain: %d rounds, chains of 3 to 10 jobs behind a stuck key\n", rounds);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "bound";
    stress_watchdog("stress_multi_chain", 120);
    sem_init(&inside, 0, 0);
    sem_init(&gate, 0, 0);
    if (strcmp(mode, "drain") == 0)
        drain(argc > 2 ? atoi(argv[2]) : 30);
    else if (strcmp(mode, "gate") == 0)
        gate_mode();
    else if (strcmp(mode, "destroy") == 0)
        waiter_destroyed();
    else if (strcmp(mode, "crash_drop") == 0 || strcmp(mode, "crash_reroute") == 0)
        waiter_crash(strcmp(mode, "crash_drop") == 0 ? SHARD_CRASH_DROP : SHARD_CRASH_REROUTE);
    else if (strcmp(mode, "live") == 0 || strcmp(mode, "bound") == 0)
        bound(strcmp(mode, "bound") == 0);
    else {
        fprintf(stderr, "usage: stress_multi_chain [bound | live | gate | drain [ROUNDS] | destroy | crash_drop |"
                        " crash_reroute]\n");
        return 2;
    }
    return stress_result("stress_multi_chain");
}
