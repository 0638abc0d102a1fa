/* Where workers run: pinning to a CPU list or one worker a CPU, thread names, polling before parking,
 * and the config errors. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <shard.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

struct seen {
    atomic_int done;
    int        ncpus;     /* CPUs in the worker's affinity mask */
    int        cpu;       /* the one CPU when ncpus is 1 */
    char       name[16];  /* the thread's name */
};

static void look(shard_worker *w, void *arg)
{
    (void)w;
    struct seen *s = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    pthread_getaffinity_np(pthread_self(), sizeof set, &set);
    s->ncpus = CPU_COUNT(&set);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) {
            s->cpu = c;
            break;
        }
    pthread_getname_np(pthread_self(), s->name, sizeof s->name);
    atomic_store(&s->done, 1);
}

/* What the worker that owns key sees of itself. */
static void look_at(shard_dispatcher *d, const char *key, struct seen *s)
{
    memset(s, 0, sizeof *s);
    cr_assert_eq(shard_submit(d, key, strlen(key), look, s), 0);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert(atomic_load(&s->done));
}

/* The name of the worker that owns key in d's ring now. */
static void owner_name(shard_dispatcher *d, const char *key, char *out, size_t n)
{
    shard_ring *r;
    cr_assert_eq(shard_dispatcher_ring(d, &r), 0);
    snprintf(out, n, "%s", shard_ring_owner(r, key, strlen(key)));
    shard_ring_destroy(r);
}

static int first_allowed_cpu(void)
{
    cpu_set_t set;
    sched_getaffinity(0, sizeof set, &set);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            return c;
    return -1;
}

Test(placement, a_cpu_list_pins_every_worker_including_added_ones)
{
    int cpu = first_allowed_cpu();
    int cpus[] = { cpu };
    struct shard_config cfg = { .workers = 2, .cpus = cpus, .ncpus = 1 };
    shard_dispatcher *d;
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    cr_assert_eq(shard_worker_add(d, "added", 1), 0);
    struct seen s;
    for (int k = 0; k < 64; k++) { /* keys on every worker */
        char key[16];
        snprintf(key, sizeof key, "k%d", k);
        look_at(d, key, &s);
        cr_assert_eq(s.ncpus, 1, "worker of %s may run on %d CPUs", key, s.ncpus);
        cr_assert_eq(s.cpu, cpu);
    }
    shard_dispatcher_destroy(d);
}

Test(placement, pin_per_core_spreads_workers_over_the_allowed_cpus)
{
    cpu_set_t allowed;
    sched_getaffinity(0, sizeof allowed, &allowed);
    int n = CPU_COUNT(&allowed);
    struct shard_config cfg = { .workers = (uint32_t)n, .pin_per_core = true };
    shard_dispatcher *d;
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    cpu_set_t used;
    CPU_ZERO(&used);
    struct seen s;
    for (int k = 0; k < 64 * n; k++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", k);
        look_at(d, key, &s);
        cr_assert_eq(s.ncpus, 1);
        cr_assert(CPU_ISSET(s.cpu, &allowed));
        CPU_SET(s.cpu, &used);
    }
    cr_assert_eq(CPU_COUNT(&used), n, "%d workers on %d CPUs", n, CPU_COUNT(&used));
    shard_dispatcher_destroy(d);
}

Test(placement, unpinned_by_default_and_threads_carry_the_worker_name)
{
    struct shard_config cfg = { .workers = 2 };
    shard_dispatcher *d;
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    cr_assert_eq(shard_worker_add(d, "a-name-longer-than-fifteen-bytes", 1), 0);
    cpu_set_t allowed;
    sched_getaffinity(0, sizeof allowed, &allowed);
    struct seen s;
    for (int k = 0; k < 32; k++) {
        char key[16], owner[SHARD_NAME_MAX + 1], expect[16];
        snprintf(key, sizeof key, "k%d", k);
        owner_name(d, key, owner, sizeof owner);
        look_at(d, key, &s);
        cr_assert_eq(s.ncpus, CPU_COUNT(&allowed));
        snprintf(expect, sizeof expect, "%.15s", owner);
        cr_assert_str_eq(s.name, expect);
    }
    shard_dispatcher_destroy(d);
}

Test(placement, bad_cpu_lists_are_refused)
{
    shard_dispatcher *d = NULL;
    int negative[] = { 0, -1 }, huge[] = { SHARD_MAX_CPUS }, fine[] = { 0 };
    struct shard_config cfg = { .workers = 1, .cpus = negative, .ncpus = 2 };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), -EINVAL);
    cfg.cpus = huge;
    cfg.ncpus = 1;
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), -EINVAL);
    cfg.cpus = NULL;
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), -EINVAL);
    cfg.cpus = fine;
    cfg.ncpus = SHARD_MAX_CPUS + 1;
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), -EINVAL);
    cr_assert_null(d);
}

Test(placement, a_cpu_the_process_may_not_run_on_fails_create_cleanly)
{
    cpu_set_t allowed;
    sched_getaffinity(0, sizeof allowed, &allowed);
    int outside = -1;
    for (int c = 0; c < SHARD_MAX_CPUS && outside < 0; c++)
        if (!CPU_ISSET(c, &allowed))
            outside = c;
    cr_assert_geq(outside, 0);
    int cpus[] = { outside };
    struct shard_config cfg = { .workers = 2, .cpus = cpus, .ncpus = 1 };
    shard_dispatcher *d = NULL;
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), -EINVAL);
    cr_assert_null(d);
}

static void nothing(shard_worker *w, void *arg)
{
    (void)w;
    atomic_fetch_add((atomic_int *)arg, 1);
}

Test(placement, a_polling_worker_runs_jobs_and_still_parks_when_idle)
{
    struct shard_config cfg = { .workers = 1, .poll_us = 2000 };
    shard_dispatcher *d;
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    atomic_int ran = 0;
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(shard_submit(d, "k", 1, nothing, &ran), 0);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&ran), 1000);
    /* Idle now: after its 2 ms of polling the worker parks (counted in its stats). */
    struct shard_worker_stats ws;
    for (;;) {
        cr_assert_eq(shard_dispatcher_worker_stats(d, &ws, 1), 1);
        if (ws.parked > 0)
            break;
        sched_yield();
    }
    shard_dispatcher_destroy(d);
}
