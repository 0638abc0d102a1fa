/* Multi-key jobs submitted from idle hooks (shard_config.on_worker_idle), as a network loop running on
 * the workers submits a transaction or an MGET it read: the hook submits, then waits on wake_fd, which
 * its own submit makes readable when a part of the job (or the whole job) is queued on its own worker
 * (dispatcher.h: the hook "may submit (to this worker too: such jobs run after it returns, and make
 * wake_fd readable like any other)"); the parts on other workers wake those. Each hook also waits on an
 * eventfd of the program's, its "socket", as a network loop waits on its sockets.
 *   turns  one hook at a time: the job of the last turn passes the turn on (writes the next worker's
 *          socket) when it runs, so that the hook whose turn it is submits with nothing else under way,
 *          once its wake_fd is not readable; a job whole on its own worker, split with a part on it
 *          (first, last, between others) or with none on it. With a part on it, its wake_fd must then
 *          be readable within HANG_S: nothing else is submitted meanwhile that could make it so.
 *   all    every hook submits its jobs at once, one a call (timeout 0 or not), and waits for wake_fd
 *          after each with a part on its own worker (HANG_S at most).
 * Each with 3 workers, then 70 (members from the 64th up, multi_submit.c's wake_owners). Checked: each
 * job runs once; no other job of its keys meanwhile; each hook's jobs of a key in the order it
 * submitted them; every job runs, each within twice HANG_S of the one before (no drain: it would wake
 * the workers, and a lost wake-up would go unseen). Without wake_owners' wake-up of the submitting
 * worker itself (for a job queued whole, or for split ones only), turns failed at the first turn with
 * a part on the hook's own worker, and all at once too. Runs under ThreadSanitizer in CI.
 *   stress_multi_idle [turns|all]   (default: both) */
#include <errno.h>
#include <poll.h>
#include <semaphore.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "stress_common.h"

#define HANG_S   (STRESS_SANITIZED ? 30 : 10)
#define MAXW     70
#define KEYS_PER 3 /* keys owned by each worker */
#define MAXK     4 /* keys a job */

enum phase { TURNS, ALL };
enum shape { WHOLE_ON_ME, ME_FIRST, ME_LAST, ME_BETWEEN, NONE_ON_ME, SHAPES };
static const char *const shape_name[SHAPES] = { "whole on its worker", "its worker's part first",
                                                "its worker's part last", "its worker's part between two",
                                                "no part on its worker" };

struct job {
    int        producer, n, shape, kind; /* producer: the submitting worker's id */
    int        key[MAXK];
    unsigned   seq[MAXK];
    atomic_int runs, steps;
};

static shard_dispatcher *d;
static int W, per, phase;
static char key_name[MAXW * KEYS_PER][16];     /* key k is owned by worker k / KEYS_PER */
static atomic_int running[MAXW * KEYS_PER];    /* jobs of the key running now */
static unsigned next_seq[MAXW][MAXW * KEYS_PER]; /* by producer, key: touched by the key's jobs only */
static unsigned seq[MAXW][MAXW * KEYS_PER];    /* by producer, key: touched by that worker's hook only */
static int submitted[MAXW];                    /* by worker: touched by its hook only */
static struct job *jobs;                       /* W * per: worker p's n-th at p * per + n */
static int sock[MAXW];                         /* each worker's "socket" */
static sem_t ran;                              /* posted by each job that ran */
static atomic_int gave_up, turns_passed, self_waits, go;

/* Waits for s at most seconds. Return: whether it was posted. */
static bool wait_sem(sem_t *s, int seconds)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += seconds;
    while (sem_timedwait(s, &t) != 0)
        if (errno != EINTR)
            return false;
    return true;
}

static void pass_turn(int from)
{
    if (atomic_fetch_add(&turns_passed, 1) + 1 >= W * per)
        return; /* the last turn */
    uint64_t one = 1;
    CHECK(write(sock[(from + 1) % W], &one, sizeof one) == sizeof one, "write: %s", strerror(errno));
}

