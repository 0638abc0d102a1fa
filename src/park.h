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

/* Parking: the worker sleeps on seq while sleeping is set; a waker clears sleeping and bumps seq. */
struct parking {
    alignas(SHARD_CACHELINE) _Atomic uint32_t seq;
    _Atomic uint32_t sleeping;
};

uint32_t shard__park_prepare(struct parking *pk);
void     shard__park_cancel(struct parking *pk);
void     shard__park_wait(struct parking *pk, uint32_t seq);
/* As shard__park_wait, but returns by deadline (CLOCK_MONOTONIC ns) at the latest. */
void     shard__park_wait_until(struct parking *pk, uint32_t seq, uint64_t deadline_ns);
/* The waker's slow half: sleeping was seen set. */
bool     shard__park_wake_sleeper(struct parking *pk);

/* Wakes the parked worker, if it is parked. Return: whether this call woke it. Inline: every submit
 * calls it, and it is one load when the worker is awake. */
static inline bool shard__park_wake(struct parking *pk)
{
    if (!atomic_load_explicit(&pk->sleeping, memory_order_seq_cst))
        return false;
    return shard__park_wake_sleeper(pk);
}

#endif
