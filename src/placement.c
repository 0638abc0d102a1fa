/* Where worker threads run: pinning to CPUs (a list, or one worker a CPU) and thread names.
 * SPDX-License-Identifier: LGPL-2.1-or-later */
#include "placement.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

int shard__placement_init(struct placement *p, const struct shard_config *cfg)
{
    memset(p, 0, sizeof *p);
    if (cfg->ncpus > SHARD_MAX_CPUS || (cfg->ncpus > 0 && !cfg->cpus))
        return -EINVAL;
    if (cfg->ncpus > 0) {
        for (size_t i = 0; i < cfg->ncpus; i++)
            if (cfg->cpus[i] < 0 || cfg->cpus[i] >= SHARD_MAX_CPUS)
                return -EINVAL;
        if (!(p->cpus = malloc(cfg->ncpus * sizeof *p->cpus)))
            return -ENOMEM;
        memcpy(p->cpus, cfg->cpus, cfg->ncpus * sizeof *p->cpus);
        p->ncpus = cfg->ncpus;
        return 0;
    }
    if (!cfg->pin_per_core)
        return 0;
    /* The CPUs this process may run on (its cgroup's cpuset, taskset), not every online one. */
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return -EINVAL;
    int n = CPU_COUNT(&allowed);
    if (!(p->cpus = malloc((size_t)(n ? n : 1) * sizeof *p->cpus)))
        return -ENOMEM;
    for (int cpu = 0; cpu < CPU_SETSIZE && p->ncpus < (size_t)n; cpu++)
        if (CPU_ISSET(cpu, &allowed))
            p->cpus[p->ncpus++] = cpu;
    return 0;
}

void shard__placement_destroy(struct placement *p)
{
    free(p->cpus);
    p->cpus = NULL;
    p->ncpus = 0;
}

void shard__placement_use(struct placement *p, pthread_attr_t *attr)
{
    if (!p->ncpus)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(p->cpus[p->next % p->ncpus], &set);
    p->next++;
    /* A CPU the process may not run on makes pthread_create fail with EINVAL. */
    pthread_attr_setaffinity_np(attr, sizeof set, &set);
}

void shard__placement_unuse(struct placement *p)
{
    if (p->ncpus)
        p->next--;
}

void shard__placement_name_self(const char *name)
{
    char buf[16];
    size_t n = strnlen(name, sizeof buf - 1);
    memcpy(buf, name, n);
    buf[n] = '\0';
    (void)pthread_setname_np(pthread_self(), buf); /* a name is for people: no failure to report */
}
