/* bench_pins: what a placement costs against the placements already made, and what pins cost a lookup.
 *   place   shard_key_place_hash on a dispatcher of 4 idle workers, the mean over the WINDOW
 *           placements that end at 2,000, 20,000 and 65,536 placements (--quick: 512 and 2,000)
 *   ring    the ring work of one placement as the dispatcher does it, without the dispatcher:
 *           shard_ring_clone of the ring in force, shard_ring_pin on the clone, shard_ring_diff of the
 *           two, the old ring destroyed; same counts
 *   pin     shard_ring_pin alone, on one ring; same counts
 * Each op's baseline, same run: its mean over the first WINDOW placements (the line with pins=0), after
 * a warm-up of 8 placements undone.
 *   lookup  shard_ring_owner_of_hash (impl=public), and shard__ring_owner_index, the lookup a submit
 *           makes inline (impl=inline), for 8 and 64 members at the default vnodes, with 0 pins (the
 *           baseline) and 8,000, on 4,096 hashes (warm) and 262,144 (cold); the two rings take turns,
 *           the best of 9 turns each (the machine's other load only ever adds time).
 *   submit  shard_submit of an empty job, the call a user makes (hash, route, queue), on a dispatcher
 *           of 8 workers, with 8,000 keys placed (shard_key_place_hash, spread over the workers) and
 *           without them (unplaced again), each timed just after those changes, from the main thread
 *           over the same 4,096 (warm) and 262,144 (cold) 8-byte keys; queues large enough that no
 *           submit waits; only the submit loop is timed (a drain follows it); the states take turns,
 *           the best of 9 each (--quick: 2), and a third, without pins again after no change
 *           (op=submit_noise): the noise beside the ratio with pins.
 * One line per measurement:
 *   bench=pins op=place|ring|pin pins=N us_per_op=MEAN median_us=X ratio_vs_first=R (of the means)
 *   bench=pins op=lookup impl=public|inline members=M pins=P keys=K ns_per_lookup=X ratio_vs_nopins=R
 *   bench=pins op=submit workers=8 pins=P keys=K ns_per_submit=X ratio_vs_nopins=R
 *   bench=pins op=submit_noise workers=8 pins=0 keys=K ns_per_submit=X ratio_vs_nopins=R */
#include <errno.h>
#include <pthread.h>
#include <shard.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "ring_layout.h" /* shard__ring_owner_index, the lookup a submit makes */

#define WINDOW 256
#define WARM_KEYS 4096
#define COLD_KEYS 262144
#define LOOKUP_PINS 8000
#define TURNS 9

static const char *const workers[] = { "w0", "w1", "w2", "w3" };
static volatile uintptr_t sink;

enum op { OP_PLACE, OP_RING, OP_PIN, OP_COUNT };
static const char *const op_names[] = { "place", "ring", "pin" };

static shard_ring *ring_of(uint32_t members)
{
    shard_ring *r;
    if (shard_ring_create(&r, NULL) != 0)
        return NULL;
    for (uint32_t i = 0; i < members; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%u", i);
        if (shard_ring_add(r, name, 1) != 0) {
            shard_ring_destroy(r);
            return NULL;
        }
    }
    return r;
}

