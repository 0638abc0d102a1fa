/* The pin filter's making and counting (pin_filter.h). Written by hand: a one-function Bloom filter
 * that clones share and only ever grow is a few lines, and no library here (liburcu, xxhash) has one.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>
#include <string.h>

#include "pin_filter.h"

#define MIN_LOG2 12 /* 4,096 bits (512 bytes): room for 128 pins */

static unsigned log2_bits(const struct pin_filter *f)
{
    return 64 - f->shift;
}

#define MAX_LOG2 24 /* room for 524,288 pins: past SHARD_RING_MAX_PINS */

struct pin_filter *shard__pin_filter_new(size_t pins)
{
    unsigned lg = MIN_LOG2;
    while (lg < MAX_LOG2 && ((size_t)1 << lg) < 32 * (pins + 1))
        lg++;
    size_t words = ((size_t)1 << lg) / 64, bytes = sizeof(struct pin_filter) + words * sizeof(uint64_t);
    struct pin_filter *f = aligned_alloc(64, (bytes + 63) / 64 * 64); /* the counts' line apart */
    if (!f)
        return NULL;
    memset(f, 0, bytes); /* zero bits are the words' initial values */
    atomic_init(&f->refs, 1);
    atomic_init(&f->set, 0);
    f->shift = 64 - lg;
    return f;
}

bool shard__pin_filter_full(const struct pin_filter *f)
{
    return !f || atomic_load_explicit(&f->set, memory_order_relaxed) + 1 > ((size_t)1 << log2_bits(f)) / 16;
}

void shard__pin_filter_add(struct pin_filter *f, uint64_t hash)
{
    size_t b = pin_filter_bit(f, hash);
    uint64_t m = UINT64_C(1) << (b % 64);
    if (!(atomic_fetch_or_explicit(&f->word[b / 64], m, memory_order_relaxed) & m))
        atomic_fetch_add_explicit(&f->set, 1, memory_order_relaxed);
}

struct pin_filter *shard__pin_filter_ref(struct pin_filter *f)
{
    if (f)
        atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed); /* the caller holds one */
    return f;
}

void shard__pin_filter_unref(struct pin_filter *f)
{
    if (f && atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1)
        free(f);
}

size_t shard__pin_filter_memory(const struct pin_filter *f)
{
    return f ? sizeof *f + ((size_t)1 << log2_bits(f)) / 8 : 0;
}
