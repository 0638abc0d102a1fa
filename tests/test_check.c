/* src/check.h, the internal checks of the sanitizer and Debug builds: a lock counts as held only by
 * the thread that holds it, and a failed check aborts. If shard__mutex_mine answered true for any
 * mutex, every SHARD_CHECK_HELD in src/ would pass whatever the caller held. */
#define SHARD_DEBUG_CHECKS 1
#include <criterion/criterion.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>

#include "check.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static sem_t           held, done;

static void *hold(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&m);
    sem_post(&held);
    sem_wait(&done);
    pthread_mutex_unlock(&m);
    return NULL;
}

Test(check, a_mutex_is_mine_only_while_this_thread_holds_it)
{
    cr_assert_not(shard__mutex_mine(&m), "nobody holds it");
    pthread_mutex_lock(&m);
    cr_assert(shard__mutex_mine(&m));
    pthread_mutex_unlock(&m);
    cr_assert_not(shard__mutex_mine(&m));
    sem_init(&held, 0, 0);
    sem_init(&done, 0, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, hold, NULL), 0);
    sem_wait(&held);
    cr_assert_not(shard__mutex_mine(&m), "another thread holds it");
    sem_post(&done);
    pthread_join(t, NULL);
    pthread_mutex_t ec;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&ec, &a);
    pthread_mutex_lock(&ec);
    cr_assert(shard__mutex_mine(&ec), "an error-checking mutex too");
    pthread_mutex_unlock(&ec);
    pthread_mutex_destroy(&ec);
    pthread_mutexattr_destroy(&a);
}

Test(check, a_lock_not_held_aborts, .signal = SIGABRT)
{
    SHARD_CHECK_HELD(&m);
}

Test(check, a_lock_held_passes)
{
    pthread_mutex_lock(&m);
    SHARD_CHECK_HELD(&m);
    pthread_mutex_unlock(&m);
}
