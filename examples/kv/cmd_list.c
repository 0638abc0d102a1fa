/* kv_server: commands of lists (LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LRANGE LLEN LINDEX LSET LINSERT LTRIM
 * LREM LPOS).
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The list is a ring of values (obj_list.c): every command here is O(1) but for the elements it
 * pushes, pops, trims or returns, and LINSERT, LREM and LPOS, O(n) as in Redis. Replies, errors and their
 * order (arguments checked before the key's type, but LINDEX's) are Redis 7.0's. */
#include <string.h>
#include <strings.h>

#include "obj_cmd.h"
#include "watch.h"

/* LPUSH, RPUSH, and with only_if LPUSHX and RPUSHX, which push only onto a list that exists (0 when
 * there is none). */
static void push(struct kv_store *s, struct request *r, const struct part *p, bool left, bool only_if)
{
    struct buf *out = part_out(r, p);
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_LIST, &e) != 0)
        return;
    if (!e && only_if) {
        resp_int(out, 0);
        watch_unchanged();
        return;
    }
    struct obj_list *l = e ? e->obj : obj_list_new();
    size_t n = r->argc - 2, done = 0;
    if (l && obj_list_reserve(l, n) == 0) {
        for (; done < n; done++) {
            struct kv_value *v = obj_value_new(r->argv[2 + done].p, r->argv[2 + done].len);
            if (!v)
                break;
            obj_list_push(l, left, v);
        }
    }
    if (done < n) {
        /* out of memory: take back what this command pushed, so that it has no effect */
        while (l && done-- > 0)
            kv_value_put(obj_list_pop(l, left));
        if (!e)
            obj_list_free(l);
        resp_error(out, OBJ_ERR_OOM);
        return;
    }
    if (!e && obj_store(s, r, p, KV_LIST, l) != 0) {
        obj_list_free(l);
        resp_error(out, OBJ_ERR_OOM);
        return;
    }
    resp_int(out, (int64_t)obj_list_len(l));
}

static void lpush(struct kv_store *s, struct request *r, const struct part *p)
{
    push(s, r, p, true, false);
}

static void rpush(struct kv_store *s, struct request *r, const struct part *p)
{
    push(s, r, p, false, false);
}

static void lpushx(struct kv_store *s, struct request *r, const struct part *p)
{
    push(s, r, p, true, true);
}

static void rpushx(struct kv_store *s, struct request *r, const struct part *p)
{
    push(s, r, p, false, true);
}

/* LPOP and RPOP: without a count one element (nil when there is none), with one an array of up to
 * count (a null array when the key does not exist). */
static void pop(struct kv_store *s, struct request *r, const struct part *p, bool left)
{
    struct buf *out = part_out(r, p);
    int64_t count;
    if (!obj_pop_count(r, p, true, &count))
        return;
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_LIST, &e) != 0)
        return;
    if (!e) {
        buf_put(out, r->argc == 3 ? "*-1\r\n" : "$-1\r\n", 5);
        watch_unchanged();
        return;
    }
    struct obj_list *l = e->obj;
    if (r->argc == 2) {
        obj_reply_value(r, p, obj_list_pop(l, left), true);
    } else {
        size_t n = (uint64_t)count < obj_list_len(l) ? (size_t)count : obj_list_len(l);
        resp_array(out, (int64_t)n);
        for (size_t i = 0; i < n; i++) {
            struct kv_value *v = obj_list_pop(l, left);
            obj_put_bulk(out, v->data, v->len);
            kv_value_put(v);
        }
    }
    if (obj_list_len(l) == 0)
        obj_drop(s, r, p);
}

static void lpop(struct kv_store *s, struct request *r, const struct part *p)
{
    pop(s, r, p, true);
}

static void rpop(struct kv_store *s, struct request *r, const struct part *p)
{
    pop(s, r, p, false);
}

