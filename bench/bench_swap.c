/* bench_swap: what publishing a new ring costs the readers.
 *   route: key lookups per second by 2 reader threads while a writer swaps in a new ring every
 *          millisecond, the ring read inside an RCU read-side section (shard's design) against the
 *          ring guarded by a pthread_rwlock; and RCU without swaps.
 *   submit: shard_submit throughput (1 producer, 2 workers) while a control thread adds and removes a
 *          worker every millisecond, against the same without membership changes.
 * One line per measurement: bench=swap what=... impl=... mops_per_s=X ratio=R */
#define _LGPL_SOURCE
#include <pthread.h>
#include <shard.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <urcu.h>

#include "bench_common.h"

#define KEYS 1024
static char keys[KEYS][16];
static size_t klen[KEYS];
static atomic_int stop;
static volatile uint64_t sink;

static shard_ring *make_ring(int extra)
{
    shard_ring *r;
    shard_ring_create(&r, NULL);
    for (int i = 0; i < 8 + extra; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        shard_ring_add(r, name, 1);
    }
    return r;
}

static shard_ring *rings[2];
static shard_ring *current; /* under rw, or published with liburcu's macros */
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static int use_rwlock, do_swaps;
static atomic_long lookups;

static void *reader(void *arg)
{
    (void)arg;
    rcu_register_thread();
    long n = 0;
    uint64_t acc = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int k = 0; k < KEYS; k++) {
            if (use_rwlock) {
                pthread_rwlock_rdlock(&rw);
                acc += (uintptr_t)shard_ring_owner(current, keys[k], klen[k]);
                pthread_rwlock_unlock(&rw);
            } else {
                rcu_read_lock();
                acc += (uintptr_t)shard_ring_owner(rcu_dereference(current), keys[k], klen[k]);
                rcu_read_unlock();
            }
        }
        n += KEYS;
    }
    sink += acc;
    atomic_fetch_add(&lookups, n);
    rcu_unregister_thread();
    return NULL;
}

static void pause_1ms(void)
{
    struct timespec ts = { 0, 1000000 };
    nanosleep(&ts, NULL);
}

static double route(int rwlock, int swaps, double seconds)
{
    use_rwlock = rwlock;
    do_swaps = swaps;
    atomic_store(&stop, 0);
    atomic_store(&lookups, 0);
    current = rings[0];
    pthread_t t[2];
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, reader, NULL);
    int which = 0;
    while ((double)(bench_now_ns() - t0) / 1e9 < seconds) {
        pause_1ms();
        if (!swaps)
            continue;
        which ^= 1;
        /* Both designs publish a prepared ring; RCU then waits a grace period before the old one
         * could be freed (here it is reused, but the wait is paid). */
        if (rwlock) {
            pthread_rwlock_wrlock(&rw);
            current = rings[which];
            pthread_rwlock_unlock(&rw);
        } else {
            rcu_assign_pointer(current, rings[which]);
            synchronize_rcu();
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    return (double)atomic_load(&lookups) / secs / 1e6;
}

static shard_dispatcher *disp;
static void nop(shard_worker *w, void *a)
{
    (void)w;
    (void)a;
}

static void *churn(void *arg)
{
    (void)arg;
    for (int i = 0; !atomic_load(&stop); i++) {
        pause_1ms();
        if (i % 2 == 0)
            shard_worker_add(disp, "extra", 1);
        else
            shard_worker_remove(disp, "extra");
    }
    return NULL;
}

static double submit(int swaps, long jobs)
{
    struct shard_config cfg = { .workers = 2 };
    shard_dispatcher_create(&disp, &cfg);
    atomic_store(&stop, 0);
    pthread_t c;
    if (swaps)
        pthread_create(&c, NULL, churn, NULL);
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < jobs; i++)
        shard_submit(disp, keys[i % KEYS], klen[i % KEYS], nop, NULL);
    shard_drain(disp);
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    atomic_store(&stop, 1);
    if (swaps)
        pthread_join(c, NULL);
    struct shard_stats st;
    shard_dispatcher_stats(disp, &st);
    if (swaps)
        printf("bench=swap what=submit membership_changes=%llu\n", (unsigned long long)st.changes);
    shard_dispatcher_destroy(disp);
    return (double)jobs / secs / 1e6;
}

int main(int argc, char **argv)
{
    bool quick = bench_quick(argc, argv);
    double secs = quick ? 0.3 : 2.0;
    for (int k = 0; k < KEYS; k++)
        klen[k] = (size_t)snprintf(keys[k], sizeof keys[k], "key-%d", k);
    rings[0] = make_ring(0);
    rings[1] = make_ring(1);
    double rcu_still = route(0, 0, secs), rcu_swap = route(0, 1, secs), rw_swap = route(1, 1, secs);
    printf("bench=swap what=route impl=rcu_noswap mops_per_s=%.2f ratio_vs_rcu_noswap=1.00\n", rcu_still);
    printf("bench=swap what=route impl=rcu_swap_1ms mops_per_s=%.2f ratio_vs_rcu_noswap=%.2f\n", rcu_swap,
           rcu_swap / rcu_still);
    printf("bench=swap what=route impl=rwlock_swap_1ms mops_per_s=%.2f ratio_vs_rcu_noswap=%.2f ratio_rcu_vs_rwlock=%.2f\n",
           rw_swap, rw_swap / rcu_still, rcu_swap / rw_swap);
    long jobs = quick ? 300000 : 3000000;
    double still = submit(0, jobs), moving = submit(1, jobs);
    printf("bench=swap what=submit impl=noswap mops_per_s=%.2f ratio_vs_noswap=1.00\n", still);
    printf("bench=swap what=submit impl=swap_1ms mops_per_s=%.2f ratio_vs_noswap=%.2f\n", moving, moving / still);
    shard_ring_destroy(rings[0]);
    shard_ring_destroy(rings[1]);
    return 0;
}
