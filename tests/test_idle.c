/* The idle hook (shard_config.on_worker_idle): an idle worker waits in it, on its wake descriptor
 * beside the caller's own; a submit, a timer, a removal, a crash and destroy each make it return; what
 * it submits to its own worker runs after it returns, in order, and makes wake_fd readable; calls a
 * job may not make answer -EDEADLK from it; and a dispatcher that cannot have the descriptor says so. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <shard.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

/* What the hooks of one test saw. */
static sem_t      entered;  /* posted each time a hook is entered to wait (a timeout other than 0) */
static atomic_int calls, woken_by_fd, last_timeout;
static atomic_int min_timeout = 1 << 30; /* the least timeout above 0 */
/* Each call's timeout, and whether wake_fd was readable when it was entered (the first LOG calls). */
#define LOG 8
static atomic_int log_timeout[LOG], log_readable[LOG];

/* Waits on wake_fd alone. Return: poll's. */
static int wait_wake(int wake_fd, int timeout_ms)
{
    struct pollfd p = { .fd = wake_fd, .events = POLLIN };
    return poll(&p, 1, timeout_ms);
}

/* Waits on wake_fd alone, as the contract asks. */
static void wait_hook(shard_worker *w, int wake_fd, int timeout_ms, void *user)
{
    (void)w, (void)user;
    int n = atomic_fetch_add(&calls, 1);
    atomic_store(&last_timeout, timeout_ms);
    if (n < LOG) {
        atomic_store(&log_timeout[n], timeout_ms);
        atomic_store(&log_readable[n], wait_wake(wake_fd, 0));
    }
    if (timeout_ms > 0 && timeout_ms < atomic_load(&min_timeout))
        atomic_store(&min_timeout, timeout_ms);
    if (timeout_ms != 0)
        sem_post(&entered); /* a call that waits; the round before it waits for nothing */
    if (wait_wake(wake_fd, timeout_ms) == 1)
        atomic_fetch_add(&woken_by_fd, 1);
}

/* Waits for s at most 10 s: what should happen at once fails the test rather than hanging it. */
static bool within_10s(sem_t *s)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += 10;
    int r;
    while ((r = sem_timedwait(s, &t)) != 0 && errno == EINTR)
        ;
    return r == 0;
}

static shard_dispatcher *make(uint32_t workers, void (*hook)(shard_worker *, int, int, void *))
{
    sem_init(&entered, 0, 0);
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = workers, .on_worker_idle = hook };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    return d;
}

/* The dispatcher a hook's user points to, once create has stored it (a hook may run before). */
static shard_dispatcher *created(void *user)
{
    shard_dispatcher *d;
    while (!(d = atomic_load((_Atomic(shard_dispatcher *) *)user)))
        ;
    return d;
}

/* A dispatcher of one worker with hook, whose user is *dp, set once create returns. */
static shard_dispatcher *make_one(void (*hook)(shard_worker *, int, int, void *), uint32_t capacity,
                                  _Atomic(shard_dispatcher *) *dp)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 1, .queue_capacity = capacity, .on_worker_idle = hook,
                                .user = (void *)dp };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    atomic_store(dp, d);
    return d;
}

static void post(shard_worker *w, void *arg)
{
    (void)w;
    sem_post(arg);
}

Test(idle, a_worker_waits_in_the_hook_and_a_submit_wakes_it)
{
    shard_dispatcher *d = make(1, wait_hook);
    sem_wait(&entered); /* the worker is idle, in the hook, with no timer: no limit */
    cr_assert_eq(atomic_load(&last_timeout), -1);
    sem_t ran;
    sem_init(&ran, 0, 0);
    cr_assert_eq(shard_submit(d, "k", 1, post, &ran), 0);
    cr_assert(within_10s(&ran), "the submit did not wake the hook");
    cr_assert_geq(atomic_load(&woken_by_fd), 1, "the job ran without the hook seeing wake_fd readable");
    shard_dispatcher_destroy(d);
}

/* The hook submits, the first time it is called, jobs of one key to its own (only) worker, then waits
 * on wake_fd as a network loop would: its own submits must make it readable, or it waits for ever.
 * Each job checks its place in the sequence. */
#define OWN_JOBS 1000
static atomic_int own_next, own_bad, fd_readable_after_own;
static sem_t      own_done;

static void own_job(shard_worker *w, void *arg)
{
    (void)w;
    int i = (int)(intptr_t)arg;
    if (atomic_load(&own_next) != i)
        atomic_fetch_add(&own_bad, 1);
    atomic_store(&own_next, i + 1);
    if (i == OWN_JOBS - 1)
        sem_post(&own_done);
}

