/* Churn torture: several producers submit sequenced jobs for hundreds of keys while a control thread
 * adds, removes, reweights and crashes (REROUTE) workers and places keys on workers every few
 * milliseconds, while the balancer places keys too. Asserts that every job ran exactly once, no key
 * ever ran on two workers at once, and per-(producer, key) order held; one producer submits in
 * batches (shard_submit_many). Then a DROP crash: executed + dropped = submitted.
 * Runs under ThreadSanitizer too (smaller). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "stress_common.h"

#define PRODUCERS 3
#define KEYS 300
#define PACED_CHANGES 8

static int jobs_per_producer;
static struct stress_key keys[KEYS];
static struct stress_job *jobs[PRODUCERS];
static shard_dispatcher *disp;
static atomic_int producers_done;
static atomic_int changes_made; /* the producers keep pace with the control thread: the jobs span changes */
static atomic_long executed;

static void run(shard_worker *w, void *arg)
{
    struct stress_job *j = arg;
    stress_run(&keys[j->key], j, w);
    /* seq_cst, not relaxed: publishes the job's writes (its key's next_seq) to main, which reads the
     * count in all_executed and then resets the keys and jobs for drop_crash. */
    atomic_fetch_add(&executed, 1);
}

static size_t key_name(char *buf, int k)
{
    return (size_t)snprintf(buf, 16, "key-%d", k);
}

/* Producer 0 submits in batches of 1 to 40 (shard_submit_many), the others one job at a time. */
static void *producer(void *arg)
{
    int p = (int)(long)arg;
    unsigned seq[KEYS] = { 0 };
    unsigned x = 12345u + (unsigned)p;
    struct shard_job batch[40];
    char names[40][16];
    int nb = 0, want = 1;
    for (int i = 0; i < jobs_per_producer; i++) {
        /* A loaded machine (a sanitizer beside other builds) makes the changes slower, not fewer: each
         * eighth of the jobs waits for one more change, so the last is submitted after PACED_CHANGES. */
        while (atomic_load(&changes_made) < (int)((long long)(i + 1) * PACED_CHANGES / jobs_per_producer))
            sched_yield();
        x = x * 1103515245u + 12345u;
        int k = (int)((x >> 8) % KEYS);
        struct stress_job *j = &jobs[p][i];
        j->producer = p;
        j->key = k;
        j->seq = seq[k]++;
        if (p != 0) {
            char name[16];
            int err = shard_submit(disp, name, key_name(name, k), run, j);
            CHECK(err == 0, "submit: %s", shard_strerror(err));
            continue;
        }
        batch[nb] = (struct shard_job){ names[nb], key_name(names[nb], k), run, j };
        if (++nb == want || i + 1 == jobs_per_producer) {
            int got = shard_submit_many(disp, batch, (size_t)nb);
            CHECK(got == nb, "submit_many: %d of %d (%s)", got, nb, got < 0 ? shard_strerror(got) : "");
            nb = 0;
            want = 1 + (int)((x >> 16) % 40);
        }
    }
    atomic_fetch_add(&producers_done, 1);
    return NULL;
}

/* Names of the workers in the ring; *others counts removed or crashed ones not yet gone. */
static int live_names(char names[][SHARD_NAME_MAX + 1], int max, int *others)
{
    struct shard_worker_stats st[64];
    long n = shard_dispatcher_worker_stats(disp, st, 64);
    int k = 0;
    *others = (int)n;
    for (long i = 0; i < n && i < 64 && k < max; i++)
        if (st[i].state == SHARD_WORKER_RUNNING)
            memcpy(names[k++], st[i].name, sizeof st[i].name);
    *others -= k;
    return k;
}

static void *control(void *arg)
{
    (void)arg;
    unsigned x = 777, next_id = 0, changes = 0, crashes = 0, reweights = 0, placements = 0;
    while (atomic_load(&producers_done) < PRODUCERS) {
        stress_pause_ms(2);
        char names[64][SHARD_NAME_MAX + 1];
        int others, live = live_names(names, 64, &others);
        x = x * 1103515245u + 12345u;
        int op = (int)((x >> 8) % 6);
        int err;
        if (op == 3) {
            err = shard_worker_set_weight(disp, names[(x >> 12) % (unsigned)live], 1 + (x >> 20) % 3);
            reweights++;
        } else if (op >= 4) {
            /* Place one of the hot few keys on a worker, or let it go back to the ring. */
            char key[16];
            size_t len = key_name(key, (int)((x >> 16) % 16));
            err = op == 4 ? shard_key_place(disp, key, len, names[(x >> 12) % (unsigned)live])
                          : shard_key_unplace(disp, key, len);
            if (err == -ENOENT && op == 5)
                continue; /* not placed, or its worker left */
            placements++;
        } else if (op == 0 && live < 6 && others < 8) {
            char name[16];
            snprintf(name, sizeof name, "c%u", next_id++);
            err = shard_worker_add(disp, name, 1 + (x >> 20) % 2);
        } else if (live > 1) {
            const char *victim = names[(x >> 12) % (unsigned)live];
            err = op == 1 ? shard_worker_remove(disp, victim) : shard_worker_crash(disp, victim, SHARD_CRASH_REROUTE);
            crashes += op != 1;
        } else {
            continue;
        }
        CHECK(err == 0, "membership change: %s", shard_strerror(err));
        changes++;
        atomic_fetch_add(&changes_made, 1);
    }
    printf("control: %u membership changes, %u crashes, %u weight changes, %u placements\n", changes, crashes,
           reweights, placements);
    return NULL;
}

static atomic_long dropped;
static void on_dropped(shard_job_fn fn, void *arg, void *user)
{
    (void)fn;
    (void)user;
    struct stress_job *j = arg;
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "dropped job ran or was dropped before");
    atomic_fetch_add(&dropped, 1);
}

static bool all_executed(void *ctx)
{
    (void)ctx;
    return atomic_load(&executed) == (long)PRODUCERS * jobs_per_producer;
}

static void churn(void)
{
    /* The balancer on, eager (a low threshold, no hysteresis): it places keys as it sees fit while the
     * control thread changes the pool. */
    struct shard_config cfg = { .workers = 3, .queue_capacity = 256, .on_dropped = on_dropped,
                                .balance = { .interval_ms = 5, .threshold = 1.02, .rounds = 1, .by_jobs = true } };
    int err = shard_dispatcher_create(&disp, &cfg);
    CHECK(err == 0, "create: %s", shard_strerror(err));
    pthread_t prod[PRODUCERS], ctl;
    pthread_create(&ctl, NULL, control, NULL);
    for (long p = 0; p < PRODUCERS; p++)
        pthread_create(&prod[p], NULL, producer, (void *)p);
    for (int p = 0; p < PRODUCERS; p++)
        pthread_join(prod[p], NULL);
    pthread_join(ctl, NULL);
    /* Until every job has run: the last crash may have stuck one (stress_common.h). */
    stress_drain_until(disp, all_executed, NULL);
    struct shard_stats bs;
    shard_dispatcher_stats(disp, &bs);
    printf("balancer: %llu rounds, %llu keys placed, %llu weights changed\n", (unsigned long long)bs.balance_rounds,
           (unsigned long long)bs.balance_moves, (unsigned long long)bs.balance_weights);
    long total = (long)PRODUCERS * jobs_per_producer;
    CHECK(atomic_load(&executed) == total, "executed %ld of %ld", atomic_load(&executed), total);
    for (int p = 0; p < PRODUCERS; p++)
        for (int i = 0; i < jobs_per_producer; i++)
            CHECK(atomic_load(&jobs[p][i].runs) == 1, "job p%d #%d ran %d times", p, i, atomic_load(&jobs[p][i].runs));
    printf("churn: %ld jobs ran exactly once, in order\n", total);
}

/* DROP: a crash with jobs queued behind a blocked job; every job ends exactly once. */
static atomic_int gate, blocker_running;
static void blocker(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    atomic_store(&blocker_running, 1);
    while (!atomic_load(&gate))
        ;
}

static void drop_crash(void)
{
    atomic_store(&executed, 0);
    for (int p = 0; p < PRODUCERS; p++)
        memset(jobs[p], 0, (size_t)jobs_per_producer * sizeof *jobs[p]);
    for (int k = 0; k < KEYS; k++)
        memset(keys[k].next_seq, 0, PRODUCERS * sizeof(unsigned));
    CHECK(shard_worker_add(disp, "drop-a", 1) == 0, "add");
    CHECK(shard_worker_add(disp, "drop-b", 1) == 0, "add");
    /* Block the owner of key-0 so jobs pile up in its queue, then crash it with DROP. */
    char name[16];
    size_t len = key_name(name, 0);
    shard_ring *r;
    CHECK(shard_dispatcher_ring(disp, &r) == 0, "ring");
    char victim[SHARD_NAME_MAX + 1];
    snprintf(victim, sizeof victim, "%s", shard_ring_owner(r, name, len));
    shard_ring_destroy(r);
    CHECK(shard_submit(disp, name, len, blocker, NULL) == 0, "submit blocker");
    while (!atomic_load(&blocker_running))
        ; /* the victim is now inside the blocker: what follows queues up behind it */
    int n = 200; /* fewer than the blocked worker's queue holds: submit never has to wait for it */
    for (int i = 0; i < n; i++) {
        struct stress_job *j = &jobs[0][i];
        j->key = (int)((unsigned)i * 7919u % KEYS);
        j->seq = keys[j->key].next_seq[1]++; /* producer 1's slot counts what was submitted */
        j->producer = 0;
        char kn[16];
        CHECK(shard_submit(disp, kn, key_name(kn, j->key), run, j) == 0, "submit");
    }
    for (int k = 0; k < KEYS; k++)
        keys[k].next_seq[1] = 0;
    int err = shard_worker_crash(disp, victim, SHARD_CRASH_DROP);
    CHECK(err == 0, "crash DROP: %s", shard_strerror(err));
    atomic_store(&gate, 1);
    CHECK(shard_drain(disp) == 0, "drain");
    struct shard_stats st;
    shard_dispatcher_stats(disp, &st);
    long ran = atomic_load(&executed), drop = atomic_load(&dropped);
    CHECK(ran + drop == n, "executed %ld + dropped %ld != submitted %d", ran, drop, n);
    CHECK(drop > 0, "the crash dropped nothing: the test did not exercise DROP");
    CHECK((long)st.dropped == drop, "stats say %llu dropped, callback saw %ld", (unsigned long long)st.dropped, drop);
    for (int i = 0; i < n; i++)
        CHECK(atomic_load(&jobs[0][i].runs) == 1, "job #%d ended %d times", i, atomic_load(&jobs[0][i].runs));
    printf("drop: %d submitted = %ld executed + %ld dropped\n", n, ran, drop);
}

int main(int argc, char **argv)
{
    jobs_per_producer = STRESS_SANITIZED ? 20000 : 200000;
    if (argc > 1)
        jobs_per_producer = atoi(argv[1]);
    for (int p = 0; p < PRODUCERS; p++)
        jobs[p] = calloc((size_t)jobs_per_producer, sizeof *jobs[p]);
    for (int k = 0; k < KEYS; k++)
        keys[k].next_seq = calloc(PRODUCERS, sizeof(unsigned));
    churn();
    drop_crash();
    shard_dispatcher_destroy(disp);
    for (int p = 0; p < PRODUCERS; p++)
        free(jobs[p]);
    for (int k = 0; k < KEYS; k++)
        free(keys[k].next_seq);
    return stress_result("stress_churn");
}
