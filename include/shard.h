/* shard: keyed work on a pool of worker threads. SPDX-License-Identifier: LGPL-2.1-or-later
 * The umbrella header: include this one. */
#ifndef SHARD_H
#define SHARD_H

#include "shard/common.h"
#include "shard/ring.h"
#include "shard/dispatcher.h"

#endif
