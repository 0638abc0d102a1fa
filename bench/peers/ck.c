/* ck_ring: Concurrency Kit's ring per worker (libck-dev; built only with it, see bench/CMakeLists.txt):
 * ck_ring_enqueue_spsc when one producer feeds it, _mpsc when several do; the consumer dequeues one
 * entry at a time (ck has no batch dequeue). In the burst cases, as ck has no burst enqueue, a ck
 * user loops ck_ring_enqueue_* over the burst, as here, with the Dekker fence and wake-up check once
 * a burst (and before sleeping on a full ring). */
#include <ck_ring.h>
#include <stdlib.h>

#include "peers.h"

struct ckq {
    struct peer p;
    _Alignas(64) ck_ring_t ring;
    ck_ring_buffer_t buf[CAP];
    bool mp; /* several producers: _mpsc enqueue */
};
static struct ckq *ckqs;
_Static_assert(offsetof(struct ckq, p) == 0, "peers_at finds the peer at a queue's start");

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
    struct wstate *w = &peers_ws[q->p.id];
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

static int ck_start(const struct run *r, pthread_t *consumers)
{
    run = *r;
    ckqs = peers_queues_alloc((size_t)run.workers, sizeof *ckqs);
    return peers_start_each(ckqs, sizeof *ckqs, ck_setup, ck_consumer, consumers);
}

static void ck_close(void)
{
    peers_close_each(ckqs, sizeof *ckqs);
}

static void ck_free(void)
{
    free(ckqs);
}

const struct peer_ops peer_ck = {
    .name = "ck_ring",
    .start = ck_start,
    .producer = ck_producer,
    .burst_producer = ck_burst_producer,
    .close = ck_close,
    .free = ck_free,
};
