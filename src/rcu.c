/* Lazy RCU registration and grace periods. SPDX-License-Identifier: LGPL-2.1-or-later */
#include "rcu.h"

#include <pthread.h>

_Thread_local int shard__rcu_registered;
#ifdef SHARD_TSAN
char shard__rcu_grace_token;
#endif

static pthread_key_t unregister_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void unregister_at_exit(void *unused)
{
    (void)unused;
    rcu_unregister_thread();
    shard__rcu_registered = 0;
}

static void make_key(void)
{
    /* Cannot fail short of PTHREAD_KEYS_MAX keys in the process; then threads stay registered until
     * they exit, which liburcu tolerates (it only keeps a stale reader entry). */
    (void)pthread_key_create(&unregister_key, unregister_at_exit);
}

void shard__rcu_ensure_registered(void)
{
    pthread_once(&key_once, make_key);
    rcu_register_thread();
    shard__rcu_registered = 1;
    /* Any non-NULL value makes the destructor run when the thread exits. */
    pthread_setspecific(unregister_key, &shard__rcu_registered);
}

void shard_rcu_synchronize(void)
{
    synchronize_rcu();
    SHARD_TSAN_ACQUIRE(&shard__rcu_grace_token);
}
