/* kv_load: a load generator for Redis-protocol servers (examples/kv_server, redis-server) that costs
 * its client little CPU, so that what it measures is the server. C connections to 127.0.0.1:PORT
 * (only there), each keeping P pipelined requests in flight, served by T threads with an epoll each:
 * every reply that comes in is parsed and checked and answered by the next request at once, and what
 * a read made is sent with one send (requests are copied from pre-formatted pieces: no printf on the
 * path). Tests (--tests, a comma list; "all" for every one), over K keys drawn uniformly:
 *   PING         +PONG
 *   SET k v      +OK                  (k "kvl:" and 12 digits, v "val:" and the same digits: 16 bytes)
 *   GET k        v, byte for byte     (the keys are all SET first, unmeasured: the "fill")
 *   INCR c       an integer >= 1      (counters "ctr:..." of their own)
 *   LPUSH l v    an integer >= 1      (lists "lst:...")
 *   HSET h f v   0 or 1               (hashes "hsh:...", 16 fields)
 *   MGET k*10    10 values, each byte for byte
 *   MSET (k v)*10  +OK                (the same values: GET's checks hold whatever ran before)
 *   MULTI          a transaction: MULTI, SET k v, SET k' v', EXEC: +OK, +QUEUED twice, then *2 of
 *                  +OK (redis-py's default pipeline of two SETs); counted as one request of 2 keys
 *   MSET_TAG, MULTI_TAG  as MSET and MULTI, over keys of one hash tag, as a Redis Cluster user writes
 *                  keys that go together ("{" 5 digits "}" 9 digits: the K keys in K / 10 tags of 10,
 *                  an MSET setting one tag's 10, a MULTI two of one tag's): on kv_server every key
 *                  of a request lives on one worker
 * A reply of another type, count or value, an error reply, a closed connection or 10 s without a
 * reply while requests are in flight prints what and exits 1.
 *
 * Each test runs for a warm-up, then a window of --seconds (or until --requests replies, whichever
 * comes first; both bounded), then stops sending and waits for every reply in flight. Over the window
 * it measures replies a second, its own CPU (getrusage: user and system, every thread) per request
 * and, with --server-pid, the server's (utime and stime of /proc/PID/stat, in clock ticks) per
 * request. One line per test:
 *   bench=kv_load server=LABEL test=T conns=C pipeline=P threads=N keys=K keys_per_req=1|10
 *     requests=R seconds=S req_per_s=X max_gap_ms=G client_ns_per_req=A client_user_ns=U
 *     client_sys_ns=Y server_ns_per_req=B server_user_ns=V server_sys_ns=Z
 * (G: the longest a thread waited for any reply in the window, a stall shows there; the server's
 * fields "-" without --server-pid; user and system are split as the kernel samples them, by ticks,
 * their sum is exact). Exit 0: every reply was right; 1: a check failed or
 * the server went away; 2: a mistake on the command line. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"

enum test { T_PING, T_SET, T_GET, T_INCR, T_LPUSH, T_HSET, T_MGET, T_MSET, T_MULTI, T_MSET_TAG, T_MULTI_TAG, NTESTS };
static const char *const test_names[NTESTS] = { "PING", "SET", "GET", "INCR", "LPUSH", "HSET", "MGET", "MSET", "MULTI",
                                                "MSET_TAG", "MULTI_TAG" };

#define MULTI    10       /* keys of an MGET or MSET */
#define FIELDS   16       /* fields of each HSET hash */
#define FRAG     23       /* a key or value as a bulk string: "$16\r\n", 16 bytes, "\r\n" */
#define REQ_MAX  512      /* bytes of the longest request (MSET: 15 + 20 * FRAG) */
#define IN_CAP   (1 << 16)
#define MAX_KEYS 1000000
#define STALL_NS (10 * 1000000000ull)

static struct {
    int         port, conns, pipeline, threads;
    uint32_t    keys;
    double      seconds, warmup;
    uint64_t    requests; /* 0: the window's length alone decides */
    long        server_pid;
    const char *label;
    enum test   order[NTESTS];
    int         ntests;
} opt = { .conns = 16, .pipeline = 256, .threads = 1, .keys = 10000, .seconds = 2, .warmup = 0.2 };

