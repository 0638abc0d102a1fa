/* shard_strerror. SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <limits.h>
#include <string.h> /* strerrordesc_np: _GNU_SOURCE, as the build defines it */

#include "shard/common.h"

/* A negative errno none of shard's calls returns (a program's own, passed on): the C library's words
 * for it, which glibc gives as a constant string (strerrordesc_np, unlike strerror, has no buffer
 * that another call may overwrite), else "unknown error". */
static const char *other_errno(int err)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
    const char *s = err > INT_MIN ? strerrordesc_np(-err) : NULL;
    if (s)
        return s;
#endif
    return "unknown error";
}

/* One code, one text for every call that returns it: a text names each reason any public header's
 * Return: gives for its code (tests/return_codes.py lists them; test_strerror checks each has a
 * text and that the texts name the calls' reasons), so that a message is right whatever failed. */
SHARD_API const char *shard_strerror(int err)
{
    switch (err) {
    case 0: return "success";
    case -EINVAL: return "invalid argument";
    case -EEXIST: return "name already present";
    case -ENOENT: return "not found: no such member or worker, pinned hash or placed key, or pending timer";
    case -ENAMETOOLONG: return "name longer than SHARD_NAME_MAX bytes";
    case -ENOMEM: return "out of memory (or of file descriptors, or of timer records)";
    case -EAGAIN: return "try again: queue full, key throttled, worker full of set-aside jobs, timer moving with its key or its job queued, or no thread could be started";
    case -EBUSY: return "busy: the last worker cannot be removed or crashed, or the timer's job is running";
    case -E2BIG: return "too many: SHARD_RING_MAX_PINS hashes pinned or keys placed already, or over SHARD_MULTI_MAX_KEYS keys in one multi-key job";
    case -ESHUTDOWN: return "dispatcher is shutting down";
    case -EDEADLK: return "would deadlock: not allowed from a worker, a control-thread hook or an RCU read-side section";
    case -ERANGE: return "index out of range";
    default: return err < 0 ? other_errno(err) : "not an error code (expected 0 or a negative errno)";
    }
}
