/* kv_server: the commands of the whole keyspace (SCAN, KEYS, RANDOMKEY, FLUSHDB, FLUSHALL) and
 * MEMORY USAGE, run by the admin thread over every worker (broadcast.c). SPDX-License-Identifier:
 * LGPL-2.1-or-later
 *
 * The cursor. A SCAN cursor is a position in the 64-bit space of key hashes (kv_hash). A call covers
 * the slice [cursor, end] and answers end + 1 as the next cursor, or 0 when end is the top of the
 * space: the iteration is over. end is chosen so that the slice holds about COUNT keys: a width of
 * 2^64 * COUNT / DBSIZE. Buckets of every kvmap run in hash order (kvmap.h), so a slice is a run of
 * buckets in every store, whatever its size. A client that chooses cursors reads a key's hash exactly
 * (the key comes back from [cursor, top] or not: 64 calls): kv_hash is a keyed pseudo-random function
 * for that (kvmap.h), from which a hash tells nothing of the key's or any other's.
 *
 * The guarantee, stronger than Redis's since every slice is read complete (broadcast.c says why): a
 * key present for the whole iteration is returned exactly once (Redis: at least once), whatever
 * workers are added, removed or crashed, or keys placed, between or during the calls; a key added or
 * deleted during it may or may not be, and is returned at most once. When the membership keeps
 * changing during a call, it answers "ERR membership changing, retry SCAN" and the cursor given stays
 * valid. KEYS is one slice of the whole space; FLUSHDB clears every store and the transit area with
 * the same checks (a slice read again after a change clears again: keys written meanwhile by
 * then-concurrent commands go too). Expired keys not yet deleted by their timer are skipped. */
#include <errno.h>
#include <strings.h>
#include <sys/random.h>

#include "broadcast.h"
#include "expire.h"

static void reply_failure(struct request *r, int err, const char *what)
{
    char msg[128];
    if (err == -EAGAIN)
        snprintf(msg, sizeof msg, "ERR membership changing, retry %s", what);
    else if (err == -ENOMEM)
        snprintf(msg, sizeof msg, "ERR out of memory");
    else
        snprintf(msg, sizeof msg, "ERR %s: %s", what, shard_strerror(err));
    resp_error(&r->reply, msg);
}

/* The keys of a finished broadcast, after an array header. */
static void put_keys(struct request *r, const struct broadcast *b)
{
    size_t n = 0;
    for (size_t i = 0; i < b->n; i++)
        n += b->slot[i].count;
    resp_array(&r->reply, (int64_t)n);
    for (size_t i = 0; i < b->n; i++)
        buf_put(&r->reply, b->slot[i].keys.p, b->slot[i].keys.len);
}

bool scan_parse_cursor(const struct resp_arg *a, uint64_t *out)
{
    /* As redis-server 7.0 reads one (strtoul in base 10): an optional sign, a minus negating modulo
     * 2^64 ("-1" is 2^64 - 1), then digits within 64 bits; no space before or after; and an empty
     * argument is 0 (strtoul's end is then the string's). */
    size_t i = a->len && (a->p[0] == '-' || a->p[0] == '+');
    bool minus = i && a->p[0] == '-';
    if (i && a->len == 1)
        return false; /* a sign alone: no number */
    uint64_t v = 0;
    for (; i < a->len; i++) {
        if (a->p[i] < '0' || a->p[i] > '9')
            return false;
        uint64_t d = (uint64_t)(a->p[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = minus ? 0 - v : v;
    return true;
}

/* The type TYPE's name names; -1 for one no key here can have (stream, or no type at all). */
static int type_named(const struct resp_arg *a)
{
    static const char *const names[] = { "string", "list", "hash", "set", "zset" };
    for (int t = 0; t < (int)(sizeof names / sizeof names[0]); t++)
        if (resp_arg_is(a, names[t]))
            return t;
    return -1;
}

uint64_t scan_slice_end(uint64_t from, uint64_t count, uint64_t keys)
{
    if (count >= keys)
        return UINT64_MAX;
    uint64_t per_key = UINT64_MAX / keys, width = per_key * count; /* count < keys: no overflow */
    return width > UINT64_MAX - from ? UINT64_MAX : from + width;
}

/* SCAN cursor [MATCH pattern] [COUNT count] [TYPE type] */
void scan_scan(struct server *srv, struct request *r)
{
    struct slice q = { .op = OP_COLLECT, .type = -1 };
    int64_t count = 10;
    bool none = false; /* a TYPE no key has here: nothing matches, but the cursor still moves */
    if (!scan_parse_cursor(&r->argv[1], &q.from)) {
        resp_error(&r->reply, "ERR invalid cursor");
        return;
    }
    for (uint32_t i = 2; i < r->argc; i += 2) {
        const struct resp_arg *opt = &r->argv[i], *val = i + 1 < r->argc ? &r->argv[i + 1] : NULL;
        if (!val) {
            resp_error(&r->reply, "ERR syntax error");
            return;
        }
        if (resp_arg_is(opt, "COUNT")) {
            if (!parse_int64(val->p, val->len, &count)) {
                resp_error(&r->reply, "ERR value is not an integer or out of range");
                return;
            }
            if (count < 1) {
                resp_error(&r->reply, "ERR syntax error");
                return;
            }
        } else if (resp_arg_is(opt, "MATCH")) {
            q.pattern = val->len == 1 && val->p[0] == '*' ? NULL : val;
        } else if (resp_arg_is(opt, "TYPE")) {
            q.type = type_named(val);
            none = q.type < 0; /* stream, or a name no type has: Redis 7.0 matches nothing (7.2 errs) */
        } else {
            resp_error(&r->reply, "ERR syntax error");
            return;
        }
    }
    q.to = scan_slice_end(q.from, (uint64_t)count, store_total_keys());
    char next[24];
    int nlen = snprintf(next, sizeof next, "%" PRIu64, q.to == UINT64_MAX ? 0 : q.to + 1);
    if (none) {
        resp_array(&r->reply, 2);
        resp_bulk(&r->reply, next, (size_t)nlen);
        resp_array(&r->reply, 0);
        return;
    }
    int err;
    struct broadcast *b = keyspace_read(srv, &q, &err);
    if (!b) {
        reply_failure(r, err, "SCAN");
        return;
    }
    resp_array(&r->reply, 2);
    resp_bulk(&r->reply, next, (size_t)nlen);
    put_keys(r, b);
    broadcast_put(b);
}

/* KEYS pattern */
void scan_keys(struct server *srv, struct request *r)
{
    const struct resp_arg *pat = &r->argv[1];
    struct slice q = { .op = OP_COLLECT, .from = 0, .to = UINT64_MAX, .type = -1,
                       .pattern = pat->len == 1 && pat->p[0] == '*' ? NULL : pat };
    int err;
    struct broadcast *b = keyspace_read(srv, &q, &err);
    if (!b) {
        reply_failure(r, err, "KEYS");
        return;
    }
    put_keys(r, b);
    broadcast_put(b);
}

/* FLUSHDB [ASYNC|SYNC], FLUSHALL [ASYNC|SYNC]: both synchronous here. */
void scan_flush(struct server *srv, struct request *r)
{
    if (r->argc > 2 || (r->argc == 2 && !resp_arg_is(&r->argv[1], "ASYNC") && !resp_arg_is(&r->argv[1], "SYNC"))) {
        resp_error(&r->reply, "ERR syntax error");
        return;
    }
    struct slice q = { .op = OP_CLEAR, .to = UINT64_MAX, .type = -1 };
    int err;
    struct broadcast *b = keyspace_read(srv, &q, &err);
    if (!b) {
        reply_failure(r, err, r->cmd->name);
        return;
    }
    broadcast_put(b);
    resp_simple(&r->reply, "OK");
}

/* RANDOMKEY: a key near a random position: slices of about 4 keys from there, round the space once. */
void scan_randomkey(struct server *srv, struct request *r)
{
    uint64_t from, start, rnd;
    if (getrandom(&start, sizeof start, 0) != sizeof start || getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
        start = rnd = (uint64_t)kv_now_ms() * 0x9E3779B97F4A7C15u;
    from = start;
    bool wrapped = false;
    for (;;) {
        uint64_t end = scan_slice_end(from, 4, store_total_keys());
        if (wrapped && end >= start - 1)
            end = start - 1;
        struct slice q = { .op = OP_COLLECT, .from = from, .to = end, .type = -1 };
        int err;
        struct broadcast *b = keyspace_read(srv, &q, &err);
        if (!b) {
            reply_failure(r, err, "RANDOMKEY");
            return;
        }
        size_t n = 0;
        for (size_t i = 0; i < b->n; i++)
            n += b->slot[i].count;
        if (n) {
            /* The (rnd mod n)-th key: walk the slots' bulk strings to it. */
            size_t pick = (size_t)(rnd % n);
            for (size_t i = 0; i < b->n; i++) {
                const struct slot *sl = &b->slot[i];
                if (pick >= sl->count) {
                    pick -= sl->count;
                    continue;
                }
                const char *p = sl->keys.p;
                for (;;) {
                    size_t len = strtoull(p + 1, NULL, 10);
                    const char *data = strchr(p, '\n') + 1;
                    if (pick-- == 0) {
                        resp_bulk(&r->reply, data, len);
                        break;
                    }
                    p = data + len + 2;
                }
                break;
            }
            broadcast_put(b);
            return;
        }
        broadcast_put(b);
        if ((wrapped && end == start - 1) || (start == 0 && end == UINT64_MAX)) {
            resp_null(&r->reply);
            return;
        }
        if (end == UINT64_MAX) {
            wrapped = true;
            from = 0;
        } else {
            from = end + 1;
        }
    }
}

/* MEMORY USAGE key [SAMPLES count] | MEMORY HELP: the key's job runs on its worker; the admin thread
 * waits for it (the key is argv[2], where the request's parts cannot take it from). */
void scan_memory(struct server *srv, struct request *r)
{
    const struct resp_arg *sub = &r->argv[1];
    if (resp_arg_is(sub, "HELP") && r->argc == 2) {
        static const char *const help[] = {
            "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value (for a string; the entry alone for",
            "    the other types). SAMPLES is accepted and ignored.",
            "HELP",
            "    Print this help.",
        };
        resp_array(&r->reply, (int64_t)(sizeof help / sizeof help[0]));
        for (size_t i = 0; i < sizeof help / sizeof help[0]; i++)
            resp_simple(&r->reply, help[i]);
        return;
    }
    if (!resp_arg_is(sub, "USAGE")) {
        char msg[96];
        snprintf(msg, sizeof msg, "ERR unknown subcommand '%.40s'. Try MEMORY HELP.", sub->p);
        resp_error(&r->reply, msg);
        return;
    }
    int64_t samples;
    if (r->argc != 3 && !(r->argc == 5 && resp_arg_is(&r->argv[3], "SAMPLES"))) {
        resp_error(&r->reply, r->argc < 3 ? "ERR wrong number of arguments for 'memory|usage' command"
                                          : "ERR syntax error");
        return;
    }
    if (r->argc == 5 && (!parse_int64(r->argv[4].p, r->argv[4].len, &samples) || samples < 0)) {
        resp_error(&r->reply, "ERR value is not an integer or out of range");
        return;
    }
    struct broadcast *b = broadcast_new(1, OP_MEMORY);
    if (!b) {
        resp_error(&r->reply, "ERR out of memory");
        return;
    }
    b->key = &r->argv[2];
    int err = broadcast_submit(srv, b, 0, r->argv[2].p, r->argv[2].len);
    broadcast_wait(b);
    if (err || b->slot[0].nomem)
        reply_failure(r, err ? err : -ENOMEM, "MEMORY USAGE");
    else if (!b->slot[0].found)
        resp_null(&r->reply);
    else
        resp_int(&r->reply, (int64_t)b->slot[0].count);
    broadcast_put(b);
}
