/* What bench_mesh's systems share (bench/bench_mesh.c says what it measures): the run going on, the
 * keys, a request (struct msg), each worker's state and checks, the work, where threads run, and the
 * interface each system's file provides (struct mesh_ops).
 *
 * A round trip, the same in every system: worker o (the origin) picks a key k uniformly, stamps the
 * request (msg) with the next number of its own sequence for k and sends it to k's owner t;
 * t checks that it owns k and that the stamp follows the last one it saw from o for k (so every
 * request of (o, k) runs once, in order), runs the work and sends the msg back to o; o checks that
 * the answer is the one its slot waits for, counts it and, unless the run is stopping, sends the
 * slot's next request. Each worker keeps depth slots, so depth requests, in flight.
 *
 * Everything a system's loop calls is static inline here, so that every system inlines the same code. */
#ifndef SHARD_BENCH_MESH_H
#define SHARD_BENCH_MESH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define XXH_INLINE_ALL /* the hash inline, as shard has it */
#include <xxhash.h>

#include "../bench_common.h"

#define MESH_KEYS   16384 /* a power of two: keys are drawn with a mask */
#define MESH_MAXW   32    /* workers at most */
#define MESH_MAXD   256   /* requests in flight a worker at most */
#define MESH_CAP    1024  /* a mesh ring's slots: one holds at most 2 * depth entries (below) */
_Static_assert(MESH_CAP >= 2 * MESH_MAXD, "a ring (from, to) holds from's requests and to's answers");

/* The keys, "key:0" to "key:16383": written by main before any run, read-only after. */
extern char   mesh_keys[MESH_KEYS][16];
extern size_t mesh_key_len[MESH_KEYS];

/* The run going on: set by main while no other thread of the run exists. */
struct mesh_run {
    int      workers, depth;
    uint32_t rounds;  /* of mesh_work a request: the calibrated work_ns, 0 for empty */
    uint32_t poll_us; /* shard only: shard_config.poll_us */
    bool     pin;     /* worker i on the i-th CPU this process may use */
};
/* Each file has its own copy, which its start fills before any thread of the run starts (static, as
 * bench/peers/peers.h explains: the compiler then keeps its fields in registers across the loops). */
static struct mesh_run mrun __attribute__((unused));

/* Set by main to end the run: origins send no new request once they see it. Relaxed everywhere:
 * it only has to be seen eventually, and nothing is read through it. */
extern _Atomic bool mesh_stop;
/* Workers that saw mesh_stop and have every request of theirs answered. Relaxed: the counters it
 * stands for are read by main only after the run's threads are joined (which orders them). */
extern _Atomic int  mesh_finished;

/* Which worker owns each key in the system running: filled by its start, read by the workers' checks. */
extern uint8_t mesh_owner[MESH_KEYS];

/* One slot of an origin: the request in flight and then its answer, handed over by pointer (the low
 * bits are free: the mesh rings tag answers there). Written by whoever holds it: the origin, then the
 * owner of key, then the origin again; each hand-over is a release/acquire edge of the system. */
struct msg {
    _Alignas(64) uint32_t origin, slot;
    uint32_t key, stamp; /* stamp: the origin's sequence number for key, from 1 */
    uint64_t seq;        /* the slot's round trip, from 1 */
    uint64_t result;     /* of the work, written by the key's owner */
};

/* A worker's state: touched by its own thread only while the run goes on, but for the two atomics. */
struct wstate {
    _Alignas(64) uint32_t id;
    bool      finished;
    uint64_t  rng;
    uint64_t  issued, answered, served;               /* requests sent, answers taken, requests run */
    uint64_t  bad_owner, bad_order, bad_answer, sink; /* the checks' counts; results summed */
    uint32_t *sent;     /* [MESH_KEYS]: the last stamp this origin gave each key */
    uint32_t *recv;     /* [workers * MESH_KEYS]: the last stamp seen from origin o for key k, at
                         * recv[o * MESH_KEYS + k], for the keys this worker owns */
    uint64_t *slot_seq; /* [MESH_MAXD]: the round trip each slot waits for */
    struct msg *msgs;   /* [MESH_MAXD] */
    /* The answers taken so far, for main's samples: a relaxed store by the worker, a relaxed load by
     * main (a count, read for a rate; nothing is read through it). */
    _Alignas(64) _Atomic uint64_t answered_pub;
};
extern struct wstate mesh_ws[MESH_MAXW];

