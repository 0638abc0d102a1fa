/* Multi-key jobs' blocks and counts (from a hostile review): multi-key jobs of 2 to 18 keys submitted
 * by workers (which keep spare blocks), by external producers, by on_worker_stop hooks, and into a
 * second dispatcher, while workers are added, removed and crashed (DROP and REROUTE). Checked: each
 * accepted job ran or was dropped exactly once; multi_open and multi_waiting come back to 0 after
 * the drains; no leak or use after free (ASan), no race (TSan).
 *   stress_multi_spares [ROUNDS] */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "stress_common.h"

#define MAXJOBS (1 << 20)
#define NKEYS 48

static atomic_int ran[MAXJOBS], dropped[MAXJOBS];
static atomic_char accepted[MAXJOBS];
static atomic_int next_id;
static atomic_int budget; /* worker-spawned jobs left */
/* Jobs between their look at budget and the end of their submits: once budget is 0, main waits for
 * none to be left before it destroys A, to which a job of B may submit (one on a crashed worker, which
 * no drain waits for, could otherwise submit to A after it is gone). */
static atomic_int spawning;
static shard_dispatcher *A, *B;
static char keyname[NKEYS][8];
static atomic_bool stop_producers;

static unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

static void done_fn(shard_worker *w, void *arg);
static void step_fn(shard_worker *w, void *arg, size_t i)
{
    (void)w, (void)arg, (void)i;
}

static int submit_one(shard_dispatcher *d, unsigned *s, bool may_wait)
{
    int id = atomic_fetch_add(&next_id, 1);
    if (id >= MAXJOBS)
        return -1;
    size_t n = 2 + rnd(s) % 17; /* 2..18: over SHARD_MULTI_POOL_KEYS too */
    struct shard_key k[18];
    for (size_t i = 0; i < n; i++) {
        int x = (int)(rnd(s) % NKEYS);
        k[i] = (struct shard_key){ keyname[x], strlen(keyname[x]) };
    }
    void *arg = (void *)(uintptr_t)id;
    int rc;
    bool each = rnd(s) % 4 == 0;
    if (may_wait)
        rc = each ? shard_submit_multi_each(d, k, n, step_fn, done_fn, arg) : shard_submit_multi(d, k, n, done_fn, arg);
    else
        rc = each ? shard_try_submit_multi_each(d, k, n, step_fn, done_fn, arg) : shard_try_submit_multi(d, k, n, done_fn, arg);
    if (rc == 0)
        atomic_store(&accepted[id], 1);
    return rc;
}

static void done_fn(shard_worker *w, void *arg)
{
    int id = (int)(uintptr_t)arg;
    CHECK(atomic_fetch_add(&ran[id], 1) == 0, "job %d ran twice", id);
    CHECK(atomic_load(&dropped[id]) == 0, "job %d ran after dropped", id);
    unsigned s = (unsigned)id * 2654435761u ^ (unsigned)(uintptr_t)w;
    /* Workers submit: their spare blocks are used and filled. */
    atomic_fetch_add(&spawning, 1);
    if (atomic_fetch_sub(&budget, 1) > 0) {
        submit_one(shard_worker_dispatcher(w), &s, false);
        if (rnd(&s) % 2 == 0 && atomic_fetch_sub(&budget, 1) > 0)
            submit_one(shard_worker_dispatcher(w) == A ? B : A, &s, false);
    }
    atomic_fetch_sub(&spawning, 1);
}

static void on_dropped(shard_job_fn fn, void *arg, void *user)
{
    (void)user;
    if (fn != done_fn)
        return;
    int id = (int)(uintptr_t)arg;
    CHECK(atomic_fetch_add(&dropped[id], 1) == 0, "job %d dropped twice", id);
    CHECK(atomic_load(&ran[id]) == 0, "job %d dropped after it ran", id);
}

/* A's workers' hook submits to A and B; B's only to B (A is destroyed first). */
static void on_stop(shard_worker *w, void *user)
{
    (void)user;
    unsigned s = (unsigned)(uintptr_t)w;
    for (int i = 0; i < 20; i++) {
        submit_one(shard_worker_dispatcher(w), &s, false);
        if (shard_worker_dispatcher(w) == A)
            submit_one(B, &s, false);
    }
}

