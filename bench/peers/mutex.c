/* mutex: a mutex and two condition variables per worker; the consumer takes everything at once. It
 * spins on a lock-free peek at its tail before it takes the lock and waits on its condition variable;
 * its producer signals only the push that makes the queue non-empty, and the consumer, which takes
 * the whole queue, wakes waiting producers once a batch. In the burst cases a producer groups the
 * burst by destination, takes each destination's lock once and signals once. */
#include <stdlib.h>

#include "peers.h"

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
    struct wstate *w = &peers_ws[q->id];
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

static int mq_start(const struct run *r, pthread_t *consumers)
{
    run = *r;
    int N = run.workers;
    mqs = peers_queues_alloc((size_t)N, sizeof *mqs);
    for (int i = 0; i < N; i++) {
        mq_setup(i);
        consumers[i] = peers_spawn(mq_consumer, &mqs[i], run.producers + i);
    }
    return N;
}

static void mq_close(void)
{
    for (int i = 0; i < run.workers; i++) {
        struct mq *q = &mqs[i];
        pthread_mutex_lock(&q->lock);
        q->closed = true;
        pthread_cond_signal(&q->nonempty);
        pthread_mutex_unlock(&q->lock);
    }
}

static void mq_free(void)
{
    for (int i = 0; i < run.workers; i++) {
        pthread_mutex_destroy(&mqs[i].lock);
        pthread_cond_destroy(&mqs[i].nonempty);
        pthread_cond_destroy(&mqs[i].nonfull);
    }
    free(mqs);
}

const struct peer_ops peer_mutex = {
    .name = "mutex",
    .start = mq_start,
    .producer = mq_producer,
    .burst_producer = mq_burst_producer,
    .close = mq_close,
    .free = mq_free,
};
