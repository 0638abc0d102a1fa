/* bench_peers: keyed dispatch through shard against what a performance-minded C user writes instead,
 * in one process and one run. Every system routes each job by its key to one of N workers and runs it
 * there; the peers keep one queue per worker and route by XXH3_64bits(key) % N, shard by its ring:
 *   ck_ring  Concurrency Kit's ring per worker: ck_ring_enqueue_spsc when one producer feeds it, _mpsc
 *            when several do; the consumer dequeues one entry at a time (ck has no batch dequeue)
 *   rte_ring DPDK's rte_ring per worker (libdpdk-dev; no EAL: rte_ring_init on memory of our own),
 *            single-producer when one producer feeds it (RING_F_SP_ENQ), multi-producer otherwise, and
 *            single-consumer; the consumer takes up to BATCH entries with one rte_ring_dequeue_burst
 *   wfcq     liburcu's wfcqueue per worker (inline, _LGPL_SOURCE): a wait-free enqueue (one xchg); the
 *            consumer splices the whole queue out at once. Nodes come from per-producer pools, not
 *            malloc: producer p has a ring of CAP nodes for each worker and reuses a node once that
 *            worker has published it consumed, which bounds the queue at CAP a producer as the rings
 *            are bounded and keeps malloc out of the measurement. The 10 ms sleep wfcqueue takes while
 *            an enqueuer is preempted between its xchg and its link (CDS_WFCQ_WAIT_SLEEP, which the
 *            header invites LGPL users to redefine) is a sched_yield here: the 2to2 cases preempt
 *   mutex    a mutex and two condition variables per worker; the consumer takes everything at once
 *   shard    shard_submit (shard_submit_many in the burst cases) to a dispatcher of N workers,
 *            queue_capacity CAP
 * Cases (P producers -> N workers; every producer submits the same number of jobs):
 *   1to1_empty, 1to1_real, 2to2_empty, 2to2_real, 1to1_burst, 2to2_burst
 *   empty  the job counts itself and adds its payload to a checksum
 *   real   about 150-200 ns on this machine: the worker finds its key in its own open-addressing table
 *          (2^18 lines of 64 bytes, up to 100k keys, a key inserted on its first job), checks that the
 *          job carries the key's next sequence number (so ordering is checked for every system), bumps
 *          it and the key's counter, and runs WORK_ROUNDS of a multiply-xorshift chain over the key's
 *          state, which stands for the application's own work
 *   burst  empty jobs, the same stream, each producer handing them over BURST (32) per call as each
 *          system's burst user would: shard fills 32 struct shard_job and calls shard_submit_many once;
 *          wfcq links the 32 per destination worker into a local queue (nodes from the same pools,
 *          linked with plain stores: see wfq_link_local) and splices each into the worker's queue with
 *          one __cds_wfcq_splice_blocking, waking the worker if that splice found its queue empty;
 *          mutex groups the 32 by destination, takes each destination's lock once and signals once;
 *          ck_ring has no burst enqueue, so a ck user loops ck_ring_enqueue_* over the 32, as here,
 *          with the Dekker fence and wake-up check once a burst (and before sleeping on a full ring);
 *          rte_ring groups the 32 by destination and hands each group over with one
 *          rte_ring_enqueue_burst, one fence and wake-up check a burst. The consumers are those of
 *          the other cases. A stream not a multiple of 32 ends in a shorter burst. The project's goal
 *          puts shard_submit_many at >= 0.9x DPDK's rte_ring burst.
 *   Plus impl=inline on 1to1_real: the producer's loop calling the job itself, no thread, no queue
 *   (the physical limit).
 * Producers draw keys uniformly from 100k (with two, producer p owns the keys k with k % 2 == p, so
 * each key has one sequence); a job is one word, the key's index and its sequence number, passed as
 * shard's arg and as the peers' queue entry. Each run is checked: every job counted exactly once (count
 * and checksum), and for real, no sequence error, every key on one worker only, with the final sequence
 * number its producer gave it. A mismatch prints what failed and exits 1.
 *
 * Idle and full, as shard itself does them, so that no peer is a strawman: an idle consumer spins SPIN
 * times (256, shard's SPIN_BEFORE_PARK) with a pause, then parks on a futex behind a Dekker pair: it
 * arms its event, fences, and looks at its queue once more; a producer fences after publishing a job
 * and wakes it if armed (one full fence a job: shard pays the same with its seq_cst CAS; wfcqueue's
 * xchg is already a full barrier and returns whether the queue was empty, so only the producer that
 * made it non-empty looks). A producer facing a full queue spins SPIN times, then sleeps on the
 * queue's room event, which the consumer signals once half the queue is free again (so one wake-up
 * refills half a queue, as shard does; it looks every BATCH jobs, and behind its fence before it
 * parks). The mutex queue spins on a lock-free peek at its tail before it takes the lock and waits on
 * its condition variable; its producer signals only the push that makes the queue non-empty, and the
 * consumer, which takes the whole queue, wakes waiting producers once a batch. Pure spinning, what one
 * might do on dedicated cores, is no option here: the 2to2 cases run four threads on two CPUs.
 *
 * Pinning: producer i runs on the i-th CPU this process may use and worker i on the (P + i)-th, modulo
 * their number (1to1: producer and worker on two CPUs; 2to2: a producer and a worker on each), the
 * same for every system (shard's workers pin themselves in on_worker_start). --no-pin leaves all
 * placement to the scheduler. --case=NAME and --impl=NAME run one case or one system only (for
 * profiling).
 *
 * Output: one line per (case, system), the median of 3 repetitions (1 with --quick), the repetitions
 * interleaved across the systems:
 *   bench=peers case=C impl=I jobs=N mjobs_per_s=X ns_per_job=T ratio_shard_vs_best=R
 * R, on shard's line ("-" on the others), is shard's rate over the best peer's in that case. Built
 * without Concurrency Kit (libck-dev) or DPDK (libdpdk-dev), the ck_ring or rte_ring lines are missing
 * and a note line says so (./build.sh bench-peers installs both). */
