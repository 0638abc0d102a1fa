/* shard: shard_submit (shard_submit_many in the burst cases, the 32 jobs of a burst in one call) to a
 * dispatcher of run.workers workers, queue_capacity CAP. Its workers pin themselves in
 * on_worker_start, to the slots the peers' consumers get. */
#include <shard.h>
#include <stdio.h>
#include <stdlib.h>

#include "peers.h"

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

static int shard_start(const struct run *r, pthread_t *consumers)
{
    run = *r;
    (void)consumers; /* the dispatcher starts its workers itself */
    struct shard_config cfg = { .workers = (uint32_t)run.workers, .queue_capacity = CAP,
                                .on_worker_start = shard_on_start };
    int err = shard_dispatcher_create(&disp, &cfg);
    if (err) {
        fprintf(stderr, "bench_peers: shard_dispatcher_create: %s\n", shard_strerror(err));
        exit(1);
    }
    return 0;
}

static void shard_close(void)
{
    shard_drain(disp);
}

static void shard_free(void)
{
    shard_dispatcher_destroy(disp);
}

const struct peer_ops peer_shard = {
    .name = "shard",
    .start = shard_start,
    .producer = shard_producer,
    .burst_producer = shard_burst_producer,
    .close = shard_close,
    .free = shard_free,
};
