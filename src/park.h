/* Internal: a worker's parking spot, a futex. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The worker announces it will sleep (prepare), checks for work once more, and sleeps on seq unless a
 * waker bumped it in between; a waker that sees sleeping set clears it and wakes the futex. The
 * check-after-announce and the producer's push-then-check form a Dekker pair (both seq_cst), so a
 * wake-up is never lost. */
#ifndef SHARD_SRC_PARK_H
#define SHARD_SRC_PARK_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cacheline.h"

/* Parking: the worker sleeps on seq while sleeping is set; a waker clears sleeping and bumps seq.
 * With the idle hook (shard_config.on_worker_idle) the worker waits in the hook instead, on fd, and a
 * waker writes to fd rather than waking the futex; the Dekker pair is the same. */
struct parking {
    alignas(SHARD_CACHELINE) _Atomic uint32_t seq;
    _Atomic uint32_t sleeping;
    /* Set by the worker while it polls for work before parking (a hint, relaxed both ways): a running
     * job's submit to it is delivered at once rather than at the end of its batch (outbox.c), as to a
     * parked worker. Missing it costs latency only: the entry is delivered when the batch ends. */
    _Atomic uint32_t polling;
    int              fd; /* an eventfd with the idle hook, else -1 */
    uint32_t         read_seq; /* the worker's: wake-ups it has read back from fd (each bumps seq, then writes 1) */
};

/* Return: 0; -ENOMEM when with_fd and no eventfd could be made. */
int      shard__park_init(struct parking *pk, bool with_fd);
void     shard__park_destroy(struct parking *pk);
/* Empties fd of wake-ups already taken; no system call while none was written since it last did.
 * Context: the worker, before shard__park_prepare. */
void     shard__park_clear_fd(struct parking *pk);
uint32_t shard__park_prepare(struct parking *pk);
void     shard__park_cancel(struct parking *pk);
void     shard__park_wait(struct parking *pk, uint32_t seq);
/* As shard__park_wait, but returns by deadline (CLOCK_MONOTONIC ns) at the latest. */
void     shard__park_wait_until(struct parking *pk, uint32_t seq, uint64_t deadline_ns);
/* The waker's slow half, once it has seen sleeping set (with a seq_cst load: the waker's side of the
 * pair, after its push). Return: whether this call woke it. */
bool     shard__park_wake_sleeper(struct parking *pk);

#endif