/* "%012u" of 0 .. max(keys, FIELDS) - 1, unterminated: every key, value and field is a prefix and these
 * digits. Written by main before any thread starts, read-only after. */
static char (*digits)[12];

/* One connection: touched by its thread only (main reads the counters after the join). */
struct conn {
    int       fd, id;
    bool      out_armed; /* EPOLLOUT wanted: the socket refused part of out */
    uint64_t  rng;
    char     *out;       /* requests not yet sent: [out_sent, out_len) */
    size_t    out_len, out_sent;
    char     *in;        /* replies read and not yet parsed: [0, in_len) */
    size_t    in_len;
    uint32_t *fifo;      /* keys of the GETs and MGETs in flight, in order, to check their values */
    uint64_t  fifo_head, fifo_tail;
    uint32_t  fifo_mask;
    uint32_t  in_flight; /* replies */
    uint8_t   phase;     /* MULTI: which reply of its transaction comes next */
    uint32_t  fill_next; /* the fill: the next key this connection SETs */
    uint64_t  sent, received;
};
static struct conn *conns;

/* What every thread runs now: set by main before it starts them (the fill, or a test). */
static enum test cur_test;
static bool      filling;
/* Main tells the threads to stop sending: relaxed, it only has to be seen; the counters are read
 * after the join. */
static _Atomic bool stop_sending;
/* Between main's two samples: the threads note their longest wait for a reply (relaxed, as above). */
static _Atomic bool measuring;

struct thr {
    pthread_t t;
    int       first, count; /* its connections: conns[first + i * threads] for i < count */
    _Alignas(64) _Atomic uint64_t replies; /* relaxed: a count main samples for a rate */
    uint64_t max_gap;                      /* ns: the longest wait for a reply while measuring */
};
static struct thr *thrs;

__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kv_load: %s: ", opt.label);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* ---- requests ---- */

static inline char *put_frag(char *p, const char prefix[4], uint32_t k)
{
    memcpy(p, "$16\r\n", 5);
    memcpy(p + 5, prefix, 4);
    memcpy(p + 9, digits[k], 12);
    memcpy(p + 21, "\r\n", 2);
    return p + FRAG;
}

#define PUT(p, lit) (memcpy((p), (lit), sizeof(lit) - 1), (p) + sizeof(lit) - 1)

/* The tags of MSET_TAG and MULTI_TAG: K / 10, each of 10 keys (one of keys 0..9 when K < 10). */
static inline uint32_t tags(void)
{
    return opt.keys >= MULTI ? opt.keys / MULTI : 1;
}

/* A key of tag t (a bulk string of 16 bytes: "{", t's last 5 digits, "}", k's last 9). */
static inline char *put_tagged(char *p, uint32_t t, uint32_t k)
{
    memcpy(p, "$16\r\n{", 6);
    memcpy(p + 6, digits[t] + 7, 5);
    p[11] = '}';
    memcpy(p + 12, digits[k] + 3, 9);
    memcpy(p + 21, "\r\n", 2);
    return p + FRAG;
}

static inline uint32_t draw(struct conn *c, uint32_t n)
{
    return (uint32_t)(((bench_mix(&c->rng) >> 32) * n) >> 32);
}

static inline void fifo_push(struct conn *c, uint32_t k)
{
    c->fifo[c->fifo_tail++ & c->fifo_mask] = k;
}