static void run_fn(shard_worker *w, void *arg)
{
    struct job *j = arg;
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "worker %d's job (%s) ran twice", j->producer, shape_name[j->shape]);
    CHECK(j->kind < 2 || atomic_load(&j->steps) == j->n, "done after %d of %d steps", atomic_load(&j->steps), j->n);
    for (int i = 0; i < j->n; i++) {
        int k = j->key[i];
        CHECK(atomic_fetch_add(&running[k], 1) == 0, "key %s: another job of it ran with a multi-key job (%s)",
              key_name[k], shard_worker_name(w));
        CHECK(next_seq[j->producer][k] == j->seq[i], "key %s, worker %d's hook: its #%u ran, #%u expected",
              key_name[k], j->producer, j->seq[i], next_seq[j->producer][k]);
        next_seq[j->producer][k] = j->seq[i] + 1;
    }
    for (int i = 0; i < j->n; i++)
        atomic_fetch_sub(&running[j->key[i]], 1);
    if (phase == TURNS)
        pass_turn(j->producer);
    sem_post(&ran);
}

static void step_fn(shard_worker *w, void *arg, size_t key)
{
    (void)w;
    struct job *j = arg;
    CHECK(atomic_fetch_add(&j->steps, 1) == (int)key, "step %zu out of its order", key);
}

/* Submits worker me's next job. Return: whether a part of it is queued on me. */
static bool submit_next(int me)
{
    int n = submitted[me]++;
    struct job *j = &jobs[me * per + n];
    int other = (me + 1 + n % (W - 1)) % W, far = W - 1 - n % 4; /* far: a high id, for 70 workers */
    if (far < 0)
        far += W;
    while (far == me || far == other)
        far = (far + 1) % W;
    j->producer = me;
    j->shape = n % SHAPES;
    j->kind = n / SHAPES % 4;
#define K(id, i) (j->key[j->n++] = (id) * KEYS_PER + (i))
    switch (j->shape) {
    case WHOLE_ON_ME: K(me, 0), K(me, 1); break;
    case ME_FIRST: K(me, 0), K(other, 0); break;
    case ME_LAST: K(other, 1), K(far, 0), K(me, 2); break;
    case ME_BETWEEN: K(far, 1), K(me, 1), K(other, 2); break;
    default: K(other, 0), K(far, 2); break;
    }
#undef K
    struct shard_key ks[MAXK];
    uint64_t hs[MAXK];
    for (int i = 0; i < j->n; i++) {
        int k = j->key[i];
        j->seq[i] = seq[me][k]++;
        ks[i] = (struct shard_key){ key_name[k], strlen(key_name[k]) };
        hs[i] = shard_dispatcher_key_hash(d, ks[i].key, ks[i].len);
    }
    int rc;
    switch (j->kind) {
    case 0: rc = shard_submit_multi(d, ks, (size_t)j->n, run_fn, j); break;
    case 1: rc = shard_submit_multi_hash(d, hs, (size_t)j->n, run_fn, j); break;
    case 2: rc = shard_submit_multi_each(d, ks, (size_t)j->n, step_fn, run_fn, j); break;
    default: rc = shard_submit_multi_each_hash(d, hs, (size_t)j->n, step_fn, run_fn, j); break;
    }
    CHECK(rc == 0, "a hook's multi-key submit: %s", shard_strerror(rc));
    return j->shape != NONE_ON_ME;
}

/* After a submit with a part on me: wake_fd must become readable (at once; HANG_S at most). */
static void expect_readable(int me, int wake_fd)
{
    if (atomic_load(&gave_up))
        return; /* one report is enough: the rest would each wait as long */
    atomic_fetch_add(&self_waits, 1);
    struct pollfd p = { .fd = wake_fd, .events = POLLIN };
    int r;
    while ((r = poll(&p, 1, HANG_S * 1000)) < 0 && errno == EINTR)
        ;
    if (r == 0 && atomic_fetch_add(&gave_up, 1) == 0) {
        const struct job *j = &jobs[me * per + submitted[me] - 1];
        CHECK(false, "%s, %d workers: worker %d's hook submitted a multi-key job (%s, kind %d) and its wake_fd was "
                     "not readable %d s later", phase == TURNS ? "turns" : "all", W, me, shape_name[j->shape], j->kind,
              HANG_S);
    }
}

