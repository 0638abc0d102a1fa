/* What bench_peers' systems share (bench/bench_peers.c says what it measures): the run going on, the
 * jobs and each worker's table of keys, the producers' job streams and bursts, where threads run, the
 * peers' spin-then-park events, and the interface each system's file provides (struct peer_ops).
 *
 * Idle and full, as shard itself does them, so that no peer is a strawman: an idle consumer spins SPIN
 * times (256, shard's SPIN_BEFORE_PARK) with a pause, then parks on a futex behind a Dekker pair: it
 * arms its event, fences, and looks at its queue once more; a producer fences after publishing a job
 * and wakes it if armed (one full fence a job: shard pays the same with its seq_cst CAS; wfcqueue's
 * xchg is already a full barrier and returns whether the queue was empty, so only the producer that
 * made it non-empty looks). A producer facing a full queue spins SPIN times, then sleeps on the
 * queue's room event, which the consumer signals once half the queue is free again (so one wake-up
 * refills half a queue, as shard does; it looks every BATCH jobs, and behind its fence before it
 * parks). The mutex queue (mutex.c) has its own. Pure spinning, what one might do on dedicated cores,
 * is no option here: the 2to2 cases run four threads on two CPUs.
 *
 * Everything a job, a producer or a consumer calls is static inline here, so that every system's file
 * inlines the same code as the others. */
#ifndef SHARD_BENCH_PEERS_H
#define SHARD_BENCH_PEERS_H

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <urcu/arch.h> /* caa_cpu_relax */

#define XXH_INLINE_ALL /* the hash inline, as shard has it */
#include <xxhash.h>

#include "../bench_common.h"

#define KEYS        100000
#define KEY_BITS    17 /* 2^17 > KEYS: a job is key | seq << KEY_BITS */
#define KEY_MASK    ((UINT64_C(1) << KEY_BITS) - 1)
#define CAP         4096 /* every queue's capacity (a ck_ring of CAP slots holds CAP - 1) */
#define SPIN        256
#define BATCH       64  /* jobs between a consumer's looks for producers waiting for room */
#define REFILL      (CAP / 2) /* free slots a waiting producer is woken for */
#define TABLE_BITS  18
#define WORK_ROUNDS 56
#define MAXT        2   /* producers and workers at most */

/* The keys, "user:0" to "user:99999": written by main before any run, read-only after. */
extern char   peers_keys[KEYS][16];
extern size_t peers_key_len[KEYS];

enum kind { EMPTY, REAL };

/* The run going on: set by main while no other thread runs. */
struct run {
    enum kind kind;
    int       producers, workers;
    long      per_producer;
    int       burst; /* jobs a producer hands over per call: 1, or BURST for the burst cases */
    bool      pin;
};
/* Each file has its own copy: main sets bench_peers.c's, a system's start copies it into its file's
 * before it starts a thread. Static, as it was when all of this was one file, so that the compiler
 * sees that no store through a pointer (a job's count, a producer's sum) can change it and keeps its
 * fields in registers across the producers' loops: one extern copy cost 1to1_burst's rte_ring ~10 %. */
static struct run run __attribute__((unused)); /* unused in a file that includes this only for types */

/* ---- the jobs ---- */

struct entry { /* one line per key */
    uint64_t hash;     /* 0: a free line */
    char     key[16];
    uint8_t  len;
    uint32_t idx;      /* the key's index, for the final check only */
    uint32_t next_seq; /* the sequence number the key's next job must carry */
    uint64_t count;
    uint64_t state[2];
};
_Static_assert(sizeof(struct entry) == 64, "an entry is one cache line");

/* A worker's state: touched by that worker only while a run goes on. */
struct wstate {
    _Alignas(64) uint64_t count, sum, errors;
    struct entry *table;
};
extern struct wstate peers_ws[MAXT];

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    return x ^ (x >> 32);
}

static inline void job_empty(struct wstate *w, uint64_t job)
{
    w->count++;
    w->sum += job;
}

