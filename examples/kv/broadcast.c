/* kv_server: reading the whole keyspace: one job on every worker, with the checks that make what it
 * reads complete. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Each worker's store is private to its thread, so the keyspace is read by a broadcast: one job on
 * every worker of the ring in force, each reading its own store (store_range, which also visits the
 * transit area). A job reaches a given worker through a probe key, a key that the ring maps to that
 * worker (found once per ring and cached: shard_dispatcher_ring copies the ring). The admin thread
 * submits the jobs and waits for them: it is not a worker, it may block, and it is the thread that
 * makes the membership changes clients ask for, so none of those happens during a broadcast (the
 * balancer's still may: see below). The network threads never wait.
 *
 * Why a slice of the hash space sees every key once. Take the ring R in force. Once every fence of R and of the rings
 * before it has passed (every release hook has run: the old owners have handed their moved keys to
 * the transit area; removed workers have exited), every key is in exactly one place: in the store of
 * its owner in R (R's owner: the ring's pins, shard_key_place and the balancer's, included), or in the
 * transit area, where only its owner takes it from. If no ring change happens while the jobs run, a
 * key leaves a store for the transit area only through a command whose keys meet (cross.h, which
 * holds the key meanwhile: in flight, it is in neither, and missed), and leaves the transit area only
 * for its owner's store; either move happens on a worker's thread between its jobs, never during the
 * owner's broadcast job. So the owner's job sees the key either in its store or in transit, and each
 * job keeps of the transit area only the entries R gives to its own worker (owned_here): every key of
 * the slice is returned exactly once.
 *
 * How the code makes sure. shard says whether a change happened (its stats' epoch: one per change),
 * not whether its fences have passed; shard_drain, called after the epoch changed, returns once every
 * job submitted before it has ended, its fences included, and those of removed workers. So a slice is
 * read as: read the epoch; if it is not the one last drained, drain and read it again (equal: settled);
 * read the slice; read the epoch once every job has returned, and check that every job ran on the
 * worker it was meant for (store_name). Anything different — a change by SHARD.* can only come between
 * two commands, but the balancer may move keys at any time — and the slice is read again, up to
 * ATTEMPTS times; then the command answers "ERR membership changing, retry <command>", and nothing
 * of the slice is returned (SCAN's cursor is unchanged: the client may call again with it). */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>

#include "broadcast.h"
#include "expire.h"

#define ATTEMPTS 8
/* Probe keys tried per ring at most: the smallest member of 4096 has a share of about 1 / 40000. */
#define PROBE_TRIES (1u << 24)

struct probe {
    char   name[SHARD_NAME_MAX + 1];
    char   key[24];
    size_t klen;
};

/* The probe keys of one ring. Admin thread only. */
static struct {
    uint64_t      epoch;   /* the ring's; 0: none cached */
    shard_ring   *ring;    /* a copy, read by the jobs of a broadcast (ring.h: const reads are safe) */
    struct probe *probes;
    size_t        n;
    uint64_t      settled; /* the epoch shard_drain last returned at; every fence before it passed */
} cache;

void scan_free(void)
{
    shard_ring_destroy(cache.ring);
    free(cache.probes);
    cache.ring = NULL;
    cache.probes = NULL;
    cache.epoch = cache.n = 0;
}

/* What INFO shows of the checks: drains after a ring change, and slices read again because the
 * membership changed during one. Written by the admin thread, read by INFO on a network thread:
 * relaxed, counters. */
static atomic_ullong drains, rereads;

void scan_counters(uint64_t *drained, uint64_t *reread)
{
    *drained = atomic_load_explicit(&drains, memory_order_relaxed);
    *reread = atomic_load_explicit(&rereads, memory_order_relaxed);
}

static int epoch_now(struct server *srv, uint64_t *epoch)
{
    struct shard_stats st;
    int err = shard_dispatcher_stats(srv->d, &st);
    if (!err)
        *epoch = st.epoch;
    return err;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct probe *)a)->name, ((const struct probe *)b)->name);
}