static void count_arc(uint64_t first, uint64_t last, const char *a, const char *b, void *ctx)
{
    (void)first;
    (void)last;
    (void)a;
    (void)b;
    (*(size_t *)ctx)++;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One placement of op; *ring is the ring in force for OP_RING and OP_PIN. Return: 0 or an error. */
static int place_one(enum op op, shard_dispatcher *d, shard_ring **ring, uint64_t hash, const char *w)
{
    if (op == OP_PLACE)
        return shard_key_place_hash(d, hash, w);
    if (op == OP_PIN)
        return shard_ring_pin(*ring, hash, w);
    shard_ring *next;
    int err = shard_ring_clone(*ring, &next);
    if (err)
        return err;
    size_t arcs = 0;
    if ((err = shard_ring_pin(next, hash, w)) != 0 || (err = shard_ring_diff(*ring, next, count_arc, &arcs)) != 0) {
        shard_ring_destroy(next);
        return err;
    }
    sink += arcs;
    shard_ring_destroy(*ring);
    *ring = next;
    return 0;
}

/* Places up to the largest count, timing the first WINDOW placements and the WINDOW that end at each
 * count (counts are at least 2 * WINDOW apart from 0 and from each other). Each placement is timed on
 * its own: the mean carries what a placement costs now and then (a leaf that splits), the median
 * leaves out the machine's other load. */
static int run_op(enum op op, const uint32_t *counts, int ncounts)
{
    shard_dispatcher *d = NULL;
    shard_ring *ring = NULL;
    if (op == OP_PLACE) {
        struct shard_config cfg = { .workers = 4, .queue_capacity = 64 };
        if (shard_dispatcher_create(&d, &cfg) != 0)
            return 1;
    } else if (!(ring = ring_of(4))) {
        return 1;
    }
    uint64_t seed = 42;
    double us[WINDOW], first = 0;
    int next = 0, err = 0;
    /* Warm up (the workers' first wake-ups, the allocator's first pages) with a pin made and undone. */
    uint64_t warm = UINT64_C(1) << 40;
    for (int k = 0; k < 8 && !err; k++)
        if (!(err = place_one(op, d, &ring, warm, workers[k % 4])))
            err = op == OP_PLACE ? shard_key_unplace_hash(d, warm) : shard_ring_unpin(ring, warm);
    for (uint32_t n = 1, w = 0; n <= counts[ncounts - 1] && !err; n++) {
        bool timed = n <= WINDOW || n > counts[next] - WINDOW;
        uint64_t t0 = bench_now_ns();
        err = place_one(op, d, &ring, bench_mix(&seed), workers[n % 4]);
        if (!timed)
            continue;
        us[w++] = (double)(bench_now_ns() - t0) / 1e3;
        if (w < WINDOW)
            continue;
        w = 0;
        double mean = 0;
        for (int k = 0; k < WINDOW; k++)
            mean += us[k] / WINDOW;
        qsort(us, WINDOW, sizeof *us, cmp_double);
        if (n == WINDOW)
            first = mean;
        printf("bench=pins op=%s pins=%u us_per_op=%.2f median_us=%.2f ratio_vs_first=%.2f\n", op_names[op],
               n == WINDOW ? 0 : n, mean, us[WINDOW / 2], mean / first);
        fflush(stdout);
        if (n == counts[next])
            next++;
    }
    if (err)
        fprintf(stderr, "bench_pins: %s: %s\n", op_names[op], shard_strerror(err));
    shard_dispatcher_destroy(d);
    shard_ring_destroy(ring);
    return err ? 1 : 0;
}

/* The public call, or (inline) the dispatcher's own lookup of a member index. */
static double time_lookups(const shard_ring *r, const uint64_t *h, size_t n, int reps, bool inline_)
{
    uintptr_t acc = 0;
    uint64_t t0 = bench_now_ns();
    for (int k = 0; k < reps; k++)
        for (size_t i = 0; i < n; i++)
            acc += inline_ ? shard__ring_owner_index(r, h[i]) : (uintptr_t)shard_ring_owner_of_hash(r, h[i]);
    sink += acc;
    return (double)(bench_now_ns() - t0) / ((double)reps * (double)n);
}

static int run_lookup(uint32_t members, bool quick)
{
    shard_ring *plain = ring_of(members), *pinned = NULL;
    uint64_t *h = malloc(COLD_KEYS * sizeof *h);
    if (!plain || !h || shard_ring_clone(plain, &pinned) != 0)
        return 1;
    uint64_t seed = 7;
    for (uint32_t i = 0; i < LOOKUP_PINS; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%u", i % members);
        if (shard_ring_pin(pinned, bench_mix(&seed), name) != 0)
            return 1;
    }
    for (size_t i = 0; i < COLD_KEYS; i++)
        h[i] = bench_mix(&seed);
    static const size_t sizes[] = { WARM_KEYS, COLD_KEYS };
    for (int s = 0; s < 2; s++) {
        int reps = s == 0 ? (quick ? 50 : 500) : (quick ? 1 : 8);
        for (int in = 0; in < 2; in++) {
            double t[2][TURNS];
            for (int k = 0; k < TURNS; k++) {
                t[0][k] = time_lookups(plain, h, sizes[s], reps, in);
                t[1][k] = time_lookups(pinned, h, sizes[s], reps, in);
            }
            qsort(t[0], TURNS, sizeof t[0][0], cmp_double);
            qsort(t[1], TURNS, sizeof t[1][0], cmp_double);
            for (int p = 0; p < 2; p++)
                printf("bench=pins op=lookup impl=%s members=%u pins=%u keys=%zu ns_per_lookup=%.2f "
                       "ratio_vs_nopins=%.2f\n",
                       in ? "inline" : "public", members, p ? LOOKUP_PINS : 0, sizes[s], t[p][0], t[p][0] / t[0][0]);
            fflush(stdout);
        }
    }
    shard_ring_destroy(plain);
    shard_ring_destroy(pinned);
    free(h);
    return 0;
}

static void empty_job(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
}

/* The gate: a job on each worker that holds it, asleep, until the timed submits are in, so that a
 * submit finds its worker busy (no wake-up to make) and the workers take no core from the submitter:
 * without it two twin dispatchers' figures differed by 0.6-2.0x with no pins on either. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static bool gate_open;
static int gate_in;

static void gate_job(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    pthread_mutex_lock(&gate_lock);
    gate_in++;
    pthread_cond_broadcast(&gate_cond);
    while (!gate_open)
        pthread_cond_wait(&gate_cond, &gate_lock);
    pthread_mutex_unlock(&gate_lock);
}

/* Holds every worker of d in gate_job (gate[i]: a key of worker i). Return: 0 or an error. */
static int gate_close(shard_dispatcher *d, const uint64_t *gate, int nworkers)
{
    pthread_mutex_lock(&gate_lock);
    gate_open = false;
    gate_in = 0;
    pthread_mutex_unlock(&gate_lock);
    for (int i = 0; i < nworkers; i++) {
        int err = shard_submit(d, &gate[i], sizeof gate[i], gate_job, NULL);
        if (err)
            return err;
    }
    pthread_mutex_lock(&gate_lock);
    while (gate_in < nworkers)
        pthread_cond_wait(&gate_cond, &gate_lock);
    pthread_mutex_unlock(&gate_lock);
    return 0;
}

static void gate_release(void)
{
    pthread_mutex_lock(&gate_lock);
    gate_open = true;
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_lock);
}