/* The work: rounds of a multiply-xorshift chain, each round depending on the one before. */
static inline uint64_t mesh_work(uint64_t x, uint32_t rounds)
{
    for (uint32_t r = 0; r < rounds; r++) {
        x ^= x >> 29;
        x *= 0xbf58476d1ce4e5b9ull;
    }
    return x;
}

/* Re-arms m, slot of origin s, with the slot's next request. Context: s's thread. */
static inline void mesh_issue(struct wstate *s, struct msg *m)
{
    uint32_t k = (uint32_t)(bench_mix(&s->rng) >> 32) & (MESH_KEYS - 1);
    m->key = k;
    m->stamp = ++s->sent[k];
    m->seq = ++s->slot_seq[m->slot];
    s->issued++;
}

/* Runs request m on s, its key's owner. Return: the origin to answer. Context: s's thread. */
static inline uint32_t mesh_serve(struct wstate *s, struct msg *m)
{
    s->bad_owner += mesh_owner[m->key] != s->id;
    uint32_t *last = &s->recv[(size_t)m->origin * MESH_KEYS + m->key];
    s->bad_order += m->stamp != *last + 1;
    *last = m->stamp;
    m->result = mesh_work(m->key ^ m->seq, mrun.rounds);
    s->served++;
    return m->origin;
}

/* Takes answer m on s, its origin. Return: true when m has been re-armed with the slot's next
 * request, to be sent; false once the run stops. Context: s's thread. */
static inline bool mesh_answered(struct wstate *s, struct msg *m)
{
    s->bad_answer += m->origin != s->id || m->seq != s->slot_seq[m->slot];
    s->sink += m->result;
    s->answered++;
    atomic_store_explicit(&s->answered_pub, s->answered, memory_order_relaxed);
    if (!atomic_load_explicit(&mesh_stop, memory_order_relaxed)) {
        mesh_issue(s, m);
        return true;
    }
    if (s->answered == s->issued && !s->finished) {
        s->finished = true;
        atomic_fetch_add_explicit(&mesh_finished, 1, memory_order_relaxed);
    }
    return false;
}

/* The owner of key k in the meshes: XXH3 % workers, computed on every send as shard hashes on every
 * submit. */
static inline uint32_t mesh_route(uint32_t k)
{
    return (uint32_t)(XXH3_64bits(mesh_keys[k], mesh_key_len[k]) % (uint64_t)mrun.workers);
}

/* Pins the calling thread to the i-th CPU this process may use (modulo their number), unless --no-pin
 * (mrun.pin of main's copy). Context: a worker thread, before its first request. */
void mesh_pin_self(int i);

/* A thread running fn(arg), aborting if none can be started. Pair with pthread_join. */
pthread_t mesh_spawn(void *(*fn)(void *), void *arg);

/* One system under test. Per measurement main fills mesh_owner's dependants (resets every wstate),
 * calls start, samples the counters while the workers run, sets mesh_stop, calls finish, checks. */
struct mesh_ops {
    const char *name; /* impl= in the output */
    /* Copies r into the file's mrun, fills mesh_owner, starts r->workers workers, worker i on
     * mesh_ws[i], each sending its depth requests at once and then one per answer. */
    void (*start)(const struct mesh_run *r);
    /* mesh_stop is set: returns once every worker has finished and its thread is gone. */
    void (*finish)(void);
};

extern const struct mesh_ops mesh_shard; /* shard.c: jobs of the keys through shard_submit */
extern const struct mesh_ops mesh_spsc;  /* spsc.c: hand-rolled N x N SPSC rings, Seastar-style */
extern const struct mesh_ops mesh_ck;    /* ck.c: Concurrency Kit's ck_ring, N x N (libck-dev) */

#endif