/* Appends the next request of the test running to c's output. */
static inline void issue(struct conn *c)
{
    char *p = c->out + c->out_len;
    uint32_t k;
    if (filling) {
        k = c->fill_next;
        c->fill_next += (uint32_t)opt.conns;
        p = PUT(p, "*3\r\n$3\r\nSET\r\n");
        p = put_frag(put_frag(p, "kvl:", k), "val:", k);
        c->out_len = (size_t)(p - c->out);
        c->in_flight++;
        c->sent++;
        return;
    }
    switch (cur_test) {
    case T_PING:
        p = PUT(p, "*1\r\n$4\r\nPING\r\n");
        break;
    case T_SET:
        k = draw(c, opt.keys);
        p = PUT(p, "*3\r\n$3\r\nSET\r\n");
        p = put_frag(put_frag(p, "kvl:", k), "val:", k);
        break;
    case T_GET:
        k = draw(c, opt.keys);
        p = put_frag(PUT(p, "*2\r\n$3\r\nGET\r\n"), "kvl:", k);
        fifo_push(c, k);
        break;
    case T_INCR:
        p = put_frag(PUT(p, "*2\r\n$4\r\nINCR\r\n"), "ctr:", draw(c, opt.keys));
        break;
    case T_LPUSH:
        k = draw(c, opt.keys);
        p = PUT(p, "*3\r\n$5\r\nLPUSH\r\n");
        p = put_frag(put_frag(p, "lst:", k), "val:", k);
        break;
    case T_HSET:
        k = draw(c, opt.keys);
        p = PUT(p, "*4\r\n$4\r\nHSET\r\n");
        p = put_frag(put_frag(put_frag(p, "hsh:", k), "fld:", draw(c, FIELDS)), "val:", k);
        break;
    case T_MGET:
        p = PUT(p, "*11\r\n$4\r\nMGET\r\n");
        for (int i = 0; i < MULTI; i++) {
            k = draw(c, opt.keys);
            p = put_frag(p, "kvl:", k);
            fifo_push(c, k);
        }
        break;
    case T_MSET:
        p = PUT(p, "*21\r\n$4\r\nMSET\r\n");
        for (int i = 0; i < MULTI; i++) {
            k = draw(c, opt.keys);
            p = put_frag(put_frag(p, "kvl:", k), "val:", k);
        }
        break;
    case T_MULTI:
        p = PUT(p, "*1\r\n$5\r\nMULTI\r\n");
        for (int i = 0; i < 2; i++) {
            k = draw(c, opt.keys);
            p = put_frag(put_frag(PUT(p, "*3\r\n$3\r\nSET\r\n"), "kvl:", k), "val:", k);
        }
        p = PUT(p, "*1\r\n$4\r\nEXEC\r\n");
        c->in_flight += 3; /* four replies: three more than the others */
        break;
    case T_MSET_TAG:
        k = draw(c, tags()) * MULTI; /* the tag's first key */
        p = PUT(p, "*21\r\n$4\r\nMSET\r\n");
        for (uint32_t i = k; i < k + MULTI; i++)
            p = put_frag(put_tagged(p, k / MULTI, i), "val:", i);
        break;
    case T_MULTI_TAG:
        k = draw(c, tags()) * MULTI;
        p = PUT(p, "*1\r\n$5\r\nMULTI\r\n");
        for (int i = 0; i < 2; i++) {
            uint32_t key = k + draw(c, MULTI);
            p = put_frag(put_tagged(PUT(p, "*3\r\n$3\r\nSET\r\n"), k / MULTI, key), "val:", key);
        }
        p = PUT(p, "*1\r\n$4\r\nEXEC\r\n");
        c->in_flight += 3;
        break;
    default:
        abort();
    }
    c->out_len = (size_t)(p - c->out);
    c->in_flight++;
    c->sent++;
}

static inline bool may_issue(const struct conn *c)
{
    if (filling)
        return c->fill_next < opt.keys;
    return !atomic_load_explicit(&stop_sending, memory_order_relaxed);
}

/* ---- replies ---- */

/* The integer of a RESP line's text p[0..n) (after its type byte, before its CRLF); INT64_MIN if it
 * is none. */
static int64_t parse_int(const char *p, size_t n)
{
    bool neg = n > 0 && *p == '-';
    size_t i = neg;
    if (i == n || n > 19)
        return INT64_MIN;
    int64_t v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return INT64_MIN;
        v = v * 10 + (p[i] - '0');
    }
    return neg ? -v : v;
}