#define _LGPL_SOURCE /* liburcu's wfcqueue inline, as a performance-minded user includes it */
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <shard.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define XXH_INLINE_ALL /* the hash inline, as shard has it */
#include <xxhash.h>

#define CDS_WFCQ_WAIT_SLEEP(msec) ((void)(msec), (void)sched_yield())
#include <urcu/wfcqueue.h>
#ifdef SHARD_BENCH_HAVE_CK
#include <ck_ring.h>
#endif
#ifdef SHARD_BENCH_HAVE_DPDK
#include <rte_config.h> /* first, as DPDK's pkg-config file forces it with -include */
#include <rte_ring.h>
#endif

#include "bench_common.h"

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

static char   keys[KEYS][16];
static size_t key_len[KEYS];

enum kind { EMPTY, REAL };

/* The run going on: set by main while no other thread runs. */
static struct {
    enum kind kind;
    int       producers, workers;
    long      per_producer;
    int       burst; /* jobs a producer hands over per call: 1, or BURST for the burst cases */
    bool      pin;
} run;

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
static struct wstate ws[MAXT];

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
    const char *key = keys[k];
    size_t len = key_len[k];
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
static struct pstate ps[MAXT];

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
    return (uint32_t)(XXH3_64bits(keys[k], key_len[k]) % (uint64_t)run.workers);
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

/* ---- placement ---- */

static int cpus[CPU_SETSIZE], ncpus;

