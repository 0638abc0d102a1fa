/* kv_server: commands of sorted sets (ZADD ZINCRBY ZREM ZPOPMIN ZPOPMAX ZRANGE ZREVRANGE ZSCORE ZMSCORE
 * ZCARD ZCOUNT ZRANK ZREVRANK ZRANGEBYSCORE ZREVRANGEBYSCORE ZRANGEBYLEX ZREVRANGEBYLEX ZLEXCOUNT
 * ZREMRANGEBYSCORE ZREMRANGEBYRANK). SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A sorted set is a skip list with spans and an index by member (obj_zset.c): ZSCORE and ZCARD are
 * O(1), ZADD, ZINCRBY and ZREM O(log n) per member, ZRANK, ZCOUNT and ZLEXCOUNT O(log n), the ranges
 * (ZRANGE in each of its forms, ZREVRANGE, ZRANGEBYSCORE, ZRANGEBYLEX and their reverses) O(log n +
 * elements skipped and returned), ZPOPMIN, ZPOPMAX, ZREMRANGEBYSCORE and ZREMRANGEBYRANK O(log n) per
 * member removed. Replies and errors are Redis 7.0's, scores written as it writes them ("%.17g", and
 * "inf", "-inf").
 *
 * ZADD takes every option of Redis 7.0: NX, XX, GT, LT, CH and INCR; ZRANGE all of its own: BYSCORE,
 * BYLEX, REV, LIMIT and WITHSCORES, read as Redis's zrangeGenericCommand reads them (every range
 * command goes through range_cmd). A range by member assumes the members share one score, as in
 * Redis (with others it answers some members, as Redis's does). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <strings.h>

#include "obj_cmd.h"
#include "watch.h"

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
    if (n == 0)
        watch_unchanged();
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
    if (n == 0)
        watch_unchanged();
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

/* How a range command reads its range: by rank, score or member (BYLEX); ZRANGE's is chosen by its
 * options (BY_ANY until then). */
enum range_by { BY_RANK, BY_SCORE, BY_LEX, BY_ANY };

/* What a range command asks, as Redis 7.0's zrangeGenericCommand reads it. */
struct range_ask {
    enum range_by by;
    bool          rev, scores;
    int64_t       offset, limit; /* LIMIT's; a limit of -1 is none (LIMIT 0 -1 too, as in Redis) */
};

/* The options from argv[4], as Redis reads them, then what they may not be given with. rev_free: REV
 * may be given (ZRANGE; the others' direction is their own); a->by BY_ANY: BYSCORE or BYLEX may be
 * (ZRANGE), else it is the command's own. Return: false, the error replied. */
static bool range_options(struct request *r, const struct part *p, struct range_ask *a, bool rev_free)
{
    struct buf *out = part_out(r, p);
    bool choose = a->by == BY_ANY;
    for (uint32_t i = 4; i < r->argc; i++) {
        const struct resp_arg *o = &r->argv[i];
        if (resp_arg_is(o, "WITHSCORES")) {
            a->scores = true;
        } else if (resp_arg_is(o, "LIMIT") && r->argc - i > 2) {
            if (!obj_parse_index(r, p, &r->argv[i + 1], &a->offset) ||
                !obj_parse_index(r, p, &r->argv[i + 2], &a->limit))
                return false;
            i += 2;
        } else if (rev_free && !a->rev && resp_arg_is(o, "REV")) {
            a->rev = true;
        } else if (choose && a->by == BY_ANY && (resp_arg_is(o, "BYSCORE") || resp_arg_is(o, "BYLEX"))) {
            a->by = resp_arg_is(o, "BYLEX") ? BY_LEX : BY_SCORE;
        } else {
            resp_error(out, OBJ_ERR_SYNTAX);
            return false;
        }
    }
    if (a->by == BY_ANY)
        a->by = BY_RANK;
    if (a->limit != -1 && a->by == BY_RANK) {
        resp_error(out, "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX");
        return false;
    }
    if (a->scores && a->by == BY_LEX) {
        resp_error(out, "ERR syntax error, WITHSCORES not supported in combination with BYLEX");
        return false;
    }
    return true;
}