static inline void job_real(struct wstate *w, uint64_t job)
{
    uint32_t k = (uint32_t)(job & KEY_MASK);
    uint32_t seq = (uint32_t)(job >> KEY_BITS);
    const char *key = peers_keys[k];
    size_t len = peers_key_len[k];
    uint64_t h = XXH3_64bits(key, len) | 1;
    const size_t mask = ((size_t)1 << TABLE_BITS) - 1;
    struct entry *e;
    /* The high half picks the line: the low bits chose the worker. */
    for (size_t i = (h >> 32) & mask;; i = (i + 1) & mask) {
        e = &w->table[i];
        if (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0)
            break;
        if (e->hash == 0) {
            e->hash = h;
            memcpy(e->key, key, sizeof e->key);
            e->len = (uint8_t)len;
            e->idx = k;
            break;
        }
    }
    w->errors += e->next_seq != seq;
    e->next_seq = seq + 1;
    e->count++;
    uint64_t x = e->state[0] ^ job;
    for (int r = 0; r < WORK_ROUNDS; r++)
        x = mix64(x + e->state[r & 1]);
    e->state[0] = x;
    e->state[1] += x >> 7;
    w->count++;
    w->sum += job;
}

static inline void job_run(struct wstate *w, uint64_t job)
{
    if (run.kind == EMPTY)
        job_empty(w, job);
    else
        job_real(w, job);
}

/* ---- the producers' job streams, the same for every system ---- */

struct pstate {
    _Alignas(64) uint64_t rng, sum, made;
    uint64_t  sent[MAXT];  /* wfcq: nodes taken from this producer's pool of each worker */
    uint32_t *next_seq;    /* [KEYS]: the next sequence number of each key this producer owns */
    int       id;
};
extern struct pstate peers_ps[MAXT];

static inline uint64_t next_job(struct pstate *p, uint32_t *key)
{
    uint64_t r = bench_mix(&p->rng);
    uint32_t per = KEYS / (uint32_t)run.producers;
    uint32_t k = (uint32_t)(((r >> 32) * per) >> 32) * (uint32_t)run.producers + (uint32_t)p->id;
    uint64_t seq = run.kind == REAL ? p->next_seq[k]++ : p->made++;
    uint64_t job = k | seq << KEY_BITS;
    p->sum += job;
    *key = k;
    return job;
}

static inline uint32_t route(uint32_t k)
{
    return (uint32_t)(XXH3_64bits(peers_keys[k], peers_key_len[k]) % (uint64_t)run.workers);
}

/* The burst cases: a producer draws BURST jobs, then hands them over at once. */
#define BURST 32

/* A peer producer's burst, routed: touched by its producer only. */
struct burst {
    uint64_t job[BURST];
    uint32_t dest[BURST];  /* the worker each job goes to */
    int      count[MAXT];  /* jobs per worker */
    int      n;            /* jobs in the burst: BURST, or fewer at the stream's end */
};

static inline void burst_draw(struct pstate *p, struct burst *b, long left)
{
    b->n = left < BURST ? (int)left : BURST;
    memset(b->count, 0, sizeof b->count);
    for (int j = 0; j < b->n; j++) {
        uint32_t k;
        b->job[j] = next_job(p, &k);
        b->dest[j] = route(k);
        b->count[b->dest[j]]++;
    }
}

/* ---- placement (bench_peers.c) ---- */

/* Pins the calling thread to the slot-th CPU this process may use (modulo their number), unless
 * --no-pin. Context: any thread; before the run's work, not during it. */
void peers_pin_self(int slot);

/* Starts a thread that pins itself to slot, then runs fn(arg); aborts if it cannot. Producer i is slot
 * i, worker i slot P + i. Context: main. Pair with pthread_join. */
pthread_t peers_spawn(void *(*fn)(void *), void *arg, int slot);

/* n zeroed queues of size bytes each, a cache line aligned; aborts without memory (a benchmark has
 * nothing better to do). */
