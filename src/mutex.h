/* Internal: a mutex for sections of a few dozen instructions that several workers take at once.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * glibc's adaptive mutex, found held, tries again a bounded number of times (adapted to how long it
 * took before, at most the tunable glibc.pthread.mutex_spin_count, 100 by default), whoever holds it
 * and whether or not that thread runs, before it sleeps as the default one does: for sections such as
 * a crash table stripe's claim or payment, a multi-key job's queueing, the block pool's list. With
 * the default mutex, two workers meeting on one went through a futex wait and wake, two system calls
 * for a section far shorter than either: 12 % of kv_server's CPU at 2 workers under atomic 10-key
 * MSETs (perf); adaptive, MSET 11-14 %, MGET of 10 keys 9-15 % faster in the same run, single-key
 * paths level. A worker's own lock and its inbox's stay default: made adaptive, nothing measured
 * faster. Elsewhere than glibc, the default mutex. */
#ifndef SHARD_SRC_MUTEX_H
#define SHARD_SRC_MUTEX_H

#include <pthread.h>

static inline void shard__mutex_init_brief(pthread_mutex_t *m)
{
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
    pthread_mutexattr_t at;
    pthread_mutexattr_init(&at);
    pthread_mutexattr_settype(&at, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(m, &at);
    pthread_mutexattr_destroy(&at);
#else
    pthread_mutex_init(m, NULL);
#endif
}

#endif
