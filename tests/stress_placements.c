/* Placement torture: producers submit sequenced jobs for 2,000 keys while a control thread places and
 * unplaces them thousands of times (each change a new ring that shares its pins with the one before,
 * read by every submit through RCU) and now and then adds or removes a worker (renumbering the pins'
 * members; a remove drops its worker's placements), while a reader thread copies the ring in force
 * (shard_dispatcher_ring), walks its pins in order and destroys the copy, dropping its references to
 * nodes the control thread shares. Asserts every job ran exactly once, never on two workers at once,
 * in per-(producer, key) order; and at the end that every key answers its placement, or the ring's
 * owner without one. Runs under ThreadSanitizer too (smaller). */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "stress_common.h"

#define PRODUCERS 2
#define KEYS 2000

static int jobs_per_producer, changes_wanted;
static struct stress_key keys[KEYS];
static struct stress_job *jobs[PRODUCERS];
static shard_dispatcher *disp;
static atomic_int control_done;
static char placed[KEYS][SHARD_NAME_MAX + 1]; /* the control thread's: "" for none */

static void run(shard_worker *w, void *arg)
{
    struct stress_job *j = arg;
    stress_run(&keys[j->key], j, w);
}

static size_t key_name(char *buf, int k)
{
    return (size_t)snprintf(buf, 16, "key-%d", k);
}

static void *producer(void *arg)
{
    int p = (int)(long)arg;
    unsigned seq[KEYS] = { 0 };
    unsigned x = 999u + (unsigned)p;
    for (int i = 0; i < jobs_per_producer; i++) {
        x = x * 1103515245u + 12345u;
        int k = (int)((x >> 8) % KEYS);
        struct stress_job *j = &jobs[p][i];
        j->producer = p;
        j->key = k;
        j->seq = seq[k]++;
        char name[16];
        int err = shard_submit(disp, name, key_name(name, k), run, j);
        CHECK(err == 0, "submit: %s", shard_strerror(err));
    }
    return NULL;
}

static void *control(void *arg)
{
    (void)arg;
    unsigned x = 4242, extra = 0;
    bool have_extra = false;
    char workers[5][SHARD_NAME_MAX + 1] = { "w0", "w1", "w2", "w3" };
    for (int op = 0; op < changes_wanted; op++) {
        x = x * 1103515245u + 12345u;
        int k = (int)((x >> 8) % KEYS);
        char key[16];
        size_t len = key_name(key, k);
        int err;
        if (op % 97 == 96) { /* a worker comes or goes: members renumbered, its placements dropped */
            if (have_extra) {
                err = shard_worker_remove(disp, workers[4]);
                for (int i = 0; i < KEYS; i++)
                    if (strcmp(placed[i], workers[4]) == 0)
                        placed[i][0] = 0;
            } else {
                snprintf(workers[4], sizeof workers[4], "%c%u", (x >> 20) % 2 ? 'a' : 'x', extra++);
                err = shard_worker_add(disp, workers[4], 1);
            }
            have_extra = !have_extra;
        } else if (placed[k][0] && (x >> 16) % 3 == 0) {
            err = shard_key_unplace(disp, key, len);
            placed[k][0] = 0;
        } else {
            const char *to = workers[(x >> 12) % (have_extra ? 5u : 4u)];
            err = shard_key_place(disp, key, len, to);
            snprintf(placed[k], sizeof placed[k], "%s", to);
        }
        CHECK(err == 0, "change %d: %s", op, shard_strerror(err));
    }
    atomic_store(&control_done, 1);
    return NULL;
}

/* Copies of the ring in force, their pins walked in order, destroyed on this thread. */
static void *reader(void *arg)
{
    (void)arg;
    long copies = 0;
    while (!atomic_load(&control_done)) {
        shard_ring *r;
        int err = shard_dispatcher_ring(disp, &r);
        CHECK(err == 0, "ring: %s", shard_strerror(err));
        if (err)
            break;
        uint64_t last = 0;
        for (size_t i = 0; i < shard_ring_pin_count(r); i += 1 + i / 8) {
            uint64_t h;
            const char *m;
            CHECK(shard_ring_pin_at(r, i, &h, &m) == 0, "pin %zu", i);
            CHECK(i == 0 || h > last, "pins out of order at %zu", i);
            CHECK(strcmp(shard_ring_owner_of_hash(r, h), m) == 0, "pin %zu answers another member", i);
            last = h;
        }
        shard_ring_destroy(r);
        copies++;
    }
    CHECK(copies > 0, "no copy of the ring was taken");
    return NULL;
}

int main(void)
{
    jobs_per_producer = STRESS_SANITIZED ? 20000 : 200000;
    changes_wanted = STRESS_SANITIZED ? 600 : 4000;
    for (int k = 0; k < KEYS; k++)
        keys[k].next_seq = calloc(PRODUCERS, sizeof *keys[k].next_seq);
    for (int p = 0; p < PRODUCERS; p++)
        jobs[p] = calloc((size_t)jobs_per_producer, sizeof *jobs[p]);
    struct shard_config cfg = { .workers = 4, .queue_capacity = 1024 };
    int err = shard_dispatcher_create(&disp, &cfg);
    CHECK(err == 0, "create: %s", shard_strerror(err));
    if (err)
        return stress_result("stress_placements");
    pthread_t prod[PRODUCERS], ctl, rd;
    pthread_create(&ctl, NULL, control, NULL);
    pthread_create(&rd, NULL, reader, NULL);
    for (long p = 0; p < PRODUCERS; p++)
        pthread_create(&prod[p], NULL, producer, (void *)p);
    for (int p = 0; p < PRODUCERS; p++)
        pthread_join(prod[p], NULL);
    pthread_join(ctl, NULL);
    pthread_join(rd, NULL);
    CHECK(shard_drain(disp) == 0, "drain");
    for (int p = 0; p < PRODUCERS; p++)
        for (int i = 0; i < jobs_per_producer; i++)
            CHECK(atomic_load(&jobs[p][i].runs) == 1, "job p%d #%d ran %d times", p, i, atomic_load(&jobs[p][i].runs));
    shard_ring *r;
    CHECK(shard_dispatcher_ring(disp, &r) == 0, "ring");
    size_t nplaced = 0;
    for (int k = 0; k < KEYS; k++) {
        char key[16];
        size_t len = key_name(key, k);
        uint64_t h = shard_ring_hash(r, key, len);
        nplaced += placed[k][0] != 0;
        if (placed[k][0])
            CHECK(strcmp(shard_ring_owner_of_hash(r, h), placed[k]) == 0, "key %d: %s, placed on %s", k,
                  shard_ring_owner_of_hash(r, h), placed[k]);
    }
    CHECK(shard_ring_pin_count(r) == nplaced, "%zu pins, %zu keys placed", shard_ring_pin_count(r), nplaced);
    printf("placements: %d changes, %zu keys placed at the end, %d jobs ran exactly once, in order\n", changes_wanted,
           nplaced, PRODUCERS * jobs_per_producer);
    shard_ring_destroy(r);
    shard_dispatcher_destroy(disp);
    return stress_result("stress_placements");
}
