/* shard_strerror. SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>

#include "shard/common.h"

SHARD_API const char *shard_strerror(int err)
{
    switch (err) {
    case 0: return "success";
    case -EINVAL: return "invalid argument";
    case -EEXIST: return "name already present";
    case -ENOENT: return "no such member or worker";
    case -ENAMETOOLONG: return "name longer than SHARD_NAME_MAX bytes";
    case -ENOMEM: return "out of memory";
    case -EAGAIN: return "queue full, try again";
    case -EBUSY: return "cannot remove the last worker";
    case -ESHUTDOWN: return "dispatcher is shutting down";
    case -EDEADLK: return "would deadlock: not allowed from a worker, a control-thread hook or an RCU read-side section";
    case -ERANGE: return "index out of range";
    default: return err < 0 ? "unknown error" : "not an error code (expected 0 or a negative errno)";
    }
}
