/* Destroy with multi-key jobs with steps in flight: producers submit shard_submit_multi_each jobs
 * while the control thread adds and removes workers and places keys; they stop (a submit that starts
 * after destroy has returned is the caller's use-after-free), and destroy comes at once, while the
 * jobs' done keep submitting from jobs until refused (-ESHUTDOWN). Every job accepted
 * (0) must have run each step once and done once, after its steps, before destroy returned (a step
 * whose worker has stopped runs on the worker of the last part: multi.h), and nothing is touched
 * after it is freed (AddressSanitizer, ThreadSanitizer). Rounds of it, each a new dispatcher.
 *   stress_steps_destroy [ROUNDS]   (default 40; 10 under sanitizers) */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "stress_common.h"

#define KEYS      32
#define PRODUCERS 2
#define MAXJOBS   200000

struct mjob {
    int        n;
    int        keys[6];
    atomic_int steps[6];
    atomic_int done;
    atomic_int accepted; /* 1: submit returned 0 */
};

static shard_dispatcher *disp;
static char              names[KEYS][16];
static size_t            lens[KEYS];
static struct mjob      *jobs;
static atomic_int        next_job, dones;
static atomic_bool       refused_seen, stop;

static void job_step(shard_worker *w, void *arg, size_t i)
{
    (void)w;
    struct mjob *j = arg;
    CHECK(atomic_fetch_add(&j->steps[i], 1) == 0, "a step ran twice");
    CHECK(atomic_load(&j->done) == 0, "a step after done");
}

static void submit_one(unsigned *seed);

static void job_done(shard_worker *w, void *arg)
{
    (void)w;
    struct mjob *j = arg;
    for (int i = 0; i < j->n; i++)
        CHECK(atomic_load(&j->steps[i]) == 1, "done with step %d run %d times", i, atomic_load(&j->steps[i]));
    CHECK(atomic_fetch_add(&j->done, 1) == 0, "done ran twice");
    atomic_fetch_add(&dones, 1);
    unsigned seed = (unsigned)(j - jobs);
    if (seed % 3 == 0)
        submit_one(&seed); /* from a job: 0 or -ESHUTDOWN */
}

static void submit_one(unsigned *seed)
{
    int id = atomic_fetch_add(&next_job, 1);
    if (id >= MAXJOBS) {
        atomic_store(&refused_seen, true);
        return;
    }
    struct mjob *j = &jobs[id];
    j->n = 2 + rand_r(seed) % 5;
    struct shard_key keys[6];
    for (int i = 0; i < j->n; i++) {
        bool again;
        do {
            j->keys[i] = rand_r(seed) % KEYS;
            again = false;
            for (int k = 0; k < i; k++)
                again |= j->keys[k] == j->keys[i];
        } while (again);
        keys[i] = (struct shard_key){ names[j->keys[i]], lens[j->keys[i]] };
    }
    /* Accepted is marked before the submit, undone if refused: done may run before submit returns. */
    atomic_store(&j->accepted, 1);
    int err = rand_r(seed) % 2 ? shard_submit_multi_each(disp, keys, (size_t)j->n, job_step, job_done, j)
                               : shard_try_submit_multi_each(disp, keys, (size_t)j->n, job_step, job_done, j);
    if (err) {
        CHECK(err == -ESHUTDOWN || err == -EAGAIN, "submit: %s", shard_strerror(err));
        CHECK(atomic_load(&j->done) == 0, "a refused job ran");
        atomic_store(&j->accepted, 0);
        if (err == -ESHUTDOWN)
            atomic_store(&refused_seen, true);
    }
}

static void *producer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg + 17;
    while (!atomic_load(&stop) && !atomic_load(&refused_seen))
        submit_one(&seed);
    return NULL;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int rounds = argc > 1 ? atoi(argv[1]) : STRESS_SANITIZED ? 10 : 40;
    for (int i = 0; i < KEYS; i++)
        lens[i] = (size_t)snprintf(names[i], sizeof names[i], "dk-%d", i);
    jobs = calloc(MAXJOBS, sizeof *jobs);
    long total_accepted = 0;
    for (int r = 0; r < rounds; r++) {
        memset(jobs, 0, MAXJOBS * sizeof *jobs);
        atomic_store(&next_job, 0);
        atomic_store(&dones, 0);
        atomic_store(&refused_seen, false);
        atomic_store(&stop, false);
        struct shard_config cfg = { .workers = 3, .queue_capacity = 32 };
        CHECK(shard_dispatcher_create(&disp, &cfg) == 0, "create");
        pthread_t prod[PRODUCERS];
        for (uintptr_t p = 0; p < PRODUCERS; p++)
            pthread_create(&prod[p], NULL, producer, (void *)p);
        /* Some jobs done, then a change or two, then destroy at once: steps in flight, some of them
         * on their way to a worker whose key moved. */
        while (atomic_load(&dones) < 50 + r * 10)
            sched_yield();
        char name[16];
        snprintf(name, sizeof name, "x%d", r);
        CHECK(shard_worker_add(disp, name, 2) == 0, "add");
        if (r % 2)
            CHECK(shard_key_place(disp, names[r % KEYS], lens[r % KEYS], name) == 0, "place");
        if (r % 3 == 0)
            CHECK(shard_worker_remove(disp, name) == 0, "remove");
        atomic_store(&stop, true);
        for (int p = 0; p < PRODUCERS; p++)
            pthread_join(prod[p], NULL);
        shard_dispatcher_destroy(disp);
        int n = atomic_load(&next_job);
        if (n > MAXJOBS)
            n = MAXJOBS;
        for (int i = 0; i < n; i++) {
            struct mjob *j = &jobs[i];
            if (!atomic_load(&j->accepted))
                continue;
            total_accepted++;
            CHECK(atomic_load(&j->done) == 1, "round %d: accepted job %d: done ran %d times by destroy's return", r,
                  i, atomic_load(&j->done));
            for (int s = 0; s < j->n; s++)
                CHECK(atomic_load(&j->steps[s]) == 1, "round %d: accepted job %d: step %d ran %d times", r, i, s,
                      atomic_load(&j->steps[s]));
        }
    }
    printf("%d rounds, %ld jobs accepted, each stepped and done once before destroy returned\n", rounds,
           total_accepted);
    free(jobs);
    return stress_result("stress_steps_destroy");
}
