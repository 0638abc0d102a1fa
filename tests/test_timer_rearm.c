/* shard_timer_rearm (shard/timer.h): every error; a pending timer's deadline moves later and sooner,
 * from a job of its key and from another thread, keeping its id; a periodic timer's grid starts again
 * from the new deadline; -EBUSY from its own job, -EAGAIN while its arm job waits in its key's queue. */
#include <criterion/criterion.h>
#include <errno.h>
#include <semaphore.h>
#include <shard.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define MS 1000000ull

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static shard_dispatcher *make(void)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 2 };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    return d;
}

struct shot {
    atomic_int runs;
    uint64_t   ran_at;
    sem_t      done;
};

static void record(shard_worker *w, void *arg)
{
    (void)w;
    struct shot *s = arg;
    s->ran_at = now_ns();
    atomic_fetch_add(&s->runs, 1);
    sem_post(&s->done);
}

static void noop(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
}

Test(timer_rearm, errors_change_nothing)
{
    shard_dispatcher *d = make();
    static struct shot s;
    sem_init(&s.done, 0, 0);
    shard_timer t;
    cr_assert_eq(shard_submit_after(d, "k", 1, 3600000 * MS, record, &s, &t), 0);
    cr_assert_eq(shard_timer_rearm(NULL, t, MS), -EINVAL);
    cr_assert_eq(shard_timer_rearm(d, 0, MS), -EINVAL);
    cr_assert_eq(shard_timer_rearm(d, t, SHARD_TIMER_MAX_NS + 1), -EINVAL);
    cr_assert_eq(shard_timer_rearm(d, t + (1ull << 32), MS), -ENOENT, "another generation of the record");
    cr_assert_eq(shard_timer_rearm(d, 0xffffffull, MS), -ENOENT, "an index never issued");
    cr_assert_eq(shard_timer_cancel(d, t), 0, "the failed calls left it pending");
    cr_assert_eq(shard_timer_rearm(d, t, MS), -ENOENT, "cancelled");
    cr_assert_eq(shard_submit_after(d, "k", 1, 0, record, &s, &t), 0);
    sem_wait(&s.done);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(shard_timer_rearm(d, t, MS), -ENOENT, "it ran");
    shard_dispatcher_destroy(d);
}

/* A job of the key pushes its timer back, as an idle timeout re-armed by every packet. */
struct push {
    shard_dispatcher *d;
    shard_timer       t;
    uint64_t          delay;
    int               rc;
    uint64_t          at;
    sem_t             done;
};

static void push_back(shard_worker *w, void *arg)
{
    (void)w;
    struct push *p = arg;
    p->at = now_ns();
    p->rc = shard_timer_rearm(p->d, p->t, p->delay);
    sem_post(&p->done);
}

Test(timer_rearm, a_job_of_its_key_moves_it_later_and_the_id_stays)
{
    shard_dispatcher *d = make();
    static struct shot s;
    static struct push p;
    sem_init(&s.done, 0, 0);
    sem_init(&p.done, 0, 0);
    /* Due in 2 s (far beyond the few ms the job below takes to run, under valgrind too), moved to
     * 2.5 s after the job. */
    cr_assert_eq(shard_submit_after(d, "player", 6, 2000 * MS, record, &s, &p.t), 0);
    p.d = d;
    p.delay = 2500 * MS;
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(shard_submit(d, "player", 6, push_back, &p), 0);
    sem_wait(&p.done);
    cr_assert_eq(p.rc, 0);
    sem_wait(&s.done);
    cr_assert_geq(s.ran_at, p.at + 2500 * MS, "ran %.1f ms after the rearm", (double)(s.ran_at - p.at) / 1e6);
    cr_assert_eq(atomic_load(&s.runs), 1);
    shard_dispatcher_destroy(d);
}

Test(timer_rearm, another_thread_moves_it_sooner_and_the_sleeping_worker_wakes)
{
    shard_dispatcher *d = make();
    static struct shot s;
    sem_init(&s.done, 0, 0);
    shard_timer t;
    cr_assert_eq(shard_submit_after(d, "k", 1, 3600000 * MS, record, &s, &t), 0);
    cr_assert_eq(shard_drain(d), 0); /* in its wheel; the workers are idle */
    uint64_t at = now_ns();
    cr_assert_eq(shard_timer_rearm(d, t, 20 * MS), 0);
    sem_wait(&s.done);
    cr_assert_geq(s.ran_at, at + 20 * MS);
    cr_assert_eq(shard_drain(d), 0); /* its job has returned: the timer is over */
    cr_assert_eq(atomic_load(&s.runs), 1);
    cr_assert_eq(shard_timer_rearm(d, t, MS), -ENOENT, "a one-shot timer is not pending once it ran");
    shard_dispatcher_destroy(d);
}

static struct shot tick;
static void tick_job(shard_worker *w, void *arg)
{
    record(w, arg);
}

