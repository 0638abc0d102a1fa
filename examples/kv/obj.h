/* kv_server: the objects behind keys that are not strings (lists, hashes, sets, sorted sets).
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * An entry of such a type (kvmap.h) owns one object, touched only by the worker that holds the key,
 * like the rest of its store; it moves between workers with its entry, without being copied. */
#ifndef KV_OBJ_H
#define KV_OBJ_H

#include <stdint.h>

/* Frees an entry's object of type (enum kv_type, not KV_STRING). Accepts NULL. */
void kv_obj_free(uint8_t type, void *obj);

#endif