static inline void *peers_queues_alloc(size_t n, size_t size)
{
    void *q = aligned_alloc(64, (n * size + 63) / 64 * 64);
    if (!q)
        abort();
    return memset(q, 0, n * size);
}

/* ---- the peers' events: spin-then-park, futex behind a Dekker pair ---- */

static inline long futex(_Atomic uint32_t *addr, int op, uint32_t val)
{
    return syscall(SYS_futex, (uint32_t *)addr, op, val, NULL, NULL, 0);
}

/* A waiter arms the event, looks at its condition once more, and sleeps on seq; a signaller that finds
 * it armed disarms it, bumps seq and wakes every sleeper. A waiter never disarms the event itself when
 * it may share it (a producer waiting for room), so it cannot erase another waiter's arming. */
struct event {
    _Alignas(64) _Atomic uint32_t seq;
    _Atomic uint32_t armed;
};

static inline uint32_t event_arm(struct event *e)
{
    uint32_t s = atomic_load_explicit(&e->seq, memory_order_relaxed);
    atomic_store_explicit(&e->armed, 1, memory_order_relaxed);
    /* The Dekker fence: armed is visible before the caller's last look at its condition; it pairs
     * with the fence the signaller issues between changing that condition and reading armed. */
    atomic_thread_fence(memory_order_seq_cst);
    return s;
}

/* Only for an event with one waiter (a consumer's). */
static inline void event_disarm(struct event *e)
{
    atomic_store_explicit(&e->armed, 0, memory_order_relaxed);
}

static inline void event_wait(struct event *e, uint32_t s)
{
    futex(&e->seq, FUTEX_WAIT_PRIVATE, s); /* returns at once if signalled since event_arm */
}

/* Context: after a full fence (or a full-barrier RMW) that follows the change the waiter waits for. */
static inline void event_signal(struct event *e)
{
    if (!atomic_load_explicit(&e->armed, memory_order_relaxed))
        return;
    if (!atomic_exchange_explicit(&e->armed, 0, memory_order_relaxed))
        return; /* another signaller pays for the wake-up */
    /* Relaxed: seq only has to change; a woken waiter reads its condition again itself. */
    atomic_fetch_add_explicit(&e->seq, 1, memory_order_relaxed);
    futex(&e->seq, FUTEX_WAKE_PRIVATE, INT_MAX);
}

/* A producer's wait for room: PUSH is an expression that is true once the job is in. Spins SPIN times,
 * then sleeps on room; PUSH is tried again after arming, so the consumer's signal cannot be missed. */
#define PUSH_OR_WAIT(room, PUSH)                                                                          \
    do {                                                                                                  \
        for (int spins_ = 0; !(PUSH);) {                                                                  \
            if (spins_++ < SPIN) {                                                                        \
                caa_cpu_relax();                                                                          \
                continue;                                                                                 \
            }                                                                                             \
            uint32_t s_ = event_arm(room);                                                                \
            if (PUSH)                                                                                     \
                break;                                                                                    \
            event_wait(room, s_);                                                                         \
            spins_ = 0;                                                                                   \
        }                                                                                                 \
    } while (0)

/* What every peer queue has besides its storage. closed: set by main once every producer is done. */
struct peer {
    struct event park, room;
    _Alignas(64) _Atomic bool closed;
    int id;
};

/* Consumer: there is nothing to take. Spins, then parks unless has_work() turns true meanwhile; on
 * the way it signals the room event behind the Dekker fence, which no producer's wait outlives. */
#define CONSUMER_IDLE(p, HAS_WORK)                                                                        \
    do {                                                                                                  \
        bool work_ = false;                                                                               \
        for (int i_ = 0; i_ < SPIN && !(work_ = (HAS_WORK)); i_++)                                        \
            caa_cpu_relax();                                                                              \
        if (work_)                                                                                        \
            break;                                                                                        \
        uint32_t s_ = event_arm(&(p)->park);                                                              \
        event_signal(&(p)->room);                                                                         \
        if ((HAS_WORK) || atomic_load_explicit(&(p)->closed, memory_order_acquire)) {                     \
            event_disarm(&(p)->park);                                                                     \
            break;                                                                                        \
        }                                                                                                 \
        event_wait(&(p)->park, s_);                                                                       \
        event_disarm(&(p)->park);                                                                         \
    } while (0)

