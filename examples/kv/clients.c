/* kv_server: every connection of every network thread, for CLIENT LIST and INFO's connected_clients.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A connection is listed from its accept to the close of its socket, by its own thread; what another
 * thread reads of it (its names, the socket's number) is written under clients_lock, and the rest
 * is set before it is listed or is a relaxed atomic (net_internal.h's legend). */
#include <pthread.h>
#include <time.h>

#include "net_internal.h"
#include "watch.h"

/* Every listed connection of every thread, for CLIENT LIST: taken at accept and close, by CLIENT
 * SETNAME and SETINFO, and by CLIENT LIST. Never on the path of a data command. */
static pthread_mutex_t clients_lock = PTHREAD_MUTEX_INITIALIZER;
static struct conn    *clients;      /* under clients_lock */
static atomic_ullong   clients_now;  /* listed connections; relaxed: a count for INFO */

uint64_t clients_count(void)
{
    return atomic_load_explicit(&clients_now, memory_order_relaxed);
}

void clients_add(struct conn *c)
{
    pthread_mutex_lock(&clients_lock);
    c->listed = true;
    c->list_fd = c->fd;
    c->list_next = clients;
    if (clients)
        clients->list_prev = c;
    clients = c;
    pthread_mutex_unlock(&clients_lock);
    atomic_fetch_add_explicit(&clients_now, 1, memory_order_relaxed);
}

/* Unlists c and frees its name: CLIENT LIST shows connections whose socket is open, as Redis does. */
void clients_remove(struct conn *c)
{
    if (!c->listed)
        return;
    pthread_mutex_lock(&clients_lock);
    if (c->list_prev)
        c->list_prev->list_next = c->list_next;
    else
        clients = c->list_next;
    if (c->list_next)
        c->list_next->list_prev = c->list_prev;
    c->listed = false;
    pthread_mutex_unlock(&clients_lock);
    atomic_fetch_sub_explicit(&clients_now, 1, memory_order_relaxed);
    free(c->name);
    free(c->lib_name);
    free(c->lib_ver);
    c->name = c->lib_name = c->lib_ver = NULL;
}

static void put_str(struct buf *out, const char *s)
{
    buf_put(out, s, strlen(s));
}

/* Redis's fields, those that mean something here. Context: under clients_lock, or c's own thread. */
static void client_line(const struct conn *c, int64_t now_ms, struct buf *out)
{
    char line[512];
    const struct command *cmd = atomic_load_explicit(&c->last_cmd, memory_order_relaxed);
    int64_t active = atomic_load_explicit(&c->active_ms, memory_order_relaxed);
    int k = snprintf(line, sizeof line,
                     "id=%" PRIu64 " addr=%s laddr=%s fd=%d name=", c->id, c->addr, c->laddr, c->list_fd);
    buf_put(out, line, (size_t)k);
    put_str(out, c->name ? c->name : "");
    k = snprintf(line, sizeof line,
                 " age=%" PRId64 " idle=%" PRId64 " flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 watch=%" PRIu32 " cmd=",
                 (now_ms - c->created_ms) / 1000, (now_ms - active) / 1000, watch_count(c));
    buf_put(out, line, (size_t)k);
    for (const char *p = cmd ? cmd->name : "NULL"; *p; p++) {
        char lower = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
        buf_put(out, &lower, 1);
    }
    put_str(out, " user=default lib-name=");
    put_str(out, c->lib_name ? c->lib_name : "");
    put_str(out, " lib-ver=");
    put_str(out, c->lib_ver ? c->lib_ver : "");
    put_str(out, " resp=2\n");
}

void net_client_line(struct conn *c, struct buf *out)
{
    client_line(c, c->nt->now_ms, out);
}

void net_client_list(struct buf *out, const uint64_t *id_filter, size_t n)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    pthread_mutex_lock(&clients_lock);
    /* Oldest first, as Redis lists them: the list is newest first, so walk it from its end. */
    struct conn *last = clients;
    while (last && last->list_next)
        last = last->list_next;
    for (struct conn *c = last; c; c = c->list_prev) {
        bool shown = n == 0;
        for (size_t i = 0; i < n && !shown; i++)
            shown = id_filter[i] == c->id;
        if (shown)
            client_line(c, now, out);
    }
    pthread_mutex_unlock(&clients_lock);
}

void net_client_set(char **field, char *value)
{
    pthread_mutex_lock(&clients_lock);
    char *old = *field;
    *field = value;
    pthread_mutex_unlock(&clients_lock);
    free(old);
}