/* The members of ranks argv[2] to argv[3] (negative: from the end), from the top when rev. */
static void put_by_rank(struct kv_store *s, struct request *r, const struct part *p, const struct range_ask *a)
{
    struct buf *out = part_out(r, p);
    struct kv_entry *e;
    size_t first, n;
    if (!rank_range(s, r, p, &e, &first, &n))
        return;
    resp_array(out, (int64_t)(a->scores ? 2 * n : n));
    const struct obj_znode *node = n ? obj_zset_at(e->obj, a->rev ? obj_zset_len(e->obj) - 1 - first : first) : NULL;
    for (size_t i = 0; i < n; i++, node = a->rev ? obj_znode_prev(node) : obj_znode_next(node))
        obj_put_znode(out, node, a->scores);
}

/* A bound of a range by member, as Redis's zslParseLexRangeItem reads it: "-" and "+" the ends of
 * everything, else "[" (included) or "(" (not) and the member. */
struct lex_bound {
    int         end; /* -1: "-", 1: "+", 0: a member */
    const char *p;
    size_t      len;
    bool        exclusive;
};

static bool parse_lex(const struct resp_arg *a, struct lex_bound *b)
{
    *b = (struct lex_bound){ 0 };
    /* "-" and "+" as Redis reads them: their C string ends after one byte ("+\0x" is "+", a review found) */
    if (a->len && (a->p[0] == '-' || a->p[0] == '+') && (a->len == 1 || a->p[1] == '\0'))
        b->end = a->p[0] == '-' ? -1 : 1;
    else if (a->len && (a->p[0] == '(' || a->p[0] == '['))
        *b = (struct lex_bound){ 0, a->p + 1, a->len - 1, a->p[0] == '(' };
    else
        return false;
    return true;
}

/* The range by member of argv[2] and argv[3]: min then max, or max then min (rev). Return: false, the
 * error replied. */
static bool parse_lex_range(struct request *r, const struct part *p, bool rev, struct lex_bound *min,
                            struct lex_bound *max)
{
    if (parse_lex(&r->argv[rev ? 3 : 2], min) && parse_lex(&r->argv[rev ? 2 : 3], max))
        return true;
    resp_error(part_out(r, p), "ERR min or max not valid string range item");
    return false;
}

/* Whether n's member is at or above min, at or below max. */
static bool lex_above(const struct obj_znode *n, const struct lex_bound *min)
{
    if (min->end)
        return min->end < 0;
    int c = obj_znode_member_cmp(n, min->p, min->len);
    return c > 0 || (c == 0 && !min->exclusive);
}

static bool lex_below(const struct obj_znode *n, const struct lex_bound *max)
{
    if (max->end)
        return max->end > 0;
    int c = obj_znode_member_cmp(n, max->p, max->len);
    return c < 0 || (c == 0 && !max->exclusive);
}

/* The first node of z at or above min, and the last at or below max (NULL: none). */
static const struct obj_znode *lex_first(const struct obj_zset *z, const struct lex_bound *min)
{
    if (min->end)
        return min->end < 0 && obj_zset_len(z) ? obj_zset_at(z, 0) : NULL;
    return obj_zset_first_lex(z, min->p, min->len, min->exclusive);
}

static const struct obj_znode *lex_last(const struct obj_zset *z, const struct lex_bound *max)
{
    if (max->end)
        return max->end > 0 && obj_zset_len(z) ? obj_zset_at(z, obj_zset_len(z) - 1) : NULL;
    return obj_zset_last_lex(z, max->p, max->len, max->exclusive);
}

/* From n on (towards the lower end when rev), skipping a->offset of those within the range (in(n) says
 * whether n still is), at most a->limit of them. A negative offset answers nothing, a negative limit
 * everything after the offset, as in Redis. */
static void put_from(struct buf *out, const struct obj_znode *n, const struct range_ask *a,
                     bool (*in)(const struct obj_znode *n, const void *range), const void *range)
{
    int64_t offset = a->offset;
    if (offset < 0)
        n = NULL;
    for (; n && offset > 0; offset--)
        n = a->rev ? obj_znode_prev(n) : obj_znode_next(n);
    struct buf found = { 0 };
    int64_t k = 0;
    uint64_t left = a->limit < 0 ? UINT64_MAX : (uint64_t)a->limit; /* counted down: no overflow */
    for (; n && left-- != 0 && in(n, range); n = a->rev ? obj_znode_prev(n) : obj_znode_next(n), k++)
        obj_put_znode(&found, n, a->scores);
    resp_array_of(out, a->scores ? 2 * k : k, &found);
}

static bool score_in(const struct obj_znode *n, const void *range)
{
    return !range_past(n, range) && !range_below(n, range);
}

