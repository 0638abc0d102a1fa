/* kv_server: a list: a ring buffer of element values. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A ring rather than Redis's quicklist of packed nodes: pushes and pops at both ends are O(1)
 * (amortized over the doublings), and so is reaching an index, which makes LINDEX O(1) and LRANGE
 * O(elements returned). Each element is a kv_value, so that a long one popped or read by LINDEX is
 * sent by reference (server.h) instead of copied. The ring halves when three quarters are empty, so a
 * list drained by pops gives its memory back. */
#include <errno.h>
#include <stdlib.h>

#include "obj.h"

#define MIN_CAP 8

struct obj_list {
    struct kv_value **slot; /* cap slots, a power of two; element i is at (head + i) & (cap - 1) */
    size_t            cap, head, n;
};

struct obj_list *obj_list_new(void)
{
    return calloc(1, sizeof(struct obj_list));
}

void obj_list_free(struct obj_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        kv_value_put(obj_list_at(l, i));
    free(l->slot);
    free(l);
}

size_t obj_list_len(const struct obj_list *l)
{
    return l->n;
}

/* Moves the elements to a ring of cap slots (cap >= n), unwrapped from slot 0. */
static int resize(struct obj_list *l, size_t cap)
{
    struct kv_value **slot = malloc(cap * sizeof *slot);
    if (!slot)
        return -ENOMEM;
    for (size_t i = 0; i < l->n; i++)
        slot[i] = obj_list_at(l, i);
    free(l->slot);
    l->slot = slot;
    l->cap = cap;
    l->head = 0;
    return 0;
}

int obj_list_reserve(struct obj_list *l, size_t n)
{
    if (l->cap - l->n >= n)
        return 0;
    if (n > SIZE_MAX / sizeof(void *) / 2 - l->n)
        return -ENOMEM;
    size_t cap = l->cap ? l->cap : MIN_CAP;
    while (cap < l->n + n)
        cap *= 2;
    return resize(l, cap);
}

void obj_list_push(struct obj_list *l, bool left, struct kv_value *v)
{
    if (left) {
        l->head = (l->head - 1) & (l->cap - 1);
        l->slot[l->head] = v;
    } else {
        l->slot[(l->head + l->n) & (l->cap - 1)] = v;
    }
    l->n++;
}

struct kv_value *obj_list_pop(struct obj_list *l, bool left)
{
    if (l->n == 0)
        return NULL;
    struct kv_value *v;
    if (left) {
        v = l->slot[l->head];
        l->head = (l->head + 1) & (l->cap - 1);
    } else {
        v = l->slot[(l->head + l->n - 1) & (l->cap - 1)];
    }
    l->n--;
    if (l->cap > MIN_CAP && l->n < l->cap / 4)
        (void)resize(l, l->cap / 2); /* without memory it simply stays larger */
    return v;
}

struct kv_value *obj_list_at(const struct obj_list *l, size_t i)
{
    return l->slot[(l->head + i) & (l->cap - 1)];
}

struct kv_value *obj_list_set(struct obj_list *l, size_t i, struct kv_value *v)
{
    struct kv_value **slot = &l->slot[(l->head + i) & (l->cap - 1)];
    struct kv_value *old = *slot;
    *slot = v;
    return old;
}

void obj_list_insert(struct obj_list *l, size_t i, struct kv_value *v)
{
    obj_list_push(l, false, v);
    for (size_t j = l->n - 1; j > i; j--) /* the elements from i on move one towards the tail */
        obj_list_set(l, j, obj_list_set(l, j - 1, obj_list_at(l, j)));
}
