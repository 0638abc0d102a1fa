/* Internal: the pin filter, a bitmap that says which hashes may be pinned, so that a lookup in a marked
 * sub-bucket (ring_layout.h) that holds no pin of its own skips the pin trie's three or four dependent
 * reads for one (pin_filter.c). SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * One bit a hash, chosen by a multiplicative hash of it (a Bloom filter with one function): a clear bit
 * means not pinned; a set bit means maybe, and the trie answers. Bits are only ever set, never cleared:
 * a filter holds a superset of the pins of every ring that refers to it. That lets clones share it as
 * they share the trie (a counted reference), with no copy per placement: a pin sets its bit in the
 * shared filter, which other rings read only as a false "maybe". Unpins, removed members and purges
 * leave their bits; the filter is rebuilt for one ring (from its live pins, into a new filter of its
 * own) when its set bits reach a sixteenth of its bits, so at most 1 lookup in 16 that reaches it is a
 * false "maybe", and a rebuild, O(pins), comes after at least as many new bits as it had pins: O(1) a
 * pin, amortized. Made with 32 to 64 bits a pin, and filled to 16 before the next rebuild: 2 to 8 bytes
 * a pin, 640 bytes at least (8,000 pins placed one at a time: 32 KB); unpins do not shrink it.
 *
 * Concurrency: bits and the count of set bits are atomic, because two clones that share a filter may
 * be changed by two threads at once, and published rings read it meanwhile. A pin's bit is set before
 * the ring that holds the pin is published (rcu_assign_pointer orders it before), so a reader of that
 * ring sees it. */
#ifndef SHARD_SRC_PIN_FILTER_H
#define SHARD_SRC_PIN_FILTER_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The counts, written by every clone and new bit, on a line of their own: lookups read shift and
 * the words. */
struct pin_filter {
    atomic_uint      refs;
    atomic_size_t    set;   /* bits set, by every ring that shares the filter */
    alignas(64) unsigned shift; /* I: 64 - log2(bits): a hash's bit is (hash * odd) >> shift */
    _Atomic uint64_t word[];
};

static inline size_t pin_filter_bit(const struct pin_filter *f, uint64_t hash)
{
    return (size_t)((hash * UINT64_C(0x9e3779b97f4a7c15)) >> f->shift);
}

/* Whether hash may be pinned in a ring whose filter is f: false only when no ring that shares f has
 * ever pinned it since f was built. NULL f: maybe. Context: any holder of f; no lock. */
static inline bool shard__pin_filter_may(const struct pin_filter *f, uint64_t hash)
{
    if (!f)
        return true;
    size_t b = pin_filter_bit(f, hash);
    return atomic_load_explicit(&f->word[b / 64], memory_order_relaxed) >> (b % 64) & 1;
}

/* A new filter, empty, with room for pins pins (a reference for the caller). NULL: no memory. */
struct pin_filter *shard__pin_filter_new(size_t pins);
/* Whether one more bit would pass the sixteenth of f's bits set that calls for a rebuild (NULL: yes). */
bool shard__pin_filter_full(const struct pin_filter *f);
/* Sets hash's bit. Context: a holder of f, before publishing the ring whose pin it is. */
void shard__pin_filter_add(struct pin_filter *f, uint64_t hash);
/* Takes a reference (a clone's); NULL is fine. */
struct pin_filter *shard__pin_filter_ref(struct pin_filter *f);
/* Drops a reference; the last frees f. NULL is fine. Context: a holder that no longer reads f. */
void shard__pin_filter_unref(struct pin_filter *f);
/* Bytes of f (0 for NULL): counted in full by every ring that shares it, as the trie is. */
size_t shard__pin_filter_memory(const struct pin_filter *f);

#endif
