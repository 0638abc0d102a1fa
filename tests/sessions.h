/* Test helper: the game-server pattern. Each worker keeps its players' sessions in worker-local state;
 * the release hook hands the sessions of moved players to their new owners through a shared transit
 * area; a packet that finds no session for a player it has seen before means a handoff came late.
 * Each player must be fed by one thread, with seq 0, 1, 2, ... */
#ifndef SHARD_TEST_SESSIONS_H
#define SHARD_TEST_SESSIONS_H

#include <pthread.h>
#include <shard.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SESSION_PLAYERS 256

struct session {
    int      player;
    unsigned packets;
};

struct session_world {
    pthread_mutex_t lock;
    struct session *in_transit[SESSION_PLAYERS];
    atomic_int      lost, wrong_count, handoffs;
};

static struct session_world session_world = { .lock = PTHREAD_MUTEX_INITIALIZER };

struct session_local {
    struct session *s[SESSION_PLAYERS];
};

struct packet {
    int      player;
    unsigned seq;
};

static inline size_t player_key(char *buf, int player)
{
    return (size_t)snprintf(buf, 24, "player-%d", player);
}

static void sessions_start(shard_worker *w, void *user)
{
    (void)user;
    shard_worker_set_user(w, calloc(1, sizeof(struct session_local)));
}

static void sessions_stop(shard_worker *w, void *user)
{
    (void)user;
    struct session_local *l = shard_worker_user(w);
    for (int p = 0; p < SESSION_PLAYERS; p++)
        free(l->s[p]);
    free(l);
}

static void sessions_release(shard_worker *w, const struct shard_handoff *h, void *user)
{
    (void)user;
    struct session_local *l = shard_worker_user(w);
    char k[24];
    for (int p = 0; p < SESSION_PLAYERS; p++) {
        if (!l->s[p])
            continue;
        if (!shard_handoff_moves(h, k, player_key(k, p)))
            continue;
        pthread_mutex_lock(&session_world.lock);
        session_world.in_transit[p] = l->s[p];
        pthread_mutex_unlock(&session_world.lock);
        l->s[p] = NULL;
        atomic_fetch_add(&session_world.handoffs, 1);
    }
}

static void sessions_on_packet(shard_worker *w, void *arg)
{
    struct packet *pk = arg;
    struct session_local *l = shard_worker_user(w);
    struct session *s = l->s[pk->player];
    if (!s) {
        pthread_mutex_lock(&session_world.lock);
        s = session_world.in_transit[pk->player];
        session_world.in_transit[pk->player] = NULL;
        pthread_mutex_unlock(&session_world.lock);
        if (!s && pk->seq > 0)
            atomic_fetch_add(&session_world.lost, 1);
        if (!s) {
            s = calloc(1, sizeof *s);
            s->player = pk->player;
        }
        l->s[pk->player] = s;
    }
    if (s->packets != pk->seq)
        atomic_fetch_add(&session_world.wrong_count, 1);
    s->packets = pk->seq + 1;
}

static inline struct shard_config sessions_config(uint32_t workers)
{
    struct shard_config cfg = { .workers = workers,
                                .on_worker_start = sessions_start,
                                .on_worker_stop = sessions_stop,
                                .on_release = sessions_release };
    return cfg;
}

#endif
