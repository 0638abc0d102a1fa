/* The dispatcher's contract: placement, backpressure, membership calls and their errors, hooks, the
 * release-hook handoff, minimal movement per worker, crashes with a stuck job, drain, destroy, stats,
 * and an idle dispatcher using no CPU. */
#include <criterion/criterion.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <shard.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "sessions.h"

static shard_dispatcher *make(uint32_t workers, uint32_t capacity)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = workers, .queue_capacity = capacity };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    return d;
}

static size_t kname(char *buf, unsigned i)
{
    return (size_t)snprintf(buf, 24, "key-%u", i);
}

static void noop(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
}

static void count(shard_worker *w, void *arg)
{
    (void)w;
    atomic_fetch_add((atomic_long *)arg, 1);
}

/* ---- create and errors ---- */

Test(dispatcher, create_defaults_and_errors)
{
    shard_dispatcher *d;
    cr_assert_eq(shard_dispatcher_create(NULL, NULL), -EINVAL);
    struct shard_config big = { .queue_capacity = SHARD_MAX_QUEUE_CAPACITY + 1 };
    cr_assert_eq(shard_dispatcher_create(&d, &big), -EINVAL);
    struct shard_config many = { .workers = SHARD_MAX_WORKERS + 1 };
    cr_assert_eq(shard_dispatcher_create(&d, &many), -EINVAL);
    cr_assert_eq(shard_dispatcher_create(&d, NULL), 0);
    struct shard_stats st;
    cr_assert_eq(shard_dispatcher_stats(d, &st), 0);
    cr_assert_eq(st.workers, (size_t)sysconf(_SC_NPROCESSORS_ONLN));
    cr_assert_eq(st.epoch, 1);
    cr_assert_eq(shard_dispatcher_stats(d, NULL), -EINVAL);
    cr_assert_eq(shard_dispatcher_stats(NULL, &st), -EINVAL);
    cr_assert_eq(shard_dispatcher_worker_stats(NULL, NULL, 0), -EINVAL);
    cr_assert_eq(shard_dispatcher_worker_stats(d, NULL, 1), -EINVAL);
    cr_assert_eq(shard_dispatcher_worker_stats(d, NULL, 0), (long)st.workers);
    shard_dispatcher_destroy(d);
    shard_dispatcher_destroy(NULL);
}

Test(dispatcher, submit_errors_never_run_the_job)
{
    shard_dispatcher *d = make(2, 0);
    atomic_long ran = 0;
    cr_assert_eq(shard_submit(NULL, "k", 1, count, &ran), -EINVAL);
    cr_assert_eq(shard_submit(d, "k", 1, NULL, &ran), -EINVAL);
    cr_assert_eq(shard_submit(d, NULL, 1, count, &ran), -EINVAL);
    cr_assert_eq(shard_try_submit(d, NULL, 1, count, &ran), -EINVAL);
    cr_assert_eq(shard_submit(d, NULL, 0, count, &ran), 0); /* the empty key is a key */
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&ran), 1);
    shard_dispatcher_destroy(d);
}

Test(dispatcher, membership_errors)
{
    shard_dispatcher *d = make(2, 0);
    char longname[SHARD_NAME_MAX + 2];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    cr_assert_eq(shard_worker_add(NULL, "a", 1), -EINVAL);
    cr_assert_eq(shard_worker_add(d, NULL, 1), -EINVAL);
    cr_assert_eq(shard_worker_add(d, "", 1), -EINVAL);
    cr_assert_eq(shard_worker_add(d, "a", 0), -EINVAL);
    cr_assert_eq(shard_worker_add(d, longname, 1), -ENAMETOOLONG);
    cr_assert_eq(shard_worker_add(d, "a", SHARD_RING_MAX_POINTS), -EINVAL);
    cr_assert_eq(shard_worker_add(d, "w0", 1), -EEXIST);
    cr_assert_eq(shard_worker_remove(d, "nope"), -ENOENT);
    cr_assert_eq(shard_worker_remove(d, NULL), -EINVAL);
    cr_assert_eq(shard_worker_remove(NULL, "w0"), -EINVAL);
    cr_assert_eq(shard_worker_crash(d, "nope", SHARD_CRASH_REROUTE), -ENOENT);
    cr_assert_eq(shard_worker_crash(d, "w0", (enum shard_crash_policy)7), -EINVAL);
    cr_assert_eq(shard_worker_set_weight(NULL, "w0", 2), -EINVAL);
    cr_assert_eq(shard_worker_set_weight(d, NULL, 2), -EINVAL);
    cr_assert_eq(shard_worker_set_weight(d, "", 2), -EINVAL);
    cr_assert_eq(shard_worker_set_weight(d, "w0", 0), -EINVAL);
    cr_assert_eq(shard_worker_set_weight(d, "w0", SHARD_RING_MAX_POINTS), -EINVAL);
    cr_assert_eq(shard_worker_set_weight(d, "nope", 2), -ENOENT);
    cr_assert_eq(shard_worker_set_weight(d, longname, 2), -ENOENT);
    cr_assert_eq(shard_worker_set_weight(d, "w0", 1), 0, "the same weight");
    cr_assert_eq(shard_drain(NULL), -EINVAL);
    struct shard_stats st;
    shard_dispatcher_stats(d, &st);
    cr_assert_eq(st.epoch, 1, "a failed call must change nothing");
    cr_assert_eq(shard_worker_remove(d, "w0"), 0);
    cr_assert_eq(shard_worker_remove(d, "w1"), -EBUSY);
    cr_assert_eq(shard_worker_crash(d, "w1", SHARD_CRASH_DROP), -EBUSY);
    cr_assert_eq(shard_worker_add(d, "w0", 1), 0); /* a removed name can come back */
    cr_assert_eq(shard_dispatcher_ring(d, NULL), -EINVAL);
    shard_dispatcher_destroy(d);
}

static atomic_int deadlk_seen;
static void membership_from_job(shard_worker *w, void *arg)
{
    shard_dispatcher *d = arg;
    (void)w;
    int a = shard_worker_add(d, "inner", 1), r = shard_worker_remove(d, "w0"),
        c = shard_worker_crash(d, "w0", SHARD_CRASH_DROP), dr = shard_drain(d), sw = shard_worker_set_weight(d, "w0", 2),
        pl = shard_key_place(d, "k", 1, "w0"), up = shard_key_unplace(d, "k", 1);
    shard_dispatcher *other;
    int cr = shard_dispatcher_create(&other, NULL);
    atomic_store(&deadlk_seen, a == -EDEADLK && r == -EDEADLK && c == -EDEADLK && dr == -EDEADLK && cr == -EDEADLK &&
                                   sw == -EDEADLK && pl == -EDEADLK && up == -EDEADLK);
}

Test(dispatcher, membership_calls_from_a_worker_are_refused)
{
    shard_dispatcher *d = make(2, 0);
    cr_assert_eq(shard_submit(d, "k", 1, membership_from_job, d), 0);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert(atomic_load(&deadlk_seen));
    shard_dispatcher_destroy(d);
}

/* ---- placement ---- */

struct placed {
    const char *ran_on[2000];
};

struct placed_job {
    struct placed *p;
    unsigned       key;
};

static void record_worker(shard_worker *w, void *arg)
{
    struct placed_job *j = arg;
    j->p->ran_on[j->key] = shard_worker_name(w);
}

