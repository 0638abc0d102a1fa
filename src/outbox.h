/* Internal: a worker's outbox: what its running jobs submit, delivered once their batch ends.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A job's shard_submit is the hop of every shard-per-core program, and each cost a claim on the
 * owner's tail (a locked read-modify-write of a line every submitter to that worker writes) and a wake
 * check. Gathered here and delivered when the worker's batch of jobs ends (or its job, off the batch
 * path), the jobs bound for one worker take their slots with one claim and one wake check, as DPDK's
 * DSW flushes its per-destination buffers once a burst and Seastar its smp queues once a poll.
 *
 * An entry is a submit accepted (shard_submit returned 0) and not routed yet: it is routed when it is
 * delivered, under the ring then in force, so as far as the ring's protocol goes (handoff.c) it is
 * submitted then: no fence can pass it, and no grace period waits for a worker's batch.
 * A submit to a parked worker delivers the outbox at once (shard__outbox_gather): batching saves nothing
 * there, and the worker would sleep until the batch's end.
 * Order: while a worker gathers, its thread's shard_submit and shard_submit_many calls to its own
 * dispatcher go through the outbox in order; every other submit of that thread to that dispatcher (the
 * try variants, timers falling due, hooks) delivers the outbox first.
 * Drain and destroy look at `open`: drain marks every queue a second time once the entries have been
 * delivered (drain.c), destroy waits for them before it stops the workers (dispatcher.c).
 *
 * A crash: the submits of a batch's jobs that have returned are not held by a later job of the batch
 * stuck on the crashed worker (drain does not wait for that one). The worker marks, after each job of
 * its batch, how many entries are its returned jobs' (`sealed`, release); the crash, once the ring
 * without the worker is published, delivers those (shard__outbox_rescue) and marks them delivered
 * (fn NULL), which the worker's own later delivery skips. A delivery, the worker's or the crash's, holds `busy`: the worker
 * takes it once a delivery, not once a job, and the crash only for a crashed worker. */
#ifndef SHARD_SRC_OUTBOX_H
#define SHARD_SRC_OUTBOX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "shard/dispatcher.h"

/* At most this many submits wait for the batch's end: a fuller outbox is delivered at once. */
#define OUTBOX_MAX 64

struct outbox_entry {
    shard_job_fn fn;
    void        *arg;
    uint64_t     hash;
    uint64_t     epoch;  /* the snapshot it was gathered under */
    uint32_t     owner;  /* its key's member index in that snapshot's ring */
    uint8_t      origin; /* enum job_origin */
};

/* Fields: W the worker's thread alone; A atomic. */
struct outbox {
    bool             gathering; /* W: one of its jobs runs, so its thread's shard_submit gathers */
    uint32_t         n;         /* W: entries held */
    _Atomic uint32_t sealed;    /* A, written by W: entries below it are jobs' that returned (release:
                                 * the rescue that acquires it sees them) */
    _Atomic bool     busy;      /* A: a delivery is under way (the worker's, or a crash's rescue) */
    _Atomic bool     open;      /* A, written by W: entries are held; seq_cst: drain and destroy read it
                                 * (destroy after setting shutdown: outbox.c's Dekker pair) */
    struct outbox_entry e[OUTBOX_MAX]; /* W; those below sealed read, and marked, by a rescue under busy */
};

struct shard_worker;

/* A running job's submit, kept for the delivery, with its key's owner under the ring in force; delivered
 * at once when that owner is parked. Context: w's own thread while it gathers, inside a read-side
 * section, shutdown not seen. Return: 0; -ENOMEM (the outbox was full and delivering it found no
 * memory for a queue beyond its capacity). */
int  shard__outbox_gather(struct shard_worker *w, uint64_t hash, shard_job_fn fn, void *arg, uint8_t origin);
/* Delivers the entries to their keys' owners under the ring in force, one claim and one wake check
 * a destination. Context: w's own thread, with or without w->lock, inside a read-side section or
 * not. Return: true when the outbox is empty; false only when memory for a job beyond a full queue
 * could not be had (the rest stays, in order, for the next try). */
bool shard__outbox_deliver(struct shard_worker *w);
/* The running job of w's batch has returned: its entries are sealed. Context: w's own thread. */
static inline void shard__outbox_seal(struct outbox *ob)
{
    atomic_store_explicit(&ob->sealed, ob->n, memory_order_release);
}
/* Delivers the sealed entries of x, crashed, under the ring without it. Context: the crash, once that
 * ring is published, ctl held, no worker's lock. */
void shard__outbox_rescue(struct shard_worker *x);
/* Whether a worker of d holds entries not yet delivered. Context: d->lock held. */
bool shard__outboxes_open(shard_dispatcher *d);

#endif
