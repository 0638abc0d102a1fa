/* Keyed timers: arm and cancel cost with 1M pending, memory a pending timer, how late a timer's job runs
 * with idle and with busy workers, and what an idle dispatcher with them pending costs; against what a
 * user would write instead: one timer thread with a binary heap (O(log n) arm and cancel, a mutex and
 * a condition variable) that submits each due job into shard. Output: key=value lines (bench/run makes the table). --quick: smaller. */
#include <pthread.h>
#include <shard.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

#define MS 1000000ull

/* ---- the baseline: a binary heap of deadlines under one mutex, and a thread that submits ---- */

struct heap_timer {
    uint64_t     deadline;
    size_t       pos; /* in the heap; SIZE_MAX once out */
    char         key[16];
    size_t       len;
    shard_job_fn fn;
    void        *arg;
};

struct heap {
    pthread_mutex_t     lock;
    pthread_cond_t      cond;
    struct heap_timer **v;
    size_t              n, cap;
    bool                stop;
    shard_dispatcher   *d;
    pthread_t           thread;
};

static void heap_swap(struct heap *h, size_t a, size_t b)
{
    struct heap_timer *t = h->v[a];
    h->v[a] = h->v[b];
    h->v[b] = t;
    h->v[a]->pos = a;
    h->v[b]->pos = b;
}

static void sift_up(struct heap *h, size_t i)
{
    while (i > 0 && h->v[(i - 1) / 2]->deadline > h->v[i]->deadline) {
        heap_swap(h, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void sift_down(struct heap *h, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && h->v[l]->deadline < h->v[m]->deadline)
            m = l;
        if (r < h->n && h->v[r]->deadline < h->v[m]->deadline)
            m = r;
        if (m == i)
            return;
        heap_swap(h, i, m);
        i = m;
    }
}

static void heap_remove_at(struct heap *h, size_t i)
{
    h->v[i]->pos = SIZE_MAX;
    h->n--;
    if (i == h->n)
        return;
    h->v[i] = h->v[h->n];
    h->v[i]->pos = i;
    sift_down(h, i);
    sift_up(h, i);
}

static struct heap_timer *heap_arm(struct heap *h, const char *key, size_t len, uint64_t delay, shard_job_fn fn, void *arg)
{
    struct heap_timer *t = malloc(sizeof *t);
    t->deadline = bench_now_ns() + delay;
    memcpy(t->key, key, len);
    t->len = len;
    t->fn = fn;
    t->arg = arg;
    pthread_mutex_lock(&h->lock);
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 1024;
        h->v = realloc(h->v, h->cap * sizeof *h->v);
    }
    h->v[h->n] = t;
    t->pos = h->n++;
    sift_up(h, t->pos);
    if (t->pos == 0)
        pthread_cond_signal(&h->cond);
    pthread_mutex_unlock(&h->lock);
    return t;
}

static bool heap_cancel(struct heap *h, struct heap_timer *t)
{
    pthread_mutex_lock(&h->lock);
    bool pending = t->pos != SIZE_MAX;
    if (pending)
        heap_remove_at(h, t->pos);
    pthread_mutex_unlock(&h->lock);
    if (pending)
        free(t);
    return pending;
}

static void *heap_thread(void *arg)
{
    struct heap *h = arg;
    pthread_mutex_lock(&h->lock);
    while (!h->stop) {
        if (!h->n) {
            pthread_cond_wait(&h->cond, &h->lock);
            continue;
        }
        uint64_t now = bench_now_ns();
        if (h->v[0]->deadline > now) {
            uint64_t at = h->v[0]->deadline;
            struct timespec ts = { (time_t)(at / 1000000000u), (long)(at % 1000000000u) };
            pthread_cond_timedwait(&h->cond, &h->lock, &ts); /* the condvar is on CLOCK_MONOTONIC */
            continue;
        }
        struct heap_timer *t = h->v[0];
        heap_remove_at(h, 0);
        pthread_mutex_unlock(&h->lock);
        shard_submit(h->d, t->key, t->len, t->fn, t->arg);
        free(t);
        pthread_mutex_lock(&h->lock);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

static void heap_start(struct heap *h, shard_dispatcher *d)
{
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->cond, &ca);
    pthread_condattr_destroy(&ca);
    h->d = d;
    pthread_create(&h->thread, NULL, heap_thread, h);
}

static void heap_stop(struct heap *h)
{
    pthread_mutex_lock(&h->lock);
    h->stop = true;
    pthread_cond_signal(&h->cond);
    pthread_mutex_unlock(&h->lock);
    pthread_join(h->thread, NULL);
    for (size_t i = 0; i < h->n; i++)
        free(h->v[i]);
    free(h->v);
}

/* ---- helpers ---- */

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * 4;
}

static size_t kname(char *buf, uint64_t i)
{
    return (size_t)snprintf(buf, 16, "p%llu", (unsigned long long)(i % 100000));
}

static void noop(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
}

static shard_dispatcher *make(void)
{
    shard_dispatcher *d;
    struct shard_config cfg = { .workers = 2 }; /* the default queue capacity */
    if (shard_dispatcher_create(&d, &cfg) != 0)
        abort();
    return d;
}

/* Touches every slot of the workers' queues, so that memory measured later is the timers'. */
static void warm(shard_dispatcher *d)
{
    char k[16];
    for (uint64_t i = 0; i < 4 * SHARD_DEFAULT_QUEUE_CAPACITY; i++)
        shard_submit(d, k, kname(k, i), noop, NULL);
    shard_drain(d);
}

/* ---- arm and cancel with many pending ---- */

static void arm_cancel(size_t pending)
{
    char k[16];
    uint64_t x = 1;
    size_t probe = pending / 10;
    /* shard */
    shard_dispatcher *d = make();
    shard_timer *ids = calloc(pending, sizeof *ids);
    memset(ids, 1, pending * sizeof *ids); /* touched: not counted as the timers' memory */
    warm(d);
    long rss0 = rss_kb();
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < pending; i++)
        shard_submit_after(d, k, kname(k, i), 600000 * MS + bench_mix(&x) % (600000 * MS), noop, NULL, &ids[i]);
    shard_drain(d); /* every arm job has put its timer in a wheel */
    uint64_t arm_ns = (bench_now_ns() - t0) / pending;
    long rss1 = rss_kb();
    double shard_bytes = (double)(rss1 - rss0) * 1024 / (double)pending;
    t0 = bench_now_ns();
    for (size_t i = 0; i < probe; i++)
        shard_timer_cancel(d, ids[(size_t)(bench_mix(&x) % pending)]);
    uint64_t cancel_ns = (bench_now_ns() - t0) / probe;
    shard_dispatcher_destroy(d);
    free(ids);
    /* the heap thread */
    d = make();
    struct heap h;
    heap_start(&h, d);
    struct heap_timer **hs = malloc(pending * sizeof *hs);
    memset(hs, 1, pending * sizeof *hs);
    warm(d);
    rss0 = rss_kb();
    t0 = bench_now_ns();
    for (size_t i = 0; i < pending; i++)
        hs[i] = heap_arm(&h, k, kname(k, i), 600000 * MS + bench_mix(&x) % (600000 * MS), noop, NULL);
    uint64_t heap_arm_ns = (bench_now_ns() - t0) / pending;
    rss1 = rss_kb();
    double heap_bytes = (double)(rss1 - rss0) * 1024 / (double)pending;
    t0 = bench_now_ns();
    for (size_t i = 0; i < probe; i++) {
        size_t j = (size_t)(bench_mix(&x) % pending);
        if (hs[j] && heap_cancel(&h, hs[j]))
            hs[j] = NULL;
    }
    uint64_t heap_cancel_ns = (bench_now_ns() - t0) / probe;
    heap_stop(&h);
    shard_dispatcher_destroy(d);
    free(hs);
    printf("case=arm_cancel pending=%zu shard_arm_ns=%llu heap_arm_ns=%llu arm_ratio=%.2f shard_cancel_ns=%llu "
           "heap_cancel_ns=%llu cancel_ratio=%.2f shard_bytes=%.0f heap_bytes=%.0f\n",
           pending, (unsigned long long)arm_ns, (unsigned long long)heap_arm_ns,
           (double)heap_arm_ns / (double)arm_ns, (unsigned long long)cancel_ns, (unsigned long long)heap_cancel_ns,
           (double)heap_cancel_ns / (double)cancel_ns, shard_bytes, heap_bytes);
}

/* ---- lateness ---- */

struct late {
    uint64_t   deadline;
    uint64_t   late_ns;
    atomic_int *left;
};