Test(dispatcher, every_job_runs_on_its_keys_owner)
{
    shard_dispatcher *d = make(4, 0);
    static struct placed p;
    static struct placed_job jobs[2000];
    char k[24];
    for (unsigned i = 0; i < 2000; i++) {
        jobs[i] = (struct placed_job){ &p, i };
        cr_assert_eq(shard_submit(d, k, kname(k, i), record_worker, &jobs[i]), 0);
    }
    cr_assert_eq(shard_drain(d), 0);
    shard_ring *r;
    cr_assert_eq(shard_dispatcher_ring(d, &r), 0);
    for (unsigned i = 0; i < 2000; i++)
        cr_assert_str_eq(p.ran_on[i], shard_ring_owner(r, k, kname(k, i)));
    shard_ring_destroy(r);
    shard_dispatcher_destroy(d);
}

Test(dispatcher, adding_a_worker_moves_only_the_keys_the_ring_moves)
{
    shard_dispatcher *d = make(3, 0);
    static struct placed before, after;
    static struct placed_job jb[2000], ja[2000];
    char k[24];
    for (unsigned i = 0; i < 2000; i++) {
        jb[i] = (struct placed_job){ &before, i };
        cr_assert_eq(shard_submit(d, k, kname(k, i), record_worker, &jb[i]), 0);
    }
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(shard_worker_add(d, "new", 1), 0);
    for (unsigned i = 0; i < 2000; i++) {
        ja[i] = (struct placed_job){ &after, i };
        cr_assert_eq(shard_submit(d, k, kname(k, i), record_worker, &ja[i]), 0);
    }
    cr_assert_eq(shard_drain(d), 0);
    int moved = 0;
    for (unsigned i = 0; i < 2000; i++) {
        if (strcmp(after.ran_on[i], before.ran_on[i]) == 0)
            continue;
        moved++;
        cr_assert_str_eq(after.ran_on[i], "new", "key %u moved from %s to %s, not to the new worker", i,
                         before.ran_on[i], after.ran_on[i]);
    }
    cr_assert(moved > 2000 / 4 * 0.6 && moved < 2000 / 4 * 1.4, "moved %d of 2000 keys", moved);
    struct shard_stats st;
    shard_dispatcher_stats(d, &st);
    cr_assert_eq(st.epoch, 2);
    cr_assert_eq(st.changes, 1);
    cr_assert(st.last_moved_share > 0.15 && st.last_moved_share < 0.35, "moved share %f", st.last_moved_share);
    shard_ring *r;
    cr_assert_eq(shard_dispatcher_ring(d, &r), 0);
    cr_assert_eq(st.ring_checksum, shard_ring_checksum(r));
    shard_ring_destroy(r);
    shard_dispatcher_destroy(d);
}

Test(dispatcher, a_new_weight_moves_only_keys_entering_or_leaving_the_worker)
{
    shard_dispatcher *d = make(3, 0);
    static struct placed before, heavy, back;
    static struct placed_job jb[2000], jh[2000], jk[2000];
    char k[24];
    for (unsigned i = 0; i < 2000; i++) {
        jb[i] = (struct placed_job){ &before, i };
        cr_assert_eq(shard_submit(d, k, kname(k, i), record_worker, &jb[i]), 0);
    }
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(shard_worker_set_weight(d, "w1", 3), 0); /* w1's share 1 / 3 -> 3 / 5 */
    for (unsigned i = 0; i < 2000; i++) {
        jh[i] = (struct placed_job){ &heavy, i };
        cr_assert_eq(shard_submit(d, k, kname(k, i), record_worker, &jh[i]), 0);
    }
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(shard_worker_set_weight(d, "w1", 1), 0);
    for (unsigned i = 0; i < 2000; i++) {
        jk[i] = (struct placed_job){ &back, i };
        cr_assert_eq(shard_submit(d, k, kname(k, i), record_worker, &jk[i]), 0);
    }
    cr_assert_eq(shard_drain(d), 0);
    int moved = 0;
    for (unsigned i = 0; i < 2000; i++) {
        cr_assert_str_eq(back.ran_on[i], before.ran_on[i], "key %u did not return to %s", i, before.ran_on[i]);
        if (strcmp(heavy.ran_on[i], before.ran_on[i]) == 0)
            continue;
        moved++;
        cr_assert_str_eq(heavy.ran_on[i], "w1", "key %u moved from %s to %s, not to the heavier worker", i,
                         before.ran_on[i], heavy.ran_on[i]);
    }
    cr_assert(moved > 2000 * 4 / 15 * 0.7 && moved < 2000 * 4 / 15 * 1.3, "moved %d of 2000 keys", moved);
    struct shard_stats st;
    shard_dispatcher_stats(d, &st);
    cr_assert_eq(st.epoch, 3);
    shard_ring *r;
    cr_assert_eq(shard_dispatcher_ring(d, &r), 0);
    cr_assert_eq(shard_ring_weight(r, "w1"), 1);
    shard_ring_destroy(r);
    shard_dispatcher_destroy(d);
}

/* ---- placements ---- */

static atomic_int moves_seen;
static uint64_t watched_hash;
static void watch_release(shard_worker *w, const struct shard_handoff *h, void *user)
{
    (void)w;
    (void)user;
    /* The key is named by its bytes; its hash is what was placed. */
    if (strcmp(shard_ring_owner_of_hash(h->before, watched_hash), shard_worker_name(w)) == 0 &&
        strcmp(shard_ring_owner_of_hash(h->after, watched_hash), shard_worker_name(w)) != 0)
        atomic_fetch_add(&moves_seen, 1);
}

Test(dispatcher, placing_a_key_moves_it_alone_and_unplacing_brings_it_back)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 3, .on_release = watch_release };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    static struct placed before, placed, back;
    static struct placed_job jb[2000], jp[2000], jk[2000];
    char k[24];
    for (unsigned i = 0; i < 2000; i++) {
        jb[i] = (struct placed_job){ &before, i };
        cr_assert_eq(shard_submit(d, k, kname(k, i), record_worker, &jb[i]), 0);
    }
    cr_assert_eq(shard_drain(d), 0);
    char pk[24];
    size_t n = kname(pk, 77);
    const char *to = strcmp(before.ran_on[77], "w2") == 0 ? "w0" : "w2";
    watched_hash = shard_dispatcher_key_hash(d, pk, n);
    cr_assert_eq(shard_key_place(d, pk, n, to), 0);
    struct shard_stats st;
    shard_dispatcher_stats(d, &st);
    cr_assert_eq(st.epoch, 2);
    cr_assert_eq(st.placements, 1);
    cr_assert_eq(shard_key_place(d, pk, n, to), 0, "placed there already");
    shard_dispatcher_stats(d, &st);
    cr_assert_eq(st.epoch, 2, "and no epoch spent");
    for (unsigned i = 0; i < 2000; i++) {
        jp[i] = (struct placed_job){ &placed, i };
        cr_assert_eq(shard_submit(d, k, kname(k, i), record_worker, &jp[i]), 0);
    }
    cr_assert_eq(shard_drain(d), 0);
    for (unsigned i = 0; i < 2000; i++)
        cr_assert_str_eq(placed.ran_on[i], i == 77 ? to : before.ran_on[i], "key %u", i);
    cr_assert_eq(atomic_load(&moves_seen), 1, "the old owner's release hook was told the key moves");
    shard_ring *r;
    cr_assert_eq(shard_dispatcher_ring(d, &r), 0);
    uint64_t ph;
    const char *pm;
    cr_assert_eq(shard_ring_pin_at(r, 0, &ph, &pm), 0);
    cr_assert_eq(ph, watched_hash);
    cr_assert_str_eq(pm, to);
    shard_ring_destroy(r);
    cr_assert_eq(shard_key_unplace(d, pk, n), 0);
    cr_assert_eq(shard_key_unplace(d, pk, n), -ENOENT);
    for (unsigned i = 0; i < 2000; i++) {
        jk[i] = (struct placed_job){ &back, i };
        cr_assert_eq(shard_submit(d, k, kname(k, i), record_worker, &jk[i]), 0);
    }
    cr_assert_eq(shard_drain(d), 0);
    for (unsigned i = 0; i < 2000; i++)
        cr_assert_str_eq(back.ran_on[i], before.ran_on[i], "key %u", i);
    /* A placement goes with its worker. */
    cr_assert_eq(shard_key_place(d, pk, n, to), 0);
    cr_assert_eq(shard_worker_remove(d, to), 0);
    shard_dispatcher_stats(d, &st);
    cr_assert_eq(st.placements, 0);
    shard_dispatcher_destroy(d);
}