/* Bytes of the whole RESP value at p[0..n): 0 when it is not all there yet, -1 when it is not RESP. */
static long resp_span(const char *p, size_t n, int depth)
{
    const char *nl = n ? memchr(p, '\n', n) : NULL;
    if (!nl)
        return 0;
    long line = nl - p + 1;
    if (line < 3 || nl[-1] != '\r')
        return -1;
    switch (p[0]) {
    case '+':
    case '-':
    case ':':
        return line;
    case '$': {
        int64_t len = parse_int(p + 1, (size_t)line - 3);
        if (len == -1)
            return line;
        if (len < 0 || len > (1 << 30))
            return -1;
        if ((size_t)line + (size_t)len + 2 > n)
            return 0;
        return p[line + len] == '\r' && p[line + len + 1] == '\n' ? line + (long)len + 2 : -1;
    }
    case '*': {
        int64_t count = parse_int(p + 1, (size_t)line - 3);
        if (count < -1 || count > (1 << 20) || depth > 8)
            return -1;
        long off = line;
        for (int64_t i = 0; i < count; i++) {
            long s = resp_span(p + off, n - (size_t)off, depth + 1);
            if (s <= 0)
                return s;
            off += s;
        }
        return off;
    }
    default:
        return -1;
    }
}

/* Whether p[0..s) is key k's value as a bulk string. */
static inline bool is_value(const char *p, long s, uint32_t k)
{
    return s == FRAG && memcmp(p, "$16\r\nval:", 9) == 0 && memcmp(p + 9, digits[k], 12) == 0 && p[21] == '\r' &&
           p[22] == '\n';
}

__attribute__((noreturn)) static void bad_reply(const struct conn *c, const char *p, long s, const char *want)
{
    char shown[121];
    size_t n = 0;
    for (long i = 0; i < s && n < sizeof shown - 4; i++)
        shown[n++] = p[i] == '\r' ? '~' : p[i] == '\n' ? '|' : p[i] >= ' ' && p[i] < 127 ? p[i] : '?';
    shown[n] = 0;
    die("%s, connection %d, reply %llu: %s expected, got \"%s\"%s (CR as ~, LF as |)",
        filling ? "fill (SET)" : test_names[cur_test], c->id, (unsigned long long)c->received + 1, want, shown,
        s > (long)n ? "..." : "");
}

/* Checks the whole reply p[0..s) against what the request in flight first on c expects. Return:
 * whether it ends a request (a MULTI's transaction ends at its EXEC's). */
static inline bool check(struct conn *c, const char *p, long s)
{
    enum test t = filling ? T_SET : cur_test;
    int64_t v;
    switch (t) {
    case T_MULTI:
    case T_MULTI_TAG: {
        static const char *const want[4] = { "+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n", "*2\r\n+OK\r\n+OK\r\n" };
        const char *w = want[c->phase];
        if ((size_t)s != strlen(w) || memcmp(p, w, (size_t)s) != 0)
            bad_reply(c, p, s, c->phase == 0 ? "+OK (MULTI)" : c->phase < 3 ? "+QUEUED" : "*2 of +OK (EXEC)");
        c->phase = (uint8_t)((c->phase + 1) % 4);
        return c->phase == 0;
    }
    case T_PING:
        if (s != 7 || memcmp(p, "+PONG\r\n", 7) != 0)
            bad_reply(c, p, s, "+PONG");
        return true;
    case T_SET:
    case T_MSET:
    case T_MSET_TAG:
        if (s != 5 || memcmp(p, "+OK\r\n", 5) != 0)
            bad_reply(c, p, s, "+OK");
        return true;
    case T_GET:
        if (!is_value(p, s, c->fifo[c->fifo_head++ & c->fifo_mask]))
            bad_reply(c, p, s, "the key's value");
        return true;
    case T_INCR:
    case T_LPUSH:
        if (p[0] != ':' || (v = parse_int(p + 1, (size_t)s - 3)) < 1)
            bad_reply(c, p, s, "an integer >= 1");
        return true;
    case T_HSET:
        if (p[0] != ':' || ((v = parse_int(p + 1, (size_t)s - 3)) != 0 && v != 1))
            bad_reply(c, p, s, "the integer 0 or 1");
        return true;
    case T_MGET:
        if (s != 5 + MULTI * FRAG || memcmp(p, "*10\r\n", 5) != 0)
            bad_reply(c, p, s, "an array of 10 values");
        for (int i = 0; i < MULTI; i++)
            if (!is_value(p + 5 + i * FRAG, FRAG, c->fifo[c->fifo_head++ & c->fifo_mask]))
                bad_reply(c, p, s, "each key's value");
        return true;
    default:
        abort();
    }
}