static void lrange(struct kv_store *s, struct request *r, const struct part *p)
{
    struct buf *out = part_out(r, p);
    int64_t start, stop;
    if (!obj_parse_index(r, p, &r->argv[2], &start) || !obj_parse_index(r, p, &r->argv[3], &stop))
        return;
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_LIST, &e) != 0)
        return;
    size_t first = 0, n = 0;
    if (e)
        obj_range(start, stop, obj_list_len(e->obj), &first, &n);
    resp_array(out, (int64_t)n);
    /* An element of COPY_MAX bytes or more is sent by reference, as GET sends a value: the reply's
     * text then takes at most COPY_MAX + 32 bytes an element, which lrange_bound counts on. */
    struct part_reply *head = &r->part_reply[p->index], *seg = head;
    for (size_t i = 0; i < n; i++) {
        struct kv_value *v = obj_list_at(e->obj, first + i);
        if (v->len < COPY_MAX) {
            obj_put_bulk(&seg->text, v->data, v->len);
            continue;
        }
        resp_bulk_header(&seg->text, v->len);
        if (!part_reply_add_value(head, &seg, kv_value_get(v)))
            return;
    }
}

/* LRANGE's reply bound: GET's for each element its indexes can name (both from the head, or both from
 * the tail); the output limit when they mix (the list's length decides). */
static size_t lrange_bound(const struct request *r)
{
    int64_t start, stop;
    if (!parse_int64(r->argv[2].p, r->argv[2].len, &start) || !parse_int64(r->argv[3].p, r->argv[3].len, &stop))
        return OBJ_SMALL_REPLY_MAX; /* an error */
    if ((start < 0) != (stop < 0))
        return OBJ_MANY_REPLY_MAX;
    uint64_t count = stop < start ? 0 : (uint64_t)stop - (uint64_t)start + 1;
    return count >= OBJ_MANY_REPLY_MAX / GET_REPLY_MAX ? OBJ_MANY_REPLY_MAX : 32 + count * GET_REPLY_MAX;
}

static void llen(struct kv_store *s, struct request *r, const struct part *p)
{
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_LIST, &e) == 0)
        resp_int(part_out(r, p), e ? (int64_t)obj_list_len(e->obj) : 0);
}

/* Turns a Redis index (negative from the end) into a position in l. Return: whether it names an
 * element. */
static bool element_at(const struct obj_list *l, int64_t *i)
{
    int64_t len = (int64_t)obj_list_len(l);
    if (*i < 0)
        *i += len;
    return *i >= 0 && *i < len;
}

/* The key is looked up before the index is read, as Redis does: a missing key answers nil whatever
 * the index. */
static void lindex(struct kv_store *s, struct request *r, const struct part *p)
{
    struct kv_entry *e;
    int64_t i;
    if (obj_lookup(s, r, p, KV_LIST, &e) != 0)
        return;
    if (!e) {
        resp_null(part_out(r, p));
        return;
    }
    if (!obj_parse_index(r, p, &r->argv[2], &i))
        return;
    if (!element_at(e->obj, &i))
        resp_null(part_out(r, p));
    else
        obj_reply_value(r, p, obj_list_at(e->obj, (size_t)i), false);
}

/* LSET key index element: the key first ("no such key"), then the index, as Redis. */
static void lset(struct kv_store *s, struct request *r, const struct part *p)
{
    struct buf *out = part_out(r, p);
    struct kv_entry *e;
    int64_t i;
    if (obj_lookup(s, r, p, KV_LIST, &e) != 0)
        return;
    if (!e) {
        resp_error(out, "ERR no such key");
        return;
    }
    if (!obj_parse_index(r, p, &r->argv[2], &i))
        return;
    if (!element_at(e->obj, &i)) {
        resp_error(out, "ERR index out of range");
        return;
    }
    struct kv_value *v = obj_value_new(r->argv[3].p, r->argv[3].len);
    if (!v) {
        resp_error(out, OBJ_ERR_OOM);
        return;
    }
    kv_value_put(obj_list_set(e->obj, (size_t)i, v));
    resp_simple(out, "OK");
}

/* The index of the first element equal to a; -1 when none is. */
static int64_t find_element(const struct obj_list *l, const struct resp_arg *a)
{
    for (size_t i = 0; i < obj_list_len(l); i++) {
        const struct kv_value *v = obj_list_at(l, i);
        if (v->len == a->len && memcmp(v->data, a->p, a->len) == 0)
            return (int64_t)i;
    }
    return -1;
}

/* LINSERT key BEFORE|AFTER pivot element: the word first, then the key (0 when missing), then the
 * pivot (-1 when absent); the list's new length. */
