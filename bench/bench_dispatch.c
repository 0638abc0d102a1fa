/* bench_dispatch: empty jobs per second from P producers to W workers, shard against, in the same run:
 *   spsc    a bare single-producer single-consumer ring between the same threads (the floor; 1->1 only)
 *   mutex   a mutex + condition variable queue per worker, keyed like shard (hash % W)
 *   shared  one mutex + condition variable queue feeding every worker (no key affinity)
 * Every implementation hashes the key with XXH3 first, as shard does. One line per measurement:
 *   bench=dispatch case=PtoW impl=NAME jobs=N mjobs_per_s=X ratio_vs_spsc=R ratio_vs_mutex=M */
#include <pthread.h>
#include <shard.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>

#include "bench_common.h"

#define KEYS 1024
#define CAP 4096

static char keys[KEYS][16];
static size_t key_len[KEYS];
static long jobs_per_producer;
static atomic_long done;

static void job(void *arg)
{
    (void)arg;
    atomic_fetch_add_explicit(&done, 1, memory_order_relaxed);
}

/* ---- spsc floor ---- */

struct spsc {
    _Alignas(64) atomic_ulong head;
    _Alignas(64) atomic_ulong tail;
    _Alignas(64) void (*fn[CAP])(void *);
};

static struct spsc ring;

static void *spsc_consumer(void *arg)
{
    long n = (long)arg;
    unsigned long head = 0;
    while ((long)head < n) {
        unsigned long tail = atomic_load_explicit(&ring.tail, memory_order_acquire);
        while (head < tail) {
            ring.fn[head % CAP](NULL);
            head++;
        }
        atomic_store_explicit(&ring.head, head, memory_order_release);
    }
    return NULL;
}

static double run_spsc(long n)
{
    atomic_store(&ring.head, 0);
    atomic_store(&ring.tail, 0);
    pthread_t c;
    uint64_t t0 = bench_now_ns();
    pthread_create(&c, NULL, spsc_consumer, (void *)n);
    unsigned long tail = 0, head_cache = 0;
    uint64_t sink = 0;
    for (long i = 0; i < n; i++) {
        sink += XXH3_64bits(keys[i % KEYS], key_len[i % KEYS]);
        while (tail - head_cache >= CAP)
            head_cache = atomic_load_explicit(&ring.head, memory_order_acquire);
        ring.fn[tail % CAP] = job;
        atomic_store_explicit(&ring.tail, ++tail, memory_order_release);
    }
    pthread_join(c, NULL);
    if (sink == 42)
        puts("");
    return (double)(bench_now_ns() - t0) / 1e9;
}

/* ---- mutex + condvar queues ---- */

struct mq {
    pthread_mutex_t lock;
    pthread_cond_t  nonempty, nonfull;
    void (*fn[CAP])(void *);
    long head, tail;
    int  closed;
};

static struct mq *mqs;
static int nqueues;

static void mq_push(struct mq *q, void (*fn)(void *))
{
    pthread_mutex_lock(&q->lock);
    while (q->tail - q->head >= CAP)
        pthread_cond_wait(&q->nonfull, &q->lock);
    q->fn[q->tail++ % CAP] = fn;
    pthread_cond_signal(&q->nonempty);
    pthread_mutex_unlock(&q->lock);
}

static void *mq_consumer(void *arg)
{
    struct mq *q = arg;
    void (*batch[CAP])(void *);
    for (;;) {
        pthread_mutex_lock(&q->lock);
        while (q->head == q->tail && !q->closed)
            pthread_cond_wait(&q->nonempty, &q->lock);
        if (q->head == q->tail) {
            pthread_mutex_unlock(&q->lock);
            return NULL;
        }
        long n = 0;
        /* a shared queue hands out small batches so every consumer gets work */
        long max = nqueues == 1 && q == &mqs[0] ? 64 : CAP;
        while (q->head < q->tail && n < max)
            batch[n++] = q->fn[q->head++ % CAP];
        pthread_cond_broadcast(&q->nonfull);
        pthread_mutex_unlock(&q->lock);
        for (long i = 0; i < n; i++)
            batch[i](NULL);
    }
}

struct producer_arg {
    int  id;
    bool shared;
};

static void *mq_producer(void *arg)
{
    struct producer_arg *p = arg;
    for (long i = 0; i < jobs_per_producer; i++) {
        int k = (int)((i * 7 + p->id * 13) % KEYS);
        uint64_t h = XXH3_64bits(keys[k], key_len[k]);
        mq_push(&mqs[p->shared ? 0 : h % (uint64_t)nqueues], job);
    }
    return NULL;
}

