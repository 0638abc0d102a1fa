/* Internal: userspace RCU (liburcu, memb flavour) as shard uses it. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Read side inline (_LGPL_SOURCE; shard is LGPL-2.1-or-later). Threads register lazily on their first
 * read-side section and unregister when they exit (a pthread key destructor).
 *
 * ThreadSanitizer cannot see the ordering liburcu builds from membarrier and inline assembly: that a
 * grace period waits for every read-side section that began before it. Under TSan these wrappers tell
 * it so with __tsan_release at read unlock and __tsan_acquire after synchronize_rcu on one address;
 * nothing else about liburcu needs to be suppressed. Pointers are published with C11 release stores
 * and read with acquire loads (what rcu_assign_pointer / rcu_dereference do on this architecture). */
#ifndef SHARD_SRC_RCU_H
#define SHARD_SRC_RCU_H

#include <urcu.h>

#if defined(__SANITIZE_THREAD__)
#define SHARD_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SHARD_TSAN 1
#endif
#endif

#ifdef SHARD_TSAN
#include <sanitizer/tsan_interface.h>
extern char shard__rcu_grace_token;
#define SHARD_TSAN_RELEASE(p) __tsan_release(p)
#define SHARD_TSAN_ACQUIRE(p) __tsan_acquire(p)
#else
#define SHARD_TSAN_RELEASE(p) ((void)0)
#define SHARD_TSAN_ACQUIRE(p) ((void)0)
#endif

/* Registers the calling thread on first use; Context: any thread. */
void shard__rcu_ensure_registered(void);
extern _Thread_local int shard__rcu_registered;

static inline void shard_rcu_read_lock(void)
{
    if (__builtin_expect(!shard__rcu_registered, 0))
        shard__rcu_ensure_registered();
    rcu_read_lock();
}

static inline void shard_rcu_read_unlock(void)
{
#ifdef SHARD_TSAN
    SHARD_TSAN_RELEASE(&shard__rcu_grace_token);
#endif
    rcu_read_unlock();
}

/* Waits for every read-side section begun before the call. Not with a read lock held. */
void shard_rcu_synchronize(void);

#endif