Test(timer_rearm, a_periodic_timer_starts_its_grid_again)
{
    shard_dispatcher *d = make();
    sem_init(&tick.done, 0, 0);
    shard_timer t;
    cr_assert_eq(shard_submit_every(d, "k", 1, 3600000 * MS, tick_job, &tick, &t), 0);
    cr_assert_eq(shard_drain(d), 0);
    uint64_t at = now_ns();
    cr_assert_eq(shard_timer_rearm(d, t, 10 * MS), 0);
    sem_wait(&tick.done);
    cr_assert_geq(tick.ran_at, at + 10 * MS);
    cr_assert_eq(shard_drain(d), 0);
    /* Pending again, a period after that run: still its id. */
    cr_assert_eq(shard_timer_cancel(d, t), 0);
    cr_assert_eq(atomic_load(&tick.runs), 1);
    shard_dispatcher_destroy(d);
}

static struct push self;
static void rearm_self(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    self.rc = shard_timer_rearm(self.d, self.t, MS);
    sem_post(&self.done);
}

Test(timer_rearm, from_its_own_running_job_it_is_busy)
{
    shard_dispatcher *d = make();
    sem_init(&self.done, 0, 0);
    self.d = d;
    /* The id is stored before the job can run (timer.h); the job reads it from self.t. */
    cr_assert_eq(shard_submit_after(d, "k", 1, 10 * MS, rearm_self, NULL, &self.t), 0);
    sem_wait(&self.done);
    cr_assert_eq(self.rc, -EBUSY);
    shard_dispatcher_destroy(d);
}

static sem_t inside, gate;
static void blocker(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    sem_post(&inside);
    sem_wait(&gate);
}

/* A key of w0 that stays w0's when w2 joins. */
static void key_staying_on_w0(shard_dispatcher *d, char *buf)
{
    shard_ring *r;
    cr_assert_eq(shard_dispatcher_ring(d, &r), 0);
    shard_ring *after;
    cr_assert_eq(shard_ring_clone(r, &after), 0);
    cr_assert_eq(shard_ring_add(after, "w2", 1), 0);
    for (int n = 0;; n++) {
        snprintf(buf, 32, "key-%d", n);
        if (strcmp(shard_ring_owner(r, buf, strlen(buf)), "w0") == 0 &&
            strcmp(shard_ring_owner(after, buf, strlen(buf)), "w0") == 0)
            break;
    }
    shard_ring_destroy(r);
    shard_ring_destroy(after);
}

Test(timer_rearm, while_its_arm_job_waits_in_its_keys_queue_it_says_eagain)
{
    shard_dispatcher *d = make();
    char key[32];
    key_staying_on_w0(d, key);
    sem_init(&inside, 0, 0);
    sem_init(&gate, 0, 0);
    cr_assert_eq(shard_submit(d, key, strlen(key), blocker, NULL), 0);
    sem_wait(&inside);
    /* w0 cannot pass the fence of this change while it is in the blocker: the ring in force is not
     * settled, so the timer goes to w0's wheel by a job of its key, queued behind the blocker. */
    cr_assert_eq(shard_worker_add(d, "w2", 1), 0);
    shard_timer t;
    cr_assert_eq(shard_submit_after(d, key, strlen(key), 3600000 * MS, noop, NULL, &t), 0);
    cr_assert_eq(shard_timer_rearm(d, t, MS), -EAGAIN);
    sem_post(&gate);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(shard_timer_rearm(d, t, 3600000 * MS), 0, "in its wheel now");
    cr_assert_eq(shard_timer_cancel(d, t), 0);
    shard_dispatcher_destroy(d);
}

/* Called while destroy runs (from a job that keeps calling until it is told). */
static atomic_int shutdown_seen, other_answer;
static shard_timer pending;
static void rearm_until_shutdown(shard_worker *w, void *arg)
{
    shard_dispatcher *d = shard_worker_dispatcher(w);
    (void)arg;
    for (;;) {
        int rc = shard_timer_rearm(d, pending, 3600000 * MS);
        if (rc == -ESHUTDOWN) {
            atomic_store(&shutdown_seen, 1);
            return;
        }
        if (rc != 0 && rc != -EAGAIN)
            atomic_store(&other_answer, rc);
    }
}

Test(timer_rearm, during_destroy_it_answers_eshutdown)
{
    shard_dispatcher *d = make();
    cr_assert_eq(shard_submit_after(d, "t", 1, 3600000 * MS, noop, NULL, &pending), 0);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(shard_submit(d, "r", 1, rearm_until_shutdown, NULL), 0);
    shard_dispatcher_destroy(d); /* runs what was accepted: the job returns once told */
    cr_assert_eq(atomic_load(&shutdown_seen), 1);
    cr_assert_eq(atomic_load(&other_answer), 0);
}