static double run_mutex(int producers, int workers, bool shared)
{
    nqueues = shared ? 1 : workers;
    mqs = calloc((size_t)nqueues, sizeof *mqs);
    for (int i = 0; i < nqueues; i++) {
        pthread_mutex_init(&mqs[i].lock, NULL);
        pthread_cond_init(&mqs[i].nonempty, NULL);
        pthread_cond_init(&mqs[i].nonfull, NULL);
    }
    pthread_t c[8], p[8];
    struct producer_arg pa[8];
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < workers; i++)
        pthread_create(&c[i], NULL, mq_consumer, &mqs[shared ? 0 : i]);
    for (int i = 0; i < producers; i++) {
        pa[i] = (struct producer_arg){ i, shared };
        pthread_create(&p[i], NULL, mq_producer, &pa[i]);
    }
    for (int i = 0; i < producers; i++)
        pthread_join(p[i], NULL);
    for (int i = 0; i < nqueues; i++) {
        pthread_mutex_lock(&mqs[i].lock);
        mqs[i].closed = 1;
        pthread_cond_broadcast(&mqs[i].nonempty);
        pthread_mutex_unlock(&mqs[i].lock);
    }
    for (int i = 0; i < workers; i++)
        pthread_join(c[i], NULL);
    double t = (double)(bench_now_ns() - t0) / 1e9;
    free(mqs);
    return t;
}

/* ---- shard ---- */

static shard_dispatcher *disp;

static void shard_job(shard_worker *w, void *arg)
{
    (void)w;
    job(arg);
}

static void *shard_producer(void *arg)
{
    int id = (int)(long)arg;
    for (long i = 0; i < jobs_per_producer; i++) {
        int k = (int)((i * 7 + id * 13) % KEYS);
        shard_submit(disp, keys[k], key_len[k], shard_job, NULL);
    }
    return NULL;
}

static double run_shard(int producers, int workers)
{
    struct shard_config cfg = { .workers = (uint32_t)workers, .queue_capacity = CAP };
    if (shard_dispatcher_create(&disp, &cfg) != 0)
        abort();
    pthread_t p[8];
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < producers; i++)
        pthread_create(&p[i], NULL, shard_producer, (void *)i);
    for (int i = 0; i < producers; i++)
        pthread_join(p[i], NULL);
    shard_drain(disp);
    double t = (double)(bench_now_ns() - t0) / 1e9;
    shard_dispatcher_destroy(disp);
    return t;
}

static double best(double a, double b)
{
    return a < b ? a : b;
}

int main(int argc, char **argv)
{
    bool quick = bench_quick(argc, argv);
    jobs_per_producer = quick ? 200000 : 2000000;
    int reps = quick ? 1 : 3;
    for (int k = 0; k < KEYS; k++)
        key_len[k] = (size_t)snprintf(keys[k], sizeof keys[k], "player-%d", k);
    static const int cases[][2] = { { 1, 1 }, { 2, 2 } };
    for (size_t c = 0; c < 2; c++) {
        int p = cases[c][0], w = cases[c][1];
        long n = jobs_per_producer * p;
        double t_spsc = 1e9, t_mutex = 1e9, t_shared = 1e9, t_shard = 1e9;
        for (int r = 0; r < reps; r++) {
            if (p == 1 && w == 1)
                t_spsc = best(t_spsc, run_spsc(n));
            t_mutex = best(t_mutex, run_mutex(p, w, false));
            t_shared = best(t_shared, run_mutex(p, w, true));
            t_shard = best(t_shard, run_shard(p, w));
        }
        const char *names[] = { "spsc", "mutex", "shared", "shard" };
        double times[] = { t_spsc, t_mutex, t_shared, t_shard };
        for (int i = 0; i < 4; i++) {
            if (times[i] >= 1e9)
                continue;
            printf("bench=dispatch case=%dto%d impl=%s jobs=%ld mjobs_per_s=%.2f", p, w, names[i], n,
                   n / times[i] / 1e6);
            if (t_spsc < 1e9)
                printf(" ratio_vs_spsc=%.2f", t_spsc / times[i]);
            printf(" ratio_vs_mutex=%.2f\n", t_mutex / times[i]);
        }
    }
    return 0;
}