static void record_late(shard_worker *w, void *arg)
{
    (void)w;
    struct late *l = arg;
    l->late_ns = bench_now_ns() - l->deadline;
    atomic_fetch_sub(l->left, 1);
}

static atomic_bool busy_stop;
static void spin_job(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
    uint64_t end = bench_now_ns() + 2000; /* a 2 us job */
    while (bench_now_ns() < end)
        ;
}

/* Keeps the workers about half busy: 10 jobs of 2 us every 40 us, over keys spread on both. */
static void *busy_producer(void *arg)
{
    shard_dispatcher *d = arg;
    char k[16];
    uint64_t i = 0;
    while (!atomic_load(&busy_stop)) {
        for (int b = 0; b < 10; b++)
            shard_submit(d, k, kname(k, i++), spin_job, NULL);
        uint64_t until = bench_now_ns() + 40000;
        while (bench_now_ns() < until)
            ;
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Arms n timers due over spread_ms, through shard or the heap thread, and reports p50/p99 lateness. */
static void lateness(size_t n, uint64_t spread_ms, bool busy, bool use_heap, uint64_t *p50, uint64_t *p99)
{
    shard_dispatcher *d = make();
    struct heap h;
    if (use_heap)
        heap_start(&h, d);
    pthread_t prod;
    atomic_store(&busy_stop, false);
    if (busy)
        pthread_create(&prod, NULL, busy_producer, d);
    struct late *ls = calloc(n, sizeof *ls);
    atomic_int left = (int)n;
    uint64_t x = 7;
    char k[16];
    for (size_t i = 0; i < n; i++) {
        uint64_t delay = MS + bench_mix(&x) % (spread_ms * MS);
        ls[i].left = &left;
        ls[i].deadline = bench_now_ns() + delay;
        if (use_heap)
            heap_arm(&h, k, kname(k, i), delay, record_late, &ls[i]);
        else
            shard_submit_after(d, k, kname(k, i), delay, record_late, &ls[i], NULL);
    }
    while (atomic_load(&left) > 0)
        shard_drain(d);
    atomic_store(&busy_stop, true);
    if (busy)
        pthread_join(prod, NULL);
    if (use_heap)
        heap_stop(&h);
    shard_dispatcher_destroy(d);
    uint64_t *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = ls[i].late_ns;
    qsort(v, n, sizeof *v, cmp_u64);
    *p50 = v[n / 2];
    *p99 = v[n * 99 / 100];
    free(v);
    free(ls);
}

static void lateness_case(size_t n, uint64_t spread_ms, bool busy)
{
    uint64_t s50, s99, h50, h99;
    lateness(n, spread_ms, busy, false, &s50, &s99);
    lateness(n, spread_ms, busy, true, &h50, &h99);
    printf("case=lateness workers=%s timers=%zu shard_p50_us=%.1f shard_p99_us=%.1f heap_p50_us=%.1f heap_p99_us=%.1f\n",
           busy ? "busy" : "idle", n, (double)s50 / 1e3, (double)s99 / 1e3, (double)h50 / 1e3, (double)h99 / 1e3);
}

/* An idle dispatcher with many timers far ahead: the share of a core it uses while nothing is due. */
static void idle_cpu(size_t pending, double seconds)
{
    shard_dispatcher *d = make();
    char k[16];
    uint64_t x = 3;
    for (size_t i = 0; i < pending; i++)
        shard_submit_after(d, k, kname(k, i), SHARD_SECONDS(3600) + bench_mix(&x) % SHARD_SECONDS(3600), noop, NULL, NULL);
    shard_drain(d);
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    uint64_t t0 = bench_now_ns();
    struct timespec ts = { (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9) };
    nanosleep(&ts, NULL); /* the measured idle time */
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
    double wall = (double)(bench_now_ns() - t0) / 1e9;
    shard_dispatcher_destroy(d);
    printf("case=idle_cpu pending=%zu seconds=%.1f cpu_percent_of_a_core=%.3f\n", pending, wall, 100 * cpu / wall);
}

int main(int argc, char **argv)
{
    bool quick = bench_quick(argc, argv);
    arm_cancel(quick ? 100000 : 1000000);
    idle_cpu(quick ? 100000 : 1000000, quick ? 0.5 : 3.0);
    lateness_case(quick ? 500 : 5000, quick ? 50 : 500, false);
    lateness_case(quick ? 500 : 5000, quick ? 50 : 500, true);
    return 0;
}
