/* Handoff torture: producers feed players' packets while workers are added and removed every few
 * milliseconds; the release hook moves each moved player's worker-local session, and every packet
 * must find its session with the count it expects. Meanwhile a stuck job on a crashed worker must keep
 * its key fenced while the worker's other keys move on. Runs under ThreadSanitizer too. */
#include <sched.h>
#include <semaphore.h>

#include "sessions.h"
#include "stress_common.h"

#define PRODUCERS 2

static shard_dispatcher *disp;
static int rounds;
static struct packet *packets[PRODUCERS];
static atomic_int producers_done, changes_made;

static void *producer(void *arg)
{
    int p = (int)(long)arg;
    char k[24];
    int n = 0;
    for (int r = 0; r < rounds; r++) {
        /* The first rounds wait for a membership change each, so that changes overlap the packets
         * however fast the producers run (under ASan they could finish before the churn began). */
        while (r < 8 && atomic_load(&changes_made) < r)
            sched_yield();
        for (int player = p; player < SESSION_PLAYERS; player += PRODUCERS, n++) {
            packets[p][n] = (struct packet){ player, (unsigned)r };
            int err = shard_submit(disp, k, player_key(k, player), sessions_on_packet, &packets[p][n]);
            CHECK(err == 0, "submit: %s", shard_strerror(err));
        }
    }
    atomic_fetch_add(&producers_done, 1);
    return NULL;
}

static void *control(void *arg)
{
    (void)arg;
    int changes = 0;
    for (unsigned i = 0; atomic_load(&producers_done) < PRODUCERS; i++) {
        stress_pause_ms(2);
        char name[16];
        snprintf(name, sizeof name, "h%u", i / 2);
        int err = i % 2 == 0 ? shard_worker_add(disp, name, 1 + i % 3) : shard_worker_remove(disp, name);
        CHECK(err == 0, "membership change %u: %s", i, shard_strerror(err));
        changes++;
        atomic_store(&changes_made, changes);
    }
    printf("control: %d membership changes\n", changes);
    return NULL;
}

static void sessions_under_churn(void)
{
    struct shard_config cfg = sessions_config(2);
    cfg.queue_capacity = 128;
    CHECK(shard_dispatcher_create(&disp, &cfg) == 0, "create");
    pthread_t prod[PRODUCERS], ctl;
    pthread_create(&ctl, NULL, control, NULL);
    for (long p = 0; p < PRODUCERS; p++)
        pthread_create(&prod[p], NULL, producer, (void *)p);
    for (int p = 0; p < PRODUCERS; p++)
        pthread_join(prod[p], NULL);
    pthread_join(ctl, NULL);
    CHECK(shard_drain(disp) == 0, "drain");
    CHECK(atomic_load(&session_world.lost) == 0, "%d packets found no session after a handoff",
          atomic_load(&session_world.lost));
    CHECK(atomic_load(&session_world.wrong_count) == 0, "%d packets saw a wrong count",
          atomic_load(&session_world.wrong_count));
    CHECK(atomic_load(&session_world.handoffs) > 0, "no session was handed over");
    printf("sessions: %d rounds x %d players, %d handoffs, none late\n", rounds, SESSION_PLAYERS,
           atomic_load(&session_world.handoffs));
    shard_dispatcher_destroy(disp);
}

static sem_t gate, entered;
static atomic_int stuck_done, follower_early, follower_ran;
static atomic_long others_ran;

static void stuck(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    sem_post(&entered);
    sem_wait(&gate);
    atomic_store(&stuck_done, 1);
}

static void follower(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    if (!atomic_load(&stuck_done))
        atomic_store(&follower_early, 1);
    atomic_store(&follower_ran, 1);
}

static void other(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    atomic_fetch_add(&others_ran, 1);
}

static void stuck_crash(void)
{
    sem_init(&gate, 0, 0);
    sem_init(&entered, 0, 0);
    CHECK(shard_dispatcher_create(&disp, &(struct shard_config){ .workers = 3 }) == 0, "create");
    shard_ring *r;
    CHECK(shard_dispatcher_ring(disp, &r) == 0, "ring");
    char victim[SHARD_NAME_MAX + 1];
    snprintf(victim, sizeof victim, "%s", shard_ring_owner(r, "stuck", 5));
    shard_ring_destroy(r);
    CHECK(shard_submit(disp, "stuck", 5, stuck, NULL) == 0, "submit");
    sem_wait(&entered);
    CHECK(shard_submit(disp, "stuck", 5, follower, NULL) == 0, "submit");
    char k[24];
    for (int i = 0; i < 2000; i++)
        CHECK(shard_submit(disp, k, player_key(k, i % 300), other, NULL) == 0, "submit");
    CHECK(shard_worker_crash(disp, victim, SHARD_CRASH_REROUTE) == 0, "crash");
    CHECK(shard_worker_add(disp, "fresh", 1) == 0, "add after crash");
    for (int i = 0; i < 2000; i++)
        CHECK(shard_submit(disp, k, player_key(k, i % 300), other, NULL) == 0, "submit");
    CHECK(shard_drain(disp) == 0, "drain"); /* does not wait for the stuck job */
    CHECK(atomic_load(&others_ran) == 4000, "other keys: %ld of 4000 ran while one job is stuck",
          atomic_load(&others_ran));
    CHECK(!atomic_load(&follower_ran), "the stuck key ran elsewhere while its job runs");
    sem_post(&gate);
    while (!atomic_load(&follower_ran))
        ; /* its follower runs once the stuck job returns */
    CHECK(!atomic_load(&follower_early), "follower ran before the stuck job returned");
    printf("stuck crash: 4000 jobs of other keys ran while one key stayed fenced\n");
    shard_dispatcher_destroy(disp);
}

int main(int argc, char **argv)
{
    rounds = STRESS_SANITIZED ? 60 : 400;
    if (argc > 1)
        rounds = atoi(argv[1]);
    for (int p = 0; p < PRODUCERS; p++)
        packets[p] = calloc((size_t)rounds * SESSION_PLAYERS, sizeof *packets[p]);
    sessions_under_churn();
    stuck_crash();
    for (int p = 0; p < PRODUCERS; p++)
        free(packets[p]);
    return stress_result("stress_handoff");
}