Test(dispatcher, placement_errors)
{
    shard_dispatcher *d = make(2, 0);
    char longname[SHARD_NAME_MAX + 2];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    cr_assert_eq(shard_key_place(NULL, "k", 1, "w0"), -EINVAL);
    cr_assert_eq(shard_key_place(d, NULL, 1, "w0"), -EINVAL);
    cr_assert_eq(shard_key_place(d, "k", 1, NULL), -EINVAL);
    cr_assert_eq(shard_key_place(d, "k", 1, ""), -EINVAL);
    cr_assert_eq(shard_key_place(d, "k", 1, "nope"), -ENOENT);
    cr_assert_eq(shard_key_place(d, "k", 1, longname), -ENOENT);
    cr_assert_eq(shard_key_place_hash(NULL, 1, "w0"), -EINVAL);
    cr_assert_eq(shard_key_place_hash(d, 1, NULL), -EINVAL);
    cr_assert_eq(shard_key_place_hash(d, 1, "nope"), -ENOENT);
    cr_assert_eq(shard_key_unplace(NULL, "k", 1), -EINVAL);
    cr_assert_eq(shard_key_unplace(d, NULL, 1), -EINVAL);
    cr_assert_eq(shard_key_unplace(d, "k", 1), -ENOENT);
    cr_assert_eq(shard_key_unplace_hash(NULL, 1), -EINVAL);
    cr_assert_eq(shard_key_unplace_hash(d, 1), -ENOENT);
    struct shard_stats st;
    shard_dispatcher_stats(d, &st);
    cr_assert_eq(st.epoch, 1, "a failed call changes nothing");
    cr_assert_eq(st.placements, 0);
    shard_dispatcher_destroy(d);
}

/* ---- backpressure ---- */

static sem_t gate, started;
static void blocker(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    sem_post(&started);
    sem_wait(&gate);
}

/* Holds the worker of key inside a blocker job until sem_post(&gate); returns once it is inside. */
static void hold_worker_of(shard_dispatcher *d, const char *key)
{
    sem_init(&gate, 0, 0);
    sem_init(&started, 0, 0);
    cr_assert_eq(shard_submit(d, key, strlen(key), blocker, NULL), 0);
    sem_wait(&started);
}

struct seq_log {
    atomic_int next;
    int        order[16];
};

struct seq_job {
    struct seq_log *log;
    int             n;
};

static void log_seq(shard_worker *w, void *arg)
{
    (void)w;
    struct seq_job *j = arg;
    j->log->order[atomic_fetch_add(&j->log->next, 1)] = j->n;
}

struct blocking_submit {
    shard_dispatcher *d;
    struct seq_job   *job;
    int               rc;
};

static void *submit_blocking(void *arg)
{
    struct blocking_submit *b = arg;
    b->rc = shard_submit(b->d, "k", 1, log_seq, b->job);
    return NULL;
}

Test(dispatcher, full_queue_try_submit_eagain_submit_waits)
{
    shard_dispatcher *d = make(1, 4);
    static struct seq_log log;
    static struct seq_job jobs[6];
    for (int i = 0; i < 6; i++)
        jobs[i] = (struct seq_job){ &log, i };
    hold_worker_of(d, "k"); /* the worker is inside the blocker: four more jobs fill its queue */
    for (int i = 0; i < 4; i++)
        cr_assert_eq(shard_try_submit(d, "k", 1, log_seq, &jobs[i]), 0);
    cr_assert_eq(shard_try_submit(d, "k", 1, log_seq, &jobs[5]), -EAGAIN);
    struct shard_worker_stats ws;
    cr_assert_eq(shard_dispatcher_worker_stats(d, &ws, 1), 1);
    cr_assert_eq(ws.queued, 4);
    cr_assert(ws.running);
    pthread_t t;
    struct blocking_submit b = { d, &jobs[4], -1 };
    pthread_create(&t, NULL, submit_blocking, &b);
    sem_post(&gate);
    pthread_join(t, NULL);
    cr_assert_eq(b.rc, 0);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&log.next), 5, "the refused job must not run");
    for (int i = 0; i < 5; i++)
        cr_assert_eq(log.order[i], i);
    shard_dispatcher_destroy(d);
}

struct self_flood {
    shard_dispatcher *d;
    atomic_int        ran, submitted;
    int               last;
    int               out_of_order;
};

static void flood_item(shard_worker *w, void *arg);
struct flood_job {
    struct self_flood *f;
    int                n;
};
static struct flood_job flood_jobs[1000];

static void flood_item(shard_worker *w, void *arg)
{
    (void)w;
    struct flood_job *j = arg;
    j->f->out_of_order += j->n != j->f->last + 1;
    j->f->last = j->n;
    atomic_fetch_add(&j->f->ran, 1);
}

static void flooder(shard_worker *w, void *arg)
{
    (void)w;
    struct self_flood *f = arg;
    /* 1000 jobs into this worker's own queue of 8: waiting would deadlock, so they go beyond it. */
    for (int i = 0; i < 1000; i++) {
        flood_jobs[i] = (struct flood_job){ f, i };
        int rc = shard_submit(f->d, "same", 4, flood_item, &flood_jobs[i]);
        if (rc)
            atomic_store(&f->ran, -100000);
    }
    atomic_store(&f->submitted, 1);
}

Test(dispatcher, a_job_submitting_to_its_own_full_queue_does_not_deadlock)
{
    static struct self_flood f;
    f.d = make(2, 8);
    f.last = -1;
    cr_assert_eq(shard_submit(f.d, "same", 4, flooder, &f), 0);
    while (!atomic_load(&f.submitted))
        ; /* drain covers jobs submitted before it: let the flooder finish submitting */
    cr_assert_eq(shard_drain(f.d), 0);
    cr_assert_eq(atomic_load(&f.ran), 1000);
    cr_assert_eq(f.out_of_order, 0);
    shard_dispatcher_destroy(f.d);
}

/* ---- destroy ---- */

Test(dispatcher, destroy_runs_every_accepted_job)
{
    shard_dispatcher *d = make(2, 64);
    static atomic_long ran;
    char k[24];
    for (unsigned i = 0; i < 20000; i++)
        cr_assert_eq(shard_submit(d, k, kname(k, i % 97), count, &ran), 0);
    shard_dispatcher_destroy(d);
    cr_assert_eq(atomic_load(&ran), 20000);
}

struct shutdown_probe {
    shard_dispatcher *d;
    atomic_long       accepted, ran;
    atomic_int        looping, saw_shutdown;
};

static void probe_count(shard_worker *w, void *arg)
{
    (void)w;
    atomic_fetch_add(&((struct shutdown_probe *)arg)->ran, 1);
}

static void submit_until_shutdown(shard_worker *w, void *arg)
{
    (void)w;
    struct shutdown_probe *p = arg;
    atomic_store(&p->looping, 1);
    for (;;) {
        int rc = shard_try_submit(p->d, "other", 5, probe_count, p);
        if (rc == 0)
            atomic_fetch_add(&p->accepted, 1);
        else if (rc == -ESHUTDOWN)
            break;
    }
    atomic_store(&p->saw_shutdown, 1);
}

