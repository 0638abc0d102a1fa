/* Batch submit (shard_submit_many, shard_try_submit_many): errors before anything is submitted, every
 * job run once and each key's jobs in order, and what is accepted when queues fill: exactly a prefix,
 * nothing beyond it run or counted, also when one worker's queue is full and another's is not. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <shard.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define NKEYS 50
#define NJOBS 2000

struct item {
    int key, seq;
};

static struct item items[NJOBS];
static char names[NKEYS][16];
static int last_seq[NKEYS];  /* of each key: touched only by the job of that key that runs */
static atomic_int ran, out_of_order;

static void ordered(shard_worker *w, void *arg)
{
    (void)w;
    struct item *it = arg;
    if (last_seq[it->key] != it->seq - 1)
        atomic_fetch_add(&out_of_order, 1);
    last_seq[it->key] = it->seq;
    atomic_fetch_add(&ran, 1);
}

/* NJOBS jobs over NKEYS keys, each key's jobs numbered 0, 1, ... in submission order. */
static void make_jobs(struct shard_job *jobs)
{
    int next[NKEYS] = { 0 };
    for (int i = 0; i < NKEYS; i++) {
        snprintf(names[i], sizeof names[i], "key-%d", i);
        last_seq[i] = -1;
    }
    for (int i = 0; i < NJOBS; i++) {
        int k = (i * 7 + i / 3) % NKEYS;
        items[i] = (struct item){ k, next[k]++ };
        jobs[i] = (struct shard_job){ names[k], strlen(names[k]), ordered, &items[i] };
    }
    atomic_store(&ran, 0);
    atomic_store(&out_of_order, 0);
}

/* Jobs run by the workers, summed from their stats. */
static uint64_t executed(shard_dispatcher *d)
{
    struct shard_worker_stats ws[8];
    long n = shard_dispatcher_worker_stats(d, ws, 8);
    cr_assert(n > 0 && n <= 8);
    uint64_t sum = 0;
    for (long i = 0; i < n; i++)
        sum += ws[i].executed;
    return sum;
}

static shard_dispatcher *make(uint32_t workers, uint32_t capacity)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = workers, .queue_capacity = capacity };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    return d;
}

Test(submit_many, errors_submit_nothing)
{
    shard_dispatcher *d = make(2, 0);
    static struct shard_job jobs[NJOBS];
    make_jobs(jobs);
    cr_assert_eq(shard_submit_many(NULL, jobs, 1), -EINVAL);
    cr_assert_eq(shard_try_submit_many(NULL, jobs, 1), -EINVAL);
    cr_assert_eq(shard_submit_many(d, NULL, 1), -EINVAL);
    cr_assert_eq(shard_submit_many(d, jobs, (size_t)INT_MAX + 1), -EINVAL);
    cr_assert_eq(shard_submit_many(d, NULL, 0), 0);
    cr_assert_eq(shard_try_submit_many(d, jobs, 0), 0);
    struct shard_job bad[3] = { jobs[0], jobs[1], jobs[2] };
    bad[2].fn = NULL; /* checked before jobs 0 and 1 are submitted */
    cr_assert_eq(shard_submit_many(d, bad, 3), -EINVAL);
    bad[2] = (struct shard_job){ NULL, 3, ordered, &items[2] };
    cr_assert_eq(shard_try_submit_many(d, bad, 3), -EINVAL);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&ran), 0, "a refused batch ran %d jobs", atomic_load(&ran));
    shard_dispatcher_destroy(d);
}

Test(submit_many, every_job_runs_once_in_each_keys_order)
{
    shard_dispatcher *d = make(4, 64); /* queues smaller than the batch: it waits for room midway */
    static struct shard_job jobs[NJOBS];
    make_jobs(jobs);
    cr_assert_eq(shard_submit_many(d, jobs, NJOBS / 2), NJOBS / 2);
    cr_assert_eq(shard_submit_many(d, jobs + NJOBS / 2, NJOBS / 2), NJOBS / 2);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&ran), NJOBS);
    cr_assert_eq(atomic_load(&out_of_order), 0);
    cr_assert_eq(executed(d), NJOBS);
    shard_dispatcher_destroy(d);
}

static sem_t gate, started;
static void blocker(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    sem_post(&started);
    sem_wait(&gate);
}

/* A key owned by worker `want` of d (named by the dispatcher "w0", "w1", ...). */
static size_t key_of(shard_dispatcher *d, const char *want, char buf[24])
{
    shard_ring *r;
    cr_assert_eq(shard_dispatcher_ring(d, &r), 0);
    for (unsigned i = 0;; i++) {
        size_t n = (size_t)snprintf(buf, 24, "probe-%u", i);
        if (strcmp(shard_ring_owner(r, buf, n), want) == 0) {
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

Test(submit_many, try_accepts_exactly_a_prefix_when_one_queue_is_full)
{
    shard_dispatcher *d = make(2, 8);
    char a[24], b[24];
    size_t al = key_of(d, "w0", a), bl = key_of(d, "w1", b);
    sem_init(&gate, 0, 0);
    sem_init(&started, 0, 0);
    cr_assert_eq(shard_submit(d, a, al, blocker, NULL), 0);
    sem_wait(&started); /* w0 is held */
    static atomic_int fillers, ran_a, ran_b;
    for (int i = 0; i < 4; i++)
        cr_assert_eq(shard_submit(d, a, al, count, &fillers), 0); /* w0 has room for four more */
    /* b a b a ...: w1 (reached first) claims slots for all six of its jobs; w0 gets four of six, so
     * the prefix ends at w0's fifth job (index 9), and w1's job at index 10, beyond it, must not run. */
    struct shard_job jobs[12];
    for (int i = 0; i < 12; i++)
        jobs[i] = i % 2 ? (struct shard_job){ a, al, count, &ran_a } : (struct shard_job){ b, bl, count, &ran_b };
    cr_assert_eq(shard_try_submit_many(d, jobs, 12), 9);
    cr_assert_eq(shard_try_submit_many(d, jobs + 1, 11), 0, "w0's queue is still full");
    sem_post(&gate);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&ran_a), 4);
    cr_assert_eq(atomic_load(&ran_b), 5, "w1 ran %d jobs: only those before the cut are accepted",
                 atomic_load(&ran_b));
    cr_assert_eq(executed(d), 1 + 4 + 9, "the blocker, the fillers and the accepted jobs; the slot "
                                         "claimed for the rest uncounted");
    shard_dispatcher_destroy(d);
}

struct waiting_batch {
    shard_dispatcher       *d;
    const struct shard_job *jobs;
    size_t                  n;
    int                     rc;
};

static void *submit_batch(void *arg)
{
    struct waiting_batch *b = arg;
    b->rc = shard_submit_many(b->d, b->jobs, b->n);
    return NULL;
}

static void *destroy_it(void *arg)
{
    shard_dispatcher_destroy(arg);
    return NULL;
}

Test(submit_many, destroy_while_waiting_returns_what_was_accepted)
{
    shard_dispatcher *d = make(1, 4);
    sem_init(&gate, 0, 0);
    sem_init(&started, 0, 0);
    cr_assert_eq(shard_submit(d, "k", 1, blocker, NULL), 0);
    sem_wait(&started);
    static atomic_int n_ran;
    struct shard_job jobs[10];
    for (int i = 0; i < 10; i++)
        jobs[i] = (struct shard_job){ "k", 1, count, &n_ran };
    struct waiting_batch b = { d, jobs, 10, -1 };
    pthread_t t, dt;
    pthread_create(&t, NULL, submit_batch, &b);
    struct shard_worker_stats ws;
    do
        shard_dispatcher_worker_stats(d, &ws, 1);
    while (ws.queued < 4); /* four accepted; the fifth waits for room */
    pthread_create(&dt, NULL, destroy_it, d);
    pthread_join(t, NULL);
    sem_post(&gate);
    pthread_join(dt, NULL);
    cr_assert_eq(b.rc, 4, "the batch returned %d: exactly the four accepted", b.rc);
    cr_assert_eq(atomic_load(&n_ran), 4);
}

/* A job that submits batches until destroy refuses one: a refused batch runs none of its jobs. */
struct shutdown_probe {
    shard_dispatcher *d;
    atomic_int        looping, accepted, ran, refused_rc;
};

static void probe_count(shard_worker *w, void *arg)
{
    (void)w;
    atomic_fetch_add(&((struct shutdown_probe *)arg)->ran, 1);
}

static void submit_batches_until_shutdown(shard_worker *w, void *arg)
{
    (void)w;
    struct shutdown_probe *p = arg;
    struct shard_job jobs[3];
    for (int i = 0; i < 3; i++)
        jobs[i] = (struct shard_job){ "other", 5, probe_count, p };
    atomic_store(&p->looping, 1);
    for (;;) {
        int rc = shard_submit_many(p->d, jobs, 3);
        if (rc > 0)
            atomic_fetch_add(&p->accepted, rc);
        if (rc < 3) {
            atomic_store(&p->refused_rc, rc);
            break;
        }
    }
}

Test(submit_many, a_batch_during_destroy_is_refused_with_eshutdown)
{
    static struct shutdown_probe p;
    p.d = make(2, 16);
    cr_assert_eq(shard_submit(p.d, "k", 1, submit_batches_until_shutdown, &p), 0);
    while (!atomic_load(&p.looping))
        ; /* the job is submitting now */
    shard_dispatcher_destroy(p.d);
    int rc = atomic_load(&p.refused_rc);
    cr_assert(rc == -ESHUTDOWN || (rc > 0 && rc < 3), "the batch destroy cut returned %d", rc);
    cr_assert_eq(atomic_load(&p.ran), atomic_load(&p.accepted), "every accepted job ran, no refused one");
}

static atomic_int dropped_seen, dropped_foreign;
static void on_drop(shard_job_fn fn, void *arg, void *user)
{
    (void)arg, (void)user;
    atomic_fetch_add(fn == count ? &dropped_seen : &dropped_foreign, 1);
}

/* The slot claimed beyond the prefix sits in a worker that crashes with DROP: on_dropped and the
 * dropped count see the accepted jobs only, never the slot's filler. */
Test(submit_many, a_drop_crash_hands_over_only_accepted_jobs)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 2, .queue_capacity = 8, .on_dropped = on_drop };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    char a[24], b[24];
    size_t al = key_of(d, "w0", a), bl = key_of(d, "w1", b);
    sem_init(&gate, 0, 0);
    sem_init(&started, 0, 0);
    cr_assert_eq(shard_submit(d, a, al, blocker, NULL), 0);
    cr_assert_eq(shard_submit(d, b, bl, blocker, NULL), 0);
    sem_wait(&started);
    sem_wait(&started); /* both workers are held */
    static atomic_int fillers, ran_a, ran_b;
    for (int i = 0; i < 4; i++)
        cr_assert_eq(shard_submit(d, a, al, count, &fillers), 0);
    struct shard_job jobs[12];
    for (int i = 0; i < 12; i++)
        jobs[i] = i % 2 ? (struct shard_job){ a, al, count, &ran_a } : (struct shard_job){ b, bl, count, &ran_b };
    cr_assert_eq(shard_try_submit_many(d, jobs, 12), 9); /* w1 holds five accepted jobs and a filler */
    cr_assert_eq(shard_worker_crash(d, "w1", SHARD_CRASH_DROP), 0);
    sem_post(&gate);
    sem_post(&gate);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&dropped_seen), 5);
    cr_assert_eq(atomic_load(&dropped_foreign), 0, "on_dropped was given a job nobody submitted");
    struct shard_stats st;
    cr_assert_eq(shard_dispatcher_stats(d, &st), 0);
    cr_assert_eq(st.dropped, 5);
    cr_assert_eq(atomic_load(&ran_b), 0);
    cr_assert_eq(atomic_load(&ran_a), 4);
    shard_dispatcher_destroy(d);
}
