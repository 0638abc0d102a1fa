/* inline, on 1to1_real only: the producer's loop calling the job itself on worker 0's state, no
 * thread, no queue (the physical limit). */
#include "peers.h"

static int inline_start(const struct run *r, pthread_t *consumers)
{
    run = *r;
    (void)consumers;
    return 0;
}

static void *inline_producer(void *arg)
{
    struct pstate *p = arg;
    for (long i = 0; i < run.per_producer; i++) {
        uint32_t k;
        uint64_t job = next_job(p, &k);
        job_run(&peers_ws[0], job);
    }
    return NULL;
}

static void inline_nothing(void)
{
}

const struct peer_ops peer_inline = {
    .name = "inline",
    .start = inline_start,
    .producer = inline_producer,
    .burst_producer = NULL,
    .close = inline_nothing,
    .free = inline_nothing,
};
