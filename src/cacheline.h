/* Internal: the cache line size that the hot structures align to. SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_CACHELINE_H
#define SHARD_SRC_CACHELINE_H

#define SHARD_CACHELINE 64

#endif
