/* Job records: spare ones kept per worker, so that steady handoffs do not allocate; blocks of them
 * made by a crash or a multi-key job, freed with the last (a multi-key job's kept as a spare of the
 * worker that ends it, for its next). SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>
#include <string.h>

#include "worker.h"

#define SPARE_RECORDS 1024
/* A worker's spare blocks of multi-key jobs, in bytes: a 2-key job's block is 1.8 KiB, so some
 * seventy of those, eleven of 16 keys; beyond, they go to the dispatcher's pool (multi.c). */
#define SPARE_BLOCK_BYTES ((size_t)128 << 10)

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

static struct job_block **block_next(struct job_block *b)
{
    return &b->next_kept;
}

bool shard__block_spare_keep(struct shard_worker *w, struct job_block *b, size_t cls, size_t bytes)
{
    SHARD_CHECK_ON(w);
    if (w->own.spare_block_bytes + bytes > SPARE_BLOCK_BYTES)
        return false;
    *block_next(b) = w->own.spare_blocks[cls];
    w->own.spare_blocks[cls] = b;
    w->own.spare_block_bytes += bytes;
    return true;
}

struct job_block *shard__block_spare_take(struct shard_worker *w, size_t cls, size_t bytes)
{
    SHARD_CHECK_ON(w);
    struct job_block *b = w->own.spare_blocks[cls];
    if (b) {
        w->own.spare_blocks[cls] = *block_next(b);
        w->own.spare_block_bytes -= bytes;
    }
    return b;
}

struct job_block *shard__block_spare_take_all(struct shard_worker *w, size_t cls, size_t bytes)
{
    SHARD_CHECK_ON(w);
    struct job_block *list = w->own.spare_blocks[cls];
    w->own.spare_blocks[cls] = NULL;
    for (struct job_block *b = list; b; b = *block_next(b))
        w->own.spare_block_bytes -= bytes;
    return list;
}

void shard__worker_drop_spares(struct shard_worker *w)
{
    for (size_t cls = 0; cls < SHARD_MULTI_POOL_KEYS; cls++)
        while (w->own.spare_blocks[cls]) {
            struct job_block *b = w->own.spare_blocks[cls];
            w->own.spare_blocks[cls] = *block_next(b);
            free(b);
        }
    w->own.spare_block_bytes = 0;
    free(w->own.spare_ready);
    w->own.spare_ready = NULL;
    while (w->own.spare) {
        struct job *next = w->own.spare->next;
        free(w->own.spare);
        w->own.spare = next;
    }
    w->own.nspare = 0;
}
