/* kv_server: adding to a number kept as text, in Redis's long double arithmetic (INCRBYFLOAT,
 * HINCRBYFLOAT). SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Redis reads both numbers with strtold and writes the sum with "%.17Lf", trailing zeros dropped
 * (util.c's string2ld and ld2string in its human mode): so does this, so that a sum reads back as
 * Redis's does ("10.5", "5.0e3" + 200 = "5200", 0.1 + 0.2 = "0.3"). The errors and the order they are
 * checked in are Redis 7.0's (t_string.c, t_hash.c). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "obj_cmd.h"

#define ERR_NOT_FLOAT "ERR value is not a valid float"
#define ERR_NAN_INF   "ERR increment would produce NaN or Infinity"

/* Redis's MAX_LONG_DOUBLE_CHARS: a longer number is refused, and a sum always fits. */
#define LD_CHARS (5 * 1024)
#define FLOAT_REPLY_MAX (LD_CHARS + 16)

/* string2ld: what strtold takes, whole, without leading space, neither NaN nor out of range. */
static bool parse_ld(const char *p, size_t len, long double *out)
{
    char text[LD_CHARS];
    if (len == 0 || len >= sizeof text)
        return false;
    memcpy(text, p, len);
    text[len] = '\0';
    char *end;
    errno = 0;
    long double v = strtold(text, &end);
    /* The whole argument: a NUL inside it ends the copy's text early (Redis refuses "1\0x"). */
    if (isspace((unsigned char)text[0]) || end != text + len || errno == EINVAL || isnan(v) ||
        (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || v == 0)))
        return false;
    *out = v;
    return true;
}

/* ld2string's human mode for a finite v into text[LD_CHARS]. Return: its length. */
static size_t format_ld(char *text, long double v)
{
    size_t n = (size_t)snprintf(text, LD_CHARS, "%.17Lf", v);
    if (strchr(text, '.')) {
        while (text[n - 1] == '0')
            n--;
        if (text[n - 1] == '.')
            n--;
    }
    if (n == 2 && text[0] == '-' && text[1] == '0') {
        text[0] = '0';
        n = 1;
    }
    return n;
}

/* v + by written as Redis writes it into text[LD_CHARS]. Return: its length, or 0 when the sum is NaN
 * or infinite (then out holds the error). */
static size_t sum_text(struct buf *out, long double v, long double by, char *text)
{
    v += by;
    if (isnan(v) || isinf(v)) {
        resp_error(out, ERR_NAN_INF);
        return 0;
    }
    return format_ld(text, v);
}

/* INCRBYFLOAT key increment: the key's type, then its value, then the increment are checked. The
 * key's time to live stays. */
static void incrbyfloat(struct kv_store *s, struct request *r, const struct part *p)
{
    struct buf *out = part_out(r, p);
    struct kv_entry *e = store_find(s, HASHED_KEY(r, p));
    long double v = 0, by;
    if (e && e->type != KV_STRING) {
        resp_error(out, WRONGTYPE);
        return;
    }
    if ((e && !parse_ld(e->val->data, e->val->len, &v)) || !parse_ld(r->argv[2].p, r->argv[2].len, &by)) {
        resp_error(out, ERR_NOT_FLOAT);
        return;
    }
    char text[LD_CHARS];
    size_t n = sum_text(out, v, by, text);
    if (n == 0)
        return;
    if (e ? kv_entry_set(e, text, n) != 0 : !store_set(s, HASHED_KEY(r, p), text, n))
        resp_error(out, OBJ_ERR_OOM);
    else
        resp_bulk(out, text, n);
}

/* HINCRBYFLOAT key field increment: the increment first, then the key's type, then the field's value. */
static void hincrbyfloat(struct kv_store *s, struct request *r, const struct part *p)
{
    struct buf *out = part_out(r, p);
    long double v = 0, by;
    if (!parse_ld(r->argv[3].p, r->argv[3].len, &by)) {
        resp_error(out, ERR_NOT_FLOAT);
        return;
    }
    if (isinf(by)) {
        resp_error(out, "ERR value is NaN or Infinity");
        return;
    }
    struct kv_entry *e, *f = NULL;
    if (obj_lookup(s, r, p, KV_HASH, &e) != 0)
        return;
    const struct resp_arg *field = &r->argv[2];
    if (e)
        f = kvmap_find(e->obj, kv_hash(field->p, field->len), field->p, field->len);
    if (f && !parse_ld(f->val->data, f->val->len, &v)) {
        resp_error(out, "ERR hash value is not a float");
        return;
    }
    char text[LD_CHARS];
    size_t n = sum_text(out, v, by, text);
    if (n == 0)
        return;
    if (obj_hash_set(s, r, p, e, field, text, n) != 0)
        resp_error(out, OBJ_ERR_OOM);
    else
        resp_bulk(out, text, n);
}

static const struct command table[] = {
    { "INCRBYFLOAT", 3, CMD_KEYED, 0, incrbyfloat, NULL, NULL, FLOAT_REPLY_MAX, NULL, false, WRITES },
    { "HINCRBYFLOAT", 4, CMD_KEYED, 0, hincrbyfloat, NULL, NULL, FLOAT_REPLY_MAX, NULL, false, WRITES },
};

const struct command_set cmds_float = { table, sizeof table / sizeof table[0] };
