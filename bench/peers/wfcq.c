/* wfcq: liburcu's wfcqueue per worker (inline, _LGPL_SOURCE): a wait-free enqueue (one xchg); the
 * consumer splices the whole queue out at once. Nodes come from per-producer pools, not malloc:
 * producer p has a ring of CAP nodes for each worker and reuses a node once that worker has published
 * it consumed, which bounds the queue at CAP a producer as the rings are bounded and keeps malloc out
 * of the measurement. The 10 ms sleep wfcqueue takes while an enqueuer is preempted between its xchg
 * and its link (CDS_WFCQ_WAIT_SLEEP, which the header invites LGPL users to redefine) is a sched_yield
 * here: the 2to2 cases preempt. In the burst cases a producer links the burst's jobs for each
 * destination worker into a local queue (nodes from the same pools, linked with plain stores: see
 * wfq_link_local) and splices each into the worker's queue with one __cds_wfcq_splice_blocking, waking
 * the worker if that splice found its queue empty. */
#define _LGPL_SOURCE /* liburcu's wfcqueue inline, as a performance-minded user includes it */
#include <sched.h>
#include <stdlib.h>

#define CDS_WFCQ_WAIT_SLEEP(msec) ((void)(msec), (void)sched_yield())
#include <urcu/wfcqueue.h>

#include "peers.h"

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
_Static_assert(offsetof(struct wfq, p) == 0, "peers_at finds the peer at a queue's start");
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
    struct wstate *w = &peers_ws[q->p.id];
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

static int wfq_start(const struct run *r, pthread_t *consumers)
{
    run = *r;
    int P = run.producers, N = run.workers;
    wfqs = peers_queues_alloc((size_t)N, sizeof *wfqs);
    for (int p = 0; p < P; p++)
        for (int i = 0; i < N; i++)
            if (!(pools[p][i] = calloc(CAP, sizeof(struct wnode))))
                abort();
    return peers_start_each(wfqs, sizeof *wfqs, wfq_setup, wfq_consumer, consumers);
}

static void wfq_close(void)
{
    peers_close_each(wfqs, sizeof *wfqs);
}

static void wfq_free(void)
{
    free(wfqs);
    for (int p = 0; p < run.producers; p++)
        for (int i = 0; i < run.workers; i++)
            free(pools[p][i]);
}

const struct peer_ops peer_wfcq = {
    .name = "wfcq",
    .start = wfq_start,
    .producer = wfq_producer,
    .burst_producer = wfq_burst_producer,
    .close = wfq_close,
    .free = wfq_free,
};
