/* kv_server: the objects behind keys that are not strings: freeing one by its type, and what the
 * objects share (a value's allocation, a random number). SPDX-License-Identifier: LGPL-2.1-or-later */
#include "obj.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

void kv_obj_free(uint8_t type, void *obj)
{
    switch ((enum kv_type)type) {
    case KV_LIST:
        obj_list_free(obj);
        break;
    case KV_HASH:
    case KV_SET:
        obj_map_free(obj);
        break;
    case KV_ZSET:
        obj_zset_free(obj);
        break;
    default:
        break; /* KV_STRING holds a value, not an object; no other type is made here */
    }
}

/* Each thread its own state, so that workers never share a cache line for it; seeded at the first
 * call from the clock and the state's own address (different per thread). */
static _Thread_local uint64_t rng_state;

uint64_t obj_random(void)
{
    if (rng_state == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        rng_state = ((uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)&rng_state) | 1;
    }
    /* xorshift64*: fast, and plenty for picking a level or a member */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

struct kv_value *obj_value_new(const void *data, size_t len)
{
    struct kv_value *v = malloc(sizeof *v + len);
    if (!v)
        return NULL;
    atomic_init(&v->refs, 1);
    v->len = len;
    memcpy(v->data, data, len);
    return v;
}
