/* SPDX-License-Identifier: LGPL-2.1-or-later */
/** @file shard/common.h
 * Definitions shared by every public header: version, limits, error strings. Include <shard.h>. */
#ifndef SHARD_COMMON_H
#define SHARD_COMMON_H

/* SHARD_API marks the library's exported functions: default visibility while building the shared
 * library; empty for callers and for the static library, whose symbols stay hidden. */
#if defined(SHARD_STATIC)
#define SHARD_API
#elif defined(SHARD_BUILDING)
#define SHARD_API __attribute__((visibility("default")))
#else
#define SHARD_API
#endif

/** Major version of the headers compiled against (the soname carries it). */
#define SHARD_VERSION_MAJOR 0
/** Minor version of the headers compiled against (while the major version is 0, the soname carries
 * it too: libshard.so.0.4). */
#define SHARD_VERSION_MINOR 4
/** Patch version of the headers compiled against. */
#define SHARD_VERSION_PATCH 0
/** The version the program was compiled against, as one number: (major << 16) | (minor << 8) | patch. */
#define SHARD_VERSION_HEX ((SHARD_VERSION_MAJOR << 16) | (SHARD_VERSION_MINOR << 8) | SHARD_VERSION_PATCH)

/** Longest member or worker name, in bytes, not counting the terminating NUL. */
#define SHARD_NAME_MAX 255

#ifdef __cplusplus
extern "C" {
#endif

/** A static, human-readable description of a return code of this library (0 or a negative errno).
 * Any other negative errno (a program's own, or one a system call gave it) gets the C library's
 * description, where it has one (glibc 2.32 and later: -ENOSPC is "No space left on device"), else
 * "unknown error"; 0 and positive values that are not a code say so. Context: any thread. Return: a
 * string that lives for the whole program; never NULL. */
SHARD_API const char *shard_strerror(int err);

/** The version of the library the program runs with (with a shared library, not necessarily the one
 * it was compiled against: compare with SHARD_VERSION_HEX), as SHARD_VERSION_HEX encodes it.
 * Context: any thread (added in 0.2). */
SHARD_API unsigned shard_version(void);

/** The same as "major.minor.patch". Context: any thread. Return: a static string (added in 0.2). */
SHARD_API const char *shard_version_string(void);

#ifdef __cplusplus
}
#endif

#endif
