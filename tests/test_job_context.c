/* What a job and a hook can ask about themselves: the running job's key hash (shard_job_key_hash,
 * a timer's job and jobs run back to back included), whether a key known by its hash moves
 * (shard_handoff_moves_hash and shard_handoff_moves, against the rings' owners by name), and a
 * worker's number (shard_worker_id). */
#include <criterion/criterion.h>
#include <semaphore.h>
#include <shard.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define JOBS 200

static shard_dispatcher *disp;
static uint64_t seen[JOBS + 1];
static sem_t done;

static void note_hash(shard_worker *w, void *arg)
{
    seen[(intptr_t)arg] = shard_job_key_hash(w);
    sem_post(&done);
}

static size_t kname(char *buf, int i)
{
    return (size_t)snprintf(buf, 24, "player-%d", i);
}

Test(job_context, a_job_knows_its_keys_hash)
{
    struct shard_config cfg = { .workers = 2 };
    cr_assert_eq(shard_dispatcher_create(&disp, &cfg), 0);
    sem_init(&done, 0, 0);
    char k[24];
    /* Submitted in one go: most run back to back in a worker's batch. */
    for (int i = 0; i < JOBS; i++)
        cr_assert_eq(shard_submit(disp, k, kname(k, i), note_hash, (void *)(intptr_t)i), 0);
    cr_assert_eq(shard_submit_after(disp, "timer", 5, 0, note_hash, (void *)(intptr_t)JOBS, NULL), 0);
    for (int i = 0; i <= JOBS; i++)
        sem_wait(&done);
    for (int i = 0; i < JOBS; i++)
        cr_assert_eq(seen[i], shard_dispatcher_key_hash(disp, k, kname(k, i)), "job %d", i);
    cr_assert_eq(seen[JOBS], shard_dispatcher_key_hash(disp, "timer", 5), "a timer's job");
    shard_dispatcher_destroy(disp);
}

static atomic_int hook_calls, hook_hash_nonzero, moves_disagree, moves_true;

static void release(shard_worker *w, const struct shard_handoff *h, void *user)
{
    (void)user;
    atomic_fetch_add(&hook_calls, 1);
    if (shard_job_key_hash(w))
        atomic_fetch_add(&hook_hash_nonzero, 1);
    char k[24];
    const char *me = shard_worker_name(w);
    for (int i = 0; i < 2000; i++) {
        size_t n = kname(k, i);
        /* By names, as the ring says: this worker's before, another's (or none) after. */
        bool moves = strcmp(shard_ring_owner(h->before, k, n), me) == 0 &&
                     (shard_ring_member_count(h->after) == 0 || strcmp(shard_ring_owner(h->after, k, n), me) != 0);
        if (moves != shard_handoff_moves_hash(h, shard_ring_hash(h->before, k, n)) ||
            moves != shard_handoff_moves(h, k, n))
            atomic_fetch_add(&moves_disagree, 1);
        atomic_fetch_add(&moves_true, moves);
    }
}

Test(job_context, a_release_hook_asks_by_hash_as_by_key)
{
    struct shard_config cfg = { .workers = 3, .on_release = release };
    cr_assert_eq(shard_dispatcher_create(&disp, &cfg), 0);
    cr_assert_eq(shard_worker_add(disp, "w3", 1), 0);
    cr_assert_eq(shard_drain(disp), 0);
    cr_assert_gt(atomic_load(&hook_calls), 0);
    cr_assert_gt(atomic_load(&moves_true), 0, "some keys moved");
    cr_assert_eq(atomic_load(&moves_disagree), 0);
    cr_assert_eq(atomic_load(&hook_hash_nonzero), 0, "a hook runs no job: 0");
    cr_assert_eq(shard_handoff_moves_hash(NULL, 1), false);
    cr_assert_eq(shard_job_key_hash(NULL), 0);
    shard_dispatcher_destroy(disp);
}

static uint32_t ids[8];
static atomic_int started;

static void start(shard_worker *w, void *user)
{
    (void)user;
    int n;
    if (sscanf(shard_worker_name(w), "w%d", &n) == 1 && n < 8)
        ids[n] = shard_worker_id(w);
    atomic_fetch_add(&started, 1);
}

static shard_worker *some_worker;
static void catch_worker(shard_worker *w, void *arg)
{
    (void)arg;
    some_worker = w;
    sem_post(&done);
}

Test(job_context, workers_are_numbered_in_order_and_never_twice, .timeout = 60)
{
    memset(ids, 0xff, sizeof ids);
    struct shard_config cfg = { .workers = 3, .on_worker_start = start };
    cr_assert_eq(shard_dispatcher_create(&disp, &cfg), 0);
    cr_assert_eq(shard_worker_add(disp, "w3", 1), 0);
    cr_assert_eq(shard_worker_remove(disp, "w3"), 0);
    cr_assert_eq(shard_worker_add(disp, "w4", 1), 0);
    cr_assert_eq(shard_drain(disp), 0);
    while (atomic_load(&started) < 5)
        cr_assert_eq(shard_drain(disp), 0);
    for (uint32_t i = 0; i < 3; i++)
        cr_assert_eq(ids[i], i, "create's w%u is %u", i, ids[i]);
    cr_assert_eq(ids[3], 3);
    cr_assert_eq(ids[4], 4, "a worker added after one that left takes a new number");
    cr_assert_eq(shard_worker_id(NULL), UINT32_MAX);
    /* From another thread, a worker's job hash is 0: only its own job has one. */
    sem_init(&done, 0, 0);
    cr_assert_eq(shard_submit(disp, "k", 1, catch_worker, NULL), 0);
    sem_wait(&done);
    cr_assert_eq(shard_job_key_hash(some_worker), 0);
    shard_dispatcher_destroy(disp);
}
