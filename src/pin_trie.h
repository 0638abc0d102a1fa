/* Internal: the pin trie, a persistent radix tree of (hash, number) entries that rings share
 * (pin_trie.c: changes; pin_trie_walk.c: walks; pin_node.h: its layout).
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Persistence: nodes and leaves are counted references. A ring holds its root, a node each child.
 * Whoever holds a trie may read it without a lock: nothing reachable from a second holder is ever
 * written. A change copies what it would write unless it is the only holder of every node on the way
 * (refs == 1 all the way down from the root: a node reached through a shared one has a second holder,
 * the copy of its parent), so a change costs one path (at most 11 nodes of 64 children, and one leaf;
 * a leaf that splits becomes a node and up to 33 small leaves), and a ring's clone shares the whole
 * trie by taking one reference. */
#ifndef SHARD_SRC_PIN_TRIE_H
#define SHARD_SRC_PIN_TRIE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pin_node.h"

/* Entries in t (a walk: pin_trie_walk.c). Context: any holder. */
uint32_t shard__pin_count(uintptr_t t);
/* Takes a reference to t (a clone's). Context: any holder. */
uintptr_t shard__pin_ref(uintptr_t t);
/* Drops a reference; the last one frees what no other holder reaches. 0 is fine. Context: the holder,
 * once it no longer reads t; any thread (the count is atomic). */
void shard__pin_unref(uintptr_t t);

/* Gives hash the number num (> 0) in *t, adding the entry if absent; *old receives its number before
 * (0: absent). Context: *t's holder, with no reader of *t (copies what another holder shares).
 * Return: 0; -ENOMEM (*t holds the same entries, possibly in copies of its nodes). */
int shard__pin_set(uintptr_t *t, uint64_t hash, uint32_t num, uint32_t *old);
/* Removes hash from *t; *old receives its number (0: absent, nothing done). Context: as
 * shard__pin_set. Return: 0; -ENOMEM (as shard__pin_set). */
int shard__pin_del(uintptr_t *t, uint64_t hash, uint32_t *old);

/* A trie of the n entries hash[i] (strictly increasing) with numbers num[i], into *t (0 for n = 0).
 * Return: 0; -ENOMEM (*t unchanged). */
int shard__pin_build(uintptr_t *t, const uint64_t *hash, const uint32_t *num, size_t n);

/* Calls fn for every entry in hash order; stops at the first non-zero return and returns it. */
typedef int (*shard__pin_fn)(uint64_t hash, uint32_t num, void *ctx);
int shard__pin_each(uintptr_t t, shard__pin_fn fn, void *ctx);
/* The first entry with a hash >= from: 1 with *hash and *num, or 0 when none. */
int shard__pin_next(uintptr_t t, uint64_t from, uint64_t *hash, uint32_t *num);
/* The i-th entry in hash order, i < shard__pin_count(t). O(64 * depth). */
void shard__pin_at(uintptr_t t, uint32_t i, uint64_t *hash, uint32_t *num);

/* Calls fn for every hash whose entry differs between a and b (present in one only, or with other
 * numbers), in hash order, with num_a and num_b (0: absent): only under subtrees that are not shared,
 * so two versions of a trie a change apart cost one path. Stops at the first non-zero return. */
typedef int (*shard__pin_diff_fn)(uint64_t hash, uint32_t num_a, uint32_t num_b, void *ctx);
int shard__pin_diff(uintptr_t a, uintptr_t b, shard__pin_diff_fn fn, void *ctx);

/* Bytes of t's nodes and leaves, shared ones included. O(nodes). */
size_t shard__pin_memory(uintptr_t t);
/* Nodes and leaves of b that a does not share (a test's view of what a change copied). O(nodes of b). */
size_t shard__pin_unshared(uintptr_t a, uintptr_t b);
/* The depth of t's deepest leaf (0: a leaf or nothing at the root). O(nodes). */
unsigned shard__pin_depth(uintptr_t t);

#endif
