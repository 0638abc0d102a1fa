/* shard: shard_submit (shard_submit_many in the burst cases, the 32 jobs of a burst in one call) to a
 * dispatcher of run.workers workers, queue_capacity CAP. Its workers pin themselves in
 * on_worker_start, to the slots the peers' consumers get. */
#include <shard.h>
#include <stdio.h>
#include <stdlib.h>

#include "peers.h"

static shard_dispatcher *disp;

static void sh_on_start(shard_worker *w, void *user)
{
    (void)user;
    int i = atoi(shard_worker_name(w) + 1); /* "w0", "w1", ... */
    peers_pin_self(run.producers + i);
    shard_worker_set_user(w, &peers_ws[i]);
}

static void sh_empty(shard_worker *w, void *arg)
{
    job_empty(shard_worker_user(w), (uintptr_t)arg);
}

static void sh_real(shard_worker *w, void *arg)
{
    job_real(shard_worker_user(w), (uintptr_t)arg);
}

static void *sh_producer(void *arg)
{
    struct pstate *p = arg;
    shard_job_fn fn = run.kind == EMPTY ? sh_empty : sh_real;
    for (long i = 0; i < run.per_producer; i++) {
        uint32_t k;
        uint64_t job = next_job(p, &k);
        int err = shard_submit(disp, peers_keys[k], peers_key_len[k], fn, (void *)(uintptr_t)job);
        if (err) {
            fprintf(stderr, "bench_peers: shard_submit: %s\n", shard_strerror(err));
            exit(1);
        }
    }
    return NULL;
}

static void *sh_burst_producer(void *arg)
{
    struct pstate *p = arg;
    shard_job_fn fn = run.kind == EMPTY ? sh_empty : sh_real;
    struct shard_job jobs[BURST];
    for (long i = 0; i < run.per_producer;) {
        int n = run.per_producer - i < BURST ? (int)(run.per_producer - i) : BURST;
        for (int j = 0; j < n; j++) {
            uint32_t k;
            uint64_t job = next_job(p, &k);
            jobs[j] = (struct shard_job){ peers_keys[k], peers_key_len[k], fn, (void *)(uintptr_t)job };
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

static int sh_start(const struct run *r, pthread_t *consumers)
{
    run = *r;
    (void)consumers; /* the dispatcher starts its workers itself */
    struct shard_config cfg = { .workers = (uint32_t)run.workers, .queue_capacity = CAP,
                                .on_worker_start = sh_on_start };
    int err = shard_dispatcher_create(&disp, &cfg);
    if (err) {
        fprintf(stderr, "bench_peers: shard_dispatcher_create: %s\n", shard_strerror(err));
        exit(1);
    }
    return 0;
}

static void sh_close(void)
{
    shard_drain(disp);
}

static void sh_free(void)
{
    shard_dispatcher_destroy(disp);
}

const struct peer_ops peer_shard = {
    .name = "shard",
    .start = sh_start,
    .producer = sh_producer,
    .burst_producer = sh_burst_producer,
    .close = sh_close,
    .free = sh_free,
};