Test(dispatcher, submit_during_destroy_is_refused_with_eshutdown)
{
    static struct shutdown_probe p;
    p.d = make(2, 16);
    cr_assert_eq(shard_submit(p.d, "k", 1, submit_until_shutdown, &p), 0);
    while (!atomic_load(&p.looping))
        ; /* the job is submitting now */
    shard_dispatcher_destroy(p.d);
    cr_assert(atomic_load(&p.saw_shutdown));
    cr_assert_eq(atomic_load(&p.ran), atomic_load(&p.accepted), "every accepted job runs, no refused one does");
}

/* ---- hooks and the handoff of worker-local state ---- */

static atomic_int starts, stops;
static void on_start(shard_worker *w, void *user)
{
    (void)user;
    atomic_fetch_add(&starts, 1);
    shard_worker_set_user(w, (void *)shard_worker_name(w));
}
static void on_stop(shard_worker *w, void *user)
{
    (void)w;
    (void)user;
    atomic_fetch_add(&stops, 1);
}
static atomic_int user_ok;
static void check_user(shard_worker *w, void *arg)
{
    (void)arg;
    if (shard_worker_user(w) == shard_worker_name(w))
        atomic_fetch_add(&user_ok, 1);
}

Test(dispatcher, start_and_stop_hooks_and_user_pointer)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 2, .on_worker_start = on_start, .on_worker_stop = on_stop };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    cr_assert_eq(shard_worker_add(d, "x", 1), 0);
    char k[24];
    for (unsigned i = 0; i < 100; i++)
        cr_assert_eq(shard_submit(d, k, kname(k, i), check_user, NULL), 0);
    cr_assert_eq(shard_worker_remove(d, "w0"), 0);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&user_ok), 100);
    shard_dispatcher_destroy(d);
    cr_assert_eq(atomic_load(&starts), 3);
    cr_assert_eq(atomic_load(&stops), 3);
    cr_assert_null(shard_worker_name(NULL));
    cr_assert_null(shard_worker_user(NULL));
    cr_assert_null(shard_worker_dispatcher(NULL));
}

Test(dispatcher, release_hook_hands_worker_local_state_to_the_new_owner)
{
    shard_dispatcher *d;
    struct shard_config cfg = sessions_config(2);
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    enum { ROUNDS = 60 };
    static struct packet packets[ROUNDS][SESSION_PLAYERS];
    char k[24];
    for (unsigned r = 0; r < ROUNDS; r++) {
        for (int p = 0; p < SESSION_PLAYERS; p++) {
            packets[r][p] = (struct packet){ p, r };
            cr_assert_eq(shard_submit(d, k, player_key(k, p), sessions_on_packet, &packets[r][p]), 0);
        }
        if (r == 10)
            cr_assert_eq(shard_worker_add(d, "w2", 1), 0);
        if (r == 20)
            cr_assert_eq(shard_worker_add(d, "w3", 2), 0);
        if (r == 30)
            cr_assert_eq(shard_worker_remove(d, "w0"), 0);
        if (r == 45)
            cr_assert_eq(shard_worker_remove(d, "w3"), 0);
    }
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&session_world.lost), 0, "a moved player's next packet found no session");
    cr_assert_eq(atomic_load(&session_world.wrong_count), 0, "a session saw packets out of order or twice");
    cr_assert_gt(atomic_load(&session_world.handoffs), SESSION_PLAYERS / 4);
    shard_dispatcher_destroy(d);
}

/* ---- crashes ---- */

struct stuck_probe {
    atomic_int stuck_done, follow_ran_early, other_ran, follow_ran;
};
static struct stuck_probe sp;

static void stuck_job(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    sem_post(&started);
    sem_wait(&gate);
    atomic_store(&sp.stuck_done, 1);
}
static void follow_job(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    if (!atomic_load(&sp.stuck_done))
        atomic_store(&sp.follow_ran_early, 1);
    atomic_store(&sp.follow_ran, 1);
}
static void other_job(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    atomic_store(&sp.other_ran, 1);
}

Test(dispatcher, crash_does_not_wait_for_a_stuck_job_but_fences_its_key)
{
    sem_init(&gate, 0, 0);
    sem_init(&started, 0, 0);
    shard_dispatcher *d = make(3, 0);
    shard_ring *r;
    cr_assert_eq(shard_dispatcher_ring(d, &r), 0);
    /* Two keys of the same worker: one will be stuck, the other must move at once. */
    char stuck_key[24], other_key[24], name[SHARD_NAME_MAX + 1];
    size_t sl = kname(stuck_key, 0), ol = 0;
    snprintf(name, sizeof name, "%s", shard_ring_owner(r, stuck_key, sl));
    for (unsigned i = 1; !ol; i++) {
        size_t n = kname(other_key, i);
        if (strcmp(shard_ring_owner(r, other_key, n), name) == 0)
            ol = n;
    }
    shard_ring_destroy(r);
    cr_assert_eq(shard_submit(d, stuck_key, sl, stuck_job, NULL), 0);
    sem_wait(&started);
    cr_assert_eq(shard_submit(d, stuck_key, sl, follow_job, NULL), 0);  /* queued behind the stuck job */
    cr_assert_eq(shard_submit(d, other_key, ol, other_job, NULL), 0);
    cr_assert_eq(shard_worker_crash(d, name, SHARD_CRASH_REROUTE), 0); /* returns with the job stuck */
    while (!atomic_load(&sp.other_ran))
        ; /* the other key moved and ran while its old worker is stuck */
    cr_assert_not(atomic_load(&sp.follow_ran), "the stuck job's key ran elsewhere while the job runs");
    struct shard_worker_stats ws[4];
    long n = shard_dispatcher_worker_stats(d, ws, 4);
    int crashed_running = 0;
    for (long i = 0; i < n; i++)
        if (ws[i].state == SHARD_WORKER_CRASHED) {
            crashed_running += ws[i].running;
            cr_assert_eq(ws[i].queued, 0, "the crashed worker's queue was handed over");
        }
    cr_assert_eq(crashed_running, 1);
    sem_post(&gate);
    cr_assert_eq(shard_drain(d), 0);
    while (!atomic_load(&sp.follow_ran))
        ; /* drain does not wait for the crashed worker's job: wait for its follower here */
    cr_assert_not(atomic_load(&sp.follow_ran_early));
    shard_dispatcher_destroy(d);
}

/* The name of the worker that owns key now, copied into name. */
static void owner_of(shard_dispatcher *d, const char *key, char name[SHARD_NAME_MAX + 1])
{
    shard_ring *r;
    cr_assert_eq(shard_dispatcher_ring(d, &r), 0);
    snprintf(name, SHARD_NAME_MAX + 1, "%s", shard_ring_owner(r, key, strlen(key)));
    shard_ring_destroy(r);
}

static atomic_long dropped_n;
static void on_drop(shard_job_fn fn, void *arg, void *user)
{
    (void)fn;
    (void)arg;
    (void)user;
    atomic_fetch_add(&dropped_n, 1);
}

Test(dispatcher, crash_drop_hands_each_queued_job_to_on_dropped_once)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 2, .on_dropped = on_drop };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    char victim[SHARD_NAME_MAX + 1];
    owner_of(d, "k", victim);
    static atomic_long ran;
    hold_worker_of(d, "k");
    for (int i = 0; i < 50; i++)
        cr_assert_eq(shard_submit(d, "k", 1, count, &ran), 0);
    cr_assert_eq(shard_worker_crash(d, victim, SHARD_CRASH_DROP), 0);
    cr_assert_eq(atomic_load(&dropped_n), 50);
    struct shard_stats st;
    shard_dispatcher_stats(d, &st);
    cr_assert_eq(st.dropped, 50);
    cr_assert_eq(st.workers, 1);
    sem_post(&gate);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&ran), 0);
    shard_dispatcher_destroy(d);
}

