/* A worker's smoothed queue length (load.h). SPDX-License-Identifier: LGPL-2.1-or-later */
#include "load.h"

void shard__load_sample(struct shard_worker *w, uint64_t now)
{
    uint64_t at = __atomic_load_n(&w->counts.sampled_at, __ATOMIC_RELAXED);
    /* The worker's own head, exact (head_pub, which others read, lags by up to a batch). */
    double dt = (double)(now - at), avg;
    double len = (double)(atomic_load_explicit(&w->q.tail, memory_order_relaxed) - w->q.head);
    uint64_t bits = atomic_load_explicit(&w->counts.queued_avg, memory_order_relaxed);
    memcpy(&avg, &bits, sizeof avg);
    /* An exponential average over time: the weight of the new sample grows with the time it stands
     * for (linearised; a gap of a second or more replaces the average). */
    double a = at == 0 || dt >= LOAD_TAU_NS ? 1.0 : dt / LOAD_TAU_NS;
    avg += (len - avg) * a;
    memcpy(&bits, &avg, sizeof bits);
    atomic_store_explicit(&w->counts.queued_avg, bits, memory_order_relaxed);
    __atomic_store_n(&w->counts.sampled_at, now, __ATOMIC_RELAXED); /* stats read it too */
}
