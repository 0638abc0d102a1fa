/* kv_server: each worker's keys, and how they change hands. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A worker owns a store (a kvmap) that only its own thread touches: no lock on the data. When a
 * membership change moves keys away from a worker, shard runs its release hook on that worker after
 * every command it was given for those keys, and before any new owner runs one: the hook puts the
 * moved entries into the transit area, a small locked map keyed by key. A worker that misses a key in
 * its own store looks in the transit area before concluding the key does not exist, and adopts the
 * entry. Keying the transit area by key, not by destination, matters: a key can move twice before
 * its new owner runs a command of it, and whoever owns it then finds it.
 *
 * A crash (shard_worker_crash) runs no release hook: a crashed worker's memory is gone in a real
 * crash. The server simulates a crash of a worker whose data survives (as with a replica): the admin
 * thread first parks the worker inside a job that hands its whole store to the transit area
 * (store_evacuate), crashes it while it is parked, and then lets the job return. Everything it was
 * given after the park is rerouted by shard, in order, to the keys' new owners. */
#ifndef KV_STORE_H
#define KV_STORE_H

#include <shard.h>
#include <stdbool.h>
#include <stddef.h>

#include "kvmap.h"

struct kv_store;

/* Sets up the transit area; Context: once, before the dispatcher starts. Return: 0; -ENOMEM. */
int  store_global_init(void);
/* Frees whatever is still in transit; Context: once, after the dispatcher is destroyed. */
void store_global_free(void);

/* The shard hooks: pass these in struct shard_config. */
void store_on_start(shard_worker *w, void *user);
void store_on_stop(shard_worker *w, void *user);
void store_on_release(shard_worker *w, const struct shard_handoff *h, void *user);

/* The running worker's store; NULL if its start hook found no memory. Context: a job on w. */
struct kv_store *store_of(shard_worker *w);

/* Starts loading the bucket of hash in the calling worker's own store, which the job about to be
 * submitted will read if the key is this worker's (with the network on the workers, a request is
 * parsed on the worker that runs it when it owns the key). Nothing on other threads. */
void store_prefetch(uint64_t hash);
/* Starts loading the entry of hash's bucket (after store_prefetch), when the caller's thread is a
 * worker. */
void store_prefetch_entry(uint64_t hash);
/* The entry of hash in the calling worker's own store, by a guess (kvmap_guess: the first with that
 * hash, keys not compared; NULL when none, or not a worker): for loading what a part will touch
 * before it runs (request_flush), never for an answer. Context: any thread (a worker reads its own
 * store). */
const struct kv_entry *store_own_guess(uint64_t hash);

/* The name of the worker that owns the store. */
const char *store_name(const struct kv_store *s);

/* The entry of key (of any type: the caller checks e->type), adopting it from the transit area if it
 * was handed to this worker's keys; NULL when the key does not exist, or has expired (it is deleted
 * then: expire.h). Context: a job on the store's worker, for a key it owns. */
struct kv_entry *store_find(struct kv_store *s, uint64_t hash, const void *key, size_t klen);
/* As store_find, but an expired key is returned as it is (for expire.c's timer, which deletes it). */
struct kv_entry *store_peek(struct kv_store *s, uint64_t hash, const void *key, size_t klen);
/* Sets key to the string val, whatever it held before; its expiry stays (the caller ends it where
 * Redis does: SET, MSET, GETSET). Return: its entry; NULL without memory (nothing changed).
 * Context: as store_find. */
struct kv_entry *store_set(struct kv_store *s, uint64_t hash, const void *key, size_t klen,
                           const void *val, size_t vlen);
/* Adds e (any type), whose key the store must not hold (store_find said so). Context: as store_find. */
void store_add(struct kv_store *s, struct kv_entry *e);
/* Deletes key, ending its expiry; true when it existed. Context: as store_find. */
bool store_del(struct kv_store *s, uint64_t hash, const void *key, size_t klen);
/* Takes key's entry out of the store (as store_find finds it), for a command whose keys meet
 * (cross.h); it is no longer counted in the server's keys. NULL when there is none. Context: as
 * store_find. */
struct kv_entry *store_take(struct kv_store *s, uint64_t hash, const void *key, size_t klen);
/* Hands e, taken by store_take or made for a key no store holds, to the transit area, where its
 * key's owner adopts it at its next command of the key. The key must be held (a multi-key job) until
 * after this returns, so that no command of it looks for it in between. Context: any worker. */
void store_hand_over(struct kv_entry *e);
/* Hands every entry of the store to the transit area (the crash simulation above).
 * Context: a job on the store's worker. */
void store_evacuate(struct kv_store *s);

/* Calls fn(e, ctx) for each entry of s, and then of the transit area for which mine(e, ctx) says it
 * belongs to s's worker (an entry in transit belongs to whichever worker owns its key), whose hash is
 * in [from, to] (kvmap_range; the transit area's under its locks), while fn returns true. fn must not
 * change either. Context: a job on s's worker. */
void store_range(struct kv_store *s, uint64_t from, uint64_t to, bool (*mine)(const struct kv_entry *e, void *ctx),
                 bool (*fn)(const struct kv_entry *e, void *ctx), void *ctx);
/* Deletes every key of s, and those in the transit area for which mine(e, ctx) says they belong to
 * s's worker (mine NULL: none): a key is deleted only on its owner's thread, where its expiry's timer
 * runs. Return: keys deleted. Context: a job on s's worker. */
size_t store_clear(struct kv_store *s, bool (*mine)(const struct kv_entry *e, void *ctx), void *ctx);

/* Keys in the whole server (DBSIZE), and how many wait in the transit area. Context: any thread;
 * exact once no command runs. */
size_t store_total_keys(void);
/* Of those, the keys with an expiry (INFO keyspace). */
size_t store_total_expires(void);
size_t store_transit_keys(void);
/* Keys held by the worker named name (not counting those in transit); 0 when it has no store.
 * Context: any thread. */
size_t store_worker_keys(const char *name);

#endif