static void submitting_hook(shard_worker *w, int wake_fd, int timeout_ms, void *user)
{
    if (atomic_fetch_add(&calls, 1) == 0) {
        shard_dispatcher *d = created(user);
        for (int i = 0; i < OWN_JOBS; i++)
            if (shard_submit(d, "own", 3, own_job, (void *)(intptr_t)i) != 0)
                atomic_fetch_add(&own_bad, 1);
        if (shard_worker_crashed(w))
            atomic_fetch_add(&own_bad, 1);
        atomic_store(&fd_readable_after_own, wait_wake(wake_fd, 10 * 1000)); /* 10 s: 0 fails the test */
        return; /* the jobs run now, after it */
    }
    wait_wake(wake_fd, timeout_ms);
}

/* Each time its queue runs dry, a worker first gives the hook a round that waits for nothing (its
 * events are work), then waits in it; the wake-up that ended the last wait was read back before. */
Test(idle, a_worker_whose_queue_ran_dry_calls_the_hook_with_timeout_0_then_to_wait)
{
    shard_dispatcher *d = make(1, wait_hook);
    sem_wait(&entered); /* waiting, with nothing to do: nothing calls it again until the submit */
    atomic_store(&calls, 0);
    sem_t ran;
    sem_init(&ran, 0, 0);
    cr_assert_eq(shard_submit(d, "k", 1, post, &ran), 0);
    cr_assert(within_10s(&ran));
    cr_assert(within_10s(&entered), "the worker did not wait in its hook again after the job");
    cr_assert_eq(atomic_load(&calls), 2, "%d calls after the job, not a round and a wait", atomic_load(&calls));
    cr_assert_eq(atomic_load(&log_timeout[0]), 0, "the first call after the job waits %d ms", atomic_load(&log_timeout[0]));
    cr_assert_eq(atomic_load(&log_timeout[1]), -1);
    cr_assert_eq(atomic_load(&log_readable[0]), 0, "the submit's wake-up was not read back: wake_fd stayed readable");
    cr_assert_eq(atomic_load(&log_readable[1]), 0);
    shard_dispatcher_destroy(d);
}

Test(idle, jobs_a_hook_submits_to_its_own_worker_run_after_it_in_order)
{
    static _Atomic(shard_dispatcher *) dp;
    sem_init(&own_done, 0, 0);
    /* More jobs than the queue holds: from a worker's thread a full queue takes them beyond it. */
    shard_dispatcher *d = make_one(submitting_hook, 64, &dp);
    cr_assert(within_10s(&own_done), "the hook's jobs did not run");
    cr_assert_eq(atomic_load(&own_bad), 0, "a submit from the hook failed, or its job ran out of order");
    cr_assert_eq(atomic_load(&own_next), OWN_JOBS);
    cr_assert_eq(atomic_load(&fd_readable_after_own), 1, "the hook's own submits left wake_fd unreadable");
    shard_dispatcher_destroy(d);
}

Test(idle, the_timeout_is_the_next_timer_and_the_timer_fires)
{
    shard_dispatcher *d = make(1, wait_hook);
    sem_wait(&entered);
    sem_t fired;
    sem_init(&fired, 0, 0);
    cr_assert_eq(shard_submit_after(d, "t", 1, 300 * 1000000ull, post, &fired, NULL), 0);
    cr_assert(within_10s(&fired), "the timer did not fire: the hook was not told its time");
    int t = atomic_load(&min_timeout);
    cr_assert(t > 0 && t <= 300, "the hook was given %d ms, not the time to a timer due in 300 ms", t);
    shard_dispatcher_destroy(d);
}

Test(idle, remove_crash_and_destroy_wake_a_worker_in_its_hook)
{
    shard_dispatcher *d = make(3, wait_hook);
    for (int i = 0; i < 3; i++)
        sem_wait(&entered); /* every worker in its hook, waiting with no limit */
    cr_assert_eq(shard_worker_remove(d, "w2"), 0); /* waits for w2 to pass its fence and exit */
    cr_assert_eq(shard_worker_crash(d, "w1", SHARD_CRASH_REROUTE), 0);
    struct shard_stats st;
    cr_assert_eq(shard_dispatcher_stats(d, &st), 0);
    cr_assert_eq(st.workers, 1);
    sem_t ran;
    sem_init(&ran, 0, 0);
    for (int i = 0; i < 64; i++) { /* keys that were w1's and w2's reach w0 */
        char k[16];
        cr_assert_eq(shard_submit(d, k, (size_t)snprintf(k, sizeof k, "k%d", i), post, &ran), 0);
    }
    for (int i = 0; i < 64; i++)
        cr_assert(within_10s(&ran), "job %d of the keys w1 and w2 had did not run on w0", i);
    shard_dispatcher_destroy(d); /* joins w0, in its hook again */
}