static void *producer(void *arg)
{
    unsigned s = (unsigned)(uintptr_t)arg;
    while (!atomic_load(&stop_producers)) {
        submit_one(A, &s, true);
        if (rnd(&s) % 4 == 0)
            submit_one(B, &s, true);
    }
    return NULL;
}

static void check_counts(shard_dispatcher *d, const char *what)
{
    struct shard_stats st;
    for (int i = 0; i < 500; i++) {
        shard_dispatcher_stats(d, &st);
        if (st.multi_open == 0 && st.multi_waiting == 0)
            return;
        stress_pause_ms(10);
    }
    CHECK(0, "%s: multi_open %llu multi_waiting %llu after drain", what, (unsigned long long)st.multi_open,
          (unsigned long long)st.multi_waiting);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : (STRESS_SANITIZED ? 40 : 200);
    for (int i = 0; i < NKEYS; i++)
        snprintf(keyname[i], sizeof keyname[i], "k%d", i);
    struct shard_config c = { .workers = 3, .queue_capacity = 64, .on_dropped = on_dropped, .on_worker_stop = on_stop };
    CHECK(shard_dispatcher_create(&A, &c) == 0, "create A");
    c.workers = 2;
    CHECK(shard_dispatcher_create(&B, &c) == 0, "create B");
    pthread_t p[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&p[i], NULL, producer, (void *)(uintptr_t)(i + 7));
    unsigned s = 99;
    int added = 0;
    char live[64][16];
    int nlive = 3;
    for (int i = 0; i < 3; i++)
        snprintf(live[i], sizeof live[i], "w%d", i);
    for (int r = 0; r < rounds; r++) {
        atomic_fetch_add(&budget, 200);
        stress_pause_ms(1 + (int)(rnd(&s) % 4));
        if (nlive < 6) {
            snprintf(live[nlive], sizeof live[nlive], "x%d", added++);
            CHECK(shard_worker_add(A, live[nlive], 1) == 0, "add");
            nlive++;
        }
        stress_pause_ms(1 + (int)(rnd(&s) % 4));
        int v = (int)(rnd(&s) % (unsigned)nlive);
        int op = (int)(rnd(&s) % 3);
        int rc = op == 0 ? shard_worker_remove(A, live[v])
                         : shard_worker_crash(A, live[v], op == 1 ? SHARD_CRASH_DROP : SHARD_CRASH_REROUTE);
        CHECK(rc == 0, "op %d on %s: %d", op, live[v], rc);
        memmove(live[v], live[v + 1], (size_t)(nlive - v - 1) * sizeof live[0]);
        nlive--;
        if (r % 16 == 15) {
            /* B's workers too, with blocks of A's and B's jobs in their spares. */
            char name[16];
            snprintf(name, sizeof name, "b%d", r);
            shard_worker_add(B, name, 1);
            shard_worker_crash(B, name, r % 32 == 15 ? SHARD_CRASH_DROP : SHARD_CRASH_REROUTE);
        }
    }
    atomic_store(&stop_producers, true);
    for (int i = 0; i < 2; i++)
        pthread_join(p[i], NULL);
    atomic_store(&budget, 0);
    for (int tries = 0; atomic_load(&spawning) > 0; tries++) {
        CHECK(tries < 10000, "a job's submits did not end in 10 s");
        stress_pause_ms(1);
    }
    CHECK(shard_drain(A) == 0, "drain A");
    CHECK(shard_drain(B) == 0, "drain B");
    check_counts(A, "A");
    check_counts(B, "B");
    shard_dispatcher_destroy(A);
    shard_dispatcher_destroy(B);
    int n = atomic_load(&next_id), acc = 0, nr = 0, nd = 0;
    if (n > MAXJOBS)
        n = MAXJOBS;
    for (int i = 0; i < n; i++) {
        if (!atomic_load(&accepted[i]))
            continue;
        acc++;
        nr += atomic_load(&ran[i]);
        nd += atomic_load(&dropped[i]);
        CHECK(atomic_load(&ran[i]) + atomic_load(&dropped[i]) == 1, "job %d: ran %d dropped %d", i,
              atomic_load(&ran[i]), atomic_load(&dropped[i]));
    }
    printf("stress_multi_spares: %d jobs accepted, %d ran, %d dropped, %d failures\n", acc, nr, nd,
           atomic_load(&stress_failures));
    return atomic_load(&stress_failures) ? 1 : 0;
}
