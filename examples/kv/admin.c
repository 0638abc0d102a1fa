/* kv_server: the admin thread: membership changes asked for by clients, and the stats.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * shard's membership calls block (a grace period, a handoff) and must not come from a worker; one
 * thread runs them in the order asked, so the network threads never wait for them. The commands of
 * the whole keyspace (SCAN, KEYS, FLUSHDB, ...: scan.c) run here too, for the same reasons: they
 * wait for one job on every worker (broadcast.c), and no change a client asks for can come between
 * their reads. */
#include <errno.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "net_internal.h"
#include "server.h"

static void reply_result(struct request *r, const char *what, int err)
{
    if (err == 0) {
        resp_simple(&r->reply, "OK");
        return;
    }
    char msg[160];
    snprintf(msg, sizeof msg, "ERR %s: %s", what, shard_strerror(err));
    resp_error(&r->reply, msg);
}

/* Whether argument i, a worker's name, has no NUL byte (shard takes names as C strings: "w\0x" would
 * name w); else the error is the reply. */
static bool worker_name(struct request *r, uint32_t i)
{
    if (!memchr(r->argv[i].p, '\0', r->argv[i].len))
        return true;
    resp_error(&r->reply, "ERR a worker's name may not hold a NUL byte");
    return false;
}

void admin_add(struct server *srv, struct request *r)
{
    if (!worker_name(r, 1))
        return;
    int64_t weight = 1;
    if (r->argc > 3 || (r->argc == 3 && (!parse_int64(r->argv[2].p, r->argv[2].len, &weight) || weight < 1 ||
                                         weight > 1000))) {
        resp_error(&r->reply, "ERR usage: SHARD.ADD name [weight 1..1000]");
        return;
    }
    reply_result(r, "shard_worker_add", shard_worker_add(srv->d, r->argv[1].p, (uint32_t)weight));
}

void admin_place(struct server *srv, struct request *r)
{
    if (!worker_name(r, 2))
        return;
    reply_result(r, "shard_key_place", shard_key_place(srv->d, r->argv[1].p, r->argv[1].len, r->argv[2].p));
}

void admin_unplace(struct server *srv, struct request *r)
{
    reply_result(r, "shard_key_unplace", shard_key_unplace(srv->d, r->argv[1].p, r->argv[1].len));
}

void admin_remove(struct server *srv, struct request *r)
{
    if (!worker_name(r, 1))
        return;
    reply_result(r, "shard_worker_remove", shard_worker_remove(srv->d, r->argv[1].p));
}

/* Shared by the admin thread and the parked job; the last of the two to let go frees it. */
struct park {
    sem_t      parked, release;
    atomic_int refs;
};

static void park_put(struct park *p)
{
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1) {
        sem_destroy(&p->parked);
        sem_destroy(&p->release);
        free(p);
    }
}

/* Runs on the worker about to crash: hands its data over, then stays in this job, as a stuck worker
 * would, until the crash is in force. Everything queued behind it is rerouted by the crash. */
static void park_and_evacuate(shard_worker *w, void *arg)
{
    struct park *p = arg;
    struct kv_store *s = store_of(w);
    if (s)
        store_evacuate(s);
    sem_post(&p->parked);
    while (sem_wait(&p->release) != 0)
        continue;
    park_put(p);
}

/* A key the worker named name owns in the ring now in force. Membership changes only come from this
 * thread, so the ring cannot change before the key's job is submitted. Return: 0; -ENOENT (no such
 * worker in the ring); -ENOMEM. */
static int key_owned_by(struct server *srv, const char *name, char *key, size_t n, size_t *len)
{
    shard_ring *ring;
    int err = shard_dispatcher_ring(srv->d, &ring);
    if (err)
        return err;
    err = -ENOENT;
    if (shard_ring_weight(ring, name) > 0)
        for (unsigned i = 0; err; i++) {
            *len = (size_t)snprintf(key, n, "shard.park:%u", i);
            if (strcmp(shard_ring_owner(ring, key, *len), name) == 0)
                err = 0;
        }
    shard_ring_destroy(ring);
    return err;
}

void admin_crash(struct server *srv, struct request *r)
{
    if (!worker_name(r, 1))
        return;
    const char *name = r->argv[1].p;
    char key[32];
    size_t len;
    int err = key_owned_by(srv, name, key, sizeof key, &len);
    struct park *p = err ? NULL : calloc(1, sizeof *p);
    if (!err && !p)
        err = -ENOMEM;
    if (p) {
        sem_init(&p->parked, 0, 0);
        sem_init(&p->release, 0, 0);
        atomic_init(&p->refs, 2);
        err = shard_submit(srv->d, key, len, park_and_evacuate, p);
        if (err) {
            park_put(p);
            park_put(p);
        } else {
            while (sem_wait(&p->parked) != 0)
                continue;
            /* Refused (the last worker, say): the worker runs on, and its evacuated keys come back
             * from the transit area as they are used. */
            err = shard_worker_crash(srv->d, name, SHARD_CRASH_REROUTE);
            sem_post(&p->release);
            park_put(p);
        }
    }
    reply_result(r, "shard_worker_crash", err);
}

static const char *state_name(enum shard_worker_state s)
{
    switch (s) {
    case SHARD_WORKER_RUNNING:
        return "running";
    case SHARD_WORKER_RETIRING:
        return "retiring";
    case SHARD_WORKER_CRASHED:
        return "crashed";
    case SHARD_WORKER_EXITED:
        return "exited";
    }
    return "?";
}

