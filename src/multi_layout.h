/* Internal: a multi-key job's layout, between its life (multi.c) and its submit (multi_submit.c).
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_MULTI_LAYOUT_H
#define SHARD_SRC_MULTI_LAYOUT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crash.h"
#include "job.h"
#include "shard/multi.h"

struct multi;

/* A key of the caller's: its hash and where it first occurs in keys[]. */
struct key_ref {
    uint64_t hash;
    uint32_t index;
};

/* A line apart from every other part's (parts run on different workers), and what a claim writes
 * on its first two lines: it is made on one worker and paid on another (job.h). */
struct multi_part {
    /* claim is in the table: set by the part (or step, or a crash of a whole job) that made it. A drop
     * racing the parts exchanges it to false and pays; the job's end reads it and pays what is still
     * set, and leaves it so (multi.c's release_claims_racing, release_claims_at_end); made anew by
     * shard__multi_parts_ready */
    _Alignas(64) _Atomic bool claimed;
    uint32_t      key;     /* I: the index in the caller's keys of its key's first occurrence */
    struct multi *m;
    struct job    claim;   /* its key's entry in the crash table while it holds the key */
};

/* multi.state: parts come up or dropped, and this bit once a DROP crash dropped one of them. */
#define MULTI_DROPPED 0x80000000u

/* On a line of its own (multi.c aligns it), the first holds what the part that runs the job reads
 * (fn, step, arg, keys) and what every part and claim writes (state, owner.owed): the parts run on
 * different workers, and each line they share crosses between them. */
struct multi {
    shard_dispatcher   *d;
    shard_job_fn        fn;      /* the job; with steps, what runs after them (may be NULL) */
    shard_multi_step_fn step;    /* NULL: no steps */
    void               *arg;
    const struct key_ref *keys;  /* I: its n distinct keys, in the block before the multi (multi.c) */
    uint32_t            n;       /* I: parts, one a distinct key */
    _Atomic uint32_t    state;   /* parts come up or dropped, | MULTI_DROPPED (multi.c's arrive) */
    /* owner and parts are made when first needed (shard__multi_parts_ready): a job queued whole and run
     * at once never needs them. Before its parts are queued, by the submitter; for a whole job, by
     * whoever splits it or the crash that stops it, each alone with it then. */
    bool                parts_ready;
    struct crash_record owner;   /* owes its claims (the table counts entries by record) */
    struct job_block   *block;   /* the allocation this lives in */
    struct multi_part   parts[];
};

/* A multi-key job of the n distinct keys h (its parts not yet made nor queued), in one allocation with
 * a record for each part's full queue and one for its step. Return: NULL when out of memory.
 * Context: any thread. */
struct multi *shard__multi_new(shard_dispatcher *d, const struct key_ref *h, size_t n, shard_job_fn fn,
                               shard_multi_step_fn step, void *arg);
/* Makes m's parts and the record that owes their claims, unless made already. Context: no other
 * thread touches them yet (see parts_ready). */
void shard__multi_parts_ready(struct multi *m);

#endif
