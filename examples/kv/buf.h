/* kv_server: a growable byte buffer and the RESP reply encoders that write into it.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Owned by one thread at a time: a request's reply is written by the worker running its job and read
 * by the network thread after the job's completion is handed back (see net.c). Growth failure sticks:
 * a buffer that could not grow is marked failed and the reply becomes an out-of-memory error. */
#ifndef KV_BUF_H
#define KV_BUF_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct buf {
    char  *p;
    size_t len, cap;
    bool   failed;
    bool   borrowed; /* p is storage the buffer was lent (buf_borrow), not its own allocation */
};

/* Starts b empty in storage of n bytes that outlives it (a request's own allocation): a short reply
 * then costs no allocation. It moves to a heap allocation of its own if it outgrows it. */
static inline void buf_borrow(struct buf *b, char *storage, size_t n)
{
    *b = (struct buf){ .p = storage, .cap = n, .borrowed = true };
}

static inline bool buf_reserve(struct buf *b, size_t more)
{
    if (b->failed)
        return false;
    if (b->len + more <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + more)
        cap *= 2;
    char *p = b->borrowed ? malloc(cap) : realloc(b->p, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    if (b->borrowed && b->len)
        memcpy(p, b->p, b->len);
    b->borrowed = false;
    b->p = p;
    b->cap = cap;
    return true;
}

static inline void buf_put(struct buf *b, const void *data, size_t n)
{
    if (n && buf_reserve(b, n)) {
        memcpy(b->p + b->len, data, n);
        b->len += n;
    }
}

/* Drops the first n bytes (already written to a socket or parsed). */
static inline void buf_consume(struct buf *b, size_t n)
{
    if (n == 0)
        return;
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
}

static inline void buf_free(struct buf *b)
{
    if (!b->borrowed)
        free(b->p);
    *b = (struct buf){ 0 };
}

/* v in decimal into out, which has room for 20 bytes. Return: its length. By hand: snprintf's format
 * parsing was about 4 % of a server answering INCR or RPUSH (perf). */
static inline size_t fmt_int64(char *out, int64_t v)
{
    char rev[20];
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v; /* INT64_MIN too */
    size_t n = 0, k = 0;
    do {
        rev[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        out[k++] = '-';
    while (n)
        out[k++] = rev[--n];
    return k;
}

/* A RESP line: type, n in decimal, CRLF. */
static inline void buf_line(struct buf *b, char type, int64_t n)
{
    char line[24];
    line[0] = type;
    size_t k = 1 + fmt_int64(line + 1, n);
    line[k++] = '\r';
    line[k++] = '\n';
    buf_put(b, line, k);
}

/* RESP2 replies. */
static inline void resp_simple(struct buf *b, const char *s)
{
    buf_put(b, "+", 1);
    buf_put(b, s, strlen(s));
    buf_put(b, "\r\n", 2);
}

/* msg starts with the error code: "ERR ...", "WRONGTYPE ...". */
static inline void resp_error(struct buf *b, const char *msg)
{
    buf_put(b, "-", 1);
    buf_put(b, msg, strlen(msg));
    buf_put(b, "\r\n", 2);
}

static inline void resp_int(struct buf *b, int64_t n)
{
    buf_line(b, ':', n);
}

static inline void resp_array(struct buf *b, int64_t n)
{
    buf_line(b, '*', n);
}

/* An array of the n items written into items, a buffer of their own (a walk that knows its count
 * only at its end), which is freed; its failure (no memory) is b's. */
static inline void resp_array_of(struct buf *b, int64_t n, struct buf *items)
{
    resp_array(b, n);
    buf_put(b, items->p, items->len);
    b->failed |= items->failed;
    buf_free(items);
}

/* A bulk string's first line; its n bytes and "\r\n" follow. */
static inline void resp_bulk_header(struct buf *b, size_t n)
{
    buf_line(b, '$', (int64_t)n);
}

static inline void resp_bulk(struct buf *b, const void *s, size_t n)
{
    resp_bulk_header(b, n);
    buf_put(b, s, n);
    buf_put(b, "\r\n", 2);
}

static inline void resp_null(struct buf *b)
{
    buf_put(b, "$-1\r\n", 5);
}

#endif
