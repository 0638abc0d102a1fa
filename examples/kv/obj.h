/* kv_server: the objects behind keys that are not strings (lists, hashes, sets, sorted sets).
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * An entry of such a type (kvmap.h) owns one object, touched only by the worker that holds the key,
 * like the rest of its store; it moves between workers with its entry, without being copied, so an
 * object points to nothing outside itself (no worker's state, no store).
 *
 *   KV_LIST  struct obj_list (obj_list.c): a ring of element values, O(1) at both ends and by index.
 *   KV_HASH  struct kvmap (obj_map.c): fields are the entries' keys, values their kv_values.
 *   KV_SET   struct kvmap (obj_map.c): members are the entries' keys, with no value (val NULL).
 *   KV_ZSET  struct obj_zset (obj_zset.c): a skip list with spans, and an index by member.
 *
 * Every function here runs on the worker holding the object (Context: a job on that worker), and
 * none of them keeps a pointer given to it but where it says it takes a reference. */
#ifndef KV_OBJ_H
#define KV_OBJ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvmap.h"

/* Frees an entry's object of type (enum kv_type, not KV_STRING). Accepts NULL. */
void kv_obj_free(uint8_t type, void *obj);

/* A pseudo-random number from the calling thread's own generator (SPOP, skip list levels): not for
 * anything that must be unpredictable. */
uint64_t obj_random(void);

/* A new value (refs 1) holding a copy of data; NULL without memory. Drop with kv_value_put. */
struct kv_value *obj_value_new(const void *data, size_t len);

/* Lists (obj_list.c). */
struct obj_list;
/* An empty list; NULL without memory. Pair with obj_list_free, which drops its elements. */
struct obj_list *obj_list_new(void);
void             obj_list_free(struct obj_list *l);
size_t           obj_list_len(const struct obj_list *l);
/* Makes room for n more elements, so that the next n pushes cannot fail. Return: 0; -ENOMEM. */
int              obj_list_reserve(struct obj_list *l, size_t n);
/* Adds v at the head (left) or the tail, taking the caller's reference; room must be reserved. */
void             obj_list_push(struct obj_list *l, bool left, struct kv_value *v);
/* Takes the element at the head or the tail, with its reference; NULL when the list is empty. */
struct kv_value *obj_list_pop(struct obj_list *l, bool left);
/* The element at index i (< len), from the head; the list keeps its reference. */
struct kv_value *obj_list_at(const struct obj_list *l, size_t i);
/* Puts v (the caller's reference) at index i (< len) and returns the element it replaces, with its
 * reference. */
struct kv_value *obj_list_set(struct obj_list *l, size_t i, struct kv_value *v);
/* Inserts v (the caller's reference) before index i (<= len): O(len - i); room must be reserved. */
void             obj_list_insert(struct obj_list *l, size_t i, struct kv_value *v);

/* Hashes and sets: a kvmap of members (obj_map.c). */
/* An empty map, small to begin with; NULL without memory. Free with obj_map_free. */
struct kvmap     *obj_map_new(void);
void              obj_map_free(struct kvmap *m);
/* A new member entry of hash (its kv_hash, which the caller has looked it up by): for a hash a copy of
 * val (vlen bytes), for a set (val NULL) none. */
struct kv_entry  *obj_member_new(uint64_t hash, const void *key, size_t klen, const void *val, size_t vlen);
/* Unlinks member key (hash its kv_hash) and returns it, for the caller to free or move; NULL when it is
 * not there. The map shrinks when it has become sparse, which its random picks need. */
struct kv_entry  *obj_map_take(struct kvmap *m, uint64_t hash, const void *key, size_t klen);
/* Removes and frees member key; true when it was there. The map shrinks as obj_map_take says. */
bool              obj_map_del(struct kvmap *m, const void *key, size_t klen);
/* A member picked at random, not quite uniformly (obj_map.c says how), but any member may come up;
 * NULL when the map is empty. */
const struct kv_entry *obj_map_random(const struct kvmap *m);
/* Unlinks a member picked as obj_map_random picks, which the caller then frees with kv_entry_free;
 * NULL when the map is empty. */
struct kv_entry  *obj_map_take_random(struct kvmap *m);

/* Sorted sets (obj_zset.c). Members are ordered by score, then by their bytes (memcmp, the shorter
 * first on a tie), as in Redis. Scores are never NaN. */
struct obj_zset;
struct obj_znode;
/* An empty sorted set; NULL without memory. Pair with obj_zset_free. */
struct obj_zset        *obj_zset_new(void);
void                    obj_zset_free(struct obj_zset *z);
size_t                  obj_zset_len(const struct obj_zset *z);
/* The node of member; NULL when absent. O(1). */
const struct obj_znode *obj_zset_find(const struct obj_zset *z, const void *member, size_t len);
/* Gives member score, adding it if absent. Return: 1 added; 0 updated; -ENOMEM (nothing changed).
 * O(log n). */
int                     obj_zset_set(struct obj_zset *z, const void *member, size_t len, double score);
/* Removes member; true when it was there. O(log n). */
bool                    obj_zset_del(struct obj_zset *z, const void *member, size_t len);
/* Calls fn for each member whose hash (kv_hash) lies in [from, to], in the index's order: a range of
 * hashes is a run of its chains (ZSCAN's cursor, cmd_scan.c). */
void                    obj_zset_range(const struct obj_zset *z, uint64_t from, uint64_t to,
                                       void (*fn)(const struct obj_znode *n, void *ctx), void *ctx);
/* The node at rank (0: the lowest score; < len). O(log n). */
const struct obj_znode *obj_zset_at(const struct obj_zset *z, size_t rank);
/* The rank of n, a node of z (0: the lowest score). O(log n). */
size_t                  obj_zset_rank(const struct obj_zset *z, const struct obj_znode *n);
/* The first node whose score is at least min (above it when exclusive); NULL when none. O(log n). */
const struct obj_znode *obj_zset_first_from(const struct obj_zset *z, double min, bool exclusive);
/* By member, for a set whose members share one score (ZRANGEBYLEX: the list is then in member order;
 * with other scores the answer is some node, as Redis's): the first node whose member is at least
 * member (above it when exclusive), and the last at most member (below it when exclusive); NULL:
 * none. Members compare as memcmp, the shorter first on a tie. O(log n). */
const struct obj_znode *obj_zset_first_lex(const struct obj_zset *z, const void *member, size_t len, bool exclusive);
const struct obj_znode *obj_zset_last_lex(const struct obj_zset *z, const void *member, size_t len, bool exclusive);
/* n's member against member, as those compare them: < 0, 0, > 0. */
int                     obj_znode_member_cmp(const struct obj_znode *n, const void *member, size_t len);
/* The node after n, before n (NULL at either end). O(1). */
const struct obj_znode *obj_znode_next(const struct obj_znode *n);
const struct obj_znode *obj_znode_prev(const struct obj_znode *n);
double                  obj_znode_score(const struct obj_znode *n);
const char             *obj_znode_member(const struct obj_znode *n, size_t *len);

#endif
