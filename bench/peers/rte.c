/* rte_ring: DPDK's rte_ring per worker (libdpdk-dev; built only with it, see bench/CMakeLists.txt), its
 * ring library only, no EAL: rte_ring_init on memory of our own. Single-producer when one producer
 * feeds it (RING_F_SP_ENQ), multi-producer otherwise, and single-consumer; the consumer takes up to
 * BATCH entries with one rte_ring_dequeue_burst. In the burst cases a producer groups the burst by
 * destination and hands each group over with one rte_ring_enqueue_burst, one fence and wake-up check
 * a burst. */
#include <rte_config.h> /* first, as DPDK's pkg-config file forces it with -include */
#include <rte_ring.h>
#include <stdlib.h>

#include "peers.h"

struct rteq {
    struct peer      p;
    struct rte_ring *ring; /* CAP slots, CAP - 1 usable, as ck's */
};
static struct rteq *rteqs;
_Static_assert(offsetof(struct rteq, p) == 0, "peers_at finds the peer at a queue's start");

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
    struct wstate *w = &peers_ws[q->p.id];
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

static int rte_start(const struct run *r, pthread_t *consumers)
{
    run = *r;
    rteqs = peers_queues_alloc((size_t)run.workers, sizeof *rteqs);
    return peers_start_each(rteqs, sizeof *rteqs, rte_setup, rte_consumer, consumers);
}

static void rte_close(void)
{
    peers_close_each(rteqs, sizeof *rteqs);
}

static void rte_free(void)
{
    for (int i = 0; i < run.workers; i++)
        free(rteqs[i].ring);
    free(rteqs);
}

const struct peer_ops peer_rte = {
    .name = "rte_ring",
    .start = rte_start,
    .producer = rte_producer,
    .burst_producer = rte_burst_producer,
    .close = rte_close,
    .free = rte_free,
};
