/* kv_server: WATCH, the optimistic lock of a transaction. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * As in Redis: after WATCH k, the connection's next EXEC runs nothing (its commands of no key
 * neither: net.c runs those once the EXEC's header is out) and answers a null array if k was written
 * in between, by any connection, this one included, or its time to live has run out; EXEC, DISCARD
 * and UNWATCH end every watch of the connection, and so does its closing. Written means: a keyed
 * command that writes k ran a part of it (server.h's access: every key of a write, but only the
 * destination of a *STORE, whose sets are read, as in Redis), unless the part said it changed
 * nothing (watch_unchanged below: the commands that say it are listed in docs/kv_server.md; any
 * other counts whatever it changed, where Redis would not count a write that changed nothing: so an
 * EXEC may abort for nothing, never run over a change); k was deleted (DEL, an expiry by its timer or
 * by a read that found it due); or the store was flushed.
 *
 * How. A table of stamps, counters chosen by a key's store hash (its top bits), shared by every
 * worker: a write adds one to its key's. WATCH runs a part on each of its keys, as a job of the key
 * (after the connection's earlier commands of it, on whichever worker holds it), which reads the
 * stamp, the count of flushes, and when the key expires. EXEC's multi-key job holds the watched keys
 * beside its commands' keys, and its first step, which runs once every key is held, compares: every
 * write of those keys that came before EXEC has run by then (each key's order), and none that comes
 * after can run until the job ends. A key whose time has come by then aborts too, as in Redis, though
 * its timer has not deleted it yet (its expiry is unchanged since WATCH, or a write changed the stamp).
 * A stamp is the key's wherever the key lives, so a key that moved to another worker since its WATCH
 * (a change, a crash) needs nothing more. Keys that share a stamp abort each other's EXEC: one write
 * in WATCH_STAMPS of another key does, for nothing. A FLUSHALL or FLUSHDB is not one step with
 * respect to a transaction (it runs as a job on each worker, and may fall between two of an EXEC's
 * steps: docs/kv_server.md); one before the EXEC's check aborts it.
 *
 * While no connection watches a key (active, the count of watched keys), a write adds nothing: one
 * load of a line only WATCH and the end of a watch write. While some do, a write adds only if a watched key shares a
 * filter slot with it (watched[], a count of watched keys by their hash's top bits): a connection
 * that WATCHes and never EXECs costs other keys' writes a read of a table that fits in a core's
 * cache, not a write of a shared line. That is safe: the counts went up before the WATCH's parts
 * were submitted, each write that matters to a watch comes after the WATCH's part of its key in the
 * key's order, so it sees them up (or down again, when the watch is over and matters no more). */
#ifndef KV_WATCH_H
#define KV_WATCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "server.h"

struct conn;

#define WATCH_STAMP_BITS  20 /* 2^20 stamps of 4 bytes: 4 MiB, written only while keys are watched */
#define WATCH_FILTER_BITS 16 /* 2^16 counts of 4 bytes: 256 KiB */
#define WATCH_STAMPS      (1u << WATCH_STAMP_BITS)
/* A connection's watched keys at most (a key watched twice counts twice): an EXEC's job holds them
 * and its commands' keys, at most TXN_MAX_PARTS (server.h) in all. */
#define WATCH_MAX_KEYS 1024

extern _Atomic uint32_t watch_stamps[WATCH_STAMPS];
extern _Atomic uint32_t watch_watched[1u << WATCH_FILTER_BITS];
/* Each on a line of its own: every write reads active. */
struct watch_counts {
    _Alignas(64) atomic_uint active;       /* keys watched now, over every connection (INFO) */
    _Alignas(64) _Atomic uint64_t flushes; /* FLUSHALLs and FLUSHDBs, a worker's part each */
    char pad[64 - sizeof(uint64_t)];
};
extern struct watch_counts watch_counts;

/* A write of the key whose store hash is hash. Context: the job that wrote it (a worker). */
static inline void watch_touch(uint64_t hash)
{
    /* relaxed: a watch that matters raised the counts before its part of the key, which comes before
     * this write in the key's order (above). */
    if (atomic_load_explicit(&watch_counts.active, memory_order_relaxed) == 0 ||
        atomic_load_explicit(&watch_watched[hash >> (64 - WATCH_FILTER_BITS)], memory_order_relaxed) == 0)
        return;
    atomic_fetch_add_explicit(&watch_stamps[hash >> (64 - WATCH_STAMP_BITS)], 1, memory_order_relaxed);
}

/* Set by a part of a write that changed nothing of its key (a SET NX of a key there already, an
 * EXPIRE whose condition does not hold, a WRONGTYPE error...), as Redis's commands signal a key
 * modified only when they changed it: the part then counts as no write of it (request.c). Unset
 * before each part; each command says it where it knows (kv_server counted every write: a client
 * spinning on SET NX of a lock aborted, every time, the EXEC that was to release it). Context: the
 * part's job. */
extern _Thread_local bool watch_part_unchanged;
static inline void watch_unchanged(void)
{
    watch_part_unchanged = true;
}

/* A write of every key (a flush): its part on one worker. Context: that worker's job. */
void watch_flushed(void);

/* The keyed command a WATCH becomes (txn.c): a part a key, every argument a key, each reading its
 * key's stamp into the request's set (watch_set_new), then +OK. */
extern const struct command watch_cmd;

/* The set of a WATCH request r's keys, their stamps to be read by its parts (r->watch: r holds it
 * until freed), counted as watched from now on. NULL without memory. Context: the network thread,
 * before r is submitted. */
struct watch_set *watch_set_new(struct request *r);

/* The connection watches s's keys too, until its next EXEC, DISCARD or UNWATCH (the connection's
 * hold on s). Context: its network thread. */
void watch_add(struct conn *c, struct watch_set *s);

/* Ends the connection's watches (UNWATCH, DISCARD, an aborted EXEC, its closing). Context: its
 * network thread. */
void watch_clear(struct conn *c);

/* The connection's watches, handed to its EXEC (the connection keeps none), or NULL. Context: its
 * network thread. */
struct watch_set *watch_take(struct conn *c);

/* The shard hashes of list's keys into hashes (room for WATCH_MAX_KEYS). Return: how many. */
uint32_t watch_hashes(const struct watch_set *list, uint64_t *hashes);

/* Whether a key of list was written since its WATCH, or its time to live has run out by now_ms
 * (kv_now_ms). Context: a job that holds every key of list. */
bool watch_changed(const struct watch_set *list, int64_t now_ms);

/* Lets list go (taken by watch_take): its keys watched no more. Context: any thread. */
void watch_release(struct watch_set *list);

/* Drops a WATCH request's hold on its set (request_free). */
void watch_set_put(struct watch_set *s);

/* How many keys the connection watches (CLIENT LIST). Context: any thread: a snapshot. */
uint32_t watch_count(const struct conn *c);

#endif