Test(idle, a_dispatcher_without_a_descriptor_left_fails_with_enomem)
{
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    int fd = open("/dev/null", O_RDONLY); /* the lowest free one: the limit there leaves none */
    cr_assert_geq(fd, 0);
    close(fd);
    struct rlimit low = { (rlim_t)fd, rl.rlim_max };
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
    shard_dispatcher *d = NULL;
    struct shard_config cfg = { .workers = 2, .on_worker_idle = wait_hook };
    sem_init(&entered, 0, 0);
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), -ENOMEM);
    cfg.on_worker_idle = NULL; /* without the hook no descriptor is needed */
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    cr_assert_eq(shard_worker_add(d, "x", 1), 0);
    shard_dispatcher_destroy(d);
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    cfg.on_worker_idle = wait_hook;
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0); /* an added worker's descriptor fails the add */
    cr_assert_eq(shard_worker_add(d, "x", 1), -ENOMEM);
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    cr_assert_eq(shard_worker_add(d, "x", 1), 0);
    shard_dispatcher_destroy(d);
}

/* The hook arms, the first time it is called to wait (not in the round before, which waits for
 * nothing), a timer on its own worker due in 50 ms, then waits as it was told (no timer then: no
 * limit): the timer must make wake_fd readable, or it never fires. */
static sem_t timer_fired;

static void timer_hook(shard_worker *w, int wake_fd, int timeout_ms, void *user)
{
    (void)w;
    if (timeout_ms != 0 && atomic_fetch_add(&calls, 1) == 0) {
        if (timeout_ms != -1) /* no timer yet: told no limit */
            atomic_fetch_add(&own_bad, 1);
        if (shard_submit_after(created(user), "t", 1, 50 * 1000000ull, post, &timer_fired, NULL) != 0)
            atomic_fetch_add(&own_bad, 1);
    }
    wait_wake(wake_fd, timeout_ms);
}

Test(idle, a_timer_the_hook_arms_on_its_own_worker_wakes_it)
{
    static _Atomic(shard_dispatcher *) dp;
    sem_init(&timer_fired, 0, 0);
    shard_dispatcher *d = make_one(timer_hook, 0, &dp);
    cr_assert(within_10s(&timer_fired), "a timer armed in the hook did not fire: the hook kept waiting");
    cr_assert_eq(atomic_load(&own_bad), 0);
    shard_dispatcher_destroy(d);
}

/* A hook calling back into its dispatcher for what a job may not do: membership changes and drain
 * answer -EDEADLK from it, and the worker carries on. */
static atomic_int calls_back[4];

static void calling_back_hook(shard_worker *w, int wake_fd, int timeout_ms, void *user)
{
    if (atomic_fetch_add(&calls, 1) == 0) {
        shard_dispatcher *d = created(user);
        atomic_store(&calls_back[0], shard_drain(d));
        atomic_store(&calls_back[1], shard_worker_add(d, "x", 1));
        atomic_store(&calls_back[2], shard_worker_remove(d, shard_worker_name(w)));
        atomic_store(&calls_back[3], shard_worker_crash(d, shard_worker_name(w), SHARD_CRASH_REROUTE));
        sem_post(&entered);
    }
    wait_wake(wake_fd, timeout_ms);
}

Test(idle, membership_calls_and_drain_from_the_hook_return_edeadlk)
{
    static _Atomic(shard_dispatcher *) dp;
    sem_init(&entered, 0, 0);
    shard_dispatcher *d = make_one(calling_back_hook, 0, &dp);
    cr_assert(within_10s(&entered), "the hook did not run");
    for (int i = 0; i < 4; i++)
        cr_assert_eq(atomic_load(&calls_back[i]), -EDEADLK, "call %d from the hook: %d", i,
                     atomic_load(&calls_back[i]));
    sem_t ran;
    sem_init(&ran, 0, 0);
    cr_assert_eq(shard_submit(d, "k", 1, post, &ran), 0);
    cr_assert(within_10s(&ran), "the worker did not carry on after its hook's refused calls");
    shard_dispatcher_destroy(d);
}
