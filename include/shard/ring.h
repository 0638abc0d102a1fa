/* SPDX-License-Identifier: LGPL-2.1-or-later */
/** @file shard/ring.h
 * The consistent-hash ring.
 *
 * A pure data structure, no threads. A ring is not synchronised: one thread changes it, or many
 * threads only read it (every const function is safe to call concurrently with the others).
 *
 * Placement: a member of weight w gets vnodes * w points, point(member, i) for i in [0, vnodes * w).
 * A key belongs to the member of the smallest point >= hash(key), wrapping to the smallest point.
 * Equal points are ordered by member name (strcmp), so the ring depends only on its members, their
 * weights and its config, never on the order of adds and removes. */
#ifndef SHARD_RING_H
#define SHARD_RING_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Points per unit of weight when the config says 0, chosen by measurement (bench_balance): with 64
 * equal members "w0".."w63" and seed 0, the largest share is 1.064x the mean and the smallest 0.951x;
 * over seeds 0..39 the largest share stays within 1.10x the mean for 38 of 40 seeds (worst 1.109x).
 * For comparison 320 points give 1.095x at seed 0 but pass for only 3 of 40 seeds, 640 for 24 of 40.
 * Lookup cost barely grows with it (see the front table), memory is 20 to 45 bytes a point
 * (shard_ring_memory). */
#define SHARD_DEFAULT_VNODES 1024

/** A ring holds at most this many points: vnodes * weight of one add, and the total, are capped. */
#define SHARD_RING_MAX_POINTS (1u << 30)

/** A consistent-hash ring: members, their points, and the lookup tables (opaque). */
typedef struct shard_ring shard_ring;

/** Hook: the index-th ring point of member. Called with the ctx of the config, from the thread calling
 * shard_ring_add (or add_many) only, with index in [0, vnodes * weight) and member the name as given
 * to add. Must be pure (same arguments, same result). */
typedef uint64_t (*shard_point_fn)(const char *member, uint32_t index, void *ctx);
/** Hook: a key's position on the ring. Called with the ctx of the config, from the thread calling any
 * ring function that takes a key. Must be pure (same arguments, same result). A dispatcher calls it
 * from every submitting thread at once: there it must be thread-safe. */
typedef uint64_t (*shard_hash_fn)(const void *key, size_t len, void *ctx);

/** How a ring places members and keys. Zeroed: the defaults. It can grow at its end (docs/using.md: ABI). */
struct shard_ring_config {
    uint32_t       vnodes; /**< points per unit of weight; 0 means SHARD_DEFAULT_VNODES */
    uint64_t       seed;   /**< seed of the default hashes */
    shard_point_fn point;  /**< NULL: XXH3_64bits_withSeed(member "#" decimal(index), seed) */
    shard_hash_fn  hash;   /**< NULL: XXH3_64bits_withSeed(key, len, seed) */
    void          *ctx;    /**< passed to both hooks */
};

/** Creates an empty ring. cfg NULL or zeroed: the defaults. The config is copied; ctx must outlive
 * the ring (and its clones). Pair with shard_ring_destroy().
 * Context: any thread. Return: 0; -EINVAL (out NULL); -ENOMEM. */
SHARD_API int shard_ring_create(shard_ring **out, const struct shard_ring_config *cfg);

/** Frees the ring and its member names. NULL is fine. Context: the thread that owns the ring, once no
 * other thread reads it. */
SHARD_API void shard_ring_destroy(shard_ring *r);

/** A deep, independent copy with the same config (hooks and ctx are shared, not copied). The pins
 * are shared with r, copy on write (a change to either copies only what it changes), so a clone costs
 * its points and tables, not its pins. Context: any thread that may read r; the copy may then be used
 * and destroyed by another thread than r. Return: 0; -EINVAL (r or out NULL); -ENOMEM. */
SHARD_API int shard_ring_clone(const shard_ring *r, shard_ring **out);

/** Adds member with vnodes * weight points; the name is copied. Costs one merge of the ring's points:
 * to build a large ring at once, shard_ring_add_many is one sort instead of one merge per member.
 * Context: the ring's owner thread. Return: 0; -EINVAL (r or member NULL, empty name, weight 0,
 * vnodes * weight or the ring's total over SHARD_RING_MAX_POINTS); -EEXIST (name present);
 * -ENAMETOOLONG (over SHARD_NAME_MAX bytes); -ENOMEM. On error the ring is unchanged. */
SHARD_API int shard_ring_add(shard_ring *r, const char *member, uint32_t weight);

/** One member for shard_ring_add_many(). */
struct shard_ring_member {
    const char *name;   /**< the member's name, copied by the ring */
    uint32_t    weight; /**< its weight: vnodes * weight points */
};