/* A stuck job's key g, held on its next owner L, goes to z and straight back: z is added, and removed
 * while L's release hook (handing g to z) still runs. The jobs L holds behind the stuck job then stay
 * on L, but g's state went to z and comes back only with z's release hook: they must wait for it. */
static struct {
    char key[24];
    size_t len;
    char l[SHARD_NAME_MAX + 1], z[SHARD_NAME_MAX + 1];
    bool l_held;                       /* L's hook thread only */
    sem_t l_hook_in, l_hook_go, owed_ran;
    atomic_bool z_hook_done;
    atomic_int ran, ran_early;
} back;

static void back_release(shard_worker *w, const struct shard_handoff *h, void *user)
{
    (void)user;
    if (!shard_handoff_moves(h, back.key, back.len))
        return;
    if (strcmp(shard_worker_name(w), back.l) == 0 && !back.l_held) {
        back.l_held = true; /* g's state to z; z leaves before this returns */
        sem_post(&back.l_hook_in);
        sem_wait(&back.l_hook_go);
    } else if (strcmp(shard_worker_name(w), back.z) == 0) {
        /* g's state back to L. A job of g that runs before this returns finds no state; wait up to a
         * second for one (on the fixed code none comes, and this returns after the second). */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        if (sem_timedwait(&back.owed_ran, &until) == 0)
            sem_post(&back.owed_ran);
        atomic_store(&back.z_hook_done, true);
    }
}

static void back_job(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    if (!atomic_load(&back.z_hook_done))
        atomic_fetch_add(&back.ran_early, 1);
    atomic_fetch_add(&back.ran, 1);
    sem_post(&back.owed_ran);
}

Test(dispatcher, jobs_behind_a_stuck_job_wait_for_a_key_that_went_away_and_came_back)
{
    sem_init(&gate, 0, 0);
    sem_init(&started, 0, 0);
    sem_init(&back.l_hook_in, 0, 0);
    sem_init(&back.l_hook_go, 0, 0);
    sem_init(&back.owed_ran, 0, 0);
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 3, .on_release = back_release };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    back.len = kname(back.key, 0);
    char u[SHARD_NAME_MAX + 1];
    owner_of(d, back.key, u);
    cr_assert_eq(shard_submit(d, back.key, back.len, stuck_job, NULL), 0);
    sem_wait(&started);
    cr_assert_eq(shard_worker_crash(d, u, SHARD_CRASH_REROUTE), 0);
    owner_of(d, back.key, back.l);
    for (int i = 0; i < 2; i++) /* held on L behind the stuck job */
        cr_assert_eq(shard_submit(d, back.key, back.len, back_job, NULL), 0);
    shard_ring *r;
    cr_assert_eq(shard_dispatcher_ring(d, &r), 0);
    for (unsigned i = 0;; i++) { /* a name that takes g from L */
        snprintf(back.z, sizeof back.z, "z%u", i);
        cr_assert_eq(shard_ring_add(r, back.z, 1), 0);
        bool takes = strcmp(shard_ring_owner(r, back.key, back.len), back.z) == 0;
        shard_ring_remove(r, back.z);
        if (takes)
            break;
    }
    shard_ring_destroy(r);
    cr_assert_eq(shard_worker_add(d, back.z, 1), 0);
    sem_wait(&back.l_hook_in);
    cr_assert_eq(shard_worker_remove(d, back.z), 0);
    sem_post(&gate); /* the stuck job returns */
    sem_post(&back.l_hook_go);
    while (atomic_load(&back.ran) < 2)
        sem_wait(&back.owed_ran); /* drain does not wait for jobs behind a crashed worker's job */
    cr_assert_eq(atomic_load(&back.ran_early), 0, "a job of the key ran before z handed its state back");
    cr_assert(atomic_load(&back.z_hook_done));
    shard_dispatcher_destroy(d);
}

/* ---- drain and idle ---- */

Test(dispatcher, drain_waits_for_removed_workers_queues)
{
    shard_dispatcher *d = make(3, 0);
    static atomic_long ran;
    char k[24];
    for (unsigned i = 0; i < 30000; i++)
        cr_assert_eq(shard_submit(d, k, kname(k, i % 500), count, &ran), 0);
    cr_assert_eq(shard_worker_remove(d, "w1"), 0);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&ran), 30000);
    shard_dispatcher_destroy(d);
}

static double cpu_seconds(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + (double)u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

Test(dispatcher, an_idle_dispatcher_uses_no_cpu)
{
    shard_dispatcher *d = make(2, 0);
    char k[24];
    for (unsigned i = 0; i < 50000; i++)
        cr_assert_eq(shard_submit(d, k, kname(k, i % 100), noop, NULL), 0);
    cr_assert_eq(shard_drain(d), 0);
    double before = cpu_seconds();
    struct timespec second = { 1, 0 };
    nanosleep(&second, NULL); /* the measurement window, not a synchronisation */
    double used = cpu_seconds() - before;
    cr_assert_lt(used, 0.05, "an idle dispatcher used %.3f s of CPU in one second", used);
    struct shard_worker_stats ws[2];
    cr_assert_eq(shard_dispatcher_worker_stats(d, ws, 2), 2);
    cr_assert_gt(ws[0].parked + ws[1].parked, 0);
    cr_assert_eq(ws[0].executed + ws[1].executed, 50000);
    shard_dispatcher_destroy(d);
}

/* ---- destroy while producers wait for room ---- */

struct waiting_producer {
    shard_dispatcher *d;
    atomic_long      *ran;
    atomic_int        accepted, refused, other;
};

static void *produce_until_refused(void *arg)
{
    struct waiting_producer *p = arg;
    for (;;) {
        int rc = shard_submit(p->d, "k", 1, count, p->ran);
        if (rc == 0) {
            atomic_fetch_add(&p->accepted, 1);
            continue;
        }
        if (rc == -ESHUTDOWN)
            atomic_fetch_add(&p->refused, 1);
        else
            atomic_fetch_add(&p->other, 1);
        return NULL;
    }
}

struct destroyer {
    shard_dispatcher *d;
};

static void *destroy_it(void *arg)
{
    shard_dispatcher_destroy(((struct destroyer *)arg)->d);
    return NULL;
}

Test(dispatcher, destroy_sends_producers_waiting_for_room_away_with_eshutdown)
{
    shard_dispatcher *d = make(1, 4);
    static atomic_long ran;
    hold_worker_of(d, "k"); /* the only worker is held: the producers fill its queue and wait */
    static struct waiting_producer p[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        p[i] = (struct waiting_producer){ .d = d, .ran = &ran };
        pthread_create(&t[i], NULL, produce_until_refused, &p[i]);
    }
    struct shard_worker_stats ws;
    do
        shard_dispatcher_worker_stats(d, &ws, 1);
    while (ws.queued < 4); /* the queue is full: the producers are waiting for room */
    pthread_t dt;
    struct destroyer ds = { d };
    pthread_create(&dt, NULL, destroy_it, &ds);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL); /* each returns -ESHUTDOWN while the worker is still held */
    sem_post(&gate);
    pthread_join(dt, NULL);
    long accepted = 0;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(atomic_load(&p[i].refused), 1);
        cr_assert_eq(atomic_load(&p[i].other), 0);
        accepted += atomic_load(&p[i].accepted);
    }
    cr_assert_eq(accepted, 4);
    cr_assert_eq(atomic_load(&ran), accepted, "every accepted job ran before destroy returned");
}

/* ---- a handoff while a queue is full ---- */

struct ordered_key {
    shard_dispatcher *d;
    struct seq_job   *jobs;
    int               n, rc;
};

static void *submit_in_order(void *arg)
{
    struct ordered_key *o = arg;
    for (int i = 0; i < o->n && !o->rc; i++)
        o->rc = shard_submit(o->d, "k", 1, log_seq, &o->jobs[i]);
    return NULL;
}