static void hook(shard_worker *w, int wake_fd, int timeout_ms, void *user)
{
    (void)user;
    int me = (int)shard_worker_id(w);
    if (phase == ALL && atomic_load(&go) && submitted[me] < per) {
        if (submit_next(me))
            expect_readable(me, wake_fd);
        return;
    }
    struct pollfd p[2] = { { .fd = wake_fd, .events = POLLIN }, { .fd = sock[me], .events = POLLIN } };
    if (poll(p, 2, timeout_ms) <= 0 || (p[0].revents & POLLIN) || !(p[1].revents & POLLIN))
        return; /* work for the worker (it comes first), the time is up, or nothing on the socket */
    uint64_t v;
    if (read(sock[me], &v, sizeof v) != sizeof v || phase != TURNS)
        return; /* ALL: the kick, and this hook is done */
    CHECK(submitted[me] < per, "worker %d: a turn beyond its jobs", me);
    if (submit_next(me))
        expect_readable(me, wake_fd);
}

/* Return: whether every job ran (else the dispatcher is left as it is: a hook may be stuck in it). */
static bool run_phase(int workers, int jobs_each, int which)
{
    W = workers, per = jobs_each;
    jobs = calloc((size_t)(W * per), sizeof *jobs);
    memset(next_seq, 0, sizeof next_seq);
    memset(seq, 0, sizeof seq);
    memset(submitted, 0, sizeof submitted);
    atomic_store(&turns_passed, 0);
    atomic_store(&self_waits, 0);
    atomic_store(&go, 0);
    sem_init(&ran, 0, 0);
    phase = which; /* before the workers start: they read it */
    for (int i = 0; i < W; i++) {
        sock[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        CHECK(sock[i] >= 0, "eventfd");
    }
    struct shard_config cfg = { .workers = (uint32_t)W, .on_worker_idle = hook };
    CHECK(shard_dispatcher_create(&d, &cfg) == 0, "create %d workers", W);
    int have[MAXW] = { 0 }, need = W * KEYS_PER;
    for (unsigned i = 0; need > 0; i++) {
        char buf[16];
        size_t len = (size_t)snprintf(buf, sizeof buf, "idle-%u", i);
        uint32_t id;
        CHECK(shard_key_owner(d, buf, len, &id) == 0 && id < (uint32_t)W, "key_owner");
        if (have[id] < KEYS_PER) {
            memcpy(key_name[id * KEYS_PER + have[id]++], buf, len + 1);
            need--;
        }
    }
    /* The keys reach the hooks through go, and the first turn through its socket. */
    atomic_store(&go, 1);
    uint64_t one = 1;
    for (int i = 0; i < (which == TURNS ? 1 : W); i++)
        CHECK(write(sock[i], &one, sizeof one) == sizeof one, "write: %s", strerror(errno));
    /* Twice a hook's own wait: a hook that waits for ever for its wake_fd says so first. */
    int got = 0;
    for (; got < W * per; got++)
        if (!wait_sem(&ran, 2 * HANG_S))
            break;
    CHECK(got == W * per, "%s, %d workers: %d of %d jobs ran, then none for %d s", which == TURNS ? "turns" : "all",
          W, got, W * per, 2 * HANG_S);
    long runs = 0;
    for (int i = 0; i < W * per; i++)
        runs += atomic_load(&jobs[i].runs);
    printf("%s, %d workers: %d jobs from hooks ran, %d checks of a hook's own wake_fd\n",
           which == TURNS ? "turns" : "all", W, got, atomic_load(&self_waits));
    if (got < W * per)
        return false;
    CHECK(runs == W * per, "%ld runs of %d jobs", runs, W * per);
    shard_dispatcher_destroy(d);
    for (int i = 0; i < W; i++)
        close(sock[i]);
    free(jobs);
    sem_destroy(&ran);
    return !atomic_load(&gave_up);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *only = argc > 1 ? argv[1] : NULL;
    if (only && strcmp(only, "turns") && strcmp(only, "all")) {
        fprintf(stderr, "usage: stress_multi_idle [turns|all]\n");
        return 2;
    }
    stress_watchdog("stress_multi_idle", STRESS_SANITIZED ? 240 : 90);
    /* After a phase that failed, no other: its hooks may still run. */
    bool ok = true;
    if (!only || !strcmp(only, "turns"))
        ok = run_phase(3, STRESS_SANITIZED ? 300 : 1000, TURNS) && run_phase(70, STRESS_SANITIZED ? 6 : 15, TURNS);
    if (ok && (!only || !strcmp(only, "all")))
        ok = run_phase(3, STRESS_SANITIZED ? 600 : 2000, ALL) && run_phase(70, STRESS_SANITIZED ? 20 : 60, ALL);
    stress_watchdog("stress_multi_idle", 0);
    return stress_result("stress_multi_idle");
}
