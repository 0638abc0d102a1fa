/* SPDX-License-Identifier: LGPL-2.1-or-later */
/** @file shard.h
 * shard: keyed work on a pool of worker threads. The umbrella header: include this one.
 * shard/ring.h is the consistent-hash ring alone; shard/dispatcher.h the workers, jobs and
 * membership; shard/timer.h keyed timers; shard/common.h the version, limits and error strings. */
#ifndef SHARD_H
#define SHARD_H

#include "shard/common.h"
#include "shard/ring.h"
#include "shard/dispatcher.h"
#include "shard/timer.h"
#include "shard/multi.h"

#endif
