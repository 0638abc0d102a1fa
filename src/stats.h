/* Internal: what stats.c gives src/ beyond the public inspection calls.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_STATS_H
#define SHARD_SRC_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "shard/dispatcher.h"

/* shard_worker_hot_keys with the window's job count and number (shard__hot_read) too: the balancer's
 * view of a worker's hot keys. */
long shard__hot_keys_of(shard_dispatcher *d, const char *name, struct shard_hot_key *out, size_t n,
                        uint64_t *window_busy_ns, uint64_t *window_jobs, uint64_t *window_seq);

#endif
