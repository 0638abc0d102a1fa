/* Intrusive hash -> FIFO-of-jobs map. SPDX-License-Identifier: LGPL-2.1-or-later */
#include "keymap.h"

#include <stdlib.h>
#include <string.h>

#include "job.h"

static struct keylink *L(const struct keymap *m, const struct job *j)
{
    return (struct keylink *)&j->links[m->use];
}

static struct job **bucket_of(struct keymap *m, uint64_t hash)
{
    return &m->bucket[shard__keymap_mix(hash) & m->mask];
}

void shard__keymap_init(struct keymap *m, enum keymap_use use)
{
    memset(m, 0, sizeof *m);
    m->use = use;
    m->mask = KEYMAP_BUCKETS - 1;
    m->bucket = m->first;
}

void shard__keymap_reset(struct keymap *m)
{
    if (m->bucket != m->first)
        free(m->bucket);
    shard__keymap_init(m, m->use);
}

size_t shard__keymap_fit_size(size_t buckets, size_t keys)
{
    size_t n = buckets;
    while (keys > 2 * n && n <= SIZE_MAX / 4 / sizeof(struct job *))
        n *= 4;
    return n;
}

void shard__keymap_grow_into(struct keymap *m, struct job **b, size_t n)
{
    /* Each key's first job to its new bucket; its FIFO goes with it. */
    for (size_t i = 0; i <= m->mask; i++) {
        for (struct job *k = m->bucket[i], *next; k; k = next) {
            next = L(m, k)->bucket_next;
            struct job **p = &b[shard__keymap_mix(k->hash) & (n - 1)];
            L(m, k)->bucket_next = *p;
            *p = k;
        }
    }
    if (m->bucket != m->first)
        free(m->bucket);
    else
        memset(m->first, 0, sizeof m->first); /* clean for a reset */
    m->bucket = b;
    m->mask = n - 1;
}

void shard__keymap_fit(struct keymap *m, size_t keys)
{
    size_t n = shard__keymap_fit_size(m->mask + 1, keys);
    struct job **b = n > m->mask + 1 ? calloc(n, sizeof *b) : NULL;
    if (b)
        shard__keymap_grow_into(m, b, n);
}

struct job *shard__keymap_first(const struct keymap *m, uint64_t hash)
{
    struct job *k = m->bucket[shard__keymap_mix(hash) & m->mask];
    while (k && k->hash != hash)
        k = L(m, k)->bucket_next;
    return k;
}

struct job *shard__keymap_next(const struct keymap *m, const struct job *j)
{
    return L(m, j)->next;
}

/* Whether a goes before b in their key's FIFO: by epoch, then jobs a crash owes in the order they
 * became owed (crash.h), then the others. The second key matters only between jobs of one key and
 * one epoch, which were all routed to one worker: pieces of such a run can reach a worker in any
 * order (a crash's reroutes and jobs following their key take different paths), so the order in
 * which they arrive is not theirs. Jobs not owed keep their arrival order. */
static bool before(const struct job *a, const struct job *b)
{
    if (a->epoch != b->epoch)
        return a->epoch < b->epoch;
    uint64_t ra = a->owed_to ? a->owe_seq : UINT64_MAX, rb = b->owed_to ? b->owe_seq : UINT64_MAX;
    return ra < rb;
}

/* j takes old's place as its key's first job in the bucket chain (old NULL: j is a new key). */
static void replace_first(struct keymap *m, struct job *old, struct job *j)
{
    struct job **p = bucket_of(m, (old ? old : j)->hash);
    if (!old) {
        L(m, j)->bucket_next = *p;
        *p = j;
        return;
    }
    while (*p != old)
        p = &L(m, *p)->bucket_next;
    if (j) {
        L(m, j)->bucket_next = L(m, old)->bucket_next;
        L(m, j)->tail = L(m, old)->tail;
        L(m, j)->hint = L(m, old)->hint == old ? NULL : L(m, old)->hint;
        *p = j;
    } else {
        *p = L(m, old)->bucket_next;
    }
}

bool shard__keymap_insert(struct keymap *m, struct job *j)
{
    struct job *k = shard__keymap_first(m, j->hash);
    struct keylink *lj = L(m, j);
    lj->next = NULL;
    if (!k) {
        lj->tail = j;
        lj->hint = NULL;
        replace_first(m, NULL, j);
        return true;
    }
    struct keylink *lk = L(m, k);
    if (!before(j, lk->tail)) {
        L(m, lk->tail)->next = j;
        lk->tail = j;
    } else if (before(j, k)) {
        lj->next = k;
        replace_first(m, k, j);
    } else {
        /* Jobs inserted before the tail come in rising runs (a crash's rerouted jobs, jobs following
         * their key): start from the last one, not from the key's first job, or pulling n of them in
         * costs O(n^2). The FIFO is sorted, so every job before the hint goes before it, and j goes
         * after it. */
        struct job *p = lk->hint && !before(j, lk->hint) ? lk->hint : k;
        while (!before(j, L(m, p)->next))
            p = L(m, p)->next; /* stops: j goes before the tail */
        lj->next = L(m, p)->next;
        L(m, p)->next = j;
        lk->hint = j;
    }
    return false;
}

bool shard__keymap_remove(struct keymap *m, struct job *j, bool *gone)
{
    struct job *k = shard__keymap_first(m, j->hash);
    if (gone)
        *gone = k == j && !L(m, j)->next;
    if (k == j) {
        struct job *next = L(m, j)->next;
        if (next)
            L(m, next)->tail = L(m, j)->tail;
        replace_first(m, j, next);
        return true;
    }
    struct job *p = k;
    while (L(m, p)->next != j)
        p = L(m, p)->next;
    L(m, p)->next = L(m, j)->next;
    if (L(m, k)->tail == j)
        L(m, k)->tail = p;
    if (L(m, k)->hint == j)
        L(m, k)->hint = p;
    return false;
}
