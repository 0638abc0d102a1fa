/* Internal: checks, in the sanitizer and Debug builds, of what the field legends and the Context lines
 * say: that a lock is held by the calling thread, or that a call runs on a worker's own thread.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * On when SHARD_CHECKS is (CMake: by default with SHARD_SANITIZE or a Debug build); otherwise each
 * check compiles to nothing. A failed check names the condition and the place, and aborts: it is a
 * bug in shard. Not assert(): RelWithDebInfo, the sanitizer builds' type, defines NDEBUG.
 *
 * Whether the caller holds a mutex: glibc keeps the holder's thread id in the mutex (__data.__owner),
 * for the default, error-checking and adaptive mutexes shard uses, which a debug check may read;
 * elsewhere the check only asks that some thread holds it (trylock fails). Not with glibc's lock elision
 * (GLIBC_TUNABLES=glibc.elision.enable=1 on a CPU with TSX): an elided lock records no holder, and
 * every check would fail. The checks are for shard's own test builds, which do not turn it on. */
#ifndef SHARD_SRC_CHECK_H
#define SHARD_SRC_CHECK_H

#include <pthread.h>
#include <stdbool.h>

#ifdef SHARD_DEBUG_CHECKS
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline void shard__check_failed(const char *what, const char *file, int line)
{
    fprintf(stderr, "shard: internal check failed at %s:%d: %s\n", file, line, what);
    abort();
}

#define SHARD_CHECK(c) ((c) ? (void)0 : shard__check_failed(#c, __FILE__, __LINE__))

/* Whether the calling thread holds m. */
static inline bool shard__mutex_mine(pthread_mutex_t *m)
{
#ifdef __GLIBC__
    return m->__data.__owner == (int)syscall(SYS_gettid); /* gettid() is glibc 2.30's */
#else
    if (pthread_mutex_trylock(m) != 0)
        return true;
    pthread_mutex_unlock(m);
    return false;
#endif
}
#else
#define SHARD_CHECK(c) ((void)0)
#endif

/* The calling thread holds mutex m (a pthread_mutex_t *). */
#define SHARD_CHECK_HELD(m) SHARD_CHECK(shard__mutex_mine(m))

#endif