static void pin_self(int slot)
{
    if (!run.pin || ncpus == 0)
        return;
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpus[slot % ncpus], &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

struct thread_arg {
    void *(*fn)(void *);
    void *arg;
    int   slot;
};

static void *thread_main(void *a)
{
    struct thread_arg t = *(struct thread_arg *)a;
    free(a);
    pin_self(t.slot);
    return t.fn(t.arg);
}

/* slot: producer i is slot i, worker i slot P + i. */
static pthread_t spawn(void *(*fn)(void *), void *arg, int slot)
{
    struct thread_arg *t = malloc(sizeof *t);
    pthread_t th;
    if (!t)
        abort();
    *t = (struct thread_arg){ fn, arg, slot };
    if (pthread_create(&th, NULL, thread_main, t) != 0)
        abort();
    return th;
}

/* ---- the peers' events: spin-then-park, futex behind a Dekker pair ---- */

static long futex(_Atomic uint32_t *addr, int op, uint32_t val)
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

static uint32_t event_arm(struct event *e)
{
    uint32_t s = atomic_load_explicit(&e->seq, memory_order_relaxed);
    atomic_store_explicit(&e->armed, 1, memory_order_relaxed);
    /* The Dekker fence: armed is visible before the caller's last look at its condition; it pairs
     * with the fence the signaller issues between changing that condition and reading armed. */
    atomic_thread_fence(memory_order_seq_cst);
    return s;
}

/* Only for an event with one waiter (a consumer's). */
static void event_disarm(struct event *e)
{
    atomic_store_explicit(&e->armed, 0, memory_order_relaxed);
}

static void event_wait(struct event *e, uint32_t s)
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

static void peer_close(struct peer *p)
{
    atomic_store_explicit(&p->closed, true, memory_order_release);
    atomic_thread_fence(memory_order_seq_cst); /* closed before the armed flag is read */
    event_signal(&p->park);
}

#if defined(SHARD_BENCH_HAVE_CK) || defined(SHARD_BENCH_HAVE_DPDK)
/* Wakes the consumers in mask of queues (an array of queues of size bytes each, which begin with their
 * struct peer) if parked. Dekker: the jobs pushed to them before their park.armed is read. */
static void peers_signal_each(void *queues, size_t size, unsigned mask)
{
    if (!mask)
        return;
    atomic_thread_fence(memory_order_seq_cst);
    for (int i = 0; i < run.workers; i++)
        if (mask >> i & 1)
            event_signal(&((struct peer *)((char *)queues + (size_t)i * size))->park);
}
#endif

/* ---- ck_ring ---- */
#ifdef SHARD_BENCH_HAVE_CK

struct ckq {
    struct peer p;
    _Alignas(64) ck_ring_t ring;
    ck_ring_buffer_t buf[CAP];
    bool mp; /* several producers: _mpsc enqueue */
};
static struct ckq *ckqs;
_Static_assert(offsetof(struct ckq, p) == 0, "peers_signal_each finds the peer at a queue's start");

static inline bool ck_push(struct ckq *q, uint64_t job)
{
    void *v = (void *)(uintptr_t)job;
    return q->mp ? ck_ring_enqueue_mpsc(&q->ring, q->buf, v) : ck_ring_enqueue_spsc(&q->ring, q->buf, v);
}

static void *ck_producer(void *arg)
{
    struct pstate *p = arg;
    for (long i = 0; i < run.per_producer; i++) {
        uint32_t k;
        uint64_t job = next_job(p, &k);
        struct ckq *q = &ckqs[route(k)];
        PUSH_OR_WAIT(&q->p.room, ck_push(q, job));
        atomic_thread_fence(memory_order_seq_cst); /* Dekker: the job before park.armed is read */
        event_signal(&q->p.park);
    }
    return NULL;
}

/* ck has no burst enqueue: one ck_ring_enqueue_* a job, one fence and wake-up check a burst. */
static void *ck_burst_producer(void *arg)
{
    struct pstate *p = arg;
    struct burst b;
    for (long i = 0; i < run.per_producer; i += b.n) {
        burst_draw(p, &b, run.per_producer - i);
        unsigned pushed = 0; /* rings with jobs of this burst whose consumer was not yet told */
        for (int j = 0; j < b.n; j++) {
            struct ckq *q = &ckqs[b.dest[j]];
            if (!ck_push(q, b.job[j])) {
                /* Full. Before we may sleep, the consumers of what we pushed unannounced must know
                 * of it: a parked consumer of this very ring would otherwise never make room. */
                peers_signal_each(ckqs, sizeof *ckqs, pushed);
                pushed = 0;
                PUSH_OR_WAIT(&q->p.room, ck_push(q, b.job[j]));
            }
            pushed |= 1u << b.dest[j];
        }
        peers_signal_each(ckqs, sizeof *ckqs, pushed);
    }
    return NULL;
}

static void *ck_consumer(void *arg)
{
    struct ckq *q = arg;
    struct wstate *w = &ws[q->p.id];
    for (;;) {
        void *v;
        long n = 0;
        /* Single consumer: _mpsc and _spsc dequeue are the same code. */
        while (n < BATCH && ck_ring_dequeue_spsc(&q->ring, q->buf, &v)) {
            job_run(w, (uintptr_t)v);
            n++;
        }
        if (n) {
            /* Unfenced: a waiter missed here is seen after the next batch, or at idle. */
            if (atomic_load_explicit(&q->p.room.armed, memory_order_relaxed) &&
                ck_ring_size(&q->ring) <= CAP - REFILL)
                event_signal(&q->p.room);
            continue;
        }
        if (atomic_load_explicit(&q->p.closed, memory_order_acquire) && ck_ring_size(&q->ring) == 0)
            return NULL;
        CONSUMER_IDLE(&q->p, ck_ring_size(&q->ring) != 0);
    }
}

static void ck_setup(int i)
{
    ck_ring_init(&ckqs[i].ring, CAP);
    ckqs[i].mp = run.producers > 1;
}
#endif

/* ---- DPDK rte_ring ---- */
#ifdef SHARD_BENCH_HAVE_DPDK

struct rteq {
    struct peer      p;
    struct rte_ring *ring; /* CAP slots, CAP - 1 usable, as ck's */
};
static struct rteq *rteqs;
_Static_assert(offsetof(struct rteq, p) == 0, "peers_signal_each finds the peer at a queue's start");

static inline bool rte_push(struct rteq *q, uint64_t job)
{
    return rte_ring_enqueue(q->ring, (void *)(uintptr_t)job) == 0;
}

static void *rte_producer(void *arg)
{
    struct pstate *p = arg;
    for (long i = 0; i < run.per_producer; i++) {
        uint32_t k;
        uint64_t job = next_job(p, &k);
        struct rteq *q = &rteqs[route(k)];
        PUSH_OR_WAIT(&q->p.room, rte_push(q, job));
        atomic_thread_fence(memory_order_seq_cst); /* Dekker: the job before park.armed is read */
        event_signal(&q->p.park);
    }
    return NULL;
}

/* Per destination worker: the burst's jobs for it in one rte_ring_enqueue_burst (more only on a full
 * ring), then one fence and wake-up check for the whole burst. */
static void *rte_burst_producer(void *arg)
{
    struct pstate *p = arg;
    struct burst b;
    void *group[BURST];
    for (long i = 0; i < run.per_producer; i += b.n) {
        burst_draw(p, &b, run.per_producer - i);
        unsigned pushed = 0; /* rings with jobs of this burst whose consumer was not yet told */
        for (uint32_t wi = 0; wi < (uint32_t)run.workers; wi++) {
            if (!b.count[wi])
                continue;
            struct rteq *q = &rteqs[wi];
            unsigned n = 0, in;
            for (int j = 0; j < b.n; j++)
                if (b.dest[j] == wi)
                    group[n++] = (void *)(uintptr_t)b.job[j];
            in = rte_ring_enqueue_burst(q->ring, group, n, NULL);
            if (in < n) {
                /* Full. As ck's: the consumers of what we pushed unannounced must know before we sleep. */
                peers_signal_each(rteqs, sizeof *rteqs, pushed | 1u << wi);
                pushed = 0;
                PUSH_OR_WAIT(&q->p.room, (in += rte_ring_enqueue_burst(q->ring, group + in, n - in, NULL)) == n);
            }
            pushed |= 1u << wi;
        }
        peers_signal_each(rteqs, sizeof *rteqs, pushed);
    }
    return NULL;
}

static void *rte_consumer(void *arg)
{
    struct rteq *q = arg;
    struct wstate *w = &ws[q->p.id];
    void *batch[BATCH];
    for (;;) {
        unsigned n = rte_ring_dequeue_burst(q->ring, batch, BATCH, NULL);
        for (unsigned i = 0; i < n; i++)
            job_run(w, (uintptr_t)batch[i]);
        if (n) {
            /* Unfenced, as ck's. */
            if (atomic_load_explicit(&q->p.room.armed, memory_order_relaxed) &&
                rte_ring_count(q->ring) <= CAP - REFILL)
                event_signal(&q->p.room);
            continue;
        }
        if (atomic_load_explicit(&q->p.closed, memory_order_acquire) && rte_ring_empty(q->ring))
            return NULL;
        CONSUMER_IDLE(&q->p, !rte_ring_empty(q->ring));
    }
}

/* rte_ring_create would want the EAL's memory zones; a ring on memory of our own needs no EAL. */
static void rte_setup(int i)
{
    ssize_t size = rte_ring_get_memsize(CAP);
    unsigned flags = RING_F_SC_DEQ | (run.producers == 1 ? RING_F_SP_ENQ : 0);
    if (size < 0 || !(rteqs[i].ring = aligned_alloc(RTE_CACHE_LINE_SIZE, (size_t)size)) ||
        rte_ring_init(rteqs[i].ring, "bench_peers", CAP, flags) != 0)
        abort();
}
#endif

/* ---- wfcqueue ---- */

struct wnode {
    struct cds_wfcq_node node;
    uint64_t job;
    uint32_t producer;
};

struct wfq {
    struct peer p;
    _Alignas(64) struct __cds_wfcq_head head;
    _Alignas(64) struct cds_wfcq_tail tail;
    _Alignas(64) _Atomic uint64_t freed[MAXT]; /* by the consumer: nodes of producer i it is done with */
};
static struct wfq *wfqs;
static struct wnode *pools[MAXT][MAXT]; /* [producer][worker]: CAP nodes each */

static void *wfq_producer(void *arg)
{
    struct pstate *p = arg;
    for (long i = 0; i < run.per_producer; i++) {
        uint32_t k;
        uint64_t job = next_job(p, &k);
        uint32_t wi = route(k);
        struct wfq *q = &wfqs[wi];
        /* acquire: pairs with the consumer's release; its reads of the node come before our writes. */
        PUSH_OR_WAIT(&q->p.room, p->sent[wi] - atomic_load_explicit(&q->freed[p->id], memory_order_acquire) < CAP);
        struct wnode *n = &pools[p->id][wi][p->sent[wi]++ % CAP];
        cds_wfcq_node_init(&n->node);
        n->job = job;
        n->producer = (uint32_t)p->id;
        /* The xchg inside is a full barrier (documented), so armed is read after the node is in; only
         * the producer that made the queue non-empty need look. */
        if (!cds_wfcq_enqueue(&q->head, &q->tail, &n->node))
            event_signal(&q->p.park);
    }
    return NULL;
}

/* Appends node to a queue no other thread sees, with the plain stores for which cds_wfcq_enqueue uses
 * an xchg: that full barrier would wait, a job, for the node's line to come back from the consumer
 * (1to1_burst ran about 1.5x slower that way). The layout is wfcqueue's public one: an empty queue
 * is head.node.next NULL and tail.p &head.node; the last node's next is NULL (cds_wfcq_node_init). */
static inline void wfq_link_local(struct cds_wfcq_tail *lt, struct cds_wfcq_node *node)
{
    lt->p->next = node;
    lt->p = node;
}

/* Per destination worker: the burst's jobs for it linked into a local queue, then one splice. */
static void *wfq_burst_producer(void *arg)
{
    struct pstate *p = arg;
    struct burst b;
    for (long i = 0; i < run.per_producer; i += b.n) {
        burst_draw(p, &b, run.per_producer - i);
        for (uint32_t wi = 0; wi < (uint32_t)run.workers; wi++) {
            if (!b.count[wi])
                continue;
            struct wfq *q = &wfqs[wi];
            uint64_t need = (uint64_t)b.count[wi];
            /* Room for the whole group before taking any node of it: nothing of this burst is held
             * back unspliced while we wait. acquire: as in wfq_producer. */
            PUSH_OR_WAIT(&q->p.room,
                         p->sent[wi] + need - atomic_load_explicit(&q->freed[p->id], memory_order_acquire) <= CAP);
            struct __cds_wfcq_head lh;
            struct cds_wfcq_tail lt;
            __cds_wfcq_init(&lh, &lt);
            for (int j = 0; j < b.n; j++) {
                if (b.dest[j] != wi)
                    continue;
                struct wnode *n = &pools[p->id][wi][p->sent[wi]++ % CAP];
                cds_wfcq_node_init(&n->node);
                n->job = b.job[j];
                n->producer = (uint32_t)p->id;
                wfq_link_local(&lt, &n->node);
            }
            /* We are the local queue's only user, the mutual exclusion splice asks of its source. The
             * append's xchg is a full barrier, so armed is read after the nodes are in; only the
             * splice that made the queue non-empty need look. */
            if (__cds_wfcq_splice_blocking(&q->head, &q->tail, &lh, &lt) == CDS_WFCQ_RET_DEST_EMPTY)
                event_signal(&q->p.park);
        }
    }
    return NULL;
}

static void *wfq_consumer(void *arg)
{
    struct wfq *q = arg;
    struct wstate *w = &ws[q->p.id];
    struct __cds_wfcq_head lh;
    struct cds_wfcq_tail lt;
    uint64_t freed[MAXT] = { 0 };
    for (;;) {
        __cds_wfcq_init(&lh, &lt);
        if (__cds_wfcq_splice_blocking(&lh, &lt, &q->head, &q->tail) != CDS_WFCQ_RET_SRC_EMPTY) {
            struct cds_wfcq_node *node, *next;
            long n = 0;
            /* _safe: next is read before the body, so the node may be handed back in it. */
            __cds_wfcq_for_each_blocking_safe(&lh, &lt, node, next) {
                struct wnode *wn = caa_container_of(node, struct wnode, node);
                uint32_t from = wn->producer;
                job_run(w, wn->job);
                freed[from]++;
                if (++n % BATCH == 0 || !next) {
                    for (int i = 0; i < run.producers; i++)
                        /* release: our reads of the nodes come before their producer reuses them. */
                        atomic_store_explicit(&q->freed[i], freed[i], memory_order_release);
                    /* A producer waits only with CAP nodes out, all of them in this batch or the
                     * queue: signal every REFILL of them, and at the batch's end. Unfenced, as ck's. */
                    if (n % REFILL == 0 || !next)
                        event_signal(&q->p.room);
                }
            }
            continue;
        }
        if (atomic_load_explicit(&q->p.closed, memory_order_acquire) && cds_wfcq_empty(&q->head, &q->tail))
            return NULL;
        CONSUMER_IDLE(&q->p, !cds_wfcq_empty(&q->head, &q->tail));
    }
}

static void wfq_setup(int i)
{
    __cds_wfcq_init(&wfqs[i].head, &wfqs[i].tail);
    for (int p = 0; p < MAXT; p++)
        atomic_init(&wfqs[i].freed[p], 0);
}

/* ---- mutex + condition variables ---- */

struct mq {
    _Alignas(64) pthread_mutex_t lock;
    pthread_cond_t nonempty, nonfull;
    long           head;                  /* under lock */
    _Atomic long   tail;                  /* stored under lock; peeked without by the spinning consumer */
    int            cons_waiting, prod_waiting;
    bool           closed;
    int            id;
    uint64_t       buf[CAP];
};
static struct mq *mqs;

static void *mq_producer(void *arg)
{
    struct pstate *p = arg;
    for (long i = 0; i < run.per_producer; i++) {
        uint32_t k;
        uint64_t job = next_job(p, &k);
        struct mq *q = &mqs[route(k)];
        pthread_mutex_lock(&q->lock);
        while (atomic_load_explicit(&q->tail, memory_order_relaxed) - q->head >= CAP) {
            q->prod_waiting++;
            pthread_cond_wait(&q->nonfull, &q->lock);
            q->prod_waiting--;
        }
        long tail = atomic_load_explicit(&q->tail, memory_order_relaxed); /* the other producer's push may have moved it */
        q->buf[tail % CAP] = job;
        atomic_store_explicit(&q->tail, tail + 1, memory_order_relaxed);
        if (q->cons_waiting && tail == q->head) /* it waits only on an empty queue: once is enough */
            pthread_cond_signal(&q->nonempty);
        pthread_mutex_unlock(&q->lock);
    }
    return NULL;
}

/* One lock, and at most one signal, per destination worker a burst. */
static void *mq_burst_producer(void *arg)
{
    struct pstate *p = arg;
    struct burst b;
    for (long i = 0; i < run.per_producer; i += b.n) {
        burst_draw(p, &b, run.per_producer - i);
        for (uint32_t wi = 0; wi < (uint32_t)run.workers; wi++) {
            if (!b.count[wi])
                continue;
            struct mq *q = &mqs[wi];
            long need = b.count[wi];
            pthread_mutex_lock(&q->lock);
            /* The consumer takes the whole queue at once: waiting for room for the group is never
             * waiting for long. */
            while (atomic_load_explicit(&q->tail, memory_order_relaxed) - q->head > CAP - need) {
                q->prod_waiting++;
                pthread_cond_wait(&q->nonfull, &q->lock);
                q->prod_waiting--;
            }
            long tail = atomic_load_explicit(&q->tail, memory_order_relaxed), t = tail;
            for (int j = 0; j < b.n; j++)
                if (b.dest[j] == wi)
                    q->buf[t++ % CAP] = b.job[j];
            atomic_store_explicit(&q->tail, t, memory_order_relaxed);
            if (q->cons_waiting && tail == q->head)
                pthread_cond_signal(&q->nonempty);
            pthread_mutex_unlock(&q->lock);
        }
    }
    return NULL;
}

static void *mq_consumer(void *arg)
{
    struct mq *q = arg;
    struct wstate *w = &ws[q->id];
    static _Thread_local uint64_t batch[CAP];
    long head = 0; /* our copy of q->head: only we change it */
    for (;;) {
        for (int i = 0; i < SPIN && atomic_load_explicit(&q->tail, memory_order_relaxed) == head; i++)
            caa_cpu_relax();
        pthread_mutex_lock(&q->lock);
        while (atomic_load_explicit(&q->tail, memory_order_relaxed) == head && !q->closed) {
            q->cons_waiting = 1;
            pthread_cond_wait(&q->nonempty, &q->lock);
            q->cons_waiting = 0;
        }
        long n = atomic_load_explicit(&q->tail, memory_order_relaxed) - head;
        if (n == 0) { /* closed and empty */
            pthread_mutex_unlock(&q->lock);
            return NULL;
        }
        for (long i = 0; i < n; i++)
            batch[i] = q->buf[(head + i) % CAP];
        head += n;
        q->head = head;
        if (q->prod_waiting)
            pthread_cond_broadcast(&q->nonfull);
        pthread_mutex_unlock(&q->lock);
        for (long i = 0; i < n; i++)
            job_run(w, batch[i]);
    }
}

static void mq_setup(int i)
{
    pthread_mutex_init(&mqs[i].lock, NULL);
    pthread_cond_init(&mqs[i].nonempty, NULL);
    pthread_cond_init(&mqs[i].nonfull, NULL);
    mqs[i].id = i;
}

static void mq_close(struct mq *q)
{
    pthread_mutex_lock(&q->lock);
    q->closed = true;
    pthread_cond_signal(&q->nonempty);
    pthread_mutex_unlock(&q->lock);
}

/* ---- shard ---- */

static shard_dispatcher *disp;

static void shard_on_start(shard_worker *w, void *user)
{
    (void)user;
    int i = atoi(shard_worker_name(w) + 1); /* "w0", "w1", ... */
    pin_self(run.producers + i);
    shard_worker_set_user(w, &ws[i]);
}

static void shard_empty(shard_worker *w, void *arg)
{
    job_empty(shard_worker_user(w), (uintptr_t)arg);
}

static void shard_real(shard_worker *w, void *arg)
{
    job_real(shard_worker_user(w), (uintptr_t)arg);
}

static void *shard_producer(void *arg)
{
    struct pstate *p = arg;
    shard_job_fn fn = run.kind == EMPTY ? shard_empty : shard_real;
    for (long i = 0; i < run.per_producer; i++) {
        uint32_t k;
        uint64_t job = next_job(p, &k);
        int err = shard_submit(disp, keys[k], key_len[k], fn, (void *)(uintptr_t)job);
        if (err) {
            fprintf(stderr, "bench_peers: shard_submit: %s\n", shard_strerror(err));
            exit(1);
        }
    }
    return NULL;
}

static void *shard_burst_producer(void *arg)
{
    struct pstate *p = arg;
    shard_job_fn fn = run.kind == EMPTY ? shard_empty : shard_real;
    struct shard_job jobs[BURST];
    for (long i = 0; i < run.per_producer;) {
        int n = run.per_producer - i < BURST ? (int)(run.per_producer - i) : BURST;
        for (int j = 0; j < n; j++) {
            uint32_t k;
            uint64_t job = next_job(p, &k);
            jobs[j] = (struct shard_job){ keys[k], key_len[k], fn, (void *)(uintptr_t)job };
        }
        int got = shard_submit_many(disp, jobs, (size_t)n);
        if (got != n) {
            if (got < 0)
                fprintf(stderr, "bench_peers: shard_submit_many: %s\n", shard_strerror(got));
            else
                fprintf(stderr, "bench_peers: shard_submit_many accepted %d of %d jobs\n", got, n);
            exit(1);
        }
        i += n;
    }
    return NULL;
}

/* ---- inline: the job on the producer's thread, no dispatch ---- */

static void *inline_producer(void *arg)
{
    struct pstate *p = arg;
    for (long i = 0; i < run.per_producer; i++) {
        uint32_t k;
        uint64_t job = next_job(p, &k);
        job_run(&ws[0], job);
    }
    return NULL;
}

/* ---- one run ---- */

enum impl { CK, RTE, WFCQ, MUTEX, SHARD, INLINE, NIMPL };
static const char *const impl_name[NIMPL] = { "ck_ring", "rte_ring", "wfcq", "mutex", "shard", "inline" };

static void fail(const char *impl, const char *what, long a, long b)
{
    fprintf(stderr, "bench_peers: %s, P=%d N=%d %s: %s (%ld, expected %ld)\n", impl, run.producers, run.workers,
            run.kind == REAL ? "real" : run.burst > 1 ? "burst" : "empty", what, a, b);
    exit(1);
}

static void reset(void)
{
    for (int i = 0; i < MAXT; i++) {
        ws[i].count = ws[i].sum = ws[i].errors = 0;
        if (run.kind == REAL)
            memset(ws[i].table, 0, sizeof(struct entry) << TABLE_BITS);
        ps[i].rng = 0x5eed0000u + (uint64_t)i; /* every system gets the same job streams */
        ps[i].sum = ps[i].made = 0;
        memset(ps[i].sent, 0, sizeof ps[i].sent);
        memset(ps[i].next_seq, 0, KEYS * sizeof *ps[i].next_seq);
        ps[i].id = i;
    }
}

static void verify(enum impl impl)
{
    const char *name = impl_name[impl];
    int nw = impl == INLINE ? 1 : run.workers;
    uint64_t count = 0, sum = 0, want_sum = 0, errors = 0;
    for (int i = 0; i < nw; i++) {
        count += ws[i].count;
        sum += ws[i].sum;
        errors += ws[i].errors;
    }
    for (int i = 0; i < run.producers; i++)
        want_sum += ps[i].sum;
    long want = run.per_producer * run.producers;
    if ((long)count != want)
        fail(name, "jobs run", (long)count, want);
    if (sum != want_sum)
        fail(name, "checksum of the jobs run differs from the jobs submitted", 0, 0);
    if (run.kind == EMPTY)
        return;
    if (errors)
        fail(name, "jobs out of order", (long)errors, 0);
    static int8_t owner[KEYS];
    memset(owner, -1, sizeof owner);
    long found = 0, used = 0;
    for (int i = 0; i < nw; i++)
        for (size_t j = 0; j < (size_t)1 << TABLE_BITS; j++) {
            const struct entry *e = &ws[i].table[j];
            if (!e->hash)
                continue;
            if (owner[e->idx] != -1)
                fail(name, "a key ran on two workers", e->idx, -1);
            owner[e->idx] = (int8_t)i;
            uint32_t last = ps[e->idx % (uint32_t)run.producers].next_seq[e->idx];
            if (e->next_seq != last || e->count != last)
                fail(name, "a key's final sequence number", e->next_seq, last);
            found++;
        }
    for (uint32_t k = 0; k < KEYS; k++)
        used += ps[k % (uint32_t)run.producers].next_seq[k] != 0;
    if (found != used)
        fail(name, "keys seen by the workers", found, used);
}

static double run_once(enum impl impl)
{
    int P = run.producers, N = run.workers;
    pthread_t prod[MAXT], cons[MAXT];
    void *(*producer)(void *) = NULL;
    reset();
    switch (impl) {
#ifdef SHARD_BENCH_HAVE_CK
    case CK:
        ckqs = aligned_alloc(64, sizeof *ckqs * (size_t)N);
        memset(ckqs, 0, sizeof *ckqs * (size_t)N);
        for (int i = 0; i < N; i++) {
            ckqs[i].p.id = i;
            ck_setup(i);
            cons[i] = spawn(ck_consumer, &ckqs[i], P + i);
        }
        producer = run.burst > 1 ? ck_burst_producer : ck_producer;
        break;
#else
    case CK:
        abort();
#endif
#ifdef SHARD_BENCH_HAVE_DPDK
    case RTE:
        rteqs = aligned_alloc(64, sizeof *rteqs * (size_t)N);
        memset(rteqs, 0, sizeof *rteqs * (size_t)N);
        for (int i = 0; i < N; i++) {
            rteqs[i].p.id = i;
            rte_setup(i);
            cons[i] = spawn(rte_consumer, &rteqs[i], P + i);
        }
        producer = run.burst > 1 ? rte_burst_producer : rte_producer;
        break;
#else
    case RTE:
        abort();
#endif
    case WFCQ:
        wfqs = aligned_alloc(64, sizeof *wfqs * (size_t)N);
        memset(wfqs, 0, sizeof *wfqs * (size_t)N);
        for (int p = 0; p < P; p++)
            for (int i = 0; i < N; i++)
                if (!(pools[p][i] = calloc(CAP, sizeof(struct wnode))))
                    abort();
        for (int i = 0; i < N; i++) {
            wfqs[i].p.id = i;
            wfq_setup(i);
            cons[i] = spawn(wfq_consumer, &wfqs[i], P + i);
        }
        producer = run.burst > 1 ? wfq_burst_producer : wfq_producer;
        break;
    case MUTEX:
        mqs = aligned_alloc(64, sizeof *mqs * (size_t)N);
        memset(mqs, 0, sizeof *mqs * (size_t)N);
        for (int i = 0; i < N; i++) {
            mq_setup(i);
            cons[i] = spawn(mq_consumer, &mqs[i], P + i);
        }
        producer = run.burst > 1 ? mq_burst_producer : mq_producer;
        break;
    case SHARD: {
        struct shard_config cfg = { .workers = (uint32_t)N, .queue_capacity = CAP, .on_worker_start = shard_on_start };
        int err = shard_dispatcher_create(&disp, &cfg);
        if (err) {
            fprintf(stderr, "bench_peers: shard_dispatcher_create: %s\n", shard_strerror(err));
            exit(1);
        }
        producer = run.burst > 1 ? shard_burst_producer : shard_producer;
        break;
    }
    case INLINE:
        producer = inline_producer;
        break;
    case NIMPL:
        abort();
    }

    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < P; i++)
        prod[i] = spawn(producer, &ps[i], i);
    for (int i = 0; i < P; i++)
        pthread_join(prod[i], NULL);
    switch (impl) {
    case CK:
#ifdef SHARD_BENCH_HAVE_CK
        for (int i = 0; i < N; i++)
            peer_close(&ckqs[i].p);
#endif
        break;
    case RTE:
#ifdef SHARD_BENCH_HAVE_DPDK
        for (int i = 0; i < N; i++)
            peer_close(&rteqs[i].p);
#endif
        break;
    case WFCQ:
        for (int i = 0; i < N; i++)
            peer_close(&wfqs[i].p);
        break;
    case MUTEX:
        for (int i = 0; i < N; i++)
            mq_close(&mqs[i]);
        break;
    case SHARD:
        shard_drain(disp);
        break;
    default:
        break;
    }
    if (impl == CK || impl == RTE || impl == WFCQ || impl == MUTEX)
        for (int i = 0; i < N; i++)
            pthread_join(cons[i], NULL);
    double t = (double)(bench_now_ns() - t0) / 1e9;

    switch (impl) {
    case CK:
#ifdef SHARD_BENCH_HAVE_CK
        free(ckqs);
#endif
        break;
    case RTE:
#ifdef SHARD_BENCH_HAVE_DPDK
        for (int i = 0; i < N; i++)
            free(rteqs[i].ring);
        free(rteqs);
#endif
        break;
    case WFCQ:
        free(wfqs);
        for (int p = 0; p < P; p++)
            for (int i = 0; i < N; i++)
                free(pools[p][i]);
        break;
    case MUTEX:
        for (int i = 0; i < N; i++) {
            pthread_mutex_destroy(&mqs[i].lock);
            pthread_cond_destroy(&mqs[i].nonempty);
            pthread_cond_destroy(&mqs[i].nonfull);
        }
        free(mqs);
        break;
    case SHARD:
        shard_dispatcher_destroy(disp);
        break;
    default:
        break;
    }
    verify(impl);
    return t;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    bool quick = bench_quick(argc, argv);
    run.pin = true;
    const char *only_impl = NULL, *only_case = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-pin") == 0)
            run.pin = false;
        else if (strncmp(argv[i], "--impl=", 7) == 0)
            only_impl = argv[i] + 7;
        else if (strncmp(argv[i], "--case=", 7) == 0)
            only_case = argv[i] + 7;
    }
    int reps = quick ? 1 : 3;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &allowed))
                cpus[ncpus++] = c;
    for (int k = 0; k < KEYS; k++)
        key_len[k] = (size_t)snprintf(keys[k], sizeof keys[k], "user:%d", k);
    for (int i = 0; i < MAXT; i++) {
        ws[i].table = aligned_alloc(64, sizeof(struct entry) << TABLE_BITS);
        ps[i].next_seq = calloc(KEYS, sizeof *ps[i].next_seq);
        if (!ws[i].table || !ps[i].next_seq)
            abort();
    }