Test(dispatcher, membership_changes_while_a_queue_is_full_neither_wait_nor_reorder)
{
    shard_dispatcher *d = make(2, 4);
    static struct seq_log log;
    static struct seq_job jobs[16];
    for (int i = 0; i < 16; i++)
        jobs[i] = (struct seq_job){ &log, i };
    hold_worker_of(d, "k"); /* k's worker is held */
    pthread_t t;
    struct ordered_key o = { d, jobs, 16, 0 };
    pthread_create(&t, NULL, submit_in_order, &o); /* fills the queue, then waits for room */
    struct shard_worker_stats ws[2];
    for (int full = 0; !full;) {
        long n = shard_dispatcher_worker_stats(d, ws, 2);
        for (long i = 0; i < n; i++)
            full |= ws[i].queued == 4;
    }
    /* Both return while the queue stays full and its worker stays held. */
    shard_ring *before, *after;
    cr_assert_eq(shard_dispatcher_ring(d, &before), 0);
    cr_assert_eq(shard_worker_add(d, "w2", 3), 0);
    cr_assert_eq(shard_worker_add(d, "w3", 3), 0);
    cr_assert_eq(shard_dispatcher_ring(d, &after), 0);
    cr_assert_str_neq(shard_ring_owner(before, "k", 1), shard_ring_owner(after, "k", 1),
                      "k must move for this test to exercise a handoff");
    shard_ring_destroy(before);
    shard_ring_destroy(after);
    sem_post(&gate);
    pthread_join(t, NULL);
    cr_assert_eq(o.rc, 0);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&log.next), 16);
    for (int i = 0; i < 16; i++)
        cr_assert_eq(log.order[i], i, "k's jobs ran out of order across the handoff");
    shard_dispatcher_destroy(d);
}

/* A long-running server that scales in and out, or simulates crashes, must not grow by every worker
 * it ever lost: a removed or crashed worker's memory (its queue alone is capacity x 40 bytes) is
 * given back by a later membership call once it is finished with and nothing can reach it. */
static void add_and_lose(shard_dispatcher *d, const char *prefix, int n, bool crash)
{
    char name[16];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s%d", prefix, i);
        cr_assert_eq(shard_worker_add(d, name, 1), 0);
        cr_assert_eq(crash ? shard_worker_crash(d, name, SHARD_CRASH_REROUTE) : shard_worker_remove(d, name), 0);
    }
}

static pthread_mutex_t stop_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_cond = PTHREAD_COND_INITIALIZER;
static int stopped_workers;

static void count_stop(shard_worker *w, void *user)
{
    (void)w;
    (void)user;
    pthread_mutex_lock(&stop_lock);
    stopped_workers++;
    pthread_cond_broadcast(&stop_cond);
    pthread_mutex_unlock(&stop_lock);
}

Test(dispatcher, removed_and_crashed_workers_are_freed)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 2, .queue_capacity = 4096, .on_worker_stop = count_stop };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    add_and_lose(d, "warm", 10, false); /* warm-up: snapshots, registry, RCU, allocator arenas */
    add_and_lose(d, "warmc", 10, true);
    cr_assert_eq(shard_drain(d), 0);
    size_t before = mallinfo2().uordblks;
    add_and_lose(d, "x", 50, false);
    add_and_lose(d, "c", 50, true);
    /* Each membership call frees what has finished by then: a lost worker's thread finishes on its
     * own time (a crashed one runs its stop hook first), so call until it shows, at most 100 times.
     * Kept, the 100 workers hold over 100 x 4096 x 40 bytes = 16 MB (measured: 23 MB). glibc's
     * counters: the normal build asserts this; under ASan or valgrind, whose allocators replace
     * glibc's, they stay at zero. */
    size_t limit = before + ((size_t)1 << 20);
    /* Every lost worker's thread has run its stop hook (120 of them with the warm-up); it then marks
     * itself finished at once, so a few more calls see it. */
    pthread_mutex_lock(&stop_lock);
    while (stopped_workers < 120)
        pthread_cond_wait(&stop_cond, &stop_lock);
    pthread_mutex_unlock(&stop_lock);
    for (int i = 0; i < 1000 && (mallinfo2().uordblks >= limit || shard_dispatcher_worker_stats(d, NULL, 0) > 2); i++) {
        cr_assert_eq(shard_drain(d), 0);
        sched_yield(); /* lets a thread between its stop hook and its last store finish */
    }
    size_t after = mallinfo2().uordblks;
    cr_assert_lt(after, limit, "grew from %zu to %zu bytes over 50 removed and 50 crashed workers", before,
                 after);
    struct shard_stats st;
    cr_assert_eq(shard_dispatcher_stats(d, &st), 0);
    cr_assert_eq(st.workers, 2);
    cr_assert_eq(shard_dispatcher_worker_stats(d, NULL, 0), 2, "the lost workers are gone from the stats");
    shard_dispatcher_destroy(d);
}

/* ---- hooks that call back, limits, stats order ---- */

static shard_dispatcher *hook_d;
static atomic_int hook_calls, hook_deadlk;
static void drop_and_call_back(shard_job_fn fn, void *arg, void *user)
{
    (void)fn;
    (void)arg;
    (void)user;
    /* on_dropped runs on the thread calling shard_worker_crash, which holds the dispatcher's control
     * lock: every call that needs it must refuse, not deadlock. */
    int a = shard_worker_add(hook_d, "from-hook", 1), r = shard_worker_remove(hook_d, "w1"),
        c = shard_worker_crash(hook_d, "w1", SHARD_CRASH_DROP), dr = shard_drain(hook_d);
    shard_dispatcher_destroy(hook_d); /* ignored here */
    atomic_fetch_add(&hook_calls, 1);
    if (a == -EDEADLK && r == -EDEADLK && c == -EDEADLK && dr == -EDEADLK)
        atomic_fetch_add(&hook_deadlk, 1);
}

Test(dispatcher, calls_back_from_on_dropped_are_refused_with_edeadlk, .timeout = 30)
{
    struct shard_config cfg = { .workers = 2, .on_dropped = drop_and_call_back };
    cr_assert_eq(shard_dispatcher_create(&hook_d, &cfg), 0);
    char victim[SHARD_NAME_MAX + 1];
    owner_of(hook_d, "k", victim);
    hold_worker_of(hook_d, "k");
    static atomic_long ran;
    for (int i = 0; i < 3; i++)
        cr_assert_eq(shard_submit(hook_d, "k", 1, count, &ran), 0);
    cr_assert_eq(shard_worker_crash(hook_d, victim, SHARD_CRASH_DROP), 0);
    cr_assert_eq(atomic_load(&hook_calls), 3);
    cr_assert_eq(atomic_load(&hook_deadlk), 3);
    sem_post(&gate);
    cr_assert_eq(shard_worker_add(hook_d, "after", 1), 0, "the control lock was left usable");
    cr_assert_eq(shard_drain(hook_d), 0);
    shard_dispatcher_destroy(hook_d);
}

Test(dispatcher, worker_stats_list_ring_members_in_name_order_then_the_others)
{
    shard_dispatcher *d = make(3, 0);
    cr_assert_eq(shard_worker_add(d, "a", 1), 0);
    cr_assert_eq(shard_worker_add(d, "zz", 1), 0);
    cr_assert_eq(shard_worker_add(d, "m", 1), 0);
    cr_assert_eq(shard_worker_crash(d, "w1", SHARD_CRASH_REROUTE), 0);
    struct shard_worker_stats st[8];
    long n = shard_dispatcher_worker_stats(d, st, 8);
    cr_assert_geq(n, 5);
    static const char *members[] = { "a", "m", "w0", "w2", "zz" };
    for (int i = 0; i < 5; i++) {
        cr_assert_str_eq(st[i].name, members[i]);
        cr_assert_eq(st[i].state, SHARD_WORKER_RUNNING);
    }
    for (long i = 5; i < n && i < 8; i++)
        cr_assert_neq(st[i].state, SHARD_WORKER_RUNNING);
    shard_dispatcher_destroy(d);
}