static inline void peer_close(struct peer *p)
{
    atomic_store_explicit(&p->closed, true, memory_order_release);
    atomic_thread_fence(memory_order_seq_cst); /* closed before the armed flag is read */
    event_signal(&p->park);
}

/* Queue i of queues, an array of queues of size bytes each that begin with their struct peer. */
static inline struct peer *peers_at(void *queues, size_t size, int i)
{
    return (struct peer *)((char *)queues + (size_t)i * size);
}

/* A system's start with such queues (zeroed, run.workers of them): numbers each queue's peer, calls
 * setup(i), and starts consumer on queue i, worker i on slot run.producers + i. Return: run.workers,
 * the threads in consumers. */
static inline int peers_start_each(void *queues, size_t size, void (*setup)(int), void *(*consumer)(void *),
                                   pthread_t *consumers)
{
    for (int i = 0; i < run.workers; i++) {
        peers_at(queues, size, i)->id = i;
        setup(i);
        consumers[i] = peers_spawn(consumer, peers_at(queues, size, i), run.producers + i);
    }
    return run.workers;
}

/* A system's close with such queues: every consumer may finish. */
static inline void peers_close_each(void *queues, size_t size)
{
    for (int i = 0; i < run.workers; i++)
        peer_close(peers_at(queues, size, i));
}

/* Wakes the consumers in mask of queues (as above) if parked. Dekker: the jobs pushed to them before their park.armed is read. */
static inline void peers_signal_each(void *queues, size_t size, unsigned mask)
{
    if (!mask)
        return;
    atomic_thread_fence(memory_order_seq_cst);
    for (int i = 0; i < run.workers; i++)
        if (mask >> i & 1)
            event_signal(&peers_at(queues, size, i)->park);
}

/* ---- what each system's file provides ---- */

/* One system under test. The harness (bench_peers.c, main's thread) calls, per repetition, start, then
 * runs run.producers threads of producer (burst_producer when run.burst > 1), each given its struct
 * pstate, joins them, calls close, joins the consumers start returned, and calls free. Worker i runs
 * its jobs with job_run(&peers_ws[i], ...), or job_empty / job_real. */
struct peer_ops {
    const char *name; /* impl= in the output */
    /* Copies r into this file's run, makes the queues of run.workers workers and starts their
     * consumers, worker i on slot run.producers + i, filling consumers[i]. Return: the number of
     * threads in consumers (0 for a system that starts its own, or none). */
    int (*start)(const struct run *r, pthread_t *consumers);
    void *(*producer)(void *);       /* one job a hand-over */
    void *(*burst_producer)(void *); /* BURST jobs a hand-over; NULL if the system has no burst case */
    /* Every producer has returned: lets the consumers run what is queued and return. Returns once they
     * have (shard) or without waiting (the peers, whose consumers the harness joins). */
    void (*close)(void);
    /* After close and the joins: frees what start made. */
    void (*free)(void);
};

/* Defined each in its own file; ck.c and rte.c are built only with their library (bench/CMakeLists.txt
 * defines SHARD_BENCH_HAVE_CK, SHARD_BENCH_HAVE_DPDK then). */
extern const struct peer_ops peer_ck;     /* ck.c: Concurrency Kit's ck_ring */
extern const struct peer_ops peer_rte;    /* rte.c: DPDK's rte_ring */
extern const struct peer_ops peer_wfcq;   /* wfcq.c: liburcu's wfcqueue */
extern const struct peer_ops peer_mutex;  /* mutex.c: a mutex and two condition variables */
extern const struct peer_ops peer_shard;  /* shard.c: shard_submit, shard_submit_many */
extern const struct peer_ops peer_inline; /* inline.c: the job on the producer's thread */

#endif
