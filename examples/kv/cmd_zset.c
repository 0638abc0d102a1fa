/* kv_server: commands of sorted sets (ZADD ZINCRBY ZREM ZPOPMIN ZPOPMAX ZRANGE ZREVRANGE ZSCORE ZMSCORE
 * ZCARD ZCOUNT ZRANK ZREVRANK ZRANGEBYSCORE ZREVRANGEBYSCORE ZREMRANGEBYSCORE ZREMRANGEBYRANK).
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A sorted set is a skip list with spans and an index by member (obj_zset.c): ZSCORE and ZCARD are
 * O(1), ZADD, ZINCRBY and ZREM O(log n) per member, ZRANK and ZCOUNT O(log n), ZRANGE, ZREVRANGE,
 * ZRANGEBYSCORE and ZREVRANGEBYSCORE O(log n + elements skipped and returned), ZPOPMIN, ZPOPMAX,
 * ZREMRANGEBYSCORE and ZREMRANGEBYRANK O(log n) per member removed. Replies and errors are Redis
 * 7.0's, scores written as it writes them ("%.17g", and "inf", "-inf").
 *
 * ZADD takes every option of Redis 7.0: NX, XX, GT, LT, CH and INCR. ZRANGE takes ranks only, with REV
 * and WITHSCORES; BYSCORE, BYLEX and LIMIT are answered with an error saying so. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <strings.h>

#include "obj_cmd.h"

#define ERR_FLOAT "ERR value is not a valid float"

/* Redis's float syntax: what strtod takes, whole, without leading space, neither NaN nor out of
 * range (a denormal is taken). A negative zero is made 0: Redis answers "0" for it in a small sorted
 * set (stored as text), "-0" in a large one; the first is what clients see most. */
static bool parse_score(const struct resp_arg *a, double *score)
{
    if (a->len == 0 || isspace((unsigned char)a->p[0]))
        return false;
    char *end;
    errno = 0;
    double d = strtod(a->p, &end); /* a->p is NUL-terminated (request.c) */
    if (end != a->p + a->len || isnan(d))
        return false;
    if (errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL || d == 0))
        return false;
    *score = d + 0.0;
    return true;
}

enum { ZADD_NX = 1, ZADD_XX = 2, ZADD_GT = 4, ZADD_LT = 8, ZADD_CH = 16, ZADD_INCR = 32 };

/* ZADD's options, from argv[2]: their flags, and the index of the first score in *first. Return:
 * false, the error replied, when they do not go together or the pairs are not pairs. */
static bool zadd_options(struct request *r, const struct part *p, unsigned *flags, uint32_t *first)
{
    static const struct {
        const char *name;
        unsigned    flag;
    } names[] = { { "NX", ZADD_NX }, { "XX", ZADD_XX }, { "GT", ZADD_GT },
                  { "LT", ZADD_LT }, { "CH", ZADD_CH }, { "INCR", ZADD_INCR } };
    struct buf *out = part_out(r, p);
    uint32_t i = 2;
    unsigned f = 0;
    for (bool known = true; i < r->argc && known; i += known) {
        known = false;
        for (size_t k = 0; k < sizeof names / sizeof names[0] && !known; k++)
            if (strcasecmp(r->argv[i].p, names[k].name) == 0) {
                f |= names[k].flag;
                known = true;
            }
    }
    *flags = f;
    *first = i;
    uint32_t args = r->argc - i;
    bool nx = f & ZADD_NX, gt = f & ZADD_GT, lt = f & ZADD_LT;
    if (args == 0 || args % 2 != 0)
        resp_error(out, OBJ_ERR_SYNTAX);
    else if (nx && (f & ZADD_XX))
        resp_error(out, "ERR XX and NX options at the same time are not compatible");
    else if ((gt && nx) || (lt && nx) || (gt && lt))
        resp_error(out, "ERR GT, LT, and/or NX options at the same time are not compatible");
    else if ((f & ZADD_INCR) && args > 2)
        resp_error(out, "ERR INCR option supports a single increment-element pair");
    else
        return true;
    return false;
}

/* What ZADD did with one pair. */
enum zadd_done {
    ZADD_SKIPPED, /* left out by NX, XX, GT or LT: INCR then answers nil */
    ZADD_SAME,    /* the score it already had */
    ZADD_ADDED,
    ZADD_UPDATED,
};

/* One pair of ZADD under flags: *score is the pair's score, and the member's after. Return: an enum
 * zadd_done; -ENOMEM (unchanged); -EDOM when INCR makes NaN (unchanged). */
static int zadd_one(struct obj_zset *z, unsigned flags, const struct resp_arg *m, double *score)
{
    const struct obj_znode *n = obj_zset_find(z, m->p, m->len);
    if ((!n && (flags & ZADD_XX)) || (n && (flags & ZADD_NX)))
        return ZADD_SKIPPED;
    double cur = n ? obj_znode_score(n) : 0;
    double to = n && (flags & ZADD_INCR) ? cur + *score : *score;
    if (isnan(to))
        return -EDOM;
    *score = to;
    if (n && (((flags & ZADD_LT) && to >= cur) || ((flags & ZADD_GT) && to <= cur)))
        return ZADD_SKIPPED;
    if (n && to == cur)
        return ZADD_SAME;
    int got = obj_zset_set(z, m->p, m->len, to);
    return got < 0 ? got : got == 1 ? ZADD_ADDED : ZADD_UPDATED;
}

/* ZADD's pairs from argv[first] under flags. Every score is read before the key is looked up, as
 * Redis does. A NaN from INCR, or out of memory, leaves the pairs before it applied (INCR has only
 * one). */
static void zadd_pairs(struct kv_store *s, struct request *r, const struct part *p, unsigned flags, uint32_t first)
{
    struct buf *out = part_out(r, p);
    double score = 0;
    for (uint32_t i = first; i < r->argc; i += 2)
        if (!parse_score(&r->argv[i], &score)) {
            resp_error(out, ERR_FLOAT);
            return;
        }
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_ZSET, &e) != 0)
        return;
    struct obj_zset *z = e ? e->obj : NULL;
    if (!z && !(flags & ZADD_XX) && !(z = obj_zset_new())) {
        resp_error(out, OBJ_ERR_OOM);
        return;
    }
    int64_t added = 0, updated = 0;
    int got = ZADD_SKIPPED;
    for (uint32_t i = first; z && i < r->argc && got >= 0; i += 2) {
        parse_score(&r->argv[i], &score);
        got = zadd_one(z, flags, &r->argv[i + 1], &score);
        added += got == ZADD_ADDED;
        updated += got == ZADD_UPDATED;
    }
    /* a new key's set: every pair was added (no XX here), unless one failed */
    if (!e && z && (got < 0 || obj_store(s, r, p, KV_ZSET, z) != 0)) {
        obj_zset_free(z);
        got = got < 0 ? got : -ENOMEM;
    }
    if (got == -EDOM)
        resp_error(out, "ERR resulting score is not a number (NaN)");
    else if (got < 0)
        resp_error(out, OBJ_ERR_OOM);
    else if (!(flags & ZADD_INCR))
        resp_int(out, added + ((flags & ZADD_CH) ? updated : 0));
    else if (got == ZADD_SKIPPED)
        resp_null(out);
    else
        obj_put_score(out, score);
}

static void zadd(struct kv_store *s, struct request *r, const struct part *p)
{
    unsigned flags;
    uint32_t first;
    if (zadd_options(r, p, &flags, &first))
        zadd_pairs(s, r, p, flags, first);
}

/* ZINCRBY key increment member: ZADD key INCR increment member. */
static void zincrby(struct kv_store *s, struct request *r, const struct part *p)
{
    zadd_pairs(s, r, p, ZADD_INCR, 2);
}

/* Removes node n of z, found by its member (which lives in n). Return: the node after it. */
static const struct obj_znode *zrem_node(struct obj_zset *z, const struct obj_znode *n)
{
    const struct obj_znode *next = obj_znode_next(n);
    size_t len;
    const char *m = obj_znode_member(n, &len);
    obj_zset_del(z, m, len);
    return next;
}

/* After a removal from e's set: the key goes with its last member, as in Redis. */
static void zrem_done(struct kv_store *s, struct request *r, const struct part *p, const struct kv_entry *e)
{
    if (e && obj_zset_len(e->obj) == 0)
        obj_drop(s, r, p);
}

static void zrem(struct kv_store *s, struct request *r, const struct part *p)
{
    struct kv_entry *e;
    int64_t n = 0;
    if (obj_lookup(s, r, p, KV_ZSET, &e) != 0)
        return;
    for (uint32_t i = 2; e && i < r->argc; i++)
        n += obj_zset_del(e->obj, r->argv[i].p, r->argv[i].len);
    zrem_done(s, r, p, e);
    resp_int(part_out(r, p), n);
}

/* ZPOPMIN and ZPOPMAX (max): an array of member, score for each popped, lowest (highest) first, with
 * or without a count (then one). */
static void pop_end(struct kv_store *s, struct request *r, const struct part *p, bool max)
{
    struct buf *out = part_out(r, p);
    int64_t count;
    if (!obj_pop_count(r, p, false, &count))
        return;
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_ZSET, &e) != 0)
        return;
    struct obj_zset *z = e ? e->obj : NULL;
    size_t len = z ? obj_zset_len(z) : 0;
    size_t n = (uint64_t)count < len ? (size_t)count : len;
    resp_array(out, 2 * (int64_t)n);
    for (size_t i = 0; i < n; i++) {
        const struct obj_znode *end = obj_zset_at(z, max ? obj_zset_len(z) - 1 : 0);
        obj_put_znode(out, end, true);
        zrem_node(z, end);
    }
    zrem_done(s, r, p, e);
}

static void zpopmin(struct kv_store *s, struct request *r, const struct part *p)
{
    pop_end(s, r, p, false);
}

static void zpopmax(struct kv_store *s, struct request *r, const struct part *p)
{
    pop_end(s, r, p, true);
}

/* The ranks argv[2] to argv[3] (negative: from the end, as ZRANGE's) of the part's key's set: its
 * entry (*e NULL: none), the first rank and how many. Return: false, the error replied, for an index
 * that is not an integer or a key of another type. */
static bool rank_range(struct kv_store *s, struct request *r, const struct part *p, struct kv_entry **e,
                       size_t *first, size_t *n)
{
    int64_t start, stop;
    if (!obj_parse_index(r, p, &r->argv[2], &start) || !obj_parse_index(r, p, &r->argv[3], &stop) ||
        obj_lookup(s, r, p, KV_ZSET, e) != 0)
        return false;
    obj_range(start, stop, *e ? obj_zset_len((*e)->obj) : 0, first, n);
    return true;
}

/* ZRANGE key start stop [REV] [WITHSCORES], and ZREVRANGE key start stop [WITHSCORES] (revrange):
 * options first, then the indexes, then the key, as Redis checks them. */
static void range_by_rank(struct kv_store *s, struct request *r, const struct part *p, bool revrange)
{
    struct buf *out = part_out(r, p);
    bool rev = revrange, scores = false;
    for (uint32_t i = 4; i < r->argc; i++) {
        const char *o = r->argv[i].p;
        if (strcasecmp(o, "WITHSCORES") == 0) {
            scores = true;
        } else if (strcasecmp(o, "REV") == 0 && !revrange) {
            rev = true;
        } else if (!revrange && (strcasecmp(o, "BYSCORE") == 0 || strcasecmp(o, "BYLEX") == 0 ||
                                 strcasecmp(o, "LIMIT") == 0)) {
            resp_error(out, "ERR ZRANGE takes ranks only here: BYSCORE, BYLEX and LIMIT are not supported");
            return;
        } else {
            resp_error(out, OBJ_ERR_SYNTAX);
            return;
        }
    }
    struct kv_entry *e;
    size_t first, n;
    if (!rank_range(s, r, p, &e, &first, &n))
        return;
    resp_array(out, (int64_t)(scores ? 2 * n : n));
    const struct obj_znode *node = n ? obj_zset_at(e->obj, rev ? obj_zset_len(e->obj) - 1 - first : first) : NULL;
    for (size_t i = 0; i < n; i++, node = rev ? obj_znode_prev(node) : obj_znode_next(node))
        obj_put_znode(out, node, scores);
}

static void zrange(struct kv_store *s, struct request *r, const struct part *p)
{
    range_by_rank(s, r, p, false);
}

static void zrevrange(struct kv_store *s, struct request *r, const struct part *p)
{
    range_by_rank(s, r, p, true);
}

/* ZMSCORE key member...: each member's score, nil where there is none. */
static void zmscore(struct kv_store *s, struct request *r, const struct part *p)
{
    struct buf *out = part_out(r, p);
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_ZSET, &e) != 0)
        return;
    resp_array(out, (int64_t)r->argc - 2);
    for (uint32_t i = 2; i < r->argc; i++) {
        const struct obj_znode *n = e ? obj_zset_find(e->obj, r->argv[i].p, r->argv[i].len) : NULL;
        if (n)
            obj_put_score(out, obj_znode_score(n));
        else
            resp_null(out);
    }
}

static void zscore(struct kv_store *s, struct request *r, const struct part *p)
{
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_ZSET, &e) != 0)
        return;
    const struct obj_znode *n = e ? obj_zset_find(e->obj, r->argv[2].p, r->argv[2].len) : NULL;
    if (n)
        obj_put_score(part_out(r, p), obj_znode_score(n));
    else
        resp_null(part_out(r, p));
}

static void zcard(struct kv_store *s, struct request *r, const struct part *p)
{
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_ZSET, &e) == 0)
        resp_int(part_out(r, p), e ? (int64_t)obj_zset_len(e->obj) : 0);
}

/* ZRANK and ZREVRANK (rev): nil when the key or the member does not exist. */
static void rank_with(struct kv_store *s, struct request *r, const struct part *p, bool rev)
{
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_ZSET, &e) != 0)
        return;
    const struct obj_znode *n = e ? obj_zset_find(e->obj, r->argv[2].p, r->argv[2].len) : NULL;
    size_t rank = n ? obj_zset_rank(e->obj, n) : 0;
    if (n)
        resp_int(part_out(r, p), (int64_t)(rev ? obj_zset_len(e->obj) - 1 - rank : rank));
    else
        resp_null(part_out(r, p));
}

static void zrank(struct kv_store *s, struct request *r, const struct part *p)
{
    rank_with(s, r, p, false);
}

static void zrevrank(struct kv_store *s, struct request *r, const struct part *p)
{
    rank_with(s, r, p, true);
}

/* A bound of ZRANGEBYSCORE as Redis's zslParseRange reads it: "(" for exclusive, then whatever
 * strtod takes whole but NaN ("(" alone is an exclusive 0, as there; inf, -inf and +inf too). */
static bool parse_bound(const struct resp_arg *a, double *v, bool *exclusive)
{
    *exclusive = a->len && a->p[0] == '(';
    char *end;
    *v = strtod(a->p + *exclusive, &end); /* a->p is NUL-terminated (request.c) */
    return *end == '\0' && !isnan(*v);
}

/* A range of scores, ZRANGEBYSCORE's, ZCOUNT's and the others'. */
struct score_range {
    double min, max;
    bool   minex, maxex;
};

/* The range of argv[2] and argv[3]: min then max, or max then min (rev: ZREVRANGEBYSCORE's). Return:
 * false, the error replied, when a bound is not a float. */
static bool parse_range(struct request *r, const struct part *p, bool rev, struct score_range *g)
{
    const struct resp_arg *min = &r->argv[rev ? 3 : 2], *max = &r->argv[rev ? 2 : 3];
    if (parse_bound(min, &g->min, &g->minex) && parse_bound(max, &g->max, &g->maxex))
        return true;
    resp_error(part_out(r, p), "ERR min or max is not a float");
    return false;
}

/* The first member of e's set (NULL: none) at or above g's minimum. */
static const struct obj_znode *range_first(const struct kv_entry *e, const struct score_range *g)
{
    return e ? obj_zset_first_from(e->obj, g->min, g->minex) : NULL;
}

/* The first member of e's set (not NULL) past g's maximum; NULL: none. */
static const struct obj_znode *range_end(const struct kv_entry *e, const struct score_range *g)
{
    return obj_zset_first_from(e->obj, g->max, !g->maxex);
}

/* The last member of e's set (NULL: none) at or below g's maximum. */
static const struct obj_znode *range_last(const struct kv_entry *e, const struct score_range *g)
{
    if (!e)
        return NULL;
    const struct obj_znode *end = range_end(e, g);
    return end ? obj_znode_prev(end) : obj_zset_at(e->obj, obj_zset_len(e->obj) - 1);
}

/* Whether n (not NULL) is past g's maximum. */
static bool range_past(const struct obj_znode *n, const struct score_range *g)
{
    double v = obj_znode_score(n);
    return v > g->max || (g->maxex && v == g->max);
}

/* Whether n (not NULL) is below g's minimum. */
static bool range_below(const struct obj_znode *n, const struct score_range *g)
{
    double v = obj_znode_score(n);
    return v < g->min || (g->minex && v == g->min);
}

/* ZRANGEBYSCORE's options from argv[4]: WITHSCORES, LIMIT offset count. Return: false, the error
 * replied, for anything else. */
static bool range_options(struct request *r, const struct part *p, bool *scores, int64_t *offset,
                          int64_t *count)
{
    for (uint32_t i = 4; i < r->argc; i++) {
        if (strcasecmp(r->argv[i].p, "WITHSCORES") == 0) {
            *scores = true;
        } else if (strcasecmp(r->argv[i].p, "LIMIT") == 0 && i + 2 < r->argc) {
            if (!obj_parse_index(r, p, &r->argv[i + 1], offset) || !obj_parse_index(r, p, &r->argv[i + 2], count))
                return false;
            i += 2;
        } else {
            resp_error(part_out(r, p), OBJ_ERR_SYNTAX);
            return false;
        }
    }
    return true;
}

/* ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count], and ZREVRANGEBYSCORE key max min ...
 * (rev: from the highest score down): options, then the bounds, then the key. A negative offset
 * answers nothing, a negative count everything after the offset, as Redis. */
static void range_by_score(struct kv_store *s, struct request *r, const struct part *p, bool rev)
{
    struct buf *out = part_out(r, p);
    bool scores = false;
    int64_t offset = 0, count = -1;
    struct score_range g;
    if (!range_options(r, p, &scores, &offset, &count) || !parse_range(r, p, rev, &g))
        return;
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_ZSET, &e) != 0)
        return;
    const struct obj_znode *n = offset < 0 ? NULL : rev ? range_last(e, &g) : range_first(e, &g);
    for (; n && offset > 0; offset--)
        n = rev ? obj_znode_prev(n) : obj_znode_next(n);
    struct buf found = { 0 };
    int64_t k = 0;
    uint64_t left = count < 0 ? UINT64_MAX : (uint64_t)count; /* counted down: no overflow at INT64_MIN */
    for (; n && left-- != 0 && !(rev ? range_below(n, &g) : range_past(n, &g));
         n = rev ? obj_znode_prev(n) : obj_znode_next(n), k++)
        obj_put_znode(&found, n, scores);
    resp_array_of(out, scores ? 2 * k : k, &found);
}

static void zrangebyscore(struct kv_store *s, struct request *r, const struct part *p)
{
    range_by_score(s, r, p, false);
}

static void zrevrangebyscore(struct kv_store *s, struct request *r, const struct part *p)
{
    range_by_score(s, r, p, true);
}

/* The rank of n in e's set; its length for NULL (past the last). */
static size_t rank_or_len(const struct kv_entry *e, const struct obj_znode *n)
{
    return n ? obj_zset_rank(e->obj, n) : obj_zset_len(e->obj);
}

/* ZCOUNT key min max: the members with a score in the range (bounds as ZRANGEBYSCORE's), as the
 * difference of two ranks, the range's first and the first past it (none when min is above max):
 * O(log n). */
static void zcount(struct kv_store *s, struct request *r, const struct part *p)
{
    struct score_range g;
    struct kv_entry *e;
    if (!parse_range(r, p, false, &g) || obj_lookup(s, r, p, KV_ZSET, &e) != 0)
        return;
    size_t from = e ? rank_or_len(e, range_first(e, &g)) : 0, to = e ? rank_or_len(e, range_end(e, &g)) : 0;
    resp_int(part_out(r, p), to > from ? (int64_t)(to - from) : 0);
}

/* ZREMRANGEBYSCORE key min max: removes the members with a score in the range; their count. */
static void zremrangebyscore(struct kv_store *s, struct request *r, const struct part *p)
{
    struct score_range g;
    struct kv_entry *e;
    if (!parse_range(r, p, false, &g) || obj_lookup(s, r, p, KV_ZSET, &e) != 0)
        return;
    int64_t k = 0;
    for (const struct obj_znode *n = range_first(e, &g); n && !range_past(n, &g); k++)
        n = zrem_node(e->obj, n);
    zrem_done(s, r, p, e);
    resp_int(part_out(r, p), k);
}

/* ZREMRANGEBYRANK key start stop: removes the members of those ranks (as ZRANGE's); their count. */
static void zremrangebyrank(struct kv_store *s, struct request *r, const struct part *p)
{
    struct kv_entry *e;
    size_t first, n;
    if (!rank_range(s, r, p, &e, &first, &n))
        return;
    const struct obj_znode *node = n ? obj_zset_at(e->obj, first) : NULL;
    for (size_t i = 0; i < n; i++)
        node = zrem_node(e->obj, node);
    zrem_done(s, r, p, e);
    resp_int(part_out(r, p), (int64_t)n);
}

static const struct command table[] = {
    { "ZADD", -4, CMD_KEYED, 0, zadd, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
    { "ZREM", -3, CMD_KEYED, 0, zrem, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
    { "ZPOPMIN", -2, CMD_KEYED, 0, zpopmin, NULL, NULL, OBJ_MANY_REPLY_MAX, obj_pop_reply_bound, false, WRITES },
    { "ZPOPMAX", -2, CMD_KEYED, 0, zpopmax, NULL, NULL, OBJ_MANY_REPLY_MAX, obj_pop_reply_bound, false, WRITES },
    { "ZRANGE", -4, CMD_KEYED, 0, zrange, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
    { "ZREVRANGE", -4, CMD_KEYED, 0, zrevrange, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
    { "ZINCRBY", 4, CMD_KEYED, 0, zincrby, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
    { "ZMSCORE", -3, CMD_KEYED, 0, zmscore, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
    { "ZCOUNT", 4, CMD_KEYED, 0, zcount, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, READS },
    { "ZSCORE", 3, CMD_KEYED, 0, zscore, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, READS },
    { "ZCARD", 2, CMD_KEYED, 0, zcard, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, READS },
    { "ZRANK", 3, CMD_KEYED, 0, zrank, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, READS },
    { "ZREVRANK", 3, CMD_KEYED, 0, zrevrank, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, READS },
    { "ZRANGEBYSCORE", -4, CMD_KEYED, 0, zrangebyscore, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
    { "ZREVRANGEBYSCORE", -4, CMD_KEYED, 0, zrevrangebyscore, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
    { "ZREMRANGEBYSCORE", 4, CMD_KEYED, 0, zremrangebyscore, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
    { "ZREMRANGEBYRANK", 4, CMD_KEYED, 0, zremrangebyrank, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
};

const struct command_set cmds_zset = { table, sizeof table / sizeof table[0] };
