/* kv_server: reading the whole keyspace, one job per worker (broadcast.c). SPDX-License-Identifier:
 * LGPL-2.1-or-later
 *
 * Context: every function here but the jobs is for the admin thread only (it owns the cache of probe
 * keys, and it waits for the jobs). */
#ifndef KV_BROADCAST_H
#define KV_BROADCAST_H

#include "server.h"

enum job_op { OP_COLLECT, OP_CLEAR, OP_MEMORY };

struct broadcast;

/* One job's part of a broadcast: written by the job, read by the admin thread once every job is done
 * (the lock of the broadcast orders the two). */
struct slot {
    struct broadcast *b;
    const char       *name;  /* the worker it is meant for */
    struct buf        keys;  /* OP_COLLECT: bulk strings */
    size_t            count; /* keys, or keys deleted (OP_CLEAR), or bytes (OP_MEMORY) */
    bool              wrong; /* ran elsewhere than on name */
    bool              found; /* OP_MEMORY: the key exists */
    bool              nomem;
};

/* Shared by the admin thread and the jobs; the last of them to let go frees it. */
struct broadcast {
    pthread_mutex_t        lock;
    pthread_cond_t         cond;
    size_t                 left; /* under lock: jobs not yet done */
    atomic_size_t          refs;
    enum job_op            op;
    uint64_t               from, to;
    const struct resp_arg *pattern; /* NULL: every key; the request's, alive until its reply */
    int                    type;    /* -1: any */
    const shard_ring      *ring;    /* the cache's, alive while jobs run (only the admin thread drops it) */
    int64_t                now_ms;
    const struct resp_arg *key;     /* OP_MEMORY */
    size_t                 n;
    struct slot            slot[];
};

/* What a slice is asked for. */
struct slice {
    enum job_op            op;
    uint64_t               from, to;
    const struct resp_arg *pattern;
    int                    type;
};

/* Reads (or clears) the slice q on every worker of the ring in force, with the checks broadcast.c
 * describes. Return: the finished broadcast (one slot per worker; broadcast_put it); NULL with *err:
 * -EAGAIN (the membership kept changing), -ENOMEM, or shard's error. Blocks until the jobs are done. */
struct broadcast *keyspace_read(struct server *srv, const struct slice *q, int *err);

/* A broadcast of n slots for op, with one reference: the caller's. NULL without memory. */
struct broadcast *broadcast_new(size_t n, enum job_op op);
/* Submits slot i's job on key (so to the key's owner). Return: as shard_submit; a refused job counts
 * as done. */
int  broadcast_submit(struct server *srv, struct broadcast *b, size_t i, const void *key, size_t len);
/* Waits until every job submitted has returned; their slots may be read then. */
void broadcast_wait(struct broadcast *b);
/* Drops a reference; the last one frees b. */
void broadcast_put(struct broadcast *b);

#endif