#ifndef SHARD_BENCH_HAVE_CK
    puts("bench=peers note=no_ck_ring reason=built_without_libck-dev");
#endif
#ifndef SHARD_BENCH_HAVE_DPDK
    puts("bench=peers note=no_rte_ring reason=built_without_libdpdk-dev");
#endif
    static const struct {
        const char *name;
        int         producers, workers;
        enum kind   kind;
        long        jobs_full, jobs_quick; /* per producer */
        int         burst;
    } cases[] = {
        { "1to1_empty", 1, 1, EMPTY, 4000000, 200000, 1 },
        { "1to1_real", 1, 1, REAL, 2000000, 100000, 1 },
        { "2to2_empty", 2, 2, EMPTY, 2000000, 100000, 1 },
        { "2to2_real", 2, 2, REAL, 1000000, 50000, 1 },
        { "1to1_burst", 1, 1, EMPTY, 4000000, 200000, BURST },
        { "2to2_burst", 2, 2, EMPTY, 2000000, 100000, BURST },
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (only_case && strcmp(only_case, cases[c].name) != 0)
            continue;
        run.kind = cases[c].kind;
        run.producers = cases[c].producers;
        run.workers = cases[c].workers;
        run.per_producer = quick ? cases[c].jobs_quick : cases[c].jobs_full;
        run.burst = cases[c].burst;
        bool with[NIMPL] = { false };
        for (int i = 0; i < NIMPL; i++)
            with[i] = true;
#ifndef SHARD_BENCH_HAVE_CK
        with[CK] = false;
#endif
#ifndef SHARD_BENCH_HAVE_DPDK
        with[RTE] = false;
#endif
        with[INLINE] = run.kind == REAL && run.producers == 1;
        for (int i = 0; i < NIMPL; i++)
            with[i] &= !only_impl || strcmp(only_impl, impl_name[i]) == 0;
        double t[NIMPL][3];
        for (int r = 0; r < reps; r++)
            for (int i = 0; i < NIMPL; i++)
                if (with[i])
                    t[i][r] = run_once((enum impl)i);
        long jobs = run.per_producer * run.producers;
        double rate[NIMPL] = { 0 }, best_peer = 0;
        for (int i = 0; i < NIMPL; i++) {
            if (!with[i])
                continue;
            qsort(t[i], (size_t)reps, sizeof t[i][0], cmp_double);
            rate[i] = (double)jobs / t[i][reps / 2];
            if (i != SHARD && i != INLINE && rate[i] > best_peer)
                best_peer = rate[i];
        }
        for (int i = 0; i < NIMPL; i++) {
            if (!with[i])
                continue;
            printf("bench=peers case=%s impl=%s jobs=%ld mjobs_per_s=%.2f ns_per_job=%.1f ratio_shard_vs_best=",
                   cases[c].name, impl_name[i], jobs, rate[i] / 1e6, 1e9 / rate[i]);
            if (i == SHARD && best_peer > 0)
                printf("%.2f\n", rate[i] / best_peer);
            else
                puts("-");
            fflush(stdout);
        }
    }
    for (int i = 0; i < MAXT; i++) {
        free(ws[i].table);
        free(ps[i].next_seq);
    }
    return 0;
}
