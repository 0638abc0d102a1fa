/* kv_server: a network thread and its connections. SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef KV_NET_INTERNAL_H
#define KV_NET_INTERNAL_H

#include "server.h"

struct conn {
    int                fd; /* -1 once closed */
    struct net_thread *nt;
    struct buf         in, out;
    struct request    *head, *tail; /* requests in arrival order; replies leave from the head */
    uint32_t           inflight;    /* requests in the FIFO */
    bool               closing;     /* read no more; close once every reply is written */
    bool               eof;         /* the client sent its last byte; parse what is left */
    bool               dead;        /* closed; freed when its last request is done */
    bool               want_in, want_out; /* what epoll watches for it */
    bool               touched;     /* in the list of connections with completed requests */
    struct conn       *touched_next;
    struct conn       *prev, *next; /* every connection of the thread; next links the graveyard */
};

struct net_thread {
    struct server  *srv;
    pthread_t       thread;
    int             epfd, listen_fd, event_fd;
    /* Completion stack: workers and the admin thread push finished requests, this thread takes them
     * all at once. */
    _Atomic(struct request *) done;
    struct resp_arg *argv; /* parser output, limits.max_args entries */
    struct conn     *conns;
    struct conn     *graveyard; /* unlinked, freed after the current batch of events */
};

#endif