/** Adds n members at once, all or none, with one sort of all their points (build cost close to
 * sorting that many 64-bit values), every member checked before any is added.
 * Context: the ring's owner thread. Return: as shard_ring_add(); -EEXIST also when two members of
 * the array share a name; -EINVAL also when members is NULL with n > 0. */
SHARD_API int shard_ring_add_many(shard_ring *r, const struct shard_ring_member *members, size_t n);

/** Removes member and its points. Strings returned for it become invalid.
 * Context: the ring's owner thread. Return: 0; -EINVAL (r or member NULL); -ENOENT (not present). */
SHARD_API int shard_ring_remove(shard_ring *r, const char *member);

/** Gives member a new weight (added in 0.2): only its own points change (those numbered between
 * vnodes * old weight and vnodes * new weight are added or removed), so only keys that enter or leave
 * it move: about as many as its share of the total weight changes by (1 of 4 to 3 of 6: a quarter).
 * The rest keep their owner. Strings returned for members stay valid. Same weight: nothing changes.
 * Context: the ring's owner thread. Return: 0; -EINVAL (r or member NULL, weight 0, vnodes * weight
 * or the ring's total over SHARD_RING_MAX_POINTS); -ENOENT (not present); -ENOMEM. On error the ring
 * is unchanged. */
SHARD_API int shard_ring_set_weight(shard_ring *r, const char *member, uint32_t weight);

/** The most hashes a ring pins (shard_ring_pin). */
#define SHARD_RING_MAX_PINS 65536u

/** Pins a hash to member (added in 0.2): shard_ring_owner() and every lookup of that hash answer
 * member, whatever the points say; other hashes are untouched. A hash pinned already moves to member.
 * Pins follow their member's renumbering; removing the member drops its pins. For placing hot keys
 * (shard_key_place() does it on a dispatcher's ring). A pin costs O(log pins), on a clone too (it
 * copies one path of the pins it shares), amortized: about one pin in every pins-many new ones
 * rebuilds the ring's pin filter from its pins, O(pins) (0.5 ms at 17,000 pins); a lookup pays for
 * pins only near one: in the lookup
 * table's buckets that hold a pin, and in rings of up to 8192 members only in the part of the bucket
 * (down to an eighth) that holds it (8,000 pins on 8 members at the default vnodes: 2.6 % of
 * lookups).
 * Context: the ring's owner thread. Return: 0; -EINVAL (r or member NULL); -ENOENT (no such member);
 * -E2BIG (SHARD_RING_MAX_PINS pins already); -ENOMEM. On error the ring is unchanged. */
SHARD_API int shard_ring_pin(shard_ring *r, uint64_t hash, const char *member);
/** Unpins a hash: the points decide its owner again. O(log pins). Context: the ring's owner thread.
 * Return: 0; -EINVAL (r NULL); -ENOENT (not pinned); -ENOMEM (the pins are shared with a clone and
 * the path to change could not be copied). On error the ring is unchanged (added in 0.2). */
SHARD_API int shard_ring_unpin(shard_ring *r, uint64_t hash);
/** How many hashes r pins. Context: any reader. Return: the count; 0 for NULL r (added in 0.2). */
SHARD_API size_t shard_ring_pin_count(const shard_ring *r);
/** The i-th pin in hash order, i < shard_ring_pin_count: its hash and member (valid like
 * shard_ring_owner()'s result); either out pointer may be NULL. O(log pins) (O(pins) after a remove
 * that found no memory to drop its member's pins, until the next pin or unpin). Context: any reader.
 * Return: 0; -EINVAL (r NULL); -ERANGE (i past the last pin) (added in 0.2). */
SHARD_API int shard_ring_pin_at(const shard_ring *r, size_t i, uint64_t *hash, const char **member);

/** The member hash is pinned to (valid like shard_ring_owner()'s result): what shard_ring_pin set
 * and shard_ring_unpin or a remove of that member has not undone. O(log pins). Context: any reader.
 * Return: the member's name; NULL when hash is not pinned, or r is NULL (added in 0.4). */
SHARD_API const char *shard_ring_pin_of(const shard_ring *r, uint64_t hash);

/** How many members r has. Context: any reader. Return: the count; 0 for NULL r. */
SHARD_API size_t shard_ring_member_count(const shard_ring *r);
/** How many points r has (the sum of vnodes * weight over its members). Context: any reader.
 * Return: the count; 0 for NULL r. */
SHARD_API size_t shard_ring_point_count(const shard_ring *r);

/** The weight member was added with; 0 when absent (or r/member NULL). Context: any reader. */
SHARD_API uint32_t shard_ring_weight(const shard_ring *r, const char *member);

/** The i-th member in name order, i < shard_ring_member_count; NULL past the end. The string is valid
 * like shard_ring_owner()'s result. Context: any reader. */