/* INFO-style text: "name:value" lines, then one line per worker. */
void admin_stats(struct server *srv, struct request *r)
{
    struct shard_stats st;
    long n = shard_dispatcher_worker_stats(srv->d, NULL, 0);
    struct shard_worker_stats *ws = n > 0 ? calloc((size_t)n, sizeof *ws) : NULL;
    if (shard_dispatcher_stats(srv->d, &st) != 0 || n < 0 || (n > 0 && !ws)) {
        free(ws);
        resp_error(&r->reply, "ERR out of memory");
        return;
    }
    long now = shard_dispatcher_worker_stats(srv->d, ws, (size_t)n);
    n = now < n ? now : n; /* workers may have exited since the count */
    struct net_totals totals;
    net_totals(srv, &totals);
    struct buf text = { 0 };
    char line[512];
    int k = snprintf(line, sizeof line,
                     "epoch:%" PRIu64 "\r\nring_checksum:%016" PRIx64 "\r\nworkers:%zu\r\nchanges:%" PRIu64
                     "\r\nlast_moved_share:%.4f\r\ntimers:%" PRIu64 "\r\nplacements:%zu\r\nbalance_ratio:%.2f"
                     "\r\nbalance_moves:%" PRIu64 "\r\nunsplittable_hash:%016" PRIx64 "\r\nunsplittable_share:%.3f"
                     "\r\nkeys:%zu\r\nkeys_in_transit:%zu\r\nconnections:%llu"
                     "\r\ncommands:%llu\r\nprotocol_errors:%llu\r\n",
                     st.epoch, st.ring_checksum, st.workers, st.changes, st.last_moved_share, st.timers,
                     st.placements, st.balance_ratio, st.balance_moves, st.unsplittable_hash, st.unsplittable_share,
                     store_total_keys(), store_transit_keys(), atomic_load(&srv->connections),
                     (unsigned long long)totals.commands, atomic_load(&srv->protocol_errors));
    buf_put(&text, line, (size_t)k);
    for (long i = 0; i < n; i++) {
        k = snprintf(line, sizeof line,
                     "worker:%s state=%s keys=%zu share=%.4f queued=%" PRIu64 " queued_avg=%.1f head_wait_us=%" PRIu64
                     " busy_ms=%" PRIu64 " executed=%" PRIu64 " set_aside=%" PRIu64 " handed_over=%" PRIu64
                     " timers=%" PRIu64 "\r\n",
                     ws[i].name, state_name(ws[i].state), store_worker_keys(ws[i].name), ws[i].share, ws[i].queued,
                     ws[i].queued_avg, ws[i].head_wait_ns / 1000, ws[i].busy_ns / 1000000, ws[i].executed,
                     ws[i].set_aside, ws[i].handed_over, ws[i].timers);
        buf_put(&text, line, (size_t)k);
        /* Its heaviest keys over the last window, by hash (shard keeps no key bytes). */
        struct shard_hot_key hk[3];
        uint64_t window;
        long nh = shard_worker_hot_keys(srv->d, ws[i].name, hk, 3, &window);
        for (long h = 0; h < nh && h < 3; h++) {
            k = snprintf(line, sizeof line, "hot:%s hash=%016" PRIx64 " busy_us=%" PRIu64 " jobs=%" PRIu64 " of_window=%.3f\r\n",
                         ws[i].name, hk[h].hash, hk[h].busy_ns / 1000, hk[h].jobs,
                         window ? (double)hk[h].busy_ns / (double)window : 0.0);
            buf_put(&text, line, (size_t)k);
        }
    }
    /* Placed keys, by hash, and where. */
    shard_ring *ring;
    if (shard_dispatcher_ring(srv->d, &ring) == 0) {
        for (size_t p = 0; p < shard_ring_pin_count(ring); p++) {
            uint64_t hash;
            const char *where;
            shard_ring_pin_at(ring, p, &hash, &where);
            k = snprintf(line, sizeof line, "placed:%016" PRIx64 " on=%s\r\n", hash, where);
            buf_put(&text, line, (size_t)k);
        }
        shard_ring_destroy(ring);
    }
    resp_bulk(&r->reply, text.p, text.len);
    r->reply.failed |= text.failed;
    buf_free(&text);
    free(ws);
}

static void *admin_main(void *arg)
{
    struct server *srv = arg;
    struct admin *a = &srv->admin;
    pthread_mutex_lock(&a->lock);
    for (;;) {
        while (!a->head && !a->stop)
            pthread_cond_wait(&a->cond, &a->lock);
        struct request *r = a->head;
        if (!r)
            break;
        a->head = r->next_admin;
        if (!a->head)
            a->tail = NULL;
        bool stop = a->stop;
        pthread_mutex_unlock(&a->lock);
        if (stop)
            resp_error(&r->reply, "ERR shutting down");
        else
            r->cmd->run(srv, r);
        request_complete(r);
        pthread_mutex_lock(&a->lock);
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

int admin_start(struct server *srv)
{
    struct admin *a = &srv->admin;
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->cond, NULL);
    int err = pthread_create(&a->thread, NULL, admin_main, srv);
    a->started = err == 0;
    return -err;
}

void admin_stop(struct server *srv)
{
    struct admin *a = &srv->admin;
    if (!a->started)
        return;
    pthread_mutex_lock(&a->lock);
    a->stop = true;
    pthread_cond_signal(&a->cond);
    pthread_mutex_unlock(&a->lock);
    pthread_join(a->thread, NULL);
    pthread_mutex_destroy(&a->lock);
    pthread_cond_destroy(&a->cond);
}

void admin_enqueue(struct server *srv, struct request *r)
{
    struct admin *a = &srv->admin;
    pthread_mutex_lock(&a->lock);
    if (a->tail)
        a->tail->next_admin = r;
    else
        a->head = r;
    a->tail = r;
    pthread_cond_signal(&a->cond);
    pthread_mutex_unlock(&a->lock);
}