/* ---- helpers for hooks ---- */

static atomic_int moves_checked, moves_disagree, moves_true;
static void check_moves(shard_worker *w, const struct shard_handoff *h, void *user)
{
    (void)user;
    char k[24];
    for (unsigned i = 0; i < 2000; i++) {
        size_t n = kname(k, i);
        bool by_name = strcmp(shard_ring_owner(h->before, k, n), shard_worker_name(w)) == 0 &&
                       strcmp(shard_ring_owner(h->after, k, n), shard_worker_name(w)) != 0;
        if (shard_handoff_moves(h, k, n) != by_name)
            atomic_fetch_add(&moves_disagree, 1);
        atomic_fetch_add(&moves_true, by_name);
        atomic_fetch_add(&moves_checked, 1);
    }
}

/* ---- load ---- */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void spin_2ms(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    uint64_t end = mono_ns() + 2000000;
    while (mono_ns() < end)
        ;
}

static const struct shard_worker_stats *find_stats(const struct shard_worker_stats *st, long n, const char *name)
{
    for (long i = 0; i < n; i++)
        if (strcmp(st[i].name, name) == 0)
            return &st[i];
    cr_assert_fail("no stats for %s", name);
    return NULL;
}

Test(dispatcher, load_busy_time_queue_wait_and_share)
{
    shard_dispatcher *d = make(2, 0);
    shard_ring *r;
    cr_assert_eq(shard_dispatcher_ring(d, &r), 0);
    const char *hot = shard_ring_owner(r, "hot", 3);
    uint64_t t0 = mono_ns();
    for (int i = 0; i < 10; i++)
        cr_assert_eq(shard_submit(d, "hot", 3, spin_2ms, NULL), 0);
    cr_assert_eq(shard_drain(d), 0);
    uint64_t wall = mono_ns() - t0;
    struct shard_worker_stats st[2];
    cr_assert_eq(shard_dispatcher_worker_stats(d, st, 2), 2);
    const struct shard_worker_stats *h = find_stats(st, 2, hot);
    cr_assert_geq(h->busy_ns, 20000000u, "10 jobs of 2 ms: busy %.3f ms", (double)h->busy_ns / 1e6);
    cr_assert_leq(h->busy_ns, wall, "busier than the time that passed");
    /* The worker publishes how far it got once idle (queued may lag a batch): then nothing waits. */
    while (h->queued != 0) {
        cr_assert_eq(shard_dispatcher_worker_stats(d, st, 2), 2);
        h = find_stats(st, 2, hot);
    }
    cr_assert_eq(h->head_wait_ns, 0, "nothing queued");
    double sum = 0;
    for (int i = 0; i < 2; i++) {
        cr_assert_float_eq(st[i].share, shard_ring_share(r, st[i].name), 1e-12);
        sum += st[i].share;
    }
    cr_assert_float_eq(sum, 1.0, 1e-9);

    /* A stuck job with 50 behind it: they wait, and the average climbs towards 50. */
    hold_worker_of(d, "hot");
    for (int i = 0; i < 50; i++)
        cr_assert_eq(shard_submit(d, "hot", 3, noop, NULL), 0);
    uint64_t held = mono_ns();
    while (mono_ns() - held < 300000000u)
        ; /* 300 ms pass: the figures are about elapsed time */
    cr_assert_eq(shard_dispatcher_worker_stats(d, st, 2), 2);
    h = find_stats(st, 2, hot);
    cr_assert(h->queued >= 50 && h->queued <= 51, "queued %llu: 50 behind, and the running one until published", (unsigned long long)h->queued);
    cr_assert_geq(h->head_wait_ns, 300000000u, "the head has waited %.3f ms", (double)h->head_wait_ns / 1e6);
    cr_assert(h->queued_avg > 5 && h->queued_avg <= 50, "smoothed queue %.2f after 0.3 s of 50", h->queued_avg);
    cr_assert(h->running);
    sem_post(&gate);
    cr_assert_eq(shard_drain(d), 0);
    do
        cr_assert_eq(shard_dispatcher_worker_stats(d, st, 2), 2);
    while (find_stats(st, 2, hot)->queued != 0);
    cr_assert_eq(find_stats(st, 2, hot)->head_wait_ns, 0);
    shard_ring_destroy(r);
    shard_dispatcher_destroy(d);
}

static void spin_us(shard_worker *w, void *arg)
{
    (void)w;
    uint64_t end = mono_ns() + (uint64_t)(uintptr_t)arg * 1000;
    while (mono_ns() < end)
        ;
}

Test(dispatcher, hot_keys_name_the_heaviest_keys_of_a_window)
{
    shard_dispatcher *d;
    struct shard_config bad = { .workers = 1, .hot_keys = SHARD_MAX_HOT_KEYS + 1 };
    cr_assert_eq(shard_dispatcher_create(&d, &bad), -EINVAL);
    struct shard_config cfg = { .workers = 1, .hot_keys = 4, .hot_window_ms = 1000 };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    struct shard_hot_key hk[8];
    uint64_t total;
    cr_assert_eq(shard_worker_hot_keys(NULL, "w0", hk, 8, &total), -EINVAL);
    cr_assert_eq(shard_worker_hot_keys(d, NULL, hk, 8, &total), -EINVAL);
    cr_assert_eq(shard_worker_hot_keys(d, "w0", NULL, 8, &total), -EINVAL);
    cr_assert_eq(shard_worker_hot_keys(d, "nope", hk, 8, &total), -ENOENT);
    cr_assert_eq(shard_worker_hot_keys(d, "w0", hk, 8, &total), 0, "no window has ended");
    cr_assert_eq(shard_dispatcher_key_hash(NULL, "k", 1), 0);
    uint64_t start = mono_ns();
    /* One hot key (30 ms of jobs) among 60 cold ones (0.2 ms each), interleaved. */
    char k[24];
    for (int i = 0; i < 60; i++) {
        if (i % 2 == 0)
            cr_assert_eq(shard_submit(d, "hot", 3, spin_us, (void *)(uintptr_t)1000), 0);
        cr_assert_eq(shard_submit(d, k, kname(k, (unsigned)i), spin_us, (void *)(uintptr_t)200), 0);
    }
    cr_assert_eq(shard_drain(d), 0);
    uint64_t loaded = mono_ns();
    cr_assert_lt(loaded - start, 1000000000u, "the load did not fit in one window (a slow machine)");
    /* The window began when the first job ended, before `loaded`: it is over a second after that,
     * and ends with the first job after it. Waiting is what is measured here (a window is a time),
     * and no job runs meanwhile: polling with jobs would put them in the window too, and a second's
     * worth of them weighs more than the hot key. */
    struct timespec until = { 0 };
    uint64_t at = loaded + 1000000000u + 1000000u;
    until.tv_sec = (time_t)(at / 1000000000u);
    until.tv_nsec = (long)(at % 1000000000u);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
        ;
    cr_assert_eq(shard_submit(d, "late", 4, noop, NULL), 0);
    cr_assert_eq(shard_drain(d), 0);
    long n = shard_worker_hot_keys(d, "w0", hk, 8, &total);
    cr_assert_eq(n, 4, "as many as hot_keys");
    cr_assert_geq(total, 30000000u + 60 * 200000u, "the window's total");
    for (long i = 1; i < n; i++)
        cr_assert_leq(hk[i].busy_ns, hk[i - 1].busy_ns, "heaviest first");
    /* Times are wall times: on a loaded machine a cold job preempted for longer than the hot key's
     * 30 ms outweighs it (seen under ctest -j2 beside the stress programs), and the total grows with
     * every preemption. What is promised: a key over a quarter of the total is listed. */
    long hot = -1;
    for (long i = 0; i < n; i++)
        if (hk[i].hash == shard_dispatcher_key_hash(d, "hot", 3))
            hot = i;
    cr_assert(hot >= 0 || 4 * 30000000u <= total, "the hot key listed (%.1f ms of %.1f)", 30.0, (double)total / 1e6);
    if (hot >= 0) {
        cr_assert_geq(hk[hot].busy_ns - hk[hot].error_ns, 30000000u, "at least its 30 ms");
        cr_assert_geq(hk[hot].jobs, 30);
        for (long i = 0; i < hot; i++) /* only a preempted cold job weighs more */
            cr_assert_gt(hk[i].busy_ns, 30000000u, "only a key over the hot key's 30 ms before it");
    }
    cr_assert_eq(shard_worker_hot_keys(d, "w0", hk, 1, NULL), 4, "the count, whatever fits");
    /* out NULL with n 0: the count alone (UBSan saw memcpy given NULL there). */
    cr_assert_eq(shard_worker_hot_keys(d, "w0", NULL, 0, NULL), 4, "the count alone");
    shard_dispatcher_destroy(d);
    /* Off: nothing tracked. */
    d = make(1, 0);
    cr_assert_eq(shard_submit(d, "hot", 3, noop, NULL), 0);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(shard_worker_hot_keys(d, "w0", hk, 8, &total), 0);
    shard_dispatcher_destroy(d);
}

