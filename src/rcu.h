/* Internal: userspace RCU (liburcu, memb flavour) as shard uses it. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Read side inline (_LGPL_SOURCE; shard is LGPL-2.1-or-later). A thread that liburcu does not know is
 * registered on its first read-side section and unregistered when it exits (a pthread key
 * destructor). Registration is liburcu's own flag, so a thread the application registered itself
 * (same memb flavour) is used as it is, and left to the application to unregister. A thread whose
 * destructor already ran (a submit from a later TLS destructor, after which glibc may run no further
 * destructor round) registers for the one section and unregisters at its end: it never exits
 * registered, which would leave liburcu waiting for it for ever.
 *
 * ThreadSanitizer cannot see the ordering liburcu builds from membarrier and inline assembly: that a
 * grace period waits for every read-side section that began before it. Under TSan these wrappers tell
 * it so with __tsan_release at read unlock and __tsan_acquire after synchronize_rcu on one address;
 * nothing else about liburcu needs to be suppressed. Pointers are published with C11 release stores
 * and read with acquire loads (what rcu_assign_pointer / rcu_dereference do on this architecture). */
#ifndef SHARD_SRC_RCU_H
#define SHARD_SRC_RCU_H

#include <stdbool.h>
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

/* Registers the calling thread with liburcu. Context: a thread liburcu does not know. */
void shard__rcu_register(void);
/* Unregisters a thread registered for one section only, once it is outside every section. */
void shard__rcu_unregister_temporary(void);
extern _Thread_local int shard__rcu_temporary;

static inline void shard__rcu_read_lock(void)
{
    if (__builtin_expect(!URCU_TLS(rcu_reader).registered, 0))
        shard__rcu_register();
    rcu_read_lock();
}

static inline void shard__rcu_read_unlock(void)
{
#ifdef SHARD_TSAN
    SHARD_TSAN_RELEASE(&shard__rcu_grace_token);
#endif
    rcu_read_unlock();
    if (__builtin_expect(shard__rcu_temporary, 0))
        shard__rcu_unregister_temporary();
}

/* Whether the caller is inside a read-side section besides the one it holds itself: the application's
 * own (docs/rcu.md). A wait that a grace period may wait for must not be made there. Context: inside
 * a read-side section of shard's. */
static inline bool shard__rcu_in_outer_section(void)
{
    return (URCU_TLS(rcu_reader).ctr & URCU_GP_CTR_NEST_MASK) > 1;
}

/* Waits for every read-side section begun before the call. Not with a read lock held. */
void shard__rcu_synchronize(void);

#endif