/* reps rounds of a submit for each of the n keys (8 bytes each, from k), the workers held in the gate
 * while a round is timed, then drained. Return: ns a submit, or a negative value on an error. */
static double time_submits(shard_dispatcher *d, const uint64_t *gate, int nworkers, const uint64_t *k, size_t n,
                           int reps)
{
    uint64_t ns = 0;
    for (int r = 0; r < reps; r++) {
        int err = gate_close(d, gate, nworkers);
        uint64_t t0 = bench_now_ns();
        for (size_t i = 0; i < n && !err; i++)
            err = shard_submit(d, &k[i], sizeof k[i], empty_job, NULL);
        ns += bench_now_ns() - t0;
        gate_release(); /* also after an error: a held worker would hold destroy up for ever */
        shard_drain(d);
        if (err)
            return -1;
    }
    return (double)ns / ((double)reps * (double)n);
}

/* gate[i]: an 8-byte key that d's ring gives worker "w<i>"; and whether every worker's share of the n
 * keys k fits its queue (capacity), as it must: a held worker makes no room, so a submit that waited
 * for some would wait for ever. Return: 0, -ENOSPC or an error of shard_dispatcher_ring. */
static int gate_keys(shard_dispatcher *d, int nworkers, uint64_t *gate, const uint64_t *k, size_t n,
                     uint32_t capacity)
{
    shard_ring *r;
    int err = shard_dispatcher_ring(d, &r);
    if (err)
        return err;
    uint32_t share[8] = { 0 };
    for (size_t i = 0; i < n && !err; i++)
        if (++share[atoi(shard_ring_owner(r, &k[i], sizeof k[i]) + 1) % 8] >= capacity)
            err = -ENOSPC;
    for (int i = 0; i < nworkers && !err; i++)
        for (gate[i] = 0; atoi(shard_ring_owner(r, &gate[i], sizeof gate[i]) + 1) != i;)
            gate[i]++;
    shard_ring_destroy(r);
    return err;
}

/* Places (place) or unplaces the LOOKUP_PINS keys of pins, spread over d's 8 workers. A pin is one
 * hash: the gate keys and the timed keys, other hashes (but for a 64-bit collision), keep the owners
 * the ring gives them either way. Return: 0 or an error. */
static int pins_set(shard_dispatcher *d, const uint64_t *pins, bool place)
{
    static const char *const names[] = { "w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7" };
    int err = 0;
    for (uint32_t i = 0; i < LOOKUP_PINS && !err; i++)
        err = place ? shard_key_place_hash(d, pins[i], names[i % 8]) : shard_key_unplace_hash(d, pins[i]);
    return err;
}