Test(dispatcher, shard_handoff_moves_agrees_with_the_rings)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 3, .on_release = check_moves };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    cr_assert_eq(shard_worker_add(d, "w3", 2), 0);   /* every worker loses keys */
    cr_assert_eq(shard_worker_remove(d, "w1"), 0);   /* w1 loses all of its keys */
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_geq(atomic_load(&moves_checked), 4 * 2000);
    cr_assert_gt(atomic_load(&moves_true), 0);
    cr_assert_eq(atomic_load(&moves_disagree), 0);
    cr_assert_not(shard_handoff_moves(NULL, "k", 1));
    shard_dispatcher_destroy(d);
}

static atomic_int stops_crashed, stops_clean;
static void note_stop(shard_worker *w, void *user)
{
    (void)user;
    atomic_fetch_add(shard_worker_crashed(w) ? &stops_crashed : &stops_clean, 1);
}

Test(dispatcher, on_worker_stop_can_tell_a_crash)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 3, .on_worker_stop = note_stop };
    cr_assert_eq(shard_dispatcher_create(&d, &cfg), 0);
    cr_assert_eq(shard_worker_crash(d, "w0", SHARD_CRASH_REROUTE), 0);
    cr_assert_eq(shard_worker_remove(d, "w1"), 0);
    cr_assert_eq(shard_drain(d), 0);
    shard_dispatcher_destroy(d);
    cr_assert_eq(atomic_load(&stops_crashed), 1);
    cr_assert_eq(atomic_load(&stops_clean), 2);
    cr_assert_not(shard_worker_crashed(NULL));
}

struct ran_on {
    atomic_uint id;
    atomic_int  done;
};

static void note_worker(shard_worker *w, void *arg)
{
    struct ran_on *r = arg;
    atomic_store(&r->id, shard_worker_id(w));
    atomic_store(&r->done, 1);
}

Test(dispatcher, key_owner_names_the_worker_a_job_of_the_key_runs_on)
{
    shard_dispatcher *d = make(3, 64);
    static struct ran_on ran[300];
    char key[32];
    uint32_t seen[3] = { 0 };
    static uint64_t hashes[300];
    static uint32_t batch[300];
    for (unsigned i = 0; i < 300; i++) {
        size_t n = kname(key, i);
        hashes[i] = shard_dispatcher_key_hash(d, key, n);
    }
    cr_assert_eq(shard_key_owners_hash(d, hashes, 300, batch), 0);
    for (unsigned i = 0; i < 300; i++) {
        size_t n = kname(key, i);
        uint32_t id = UINT32_MAX, by_hash = UINT32_MAX;
        cr_assert_eq(shard_key_owner(d, key, n, &id), 0);
        cr_assert_eq(shard_key_owner_hash(d, hashes[i], &by_hash), 0);
        cr_assert_eq(id, by_hash, "key %u: by key %u, by hash %u", i, id, by_hash);
        cr_assert_eq(id, batch[i], "key %u: by key %u, in a batch %u", i, id, batch[i]);
        cr_assert_lt(id, 3u);
        seen[id]++;
        cr_assert_eq(shard_submit(d, key, n, note_worker, &ran[i]), 0);
        cr_assert_eq(shard_drain(d), 0);
        cr_assert_eq(atomic_load(&ran[i].id), id, "key %u ran on worker %u, owner said %u", i,
                     atomic_load(&ran[i].id), id);
    }
    cr_assert(seen[0] && seen[1] && seen[2], "300 keys over 3 workers: %u %u %u", seen[0], seen[1], seen[2]);
    /* A pin is followed; a worker added later has the next number. */
    cr_assert_eq(shard_worker_add(d, "extra", 1), 0);
    size_t n = kname(key, 7);
    cr_assert_eq(shard_key_place(d, key, n, "extra"), 0);
    uint32_t id = UINT32_MAX;
    cr_assert_eq(shard_key_owner(d, key, n, &id), 0);
    cr_assert_eq(id, 3u, "a key placed on the fourth worker: owner %u", id);
    struct ran_on placed = { 0 };
    cr_assert_eq(shard_submit(d, key, n, note_worker, &placed), 0);
    cr_assert_eq(shard_drain(d), 0);
    cr_assert_eq(atomic_load(&placed.id), 3u);
    uint64_t two[2] = { shard_dispatcher_key_hash(d, key, n), hashes[0] };
    uint32_t ids[2];
    cr_assert_eq(shard_key_owners_hash(d, two, 2, ids), 0);
    cr_assert_eq(ids[0], 3u, "a batch follows the pin too");
    uint32_t one = UINT32_MAX;
    cr_assert_eq(shard_key_owner_hash(d, hashes[0], &one), 0);
    cr_assert_eq(ids[1], one, "after the add, a batch and a single query agree");
    shard_dispatcher_destroy(d);
}

Test(dispatcher, key_owner_refuses_bad_arguments)
{
    shard_dispatcher *d = make(2, 64);
    uint32_t id = 42;
    cr_assert_eq(shard_key_owner(NULL, "k", 1, &id), -EINVAL);
    cr_assert_eq(shard_key_owner(d, "k", 1, NULL), -EINVAL);
    cr_assert_eq(shard_key_owner(d, NULL, 1, &id), -EINVAL);
    cr_assert_eq(shard_key_owner_hash(NULL, 1, &id), -EINVAL);
    cr_assert_eq(shard_key_owner_hash(d, 1, NULL), -EINVAL);
    uint64_t h = 1;
    cr_assert_eq(shard_key_owners_hash(NULL, &h, 1, &id), -EINVAL);
    cr_assert_eq(shard_key_owners_hash(d, NULL, 1, &id), -EINVAL);
    cr_assert_eq(shard_key_owners_hash(d, &h, 1, NULL), -EINVAL);
    cr_assert_eq(id, 42u, "a refused call wrote *id");
    cr_assert_eq(shard_key_owners_hash(d, NULL, 0, NULL), 0, "no keys: nothing to answer");
    cr_assert_eq(shard_key_owner(d, NULL, 0, &id), 0, "the empty key is a key");
    shard_dispatcher_destroy(d);
}