/* ---- a thread's connections ---- */

static void arm_out(int ep, struct conn *c, bool on)
{
    struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c };
    if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) != 0)
        die("epoll_ctl: %s", strerror(errno));
    c->out_armed = on;
}

static void flush(int ep, struct conn *c)
{
    while (c->out_sent < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                die("connection %d: send: %s", c->id, strerror(errno));
            /* The rest goes when the socket has room; what was sent makes way for the next requests. */
            memmove(c->out, c->out + c->out_sent, c->out_len - c->out_sent);
            c->out_len -= c->out_sent;
            c->out_sent = 0;
            if (!c->out_armed)
                arm_out(ep, c, true);
            return;
        }
        c->out_sent += (size_t)w;
    }
    c->out_len = c->out_sent = 0;
    if (c->out_armed)
        arm_out(ep, c, false);
}

static void refill(struct conn *c)
{
    while (c->in_flight < (uint32_t)opt.pipeline && may_issue(c))
        issue(c);
}

/* Return: replies taken. */
static uint64_t on_readable(struct conn *c)
{
    ssize_t r = recv(c->fd, c->in + c->in_len, IN_CAP - c->in_len, 0);
    if (r == 0)
        die("connection %d: the server closed it with %u requests in flight", c->id, c->in_flight);
    if (r < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return 0;
        die("connection %d: recv: %s", c->id, strerror(errno));
    }
    c->in_len += (size_t)r;
    size_t off = 0;
    uint64_t got = 0;
    for (;;) {
        long s = resp_span(c->in + off, c->in_len - off, 0);
        if (s == 0)
            break;
        if (s < 0)
            bad_reply(c, c->in + off, (long)(c->in_len - off), "a RESP reply");
        if (c->in_flight == 0)
            bad_reply(c, c->in + off, s, "no reply (none in flight)");
        got += check(c, c->in + off, s);
        off += (size_t)s;
        c->in_flight--;
    }
    c->in_len -= off;
    if (c->in_len && off)
        memmove(c->in, c->in + off, c->in_len);
    c->received += got;
    return got;
}

static void *thread_main(void *arg)
{
    struct thr *t = arg;
    int ep = epoll_create1(0);
    if (ep < 0)
        die("epoll_create1: %s", strerror(errno));
    for (int i = 0; i < t->count; i++) {
        struct conn *c = &conns[t->first + i * opt.threads];
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
        c->out_armed = false;
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
            die("epoll_ctl: %s", strerror(errno));
        refill(c);
        flush(ep, c);
    }
    uint64_t replies = 0, last = bench_now_ns();
    struct epoll_event evs[64];
    for (;;) {
        int n = epoll_wait(ep, evs, 64, 10);
        if (n < 0 && errno != EINTR)
            die("epoll_wait: %s", strerror(errno));
        uint64_t before = replies;
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
                replies += on_readable(c);
                refill(c);
                flush(ep, c);
            } else if (evs[i].events & EPOLLOUT) {
                flush(ep, c);
            }
        }
        if (replies != before) {
            atomic_store_explicit(&t->replies, replies, memory_order_relaxed);
            uint64_t now = bench_now_ns();
            if (now - last > t->max_gap && atomic_load_explicit(&measuring, memory_order_relaxed))
                t->max_gap = now - last;
            last = now;
            continue;
        }
        /* A connection with nothing in flight sends no more (refill ran after its last reply). */
        bool busy = false;
        for (int i = 0; i < t->count; i++)
            busy |= conns[t->first + i * opt.threads].in_flight > 0;
        if (!busy)
            break;
        if (bench_now_ns() - last > STALL_NS)
            die("%s: no reply for 10 s with requests in flight", filling ? "fill" : test_names[cur_test]);
    }
    close(ep);
    return NULL;
}

