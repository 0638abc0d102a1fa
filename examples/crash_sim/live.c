/* Table 5: the same crash on the real dispatcher. Workers stand for nodes; w3 crashes while a
 * producer thread submits (SHARD_CRASH_REROUTE), and every session records where its jobs ran.
 * Fixed size (8 workers, 20,000 sessions): it shows the dispatcher, not the hash. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <xxhash.h>

#include "crash_sim.h"

#define LIVE_WORKERS  8
#define LIVE_SESSIONS 20000
#define LIVE_ROUNDS   20 /* after the first job of each session */

/* Where a session's jobs ran: worker names, copied (a crashed worker's memory is freed once it is
 * finished with, so its shard_worker pointer and name do not outlive it). home and first are
 * written by the jobs, which shard runs one at a time per key, and read by main after a drain;
 * jobs is only counted. */
struct live_session {
    char       home[8], first[8];
    atomic_int jobs;
};

static struct live_session live[LIVE_SESSIONS];
static shard_dispatcher   *disp;
static atomic_int          half_submitted, crashed; /* the producer's and main's signals */

static void session_job(shard_worker *w, void *arg)
{
    struct live_session *s = arg;
    if (!s->first[0])
        snprintf(s->first, sizeof s->first, "%s", shard_worker_name(w));
    snprintf(s->home, sizeof s->home, "%s", shard_worker_name(w));
    /* relaxed: a count read after shard_drain, which orders every job before it returns */
    atomic_fetch_add_explicit(&s->jobs, 1, memory_order_relaxed);
}

static size_t live_key(char *buf, int i)
{
    return (size_t)snprintf(buf, 24, "session-%d", i);
}

static void *live_producer(void *arg)
{
    (void)arg;
    char k[24];
    for (int round = 0; round < LIVE_ROUNDS; round++) {
        if (round == LIVE_ROUNDS / 2) {
            /* Half the rounds are queued: let main crash w3 while they run, and submit the rest once
             * it has, so that every session has jobs on both sides of the crash however the threads
             * are scheduled (otherwise a slow main could crash w3 after the last job). Relaxed: the
             * flag carries no data. Acquire pairs with main's release: this thread's next submits
             * happen after the crash returned, so they route by the ring without w3. */
            atomic_store_explicit(&half_submitted, 1, memory_order_relaxed);
            while (!atomic_load_explicit(&crashed, memory_order_acquire))
                sched_yield();
        }
        for (int i = 0; i < LIVE_SESSIONS; i++)
            shard_submit(disp, k, live_key(k, i), session_job, &live[i]);
    }
    return NULL;
}

void live_run(void)
{
    char title[128];
    snprintf(title, sizeof title, "5. Live: %d workers, %d sessions, %d jobs each; w3 crashes mid-run (REROUTE)",
             LIVE_WORKERS, LIVE_SESSIONS, LIVE_ROUNDS + 1);
    report_table("live", title, "moved", "hash % N", "jobs lost");
    struct shard_config cfg = { .workers = LIVE_WORKERS };
    if (shard_dispatcher_create(&disp, &cfg) != 0) {
        report_check(false, "create the dispatcher");
        return;
    }
    char k[24];
    for (int i = 0; i < LIVE_SESSIONS; i++)
        shard_submit(disp, k, live_key(k, i), session_job, &live[i]);
    shard_drain(disp);
    pthread_t t;
    pthread_create(&t, NULL, live_producer, NULL);
    /* crash once half the rounds are queued; the producer waits for it before the rest */
    while (!atomic_load_explicit(&half_submitted, memory_order_relaxed))
        sched_yield();
    int err = shard_worker_crash(disp, "w3", SHARD_CRASH_REROUTE); /* while traffic flows */
    atomic_store_explicit(&crashed, 1, memory_order_release);
    pthread_join(t, NULL);
    shard_drain(disp);
    long moved = 0, wrong = 0, ran = 0, modulo = 0, expected = (LIVE_ROUNDS + 1L) * LIVE_SESSIONS;
    for (int i = 0; i < LIVE_SESSIONS; i++) {
        ran += atomic_load(&live[i].jobs);
        if (strcmp(live[i].home, live[i].first) != 0) {
            moved++;
            wrong += strcmp(live[i].first, "w3") != 0;
        }
        uint64_t h = XXH3_64bits(k, live_key(k, i));
        modulo += h % LIVE_WORKERS != h % (LIVE_WORKERS - 1);
    }
    report_row("sessions disrupted by the crash", (double)moved / LIVE_SESSIONS, (double)modulo / LIVE_SESSIONS,
               (double)(expected - ran));
    report_check(err == 0, "crash accepted");
    report_check(ran == expected, "every job ran exactly once, none lost");
    report_check(wrong == 0 && moved > 0, "only the crashed worker's sessions moved (%ld moved, %ld of them not w3's)",
                 moved, wrong);
    shard_dispatcher_destroy(disp);
}
