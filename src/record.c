/* Job records: spare ones kept per worker, so that steady handoffs do not allocate; blocks of them
 * made by a crash, freed with the last. SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>
#include <string.h>

#include "worker.h"

#define SPARE_RECORDS 1024

/* Records for jobs set aside: spare ones are kept per worker, so steady handoffs do not allocate. */
struct job *shard__record_alloc(struct shard_worker *w)
{
    SHARD_CHECK_W(w);
    struct job *j = w->own.spare;
    if (j) {
        w->own.spare = j->next;
        w->own.nspare--;
        memset(j, 0, sizeof *j);
        return j;
    }
    return calloc(1, sizeof *j);
}

void shard__free_record(struct shard_worker *w, struct job *j)
{
    if (w)
        SHARD_CHECK_W(w);
    if (j->embedded)
        return;
    if (j->block) {
        shard__job_block_put(j->block);
        return;
    }
    if (w && w->own.nspare < SPARE_RECORDS) {
        j->next = w->own.spare;
        w->own.spare = j;
        w->own.nspare++;
        return;
    }
    free(j);
}

void shard__job_block_put(struct job_block *b)
{
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (b->release)
        b->release(b);
    else
        free(b);
}

void shard__worker_drop_spares(struct shard_worker *w)
{
    free(w->own.spare_ready);
    w->own.spare_ready = NULL;
    while (w->own.spare) {
        struct job *next = w->own.spare->next;
        free(w->own.spare);
        w->own.spare = next;
    }
    w->own.nspare = 0;
}
