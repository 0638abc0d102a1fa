/* Lazy RCU registration and grace periods. SPDX-License-Identifier: LGPL-2.1-or-later */
#include "rcu.h"

#include <pthread.h>
#include <stdbool.h>

_Thread_local int shard__rcu_temporary;
#ifdef SHARD_TSAN
char shard__rcu_grace_token;
#endif

static pthread_key_t unregister_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static _Thread_local bool exiting; /* this thread's destructor below has run */

static void unregister_at_exit(void *unused)
{
    (void)unused;
    exiting = true;
    /* The application may have unregistered the thread itself meanwhile. */
    if (URCU_TLS(rcu_reader).registered && !rcu_read_ongoing())
        rcu_unregister_thread();
}

static void make_key(void)
{
    /* Cannot fail short of PTHREAD_KEYS_MAX keys in the process; then threads stay registered until
     * they exit, which liburcu tolerates (it only keeps a stale reader entry). */
    (void)pthread_key_create(&unregister_key, unregister_at_exit);
}

void shard__rcu_register(void)
{
    pthread_once(&key_once, make_key);
    rcu_register_thread();
    if (exiting) {
        /* Destructors may not run again: unregister when this section ends. */
        shard__rcu_temporary = 1;
        return;
    }
    /* Any non-NULL value makes the destructor run when the thread exits. */
    pthread_setspecific(unregister_key, &unregister_key);
}

void shard__rcu_unregister_temporary(void)
{
    if (rcu_read_ongoing())
        return;
    shard__rcu_temporary = 0;
    rcu_unregister_thread();
}

void shard__rcu_synchronize(void)
{
    synchronize_rcu();
    SHARD_TSAN_ACQUIRE(&shard__rcu_grace_token);
}