/* ---- measuring ---- */

struct sample {
    uint64_t t, replies, user_ns, sys_ns, srv_user, srv_sys; /* srv_*: clock ticks */
};

static uint64_t tv_ns(struct timeval tv)
{
    return (uint64_t)tv.tv_sec * 1000000000u + (uint64_t)tv.tv_usec * 1000u;
}

/* utime and stime of the server, in clock ticks (fields 14 and 15 of /proc/PID/stat, counted after the
 * command's closing parenthesis, which may itself hold spaces and parentheses). */
static bool server_ticks(uint64_t *user, uint64_t *sys)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", opt.server_pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    unsigned long long u, s;
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &u, &s) != 2)
        return false;
    *user = u;
    *sys = s;
    return true;
}

static void take(struct sample *s)
{
    s->replies = 0;
    for (int i = 0; i < opt.threads; i++)
        s->replies += atomic_load_explicit(&thrs[i].replies, memory_order_relaxed);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    s->user_ns = tv_ns(ru.ru_utime);
    s->sys_ns = tv_ns(ru.ru_stime);
    if (opt.server_pid && !server_ticks(&s->srv_user, &s->srv_sys))
        die("cannot read /proc/%ld/stat: has the server gone?", opt.server_pid);
    s->t = bench_now_ns();
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Runs the fill (filling) or cur_test on every connection; returns once every reply is in. With
 * measure, samples the window between the warm-up and the stop into *a and *b. */
static void run_threads(bool measure, struct sample *a, struct sample *b)
{
    atomic_store_explicit(&stop_sending, false, memory_order_relaxed);
    for (int i = 0; i < opt.threads; i++) {
        atomic_store_explicit(&thrs[i].replies, 0, memory_order_relaxed);
        thrs[i].max_gap = 0;
        if (pthread_create(&thrs[i].t, NULL, thread_main, &thrs[i]) != 0)
            die("pthread_create failed");
    }
    if (measure) {
        sleep_ns((uint64_t)(opt.warmup * 1e9));
        take(a);
        atomic_store_explicit(&measuring, true, memory_order_relaxed);
        uint64_t end = a->t + (uint64_t)(opt.seconds * 1e9);
        if (!opt.requests) {
            sleep_ns(end - a->t);
            take(b);
        } else {
            for (;;) {
                sleep_ns(2000000);
                take(b);
                if (b->t >= end || b->replies - a->replies >= opt.requests)
                    break;
            }
        }
        /* A window without a reply (a loaded machine's stall) has no rate: it runs on until one. */
        while (b->replies == a->replies && b->t - a->t < STALL_NS) {
            sleep_ns(2000000);
            take(b);
        }
        atomic_store_explicit(&measuring, false, memory_order_relaxed);
        atomic_store_explicit(&stop_sending, true, memory_order_relaxed);
    }
    for (int i = 0; i < opt.threads; i++)
        pthread_join(thrs[i].t, NULL);
    for (int i = 0; i < opt.conns; i++)
        if (conns[i].in_flight || conns[i].sent != conns[i].received)
            die("connection %d: %llu requests sent, %llu replies", i, (unsigned long long)conns[i].sent,
                (unsigned long long)conns[i].received);
}

static void report(enum test t, const struct sample *a, const struct sample *b)
{
    double req = (double)(b->replies - a->replies);
    if (req <= 0)
        die("%s: no reply in the window", test_names[t]);
    double secs = (double)(b->t - a->t) / 1e9;
    double user = (double)(b->user_ns - a->user_ns) / req, sys = (double)(b->sys_ns - a->sys_ns) / req;
    uint64_t gap = 0;
    for (int i = 0; i < opt.threads; i++)
        gap = thrs[i].max_gap > gap ? thrs[i].max_gap : gap;
    printf("bench=kv_load server=%s test=%s conns=%d pipeline=%d threads=%d keys=%u keys_per_req=%d requests=%.0f "
           "seconds=%.3f req_per_s=%.0f max_gap_ms=%.1f client_ns_per_req=%.1f client_user_ns=%.1f "
           "client_sys_ns=%.1f ",
           opt.label, test_names[t], opt.conns, opt.pipeline, opt.threads, opt.keys,
           t == T_MGET || t == T_MSET || t == T_MSET_TAG ? MULTI : t == T_MULTI || t == T_MULTI_TAG ? 2 : 1, req, secs, req / secs, (double)gap / 1e6, user + sys, user, sys);
    if (opt.server_pid) {
        double tick = 1e9 / (double)sysconf(_SC_CLK_TCK);
        double su = (double)(b->srv_user - a->srv_user) * tick / req, ss = (double)(b->srv_sys - a->srv_sys) * tick / req;
        printf("server_ns_per_req=%.1f server_user_ns=%.1f server_sys_ns=%.1f\n", su + ss, su, ss);
    } else {
        puts("server_ns_per_req=- server_user_ns=- server_sys_ns=-");
    }
    fflush(stdout);
}

/* ---- set-up ---- */

#define USAGE                                                                                              \
    "usage: kv_load --port P [--tests T,T,...|all] [--connections C] [--pipeline N] [--threads N]\n"        \
    "               [--keys K] [--seconds S] [--requests N] [--warmup S] [--server-pid PID]\n"             \
    "               [--label NAME] [--quick]\n"

__attribute__((noreturn, format(printf, 1, 2))) static void refuse(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kv_load: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n" USAGE);
    exit(2);
}

static double number(const char *name, const char *v, double lo, double hi)
{
    char *end;
    double d = v ? strtod(v, &end) : 0;
    if (!v || end == v || *end || !(d >= lo && d <= hi))
        refuse("%s wants a number in [%g, %g]", name, lo, hi);
    return d;
}

static void parse_tests(const char *v)
{
    opt.ntests = 0;
    if (strcmp(v, "all") == 0) {
        for (int t = 0; t < NTESTS; t++)
            opt.order[opt.ntests++] = (enum test)t;
        return;
    }
    for (const char *p = v; *p;) {
        size_t n = strcspn(p, ",");
        int t = 0;
        while (t < NTESTS && !(strlen(test_names[t]) == n && strncasecmp(p, test_names[t], n) == 0))
            t++;
        if (t == NTESTS || opt.ntests == NTESTS) {
            char names[128] = "";
            for (int i = 0; i < NTESTS; i++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s ", test_names[i]);
            refuse("--tests: '%.*s' is none of %s(or all)", (int)n, p, names);
        }
        opt.order[opt.ntests++] = (enum test)t;
        p += n + (p[n] == ',');
    }
    if (!opt.ntests)
        refuse("--tests names no test");
}

static void parse_options(int argc, char **argv)
{
    bool quick = false, seconds_given = false, warmup_given = false;
    parse_tests("SET,GET");
    for (int i = 1; i < argc; i++) {
        char *name = argv[i], *eq = strchr(name, '=');
        const char *v = NULL;
        char buf[32];
        if (eq && eq - name < (long)sizeof buf) {
            snprintf(buf, sizeof buf, "%.*s", (int)(eq - name), name);
            name = buf;
            v = eq + 1;
        }
        if (strcmp(name, "--help") == 0) {
            fputs(USAGE, stdout);
            exit(0);
        } else if (strcmp(name, "--quick") == 0) {
            quick = true;
            continue;
        }
        if (!v && i + 1 < argc)
            v = argv[++i];
        if (!v)
            refuse("unknown argument '%s', or one that wants a value", argv[i]);
        if (strcmp(name, "--port") == 0)
            opt.port = (int)number(name, v, 1, 65535);
        else if (strcmp(name, "--tests") == 0)
            parse_tests(v);
        else if (strcmp(name, "--connections") == 0)
            opt.conns = (int)number(name, v, 1, 4096);
        else if (strcmp(name, "--pipeline") == 0)
            opt.pipeline = (int)number(name, v, 1, 65536);
        else if (strcmp(name, "--threads") == 0)
            opt.threads = (int)number(name, v, 1, 8);
        else if (strcmp(name, "--keys") == 0)
            opt.keys = (uint32_t)number(name, v, 1, MAX_KEYS);
        else if (strcmp(name, "--seconds") == 0)
            opt.seconds = number(name, v, 0.01, 600), seconds_given = true;
        else if (strcmp(name, "--requests") == 0)
            opt.requests = (uint64_t)number(name, v, 1, 1e12);
        else if (strcmp(name, "--warmup") == 0)
            opt.warmup = number(name, v, 0, 60), warmup_given = true;
        else if (strcmp(name, "--server-pid") == 0)
            opt.server_pid = (long)number(name, v, 1, 1e9);
        else if (strcmp(name, "--label") == 0)
            opt.label = v;
        else
            refuse("unknown argument '%s'", argv[i]);
    }
    if (!opt.port)
        refuse("--port is required (the server listens on 127.0.0.1:PORT)");
    if (opt.threads > opt.conns)
        refuse("--threads %d: more threads than connections (%d)", opt.threads, opt.conns);
    if (quick) {
        opt.seconds = seconds_given ? opt.seconds : 0.3;
        opt.warmup = warmup_given ? opt.warmup : 0.05;
    }
    if (!opt.label) {
        static char label[16];
        snprintf(label, sizeof label, "port%d", opt.port);
        opt.label = label;
    }
}

static void connect_all(void)
{
    if (!(conns = calloc((size_t)opt.conns, sizeof *conns)) || !(thrs = calloc((size_t)opt.threads, sizeof *thrs)))
        die("out of memory");
    uint32_t fifo = 1;
    while (fifo < (uint32_t)opt.pipeline * MULTI)
        fifo *= 2;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    for (int i = 0; i < opt.conns; i++) {
        struct conn *c = &conns[i];
        c->id = i;
        c->rng = 0x6b766c6fu + (uint64_t)i;
        c->fifo_mask = fifo - 1;
        c->out = malloc((size_t)opt.pipeline * REQ_MAX);
        c->in = malloc(IN_CAP);
        c->fifo = malloc(fifo * sizeof *c->fifo);
        if (!c->out || !c->in || !c->fifo)
            die("out of memory");
        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0)
            die("connect to 127.0.0.1:%d: %s", opt.port, strerror(errno));
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (fcntl(c->fd, F_SETFL, O_NONBLOCK) != 0)
            die("fcntl: %s", strerror(errno));
    }
    for (int i = 0; i < opt.threads; i++) {
        thrs[i].first = i;
        thrs[i].count = (opt.conns - i + opt.threads - 1) / opt.threads;
    }
}

int main(int argc, char **argv)
{
    parse_options(argc, argv);
    uint32_t nd = opt.keys > FIELDS ? opt.keys : FIELDS;
    if (!(digits = malloc((size_t)nd * sizeof *digits)))
        die("out of memory");
    for (uint32_t k = 0; k < nd; k++) {
        char b[16];
        snprintf(b, sizeof b, "%012u", k);
        memcpy(digits[k], b, 12);
    }
    if (opt.server_pid) {
        uint64_t u, s;
        if (!server_ticks(&u, &s))
            refuse("--server-pid %ld: no /proc/%ld/stat to read", opt.server_pid, opt.server_pid);
    }
    connect_all();
    /* The fill: every key SET once (unmeasured, checked), so that GET and MGET find their values. */
    filling = true;
    for (int i = 0; i < opt.conns; i++)
        conns[i].fill_next = (uint32_t)i;
    run_threads(false, NULL, NULL);
    filling = false;
    for (int i = 0; i < opt.ntests; i++) {
        struct sample a, b;
        cur_test = opt.order[i];
        run_threads(true, &a, &b);
        report(cur_test, &a, &b);
    }
    for (int i = 0; i < opt.conns; i++) {
        close(conns[i].fd);
        free(conns[i].out);
        free(conns[i].in);
        free(conns[i].fifo);
    }
    free(conns);
    free(thrs);
    free(digits);
    return 0;
}