static void linsert(struct kv_store *s, struct request *r, const struct part *p)
{
    struct buf *out = part_out(r, p);
    bool after = strcasecmp(r->argv[2].p, "AFTER") == 0;
    if (!after && strcasecmp(r->argv[2].p, "BEFORE") != 0) {
        resp_error(out, OBJ_ERR_SYNTAX);
        return;
    }
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_LIST, &e) != 0)
        return;
    int64_t at = e ? find_element(e->obj, &r->argv[3]) : -1;
    if (at < 0) {
        resp_int(out, e ? -1 : 0);
        return;
    }
    struct kv_value *v = obj_value_new(r->argv[4].p, r->argv[4].len);
    if (!v || obj_list_reserve(e->obj, 1) != 0) {
        kv_value_put(v);
        resp_error(out, OBJ_ERR_OOM);
        return;
    }
    obj_list_insert(e->obj, (size_t)at + after, v);
    resp_int(out, (int64_t)obj_list_len(e->obj));
}

/* LTRIM key start stop: the indexes first, then the key; a range that keeps nothing deletes it. */
static void ltrim(struct kv_store *s, struct request *r, const struct part *p)
{
    int64_t start, stop;
    if (!obj_parse_index(r, p, &r->argv[2], &start) || !obj_parse_index(r, p, &r->argv[3], &stop))
        return;
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_LIST, &e) != 0)
        return;
    if (e) {
        struct obj_list *l = e->obj;
        size_t len = obj_list_len(l), first, n;
        obj_range(start, stop, len, &first, &n);
        /* Nothing left: the key goes whole (first may lie far past the end, which a pop a step
         * would walk to: LTRIM key 9223372036854775807 0 held its worker for good). */
        if (n == 0) {
            obj_drop(s, r, p);
        } else {
            for (size_t i = 0; i < first; i++)
                kv_value_put(obj_list_pop(l, true));
            for (size_t i = first + n; i < len; i++)
                kv_value_put(obj_list_pop(l, false));
        }
    }
    resp_simple(part_out(r, p), "OK");
}

/* LREM key count element: up to count elements equal to element removed from the head (count > 0),
 * from the tail (count < 0), or all (0); how many. Each element is taken from one end and, unless
 * removed, put back at the other: once round the ring, the rest in their order. */
static void lrem(struct kv_store *s, struct request *r, const struct part *p)
{
    int64_t count;
    if (!obj_parse_index(r, p, &r->argv[2], &count))
        return;
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_LIST, &e) != 0)
        return;
    uint64_t most = count == 0 ? UINT64_MAX : count > 0 ? (uint64_t)count : 0 - (uint64_t)count, removed = 0;
    bool head = count >= 0;
    const struct resp_arg *a = &r->argv[3];
    if (e) {
        struct obj_list *l = e->obj;
        for (size_t i = 0, len = obj_list_len(l); i < len; i++) {
            struct kv_value *v = obj_list_pop(l, head);
            if (removed < most && v->len == a->len && memcmp(v->data, a->p, a->len) == 0) {
                kv_value_put(v);
                removed++;
            } else {
                obj_list_push(l, !head, v); /* into the slot just freed: no room to reserve */
            }
        }
        if (obj_list_len(l) == 0)
            obj_drop(s, r, p);
    }
    if (removed == 0)
        watch_unchanged();
    resp_int(part_out(r, p), (int64_t)removed);
}

/* LPOS's options from argv[3], as Redis 7.0 reads them: RANK r (not 0: the r-th match, from the end
 * when negative), COUNT n (that many matches, 0 for all; *count stays -1 without it: the first
 * alone, not in an array), MAXLEN m (compare at most m elements, 0 for all); a name without its
 * value, or any other word, is a syntax error. Return: false, the error replied. */
static bool lpos_options(struct request *r, const struct part *p, int64_t *rank, int64_t *count, int64_t *maxlen)
{
    struct buf *out = part_out(r, p);
    for (uint32_t i = 3; i < r->argc; i += 2) {
        const char *o = r->argv[i].p;
        bool is_rank = strcasecmp(o, "RANK") == 0, is_count = strcasecmp(o, "COUNT") == 0;
        if (i + 1 == r->argc || (!is_rank && !is_count && strcasecmp(o, "MAXLEN") != 0)) {
            resp_error(out, OBJ_ERR_SYNTAX);
            return false;
        }
        int64_t v;
        bool integer = parse_int64(r->argv[i + 1].p, r->argv[i + 1].len, &v);
        if (is_rank && !integer) {
            resp_error(out, OBJ_ERR_INTEGER);
        } else if (is_rank && v == INT64_MIN) {
            /* later Redis versions' answer: 7.0 negates it, overflowing, and answers as for -1 */
            resp_error(out, "ERR value is out of range, value must between -9223372036854775807 and "
                            "9223372036854775807");
        } else if (is_rank && v == 0) {
            resp_error(out, "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... "
                            "or use negative to start from the end of the list");
        } else if (!is_rank && (!integer || v < 0)) {
            /* Redis gives a count or a length that is not an integer this error too */
            resp_error(out, is_count ? "ERR COUNT can't be negative" : "ERR MAXLEN can't be negative");
        } else {
            *(is_rank ? rank : is_count ? count : maxlen) = v;
            continue;
        }
        return false;
    }
    return true;
}

/* LPOS key element [RANK r] [COUNT n] [MAXLEN m]: the index of the element's matches, from the head
 * (or, with a negative rank, from the tail): the first as an integer or nil, or with COUNT an array. */
static void lpos(struct kv_store *s, struct request *r, const struct part *p)
{
    int64_t rank = 1, count = -1, maxlen = 0;
    if (!lpos_options(r, p, &rank, &count, &maxlen))
        return;
    struct kv_entry *e;
    if (obj_lookup(s, r, p, KV_LIST, &e) != 0)
        return;
    struct buf *out = part_out(r, p), found = { 0 };
    const struct resp_arg *a = &r->argv[2];
    const struct obj_list *l = e ? e->obj : NULL;
    size_t len = l ? obj_list_len(l) : 0, look = maxlen == 0 || (uint64_t)maxlen > len ? len : (size_t)maxlen;
    uint64_t skip = (rank < 0 ? 0 - (uint64_t)rank : (uint64_t)rank) - 1;
    int64_t k = 0;
    size_t at = 0; /* without COUNT: the one match */
    for (size_t seen = 0; seen < look; seen++) {
        size_t i = rank < 0 ? len - 1 - seen : seen;
        const struct kv_value *v = obj_list_at(l, i);
        if (v->len != a->len || memcmp(v->data, a->p, a->len) != 0)
            continue;
        if (skip > 0) {
            skip--; /* a match before the rank's */
            continue;
        }
        k++;
        if (count < 0) {
            at = i;
            break;
        }
        resp_int(&found, (int64_t)i);
        if (k == count)
            break;
    }
    if (count >= 0)
        resp_array_of(out, k, &found);
    else if (k)
        resp_int(out, (int64_t)at);
    else
        resp_null(out);
}

static const struct command table[] = {
    { "LPUSH", -3, CMD_KEYED, 0, lpush, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
    { "RPUSH", -3, CMD_KEYED, 0, rpush, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
    { "LPUSHX", -3, CMD_KEYED, 0, lpushx, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
    { "RPUSHX", -3, CMD_KEYED, 0, rpushx, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
    { "LPOP", -2, CMD_KEYED, 0, lpop, NULL, NULL, OBJ_MANY_REPLY_MAX, obj_pop_reply_bound, false, WRITES },
    { "RPOP", -2, CMD_KEYED, 0, rpop, NULL, NULL, OBJ_MANY_REPLY_MAX, obj_pop_reply_bound, false, WRITES },
    { "LRANGE", 4, CMD_KEYED, 0, lrange, NULL, NULL, OBJ_MANY_REPLY_MAX, lrange_bound, false, READS },
    { "LLEN", 2, CMD_KEYED, 0, llen, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, READS },
    { "LINDEX", 3, CMD_KEYED, 0, lindex, NULL, NULL, OBJ_ONE_REPLY_MAX, NULL, false, READS },
    { "LSET", 4, CMD_KEYED, 0, lset, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
    { "LINSERT", 5, CMD_KEYED, 0, linsert, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
    { "LTRIM", 4, CMD_KEYED, 0, ltrim, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
    { "LREM", 4, CMD_KEYED, 0, lrem, NULL, NULL, OBJ_SMALL_REPLY_MAX, NULL, false, WRITES },
    { "LPOS", -3, CMD_KEYED, 0, lpos, NULL, NULL, OBJ_MANY_REPLY_MAX, NULL, false, READS },
};

const struct command_set cmds_list = { table, sizeof table / sizeof table[0] };