/* The members of the scores argv[2] to argv[3] (argv[3] to argv[2] when rev). */
static void put_by_score(struct kv_store *s, struct request *r, const struct part *p, const struct range_ask *a)
{
    struct score_range g;
    struct kv_entry *e;
    if (!parse_range(r, p, a->rev, &g) || obj_lookup(s, r, p, KV_ZSET, &e) != 0)
        return;
    put_from(part_out(r, p), a->rev ? range_last(e, &g) : range_first(e, &g), a, score_in, &g);
}

/* A range by member: its two bounds. */
struct lex_range {
    struct lex_bound min, max;
};

static bool lex_in(const struct obj_znode *n, const void *range)
{
    const struct lex_range *x = range;
    return lex_above(n, &x->min) && lex_below(n, &x->max);
}

/* The members from argv[2] to argv[3] by their bytes (argv[3] to argv[2] when rev). */
static void put_by_lex(struct kv_store *s, struct request *r, const struct part *p, const struct range_ask *a)
{
    struct lex_range x;
    struct kv_entry *e;
    if (!parse_lex_range(r, p, a->rev, &x.min, &x.max) || obj_lookup(s, r, p, KV_ZSET, &e) != 0)
        return;
    const struct obj_znode *n = !e ? NULL : a->rev ? lex_last(e->obj, &x.max) : lex_first(e->obj, &x.min);
    put_from(part_out(r, p), n, a, lex_in, &x);
}

/* Every range command: its options, then its range, then the key, as Redis checks them. by: BY_ANY for
 * ZRANGE (BYSCORE, BYLEX and REV among its options), else the command's own; rev: its direction. */
static void range_cmd(struct kv_store *s, struct request *r, const struct part *p, enum range_by by, bool rev)
{
    struct range_ask a = { .by = by, .rev = rev, .limit = -1 };
    if (!range_options(r, p, &a, by == BY_ANY))
        return;
    if (a.by == BY_RANK)
        put_by_rank(s, r, p, &a);
    else if (a.by == BY_SCORE)
        put_by_score(s, r, p, &a);
    else
        put_by_lex(s, r, p, &a);
}

/* ZRANGE key start stop [BYSCORE | BYLEX] [REV] [LIMIT offset count] [WITHSCORES] */
static void zrange(struct kv_store *s, struct request *r, const struct part *p)
{
    range_cmd(s, r, p, BY_ANY, false);
}

static void zrevrange(struct kv_store *s, struct request *r, const struct part *p)
{
    range_cmd(s, r, p, BY_RANK, true);
}

static void zrangebyscore(struct kv_store *s, struct request *r, const struct part *p)
{
    range_cmd(s, r, p, BY_SCORE, false);
}

static void zrevrangebyscore(struct kv_store *s, struct request *r, const struct part *p)
{
    range_cmd(s, r, p, BY_SCORE, true);
}

static void zrangebylex(struct kv_store *s, struct request *r, const struct part *p)
{
    range_cmd(s, r, p, BY_LEX, false);
}

static void zrevrangebylex(struct kv_store *s, struct request *r, const struct part *p)
{
    range_cmd(s, r, p, BY_LEX, true);
}

/* ZLEXCOUNT key min max: the range first, then the key. */
static void zlexcount(struct kv_store *s, struct request *r, const struct part *p)
{
    struct lex_range x;
    struct kv_entry *e;
    if (!parse_lex_range(r, p, false, &x.min, &x.max) || obj_lookup(s, r, p, KV_ZSET, &e) != 0)
        return;
    const struct obj_znode *first = e ? lex_first(e->obj, &x.min) : NULL;
    const struct obj_znode *last = first && lex_below(first, &x.max) ? lex_last(e->obj, &x.max) : NULL;
    size_t n = last ? obj_zset_rank(e->obj, last) - obj_zset_rank(e->obj, first) + 1 : 0;
    resp_int(part_out(r, p), (int64_t)n);
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
    { "ZRANGEBYLEX", -4, CMD_KEYED, 0, zrangebylex, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
    { "ZREVRANGEBYLEX", -4, CMD_KEYED, 0, zrevrangebylex, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
    { "ZLEXCOUNT", 4, CMD_KEYED, 0, zlexcount, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, READS },
    { "ZREMRANGEBYSCORE", 4, CMD_KEYED, 0, zremrangebyscore, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
    { "ZREMRANGEBYRANK", 4, CMD_KEYED, 0, zremrangebyrank, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
};

const struct command_set cmds_zset = { table, sizeof table / sizeof table[0] };
