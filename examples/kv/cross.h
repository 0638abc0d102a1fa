/* kv_server: commands whose keys meet: what one key gets depends on another key, which may live on
 * another worker (RENAME, RENAMENX, MSETNX, SMOVE, LMOVE, SINTER...). SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Such a command runs as one multi-key job (its table entry's `atomic`, txn.c): its parts run one
 * after another, each on its key's worker, while every key is held. A worker's store is its own
 * (store.h), so no part may read another worker's keys; and one visit a key is not enough to check
 * every key and then change every key (RENAMENX's source waits on whether its destination exists).
 * So the keys come to one place: every part but the last takes its key's entry out of its store into
 * the request (part.held); the last takes its own too, and decides the whole command there, with
 * every entry in hand, as Redis does with its one keyspace; then it puts each entry back: its own
 * key's into its store, the others' into the transit area (store_hand_over), where their owners adopt
 * them at their next command. Every key is still held then, so no command of any of them runs before
 * its entry is back: to other clients the command is one step, as in Redis.
 *
 * What is not one step: the keyspace commands (KEYS, SCAN, DBSIZE, FLUSHDB), which read or clear each
 * worker's store apart from the keys' order, miss a key while it is in the request. Inside MULTI,
 * the parts of the transaction's other commands run in their keys' steps (txn.c), so a command whose
 * keys meet may share no key with another command of its transaction (txn.c refuses it while queued). */
#ifndef KV_CROSS_H
#define KV_CROSS_H

#include "server.h"

/* Decides a command whose keys meet, in its last part p on s's worker: every key's entry is in hand
 * (cross_entry), the reply goes to part_out(r, p). It may change, replace, make or free the entries
 * (cross_drop), each keeping its part's key. */
typedef void cross_decide_fn(struct kv_store *s, struct request *r, const struct part *p);

/* A part of such a command: its key's entry comes into the request; the last part calls decide and
 * puts every entry back. Context: the part's job, in the command's multi-key job (or its only part). */
void cross_part(struct kv_store *s, struct request *r, const struct part *p, cross_decide_fn *decide);

/* Where the entry of part i's key is, while the last part decides: NULL when the key does not exist.
 * Parts of one key share one place. */
static inline struct kv_entry **cross_entry(struct request *r, uint32_t i)
{
    return &r->parts[r->parts[i].same].held;
}

/* Frees the entry of part i's key, its expiry ended: the key no longer exists. */
void cross_drop(struct request *r, uint32_t i);

/* A new entry for part i's key holding obj of type (a string: a copy of the len bytes at obj), put in
 * its place, which must be empty. Return: 0; -ENOMEM (obj is still the caller's). */
int cross_make(struct request *r, uint32_t i, enum kv_type type, const void *obj, size_t len);

#endif
