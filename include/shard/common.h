/* shard: definitions shared by every public header. SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_COMMON_H
#define SHARD_COMMON_H

#if defined(SHARD_STATIC)
#define SHARD_API
#elif defined(SHARD_BUILDING)
#define SHARD_API __attribute__((visibility("default")))
#else
#define SHARD_API
#endif

#define SHARD_VERSION_MAJOR 0
#define SHARD_VERSION_MINOR 1
#define SHARD_VERSION_PATCH 0

/* Longest member or worker name, in bytes, not counting the terminating NUL. */
#define SHARD_NAME_MAX 255

#ifdef __cplusplus
extern "C" {
#endif

/* A static, human-readable description of a return code of this library (0 or a negative errno).
 * Context: any thread. Return: a string that lives for the whole program; never NULL. */
SHARD_API const char *shard_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif
