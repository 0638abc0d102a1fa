/* Internal: where worker threads run, and what they are called (placement.c).
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_PLACEMENT_H
#define SHARD_SRC_PLACEMENT_H

#include <pthread.h>
#include <stdint.h>

#include "shard/dispatcher.h"

/* The CPUs workers are pinned to, round robin; none: not pinned. I after create. */
struct placement {
    int     *cpus;
    size_t   ncpus;
    uint32_t next; /* C: the index, in cpus, of the next worker to start */
};

/* From the config: checks and copies cpus, or lists the CPUs this process may run on for
 * pin_per_core. Return: 0; -EINVAL; -ENOMEM. */
int  shard__placement_init(struct placement *p, const struct shard_config *cfg);
void shard__placement_destroy(struct placement *p);
/* Sets the CPU of the next worker to start in attr, and takes its turn; shard__placement_unuse gives
 * the turn back when that worker did not start. Context: ctl held (or create). */
void shard__placement_use(struct placement *p, pthread_attr_t *attr);
void shard__placement_unuse(struct placement *p);
/* Names the calling thread after its worker (its first 15 bytes, the kernel's limit). */
void shard__placement_name_self(const char *name);

#endif
