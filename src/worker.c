/* A worker's accessors for jobs and hooks, and the thread's own worker (worker.h). Its life, from
 * birth to free, and its thread's loop are worker_life.c's. SPDX-License-Identifier: LGPL-2.1-or-later */
#include "dispatcher_internal.h"

_Thread_local struct shard_worker *shard__current_worker;

SHARD_API const char *shard_worker_name(const shard_worker *w)
{
    return w ? w->name : NULL;
}

SHARD_API void *shard_worker_user(const shard_worker *w)
{
    return w ? w->user : NULL;
}

SHARD_API void shard_worker_set_user(shard_worker *w, void *user)
{
    if (w)
        w->user = user;
}

SHARD_API uint64_t shard_job_key_hash(const shard_worker *w)
{
    /* busy: set by w's own thread around a job or a batch of them, not around a hook (run.c). */
    if (!w || w != shard__current_worker || !atomic_load_explicit(&w->counts.busy, memory_order_relaxed))
        return 0;
    return w->own.job_hash;
}

SHARD_API uint32_t shard_worker_id(const shard_worker *w)
{
    return w ? w->id : UINT32_MAX;
}

SHARD_API bool shard_worker_crashed(const shard_worker *w)
{
    return w && atomic_load_explicit(&w->life.state, memory_order_relaxed) == SHARD_WORKER_CRASHED;
}

SHARD_API shard_dispatcher *shard_worker_dispatcher(const shard_worker *w)
{
    return w ? w->d : NULL;
}