static int run_submit(bool quick)
{
    struct shard_config cfg = { .workers = 8, .queue_capacity = 65536 };
    shard_dispatcher *d = NULL;
    uint64_t *k = malloc(COLD_KEYS * sizeof *k), *pins = malloc(LOOKUP_PINS * sizeof *pins), seed = 11, gate[8];
    int err = k && pins ? shard_dispatcher_create(&d, &cfg) : -ENOMEM;
    for (uint32_t i = 0; pins && i < LOOKUP_PINS; i++)
        pins[i] = bench_mix(&seed);
    for (size_t i = 0; k && i < COLD_KEYS; i++)
        k[i] = bench_mix(&seed);
    if (!err)
        err = gate_keys(d, 8, gate, k, COLD_KEYS, cfg.queue_capacity);
    /* One dispatcher, timed with its pins and without them by turns, each state right after the 8,000
     * changes that made it (placed, or unplaced again): two twin dispatchers, one with the pins,
     * compared 1.10-1.16x with the pins on the second made and 0.85-0.99x on the first. Then the
     * state without pins again, after no change (op=submit_noise): its ratio to the one timed after
     * the unplacing is the noise, and what the changes just before a timing do to it. */
    static const size_t sizes[] = { WARM_KEYS, COLD_KEYS };
    enum { WITHOUT, WITH, AGAIN, STATES };
    static const struct {
        int  state;
        bool place, unplace; /* the changes before its timing */
    } step[] = { { WITH, true, false }, { WITHOUT, false, true }, { AGAIN, false, false } };
    int turns = quick ? 2 : TURNS;
    double t[2][STATES][TURNS]; /* by size, by state */
    for (int turn = 0; turn < turns && !err; turn++)
        for (size_t i = 0; i < sizeof step / sizeof step[0] && !err; i++) {
            if ((step[i].place || step[i].unplace) && (err = pins_set(d, pins, step[i].place)) != 0)
                break;
            for (int s = 0; s < 2 && !err; s++)
                if ((t[s][step[i].state][turn] = time_submits(d, gate, 8, k, sizes[s], s == 0 ? (quick ? 4 : 32) : 1)) < 0)
                    err = -EIO;
        }
    for (int s = 0; s < 2 && !err; s++) {
        for (int p = 0; p < STATES; p++)
            qsort(t[s][p], (size_t)turns, sizeof t[s][p][0], cmp_double);
        for (int p = WITHOUT; p <= WITH; p++)
            printf("bench=pins op=submit workers=8 pins=%u keys=%zu ns_per_submit=%.1f ratio_vs_nopins=%.2f\n",
                   p == WITH ? LOOKUP_PINS : 0, sizes[s], t[s][p][0], t[s][p][0] / t[s][WITHOUT][0]);
        printf("bench=pins op=submit_noise workers=8 pins=0 keys=%zu ns_per_submit=%.1f ratio_vs_nopins=%.2f\n",
               sizes[s], t[s][AGAIN][0], t[s][AGAIN][0] / t[s][WITHOUT][0]);
    }
    fflush(stdout);
    if (err)
        fprintf(stderr, "bench_pins: submit (placing, unplacing or timing 8,000 pins' states): %s\n",
                err == -ENOSPC ? "a worker's share of the keys does not fit its queue" : shard_strerror(err));
    shard_dispatcher_destroy(d);
    free(k);
    free(pins);
    return err ? 1 : 0;
}

static uint32_t most = SHARD_RING_MAX_PINS;
static bool lookups = true;

/* The options beside --quick (bench_args): --max=N stops the placements at the last count up to N
 * (the code before the pin trie takes many minutes to 65,536); --no-lookup skips the lookups. */
static bool accept_option(const char *arg)
{
    char *end;
    if (strncmp(arg, "--max=", 6) == 0) {
        unsigned long n = strtoul(arg + 6, &end, 10);
        if (*end || n < 2000 || n > SHARD_RING_MAX_PINS)
            return false;
        most = (uint32_t)n;
    } else if (strcmp(arg, "--no-lookup") == 0) {
        lookups = false;
    } else {
        return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    bool quick = bench_args(argc, argv, accept_option, " [--max=2000..65536] [--no-lookup]");
    static const uint32_t full[] = { 2000, 20000, SHARD_RING_MAX_PINS }, short_[] = { 512, 2000 };
    const uint32_t *counts = quick ? short_ : full;
    int ncounts = quick ? 2 : 3;
    while (ncounts > 1 && counts[ncounts - 1] > most)
        ncounts--;
    if (lookups && (run_lookup(8, quick) || run_lookup(64, quick) || run_submit(quick)))
        return 1;
    for (int op = OP_COUNT - 1; op >= 0; op--)
        if (run_op((enum op)op, counts, ncounts) != 0)
            return 1;
    return 0;
}