SHARD_API const char *shard_ring_member(const shard_ring *r, size_t i);

/** The i-th point in clockwise order (ascending), i < shard_ring_point_count, and its owner (valid
 * like shard_ring_owner's result). Either out pointer may be NULL.
 * Context: any reader. Return: 0; -EINVAL (r NULL); -ERANGE (i past the last point). */
SHARD_API int shard_ring_point(const shard_ring *r, size_t i, uint64_t *point, const char **owner);

/** A key's position: the hash hook, or XXH3 with the seed. key may be NULL only with len 0.
 * Context: any reader. Return: the hash; 0 for r NULL or key NULL with len > 0. */
SHARD_API uint64_t shard_ring_hash(const shard_ring *r, const void *key, size_t len);

/** The key's owner: the member of the smallest point >= shard_ring_hash(r, key, len), wrapping to the
 * smallest point. NULL when the ring is empty or key is NULL with len > 0. The string stays valid
 * until that member is removed from r or r is destroyed. Context: any reader; no allocation, no
 * lock. */
SHARD_API const char *shard_ring_owner(const shard_ring *r, const void *key, size_t len);
/** The owner of a position: as shard_ring_owner(), for a hash already computed (shard_ring_hash()).
 * NULL when the ring is empty. Context: any reader; no allocation, no lock. */
SHARD_API const char *shard_ring_owner_of_hash(const shard_ring *r, uint64_t hash);

/** Up to n distinct members, clockwise from the key (the first is shard_ring_owner()), for replicas or
 * fallbacks; a member's later points are skipped. Strings are valid like shard_ring_owner()'s.
 * Context: any reader. Return: how many were written: min(n, member count); 0 for an empty ring,
 * NULL r, NULL out or a NULL key with len > 0. */
SHARD_API size_t shard_ring_owners(const shard_ring *r, const void *key, size_t len,
                                   const char **out, size_t n);
/** As shard_ring_owners(), from a position (shard_ring_hash()) instead of a key. Context: any reader.
 * Return: as shard_ring_owners(). */
SHARD_API size_t shard_ring_owners_of_hash(const shard_ring *r, uint64_t hash,
                                           const char **out, size_t n);

/** Fraction of the 2^64 hash space that member owns (0 when absent). Over all members: 1. Pins,
 * single hashes, do not count. Context: any reader; O(points). */
SHARD_API double shard_ring_share(const shard_ring *r, const char *member);

/** A 64-bit digest of the member names, the points and their owners, and the pins: two rings with
 * equal checksums route every hash identically. 0 for NULL. Context: any reader; O(points). */
SHARD_API uint64_t shard_ring_checksum(const shard_ring *r);

/** Bytes used by the lookup structures: points and their owners (12 bytes a point), and a direct table
 * that names the owner of most hashes in one load (2 bytes an entry, 8 to 16 entries a point while they
 * take at most 1 MiB, 4 to 8 beyond, plus 4 bytes every 64 entries). Under 45 bytes a point; under 29
 * for rings of more than 65,536 points; pins add 13 to 27 bytes each (their tree) and 2 to 8 (a filter
 * that spares most lookups the tree: at least 640 bytes, sized by the pins there were when it was
 * last made, so unpins do not shrink it), both shared with clones and counted in full by every ring
 * that shares them. Member names and the ring header are not counted.
 * Context: any reader. Return: 0 for NULL r. */
SHARD_API size_t shard_ring_memory(const shard_ring *r);

/** Called by shard_ring_diff() for one arc (first, last] whose owner is owner_a in one ring and
 * owner_b in the other; the strings are valid during the call. */
typedef void (*shard_diff_fn)(uint64_t first, uint64_t last,
                              const char *owner_a, const char *owner_b, void *ctx);
/** Calls fn for every arc of the hash space whose owner differs between a and b, in clockwise order
 * starting with the arc that holds hash 0. An arc is (first, last] in hash space: keys with
 * first < hash <= last, wrapping past 2^64-1; first == last means the whole space. Adjacent arcs
 * with the same pair of owners are reported as one. A pinned hash h (shard_ring_pin) owned
 * differently is the arc (h - 1, h]. An owner is NULL where its ring is empty. The
 * strings are valid during the call. Both rings must use the same hash function for the arcs to
 * mean the same keys. Cost: O(points + pins) of both; O(pins changed) when b is a clone of a (or a of
 * b, or both of one ring) whose members and weights have not changed since, only pins (a
 * placement). Context: any reader of both. Return: 0; -EINVAL (a, b or fn NULL); -ENOMEM. */
SHARD_API int shard_ring_diff(const shard_ring *a, const shard_ring *b, shard_diff_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif

#endif