/* Finds a probe key for every member of ring. Return: 0; -ENOMEM; -EAGAIN (a member not found). */
static int find_probes(shard_ring *ring, struct probe **out, size_t *nout)
{
    size_t n = shard_ring_member_count(ring), found = 0;
    struct probe *p = calloc(n ? n : 1, sizeof *p);
    if (!p)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        snprintf(p[i].name, sizeof p[i].name, "%s", shard_ring_member(ring, i));
    qsort(p, n, sizeof *p, by_name);
    for (unsigned i = 0; found < n && i < PROBE_TRIES; i++) {
        struct probe want;
        char key[24];
        size_t klen = (size_t)snprintf(key, sizeof key, "shard.probe:%u", i);
        snprintf(want.name, sizeof want.name, "%s", shard_ring_owner(ring, key, klen));
        struct probe *m = bsearch(&want, p, n, sizeof *p, by_name);
        if (m && m->klen == 0) {
            memcpy(m->key, key, klen);
            m->klen = klen;
            found++;
        }
    }
    if (found < n) {
        free(p);
        return -EAGAIN;
    }
    *out = p;
    *nout = n;
    return 0;
}

/* Makes cache hold the ring of epoch. Return: 0; -EAGAIN (the ring changed meanwhile); else as
 * shard_dispatcher_ring, find_probes. */
static int load_ring(struct server *srv, uint64_t epoch)
{
    if (cache.epoch == epoch)
        return 0;
    shard_ring *ring;
    int err = shard_dispatcher_ring(srv->d, &ring);
    if (err)
        return err;
    uint64_t after;
    struct probe *probes = NULL;
    size_t n = 0;
    /* The stats' epoch and the ring are read from the same published snapshot: equal epochs around
     * the copy mean it is the ring of that epoch. */
    err = epoch_now(srv, &after);
    if (!err && after != epoch)
        err = -EAGAIN;
    if (!err)
        err = find_probes(ring, &probes, &n);
    if (err) {
        shard_ring_destroy(ring);
        return err;
    }
    scan_free();
    cache.ring = ring;
    cache.probes = probes;
    cache.n = n;
    cache.epoch = epoch;
    return 0;
}
void broadcast_put(struct broadcast *b)
{
    /* acq_rel: each holder's writes come before the free by the last one. */
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < b->n; i++)
        buf_free(&b->slot[i].keys);
    pthread_mutex_destroy(&b->lock);
    pthread_cond_destroy(&b->cond);
    free(b);
}

/* Whether e, in transit, belongs to the slot's worker: an entry in transit is seen by every job, and
 * only its owner's keeps it (or clears it: where its expiry's timer runs). Asked of every entry in
 * transit, however empty the area was when the slice began: a release hook or a crash's evacuation
 * fill it only at a ring change, which the slice sees, but a command whose keys meet hands its keys'
 * entries over through it at any time (cross.h), so an entry may come there from a store that a job
 * has read already (a SCAN returned a key twice so). */
static bool owned_here(const struct kv_entry *e, void *arg)
{
    const struct slot *sl = arg;
    return strcmp(shard_ring_owner(sl->b->ring, e->key, e->klen), sl->name) == 0;
}

static bool collect(const struct kv_entry *e, void *arg)
{
    struct slot *sl = arg;
    const struct broadcast *b = sl->b;
    if (expire_due(e, b->now_ms) || (b->type >= 0 && e->type != b->type) ||
        (b->pattern && !glob_match(b->pattern->p, b->pattern->len, e->key, e->klen, false)))
        return true;
    resp_bulk(&sl->keys, e->key, e->klen);
    sl->count++;
    sl->nomem |= sl->keys.failed;
    return !sl->nomem;
}

/* What MEMORY USAGE reports: the allocations of the entry and of a string's value. The objects of
 * the other types are not measured (obj.h has no size of its own). */
static size_t entry_bytes(const struct kv_entry *e)
{
    size_t n = malloc_usable_size((void *)e);
    if (e->type == KV_STRING && e->val && e->val != kv_entry_inline(e))
        n += malloc_usable_size(e->val);
    return n;
}

