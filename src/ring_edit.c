/* Changes that edit the ring and keep its members: a worker's weight, a key's placement. Each is one
 * shard__membership_edit (membership.h), with add and remove's ordered handoff of the keys it moves.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>

#include "dispatcher_internal.h"
#include "hash.h"
#include "membership.h"
#include "rcu.h"

struct weight_edit {
    const char *name;
    uint32_t    weight;
};

static int set_weight_edit(shard_ring *r, const void *ctx, bool *changed)
{
    const struct weight_edit *e = ctx;
    uint32_t old = shard_ring_weight(r, e->name);
    if (old == 0)
        return -ENOENT;
    *changed = old != e->weight;
    return *changed ? shard_ring_set_weight(r, e->name, e->weight) : 0;
}

SHARD_API int shard_worker_set_weight(shard_dispatcher *d, const char *name, uint32_t weight)
{
    int err = shard__ring_check_name(name);
    if (err || weight == 0)
        return err == -ENAMETOOLONG ? -ENOENT : -EINVAL;
    if (!d)
        return -EINVAL;
    struct weight_edit e = { name, weight };
    return shard__membership_edit(d, set_weight_edit, &e);
}

struct place_edit {
    shard_dispatcher *d;
    uint64_t    hash;
    const char *name; /* NULL: unplace */
    const void *key;  /* by_key: the key's bytes, hashed under ctl */
    size_t      len;
    bool        by_key;
};

static int place_edit(shard_ring *r, const void *ctx, bool *changed)
{
    const struct place_edit *e = ctx;
    /* The key is hashed here, holding ctl (counted by shard__ctl_enter), by the ring's copy of
     * d->cfg.ring: a section of its own before shard__ctl_enter's would leave a gap in which destroy
     * could free d. */
    uint64_t hash = e->by_key ? shard_ring_hash(r, e->key, e->len) : e->hash;
    /* Counted under ctl, as the balancer's edits run (balance_plan.c's end_isolation). */
    atomic_fetch_add_explicit(&e->d->user_places, 1, memory_order_relaxed);
    if (!e->name) {
        *changed = true;
        return shard_ring_unpin(r, hash);
    }
    if (!shard_ring_weight(r, e->name)) /* every member weighs at least 1 */
        return -ENOENT;
    const char *now = shard_ring_pin_of(r, hash);
    *changed = !now || strcmp(now, e->name) != 0;
    return *changed ? shard_ring_pin(r, hash, e->name) : 0;
}

SHARD_API int shard_key_place_hash(shard_dispatcher *d, uint64_t hash, const char *worker)
{
    int err = shard__ring_check_name(worker);
    if (err)
        return err == -ENAMETOOLONG ? -ENOENT : err;
    if (!d)
        return -EINVAL;
    struct place_edit e = { .d = d, .hash = hash, .name = worker };
    return shard__membership_edit(d, place_edit, &e);
}

SHARD_API int shard_key_place(shard_dispatcher *d, const void *key, size_t len, const char *worker)
{
    if (!d || (!key && len > 0))
        return -EINVAL;
    int err = shard__ring_check_name(worker);
    if (err)
        return err == -ENAMETOOLONG ? -ENOENT : err;
    struct place_edit e = { .d = d, .name = worker, .key = key, .len = len, .by_key = true };
    return shard__membership_edit(d, place_edit, &e);
}

SHARD_API int shard_key_unplace_hash(shard_dispatcher *d, uint64_t hash)
{
    if (!d)
        return -EINVAL;
    struct place_edit e = { .d = d, .hash = hash };
    return shard__membership_edit(d, place_edit, &e);
}

SHARD_API int shard_key_unplace(shard_dispatcher *d, const void *key, size_t len)
{
    if (!d || (!key && len > 0))
        return -EINVAL;
    struct place_edit e = { .d = d, .key = key, .len = len, .by_key = true };
    return shard__membership_edit(d, place_edit, &e);
}
