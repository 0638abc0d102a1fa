/* A worker's parking spot (park.h): futex wait and wake. SPDX-License-Identifier: LGPL-2.1-or-later */
#include "park.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/eventfd.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

int shard__park_init(struct parking *pk, bool with_fd)
{
    pk->fd = -1;
    if (with_fd && (pk->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
        return -ENOMEM;
    return 0;
}

void shard__park_destroy(struct parking *pk)
{
    if (pk->fd >= 0)
        close(pk->fd);
    pk->fd = -1;
}

void shard__park_clear_fd(struct parking *pk)
{
    /* A waker bumps seq, then writes 1: while seq is what was read back, nothing is in fd or on its
     * way (an idle worker parks far more often than it is woken; each read would be an EAGAIN). A
     * write still on its way is read back at a later call, so fd never stays readable unnoticed. */
    if (atomic_load_explicit(&pk->seq, memory_order_relaxed) == pk->read_seq)
        return;
    uint64_t n;
    if (read(pk->fd, &n, sizeof n) == (ssize_t)sizeof n)
        pk->read_seq += (uint32_t)n;
}

static long futex(_Atomic uint32_t *addr, int op, uint32_t val)
{
    return syscall(SYS_futex, (uint32_t *)addr, op, val, NULL, NULL, 0);
}

uint32_t shard__park_prepare(struct parking *pk)
{
    uint32_t seq = atomic_load_explicit(&pk->seq, memory_order_acquire);
    /* seq_cst: ordered before the caller's has_work check, against the waker's seq_cst change and
     * flag read. */
    atomic_store_explicit(&pk->sleeping, 1, memory_order_seq_cst);
    return seq;
}

void shard__park_cancel(struct parking *pk)
{
    atomic_store_explicit(&pk->sleeping, 0, memory_order_relaxed);
}

void shard__park_wait(struct parking *pk, uint32_t seq)
{
    /* Returns at once if a waker bumped seq since shard__park_prepare; spurious returns are fine. */
    futex(&pk->seq, FUTEX_WAIT_PRIVATE, seq);
    atomic_store_explicit(&pk->sleeping, 0, memory_order_relaxed);
}

void shard__park_wait_until(struct parking *pk, uint32_t seq, uint64_t deadline_ns)
{
    /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time (plain FUTEX_WAIT a relative one). */
    struct timespec at = { (time_t)(deadline_ns / 1000000000u), (long)(deadline_ns % 1000000000u) };
    syscall(SYS_futex, (uint32_t *)&pk->seq, FUTEX_WAIT_BITSET_PRIVATE, seq, &at, NULL, FUTEX_BITSET_MATCH_ANY);
    atomic_store_explicit(&pk->sleeping, 0, memory_order_relaxed);
}

bool shard__park_wake_sleeper(struct parking *pk)
{
    /* Only one waker pays for the syscall. */
    if (!atomic_exchange_explicit(&pk->sleeping, 0, memory_order_seq_cst))
        return false;
    /* release: pairs with the acquire in shard__park_prepare of the next round. */
    atomic_fetch_add_explicit(&pk->seq, 1, memory_order_release);
    if (pk->fd >= 0) {
        uint64_t one = 1;
        ssize_t n = write(pk->fd, &one, sizeof one);
        (void)n; /* fails only when the counter would overflow: the fd is readable anyway */
    } else {
        futex(&pk->seq, FUTEX_WAKE_PRIVATE, 1);
    }
    return true;
}