static void broadcast_job(shard_worker *w, void *arg)
{
    struct slot *sl = arg;
    struct broadcast *b = sl->b;
    struct kv_store *s = store_of(w);
    if (!s) {
        sl->nomem = true;
    } else if (b->op != OP_MEMORY && strcmp(store_name(s), sl->name) != 0) {
        sl->wrong = true;
    } else if (b->op == OP_CLEAR) {
        sl->count = store_clear(s, owned_here, sl);
    } else if (b->op == OP_MEMORY) {
        struct kv_entry *e = store_find(s, kv_hash(b->key->p, b->key->len), b->key->p, b->key->len);
        sl->found = e != NULL;
        sl->count = e ? entry_bytes(e) : 0;
    } else {
        store_range(s, b->from, b->to, owned_here, collect, sl);
    }
    pthread_mutex_lock(&b->lock);
    if (--b->left == 0)
        pthread_cond_signal(&b->cond);
    pthread_mutex_unlock(&b->lock);
    broadcast_put(b);
}

struct broadcast *broadcast_new(size_t n, enum job_op op)
{
    struct broadcast *b = calloc(1, sizeof *b + n * sizeof b->slot[0]);
    if (!b)
        return NULL;
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->cond, NULL);
    atomic_init(&b->refs, 1);
    b->op = op;
    b->n = n;
    b->type = -1;
    for (size_t i = 0; i < n; i++)
        b->slot[i].b = b;
    return b;
}

/* Submits slot i's job on key and counts it; a refused one is done at once. Return: as shard_submit. */
int broadcast_submit(struct server *srv, struct broadcast *b, size_t i, const void *key, size_t len)
{
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    pthread_mutex_lock(&b->lock);
    b->left++;
    pthread_mutex_unlock(&b->lock);
    int err = shard_submit(srv->d, key, len, broadcast_job, &b->slot[i]);
    if (err) {
        pthread_mutex_lock(&b->lock);
        b->left--;
        pthread_mutex_unlock(&b->lock);
        atomic_fetch_sub_explicit(&b->refs, 1, memory_order_relaxed);
    }
    return err;
}

/* Waits until every job submitted has returned. */
void broadcast_wait(struct broadcast *b)
{
    pthread_mutex_lock(&b->lock);
    while (b->left)
        pthread_cond_wait(&b->cond, &b->lock);
    pthread_mutex_unlock(&b->lock);
}
struct broadcast *keyspace_read(struct server *srv, const struct slice *q, int *err)
{
    for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
        uint64_t epoch, after = 0;
        if ((*err = epoch_now(srv, &epoch)) != 0)
            return NULL;
        if (epoch != cache.settled) {
            if ((*err = shard_drain(srv->d)) != 0 || (*err = epoch_now(srv, &after)) != 0)
                return NULL;
            atomic_fetch_add_explicit(&drains, 1, memory_order_relaxed);
            if (after == epoch)
                cache.settled = epoch;
            continue; /* read the epoch again either way: the ring may have changed during the drain */
        }
        *err = load_ring(srv, epoch);
        if (*err == -EAGAIN)
            continue;
        if (*err)
            return NULL;
        struct broadcast *b = broadcast_new(cache.n, q->op);
        if (!b) {
            *err = -ENOMEM;
            return NULL;
        }
        b->from = q->from;
        b->to = q->to;
        b->pattern = q->pattern;
        b->type = q->type;
        b->now_ms = kv_now_ms();
        b->ring = cache.ring;
        bool redo = false;
        for (size_t i = 0; i < cache.n && !*err; i++) {
            b->slot[i].name = cache.probes[i].name;
            *err = broadcast_submit(srv, b, i, cache.probes[i].key, cache.probes[i].klen);
        }
        broadcast_wait(b);
        if (!*err)
            *err = epoch_now(srv, &after);
        for (size_t i = 0; i < cache.n; i++) {
            redo |= b->slot[i].wrong;
            if (b->slot[i].nomem && !*err)
                *err = -ENOMEM;
        }
        /* The transit area, read as empty before the jobs, may have filled only by a change. */
        if (!*err && (redo || after != epoch)) {
            atomic_fetch_add_explicit(&rereads, 1, memory_order_relaxed);
            broadcast_put(b);
            continue;
        }
        if (*err) {
            broadcast_put(b);
            return NULL;
        }
        return b;
    }
    *err = -EAGAIN;
    return NULL;
}
