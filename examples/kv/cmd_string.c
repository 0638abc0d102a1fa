/* kv_server: string commands (with SET's expiry options) and the commands that work on any key (DEL,
 * UNLINK, EXISTS, TYPE): what each does with a key's data on its worker. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A keyed command's part runs on the worker owning its key, with that worker's store: no lock. A
 * command of several keys is a part a key, each run on its key's worker in order with that key's
 * other commands. Those whose table entry says `atomic` (MSET, DEL, UNLINK) run as one multi-key job,
 * every key held until all are done, as Redis's (request.c, txn.c); the others (MGET, EXISTS) read
 * the keys of each worker in one step, a worker after another, not as one snapshot (inside MULTI they
 * are one). */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "expire.h"
#include "server.h"
#include "watch.h"

/* A string's value as a bulk reply: copied when short, else sent from the value itself. */
static void reply_value(struct part_reply *out, struct kv_value *v)
{
    if (v->len < COPY_MAX) {
        resp_bulk(&out->text, v->data, v->len);
    } else {
        resp_bulk_header(&out->text, v->len);
        out->value = kv_value_get(v);
    }
}

/* GET's reply for the part's key (its value, nil, or WRONGTYPE). Return: its entry when it holds a
 * string, else NULL. */
static struct kv_entry *get_reply(struct kv_store *s, struct request *r, const struct part *p)
{
    struct part_reply *out = &r->part_reply[p->index];
    struct kv_entry *e = store_find(s, HASHED_KEY(r, p));
    if (e && e->type != KV_STRING) {
        resp_error(&out->text, WRONGTYPE);
        return NULL;
    }
    if (!e)
        resp_null(&out->text);
    else
        reply_value(out, e->val);
    return e;
}

static void get_part(struct kv_store *s, struct request *r, const struct part *p)
{
    if (r->nparts == 1 && !r->cmd->finish) {
        (void)get_reply(s, r, p); /* GET */
        return;
    }
    struct kv_entry *e = store_find(s, HASHED_KEY(r, p)); /* MGET: nil for another type, as Redis */
    if (!e || e->type != KV_STRING)
        resp_null(&r->part_reply[p->index].text);
    else
        reply_value(&r->part_reply[p->index], e->val);
}

/* What a SET-like command asks for besides the value. */
struct set_opts {
    bool    nx, xx;  /* only if the key does not exist / does */
    bool    get;     /* reply with the old value */
    bool    keepttl; /* keep the key's expiry (else a SET ends it) */
    int64_t at_ms;   /* expire then; 0: no expiry given */
};

/* The time an EX/PX/EXAT/PXAT argument names, for command cmd ("set", "setex", "getex"): a positive
 * number, as Redis wants there. Return: true; false with the error reply written. */
static bool expire_arg(const struct resp_arg *a, int64_t unit_ms, bool relative, const char *cmd,
                       int64_t *at_ms, struct buf *out)
{
    int64_t n;
    if (!parse_int64(a->p, a->len, &n)) {
        resp_error(out, "ERR value is not an integer or out of range");
        return false;
    }
    if (n <= 0 || expire_deadline(a->p, a->len, unit_ms, relative, at_ms) != 0) {
        char msg[64];
        snprintf(msg, sizeof msg, "ERR invalid expire time in '%s' command", cmd);
        resp_error(out, msg);
        return false;
    }
    return true;
}

static const struct expire_form {
    const char *word;
    int64_t     unit_ms;
    bool        relative;
} expire_forms[] = { { "EX", 1000, true }, { "PX", 1, true }, { "EXAT", 1000, false }, { "PXAT", 1, false } };

/* An expiry option of SET or GETEX: its form (NULL: none given) and its number, which is read once
 * every option is known, as Redis reads it (SET k v EX abc NX XX is a syntax error, not a number's). */
struct expire_opt {
    const struct expire_form *form;
    const struct resp_arg    *arg;
};

/* Whether argv[*i] is EX, PX, EXAT or PXAT; then *i is at its number, and *ok is false when there is
 * none or another form came before (the same form again replaces the first, as in Redis). */
static bool parse_expire_opt(const struct request *r, uint32_t *i, struct expire_opt *x, bool *ok)
{
    for (size_t f = 0; f < sizeof expire_forms / sizeof expire_forms[0]; f++)
        if (resp_arg_is(&r->argv[*i], expire_forms[f].word)) {
            if (*i + 1 >= r->argc || (x->form && x->form != &expire_forms[f]))
                *ok = false;
            else
                *x = (struct expire_opt){ &expire_forms[f], &r->argv[++*i] };
            return true;
        }
    return false;
}

/* The time x names into *at_ms (left 0 without one), for command cmd. Return: true; false with the
 * error reply written. */
static bool expire_of(const struct expire_opt *x, const char *cmd, int64_t *at_ms, struct buf *out)
{
    return !x->form || expire_arg(x->arg, x->form->unit_ms, x->form->relative, cmd, at_ms, out);
}

/* SET's options from argv[3]. Return: true; false with the error reply written. */
static bool parse_set_opts(struct request *r, struct set_opts *o, struct buf *out)
{
    struct expire_opt x = { 0 };
    for (uint32_t i = 3; i < r->argc; i++) {
        bool ok = true;
        if (parse_expire_opt(r, &i, &x, &ok)) {
            if (!ok || o->keepttl)
                goto syntax;
        } else if (resp_arg_is(&r->argv[i], "NX") && !o->xx) {
            o->nx = true;
        } else if (resp_arg_is(&r->argv[i], "XX") && !o->nx) {
            o->xx = true;
        } else if (resp_arg_is(&r->argv[i], "GET")) {
            o->get = true;
        } else if (resp_arg_is(&r->argv[i], "KEEPTTL") && !x.form) {
            o->keepttl = true;
        } else {
            goto syntax;
        }
    }
    return expire_of(&x, "set", &o->at_ms, out);
syntax:
    resp_error(out, "ERR syntax error");
    return false;
}

enum set_reply { REPLY_OK, REPLY_OLD, REPLY_BOOL }; /* SET, SET GET and GETSET, SETNX */

/* Sets the part's key to val as o says and replies in the form asked. */
static void set_with(struct kv_store *s, struct request *r, const struct part *p,
                     const struct resp_arg *val, const struct set_opts *o, enum set_reply form)
{
    struct part_reply *out = &r->part_reply[p->index];
    struct kv_entry *e = store_find(s, HASHED_KEY(r, p));
    if (form == REPLY_OLD && e && e->type != KV_STRING) {
        resp_error(&out->text, WRONGTYPE);
        watch_unchanged();
        return;
    }
    bool go = !(o->nx && e) && !(o->xx && !e);
    if (!go)
        watch_unchanged();
    /* The old value's reply first: the set below may rewrite it in place or free it. */
    if (form == REPLY_OLD && e)
        reply_value(out, e->val);
    else if (form == REPLY_OLD || (form == REPLY_OK && !go))
        resp_null(&out->text);
    bool failed = false;
    if (go && o->at_ms && o->at_ms <= kv_now_ms()) {
        store_del(s, HASHED_KEY(r, p)); /* set and expired at once */
    } else if (go) {
        e = store_set(s, HASHED_KEY(r, p), val->p, val->len);
        if (!e)
            failed = true;
        else if (o->at_ms)
            failed = expire_set(e, o->at_ms) != 0;
        else if (!o->keepttl)
            expire_clear(e);
    }
    if (failed) {
        kv_value_put(out->value);
        out->value = NULL;
        out->text.len = 0;
        resp_error(&out->text, "ERR out of memory");
    } else if (form == REPLY_BOOL) {
        resp_int(&out->text, go);
    } else if (form == REPLY_OK && go) {
        resp_simple(&out->text, "OK");
    }
}

static void set_part(struct kv_store *s, struct request *r, const struct part *p)
{
    struct set_opts o = { 0 };
    if (parse_set_opts(r, &o, part_out(r, p)))
        set_with(s, r, p, &r->argv[2], &o, o.get ? REPLY_OLD : REPLY_OK);
    else
        watch_unchanged();
}

static void setnx_part(struct kv_store *s, struct request *r, const struct part *p)
{
    set_with(s, r, p, &r->argv[2], &(struct set_opts){ .nx = true }, REPLY_BOOL);
}

static void getset_part(struct kv_store *s, struct request *r, const struct part *p)
{
    set_with(s, r, p, &r->argv[2], &(struct set_opts){ 0 }, REPLY_OLD);
}

/* SETEX key seconds value, PSETEX key ms value. */
static void setex_with(struct kv_store *s, struct request *r, const struct part *p, int64_t unit_ms)
{
    struct set_opts o = { 0 };
    if (expire_arg(&r->argv[2], unit_ms, true, unit_ms == 1 ? "psetex" : "setex", &o.at_ms,
                   part_out(r, p)))
        set_with(s, r, p, &r->argv[3], &o, REPLY_OK);
    else
        watch_unchanged();
}

static void setex_part(struct kv_store *s, struct request *r, const struct part *p)
{
    setex_with(s, r, p, 1000);
}

static void psetex_part(struct kv_store *s, struct request *r, const struct part *p)
{
    setex_with(s, r, p, 1);
}

static void getdel_part(struct kv_store *s, struct request *r, const struct part *p)
{
    if (get_reply(s, r, p))
        store_del(s, HASHED_KEY(r, p));
    else
        watch_unchanged();
}

/* GETEX key [EX s | PX ms | EXAT unix-s | PXAT unix-ms | PERSIST] */
static void getex_part(struct kv_store *s, struct request *r, const struct part *p)
{
    struct part_reply *out = &r->part_reply[p->index];
    struct expire_opt x = { 0 };
    int64_t at_ms = 0;
    bool persist = false;
    for (uint32_t i = 2; i < r->argc; i++) {
        bool ok = true;
        if (parse_expire_opt(r, &i, &x, &ok)) {
            if (!ok || persist)
                goto syntax;
        } else if (resp_arg_is(&r->argv[i], "PERSIST") && !x.form) {
            persist = true; /* again is fine, as in Redis */
        } else {
            goto syntax;
        }
    }
    /* As Redis: the number is read only for a key that holds a string (else nil or WRONGTYPE). */
    if (x.form) {
        struct kv_entry *found = store_find(s, HASHED_KEY(r, p));
        if (found && found->type == KV_STRING && !expire_of(&x, "getex", &at_ms, &out->text)) {
            watch_unchanged();
            return;
        }
    }
    struct kv_entry *e = get_reply(s, r, p);
    if (!e || (!at_ms && !(persist && e->exp)))
        watch_unchanged(); /* no key, another type, or no change of its time to live asked */
    if (e && persist)
        expire_clear(e);
    else if (e && at_ms && at_ms <= kv_now_ms())
        store_del(s, HASHED_KEY(r, p));
    else if (e && at_ms && expire_set(e, at_ms) != 0)
        out->text.failed = true;
    return;
syntax:
    resp_error(&out->text, "ERR syntax error");
    watch_unchanged();
}

/* Redis's bound on a string that SETRANGE or APPEND makes (proto-max-bulk-len's default). */
#define STRING_MAX (512ull * 1024 * 1024)
#define ERR_STRING_MAX "ERR string exceeds maximum allowed size (proto-max-bulk-len)"

static void append_part(struct kv_store *s, struct request *r, const struct part *p)
{
    struct buf *out = part_out(r, p);
    struct kv_entry *e = store_find(s, HASHED_KEY(r, p));
    if (e && e->type != KV_STRING) {
        resp_error(out, WRONGTYPE);
        return;
    }
    const struct resp_arg *add = &r->argv[2];
    size_t had = e ? e->val->len : 0;
    if ((uint64_t)had + add->len > STRING_MAX) {
        resp_error(out, ERR_STRING_MAX);
        return;
    }
    if (e ? kv_entry_write(e, had, add->p, add->len) != 0 : !store_set(s, HASHED_KEY(r, p), add->p, add->len))
        resp_error(out, "ERR out of memory");
    else
        resp_int(out, (int64_t)(had + add->len));
}

/* GETRANGE key start end: the bytes from start to end, both included, counted from the end when
 * negative and clamped as Redis 7.0 clamps them (an end before the string's start still takes its
 * first byte); empty when nothing is left. A range of COPY_MAX bytes or more is sent from the stored
 * value, as GET sends one. */
static void getrange_part(struct kv_store *s, struct request *r, const struct part *p)
{
    struct part_reply *out = &r->part_reply[p->index];
    int64_t start, end;
    if (!parse_int64(r->argv[2].p, r->argv[2].len, &start) || !parse_int64(r->argv[3].p, r->argv[3].len, &end)) {
        resp_error(&out->text, "ERR value is not an integer or out of range");
        return;
    }
    struct kv_entry *e = store_find(s, HASHED_KEY(r, p));
    if (e && e->type != KV_STRING) {
        resp_error(&out->text, WRONGTYPE);
        return;
    }
    int64_t len = e ? (int64_t)e->val->len : 0; /* len >= 0: start + len cannot overflow */
    if (start < 0 && end < 0 && start > end) { /* as Redis: before either is counted from the end */
        resp_bulk(&out->text, "", 0);
        return;
    }
    start = start < 0 ? start + len : start;
    end = end < 0 ? end + len : end;
    start = start < 0 ? 0 : start;
    end = end < 0 ? 0 : end >= len ? len - 1 : end;
    if (len == 0 || start > end) {
        resp_bulk(&out->text, "", 0);
        return;
    }
    size_t n = (size_t)(end - start + 1);
    if (n < COPY_MAX) {
        resp_bulk(&out->text, e->val->data + start, n);
        return;
    }
    /* Sent from the stored value, as GET sends it: a copy made here, charged as a GET's reply (about
     * 1 KiB) while it ran, let a client that pipelines GETRANGEs without reading hold a copy each. */
    resp_bulk_header(&out->text, n);
    out->value = kv_value_get(e->val);
    out->slice_off = (uint32_t)start;
    out->slice_len = (uint32_t)n;
}

/* SETRANGE key offset value: value written at offset, the string padded with zero bytes up to it
 * (its expiry stays); the new length. An empty value changes nothing (a missing key stays missing),
 * as in Redis, which checks in this order. */
static void setrange_part(struct kv_store *s, struct request *r, const struct part *p)
{
    struct buf *out = part_out(r, p);
    int64_t off;
    if (!parse_int64(r->argv[2].p, r->argv[2].len, &off)) {
        resp_error(out, "ERR value is not an integer or out of range");
        return;
    }
    if (off < 0) {
        resp_error(out, "ERR offset is out of range");
        return;
    }
    struct kv_entry *e = store_find(s, HASHED_KEY(r, p));
    if (e && e->type != KV_STRING) {
        resp_error(out, WRONGTYPE);
        return;
    }
    const struct resp_arg *v = &r->argv[3];
    size_t had = e ? e->val->len : 0;
    if (v->len == 0) {
        resp_int(out, (int64_t)had);
        return;
    }
    if ((uint64_t)off + v->len > STRING_MAX) {
        resp_error(out, ERR_STRING_MAX);
        return;
    }
    size_t end = (size_t)off + v->len, len = end > had ? end : had;
    bool made = !e;
    if (made)
        e = store_set(s, HASHED_KEY(r, p), "", 0);
    if (e && kv_entry_write(e, (size_t)off, v->p, v->len) != 0) {
        if (made)
            store_del(s, HASHED_KEY(r, p)); /* no key that was not there, as if it never ran */
        e = NULL;
    }
    if (!e)
        resp_error(out, "ERR out of memory");
    else
        resp_int(out, (int64_t)len);
}

static void strlen_part(struct kv_store *s, struct request *r, const struct part *p)
{
    struct kv_entry *e = store_find(s, HASHED_KEY(r, p));
    if (e && e->type != KV_STRING)
        resp_error(part_out(r, p), WRONGTYPE);
    else
        resp_int(part_out(r, p), e ? (int64_t)e->val->len : 0);
}

static void type_part(struct kv_store *s, struct request *r, const struct part *p)
{
    struct kv_entry *e = store_find(s, HASHED_KEY(r, p));
    resp_simple(part_out(r, p), e ? kv_type_name(e->type) : "none");
}

/* One pair of MSET: the key and the value after it. */
static void mset_part(struct kv_store *s, struct request *r, const struct part *p)
{
    const struct resp_arg *v = &r->argv[p->arg + 1];
    struct kv_entry *e = store_set(s, HASHED_KEY(r, p), v->p, v->len);
    if (e)
        expire_clear(e); /* a SET of each key */
    else
        part_out(r, p)->failed = true;
}

static void mset_finish(struct request *r)
{
    resp_simple(&r->reply, "OK");
}

/* The parts' replies are not assembled into one: the network thread copies them out one by one as
 * the client reads (server.h). */
static void mget_finish(struct request *r)
{
    resp_array(&r->reply, r->nparts);
    r->reply_parts = true;
}

static void del_part(struct kv_store *s, struct request *r, const struct part *p)
{
    if (store_del(s, HASHED_KEY(r, p)))
        atomic_fetch_add_explicit(&r->sum, 1, memory_order_relaxed);
    else
        watch_unchanged(); /* a key deleted counted itself (store_del) */
}

static void exists_part(struct kv_store *s, struct request *r, const struct part *p)
{
    if (store_find(s, HASHED_KEY(r, p)))
        atomic_fetch_add_explicit(&r->sum, 1, memory_order_relaxed);
}

static void sum_finish(struct request *r)
{
    resp_int(&r->reply, atomic_load_explicit(&r->sum, memory_order_relaxed));
}

static void add_to(struct kv_store *s, struct request *r, const struct part *p, int64_t by)
{
    struct buf *out = &r->part_reply[p->index].text;
    struct kv_entry *e = store_find(s, HASHED_KEY(r, p));
    int64_t v = 0;
    if (e && e->type != KV_STRING) {
        resp_error(out, WRONGTYPE);
        return;
    }
    if (e && !parse_int64(e->val->data, e->val->len, &v)) {
        resp_error(out, "ERR value is not an integer or out of range");
        return;
    }
    if ((by > 0 && v > INT64_MAX - by) || (by < 0 && v < INT64_MIN - by)) {
        resp_error(out, "ERR increment or decrement would overflow");
        return;
    }
    v += by;
    char text[20];
    size_t n = fmt_int64(text, v);
    /* The entry found, rewritten in place (its TTL kept, as store_set would): no second lookup. */
    if (e ? kv_entry_set(e, text, n) != 0 : !store_set(s, HASHED_KEY(r, p), text, n))
        resp_error(out, "ERR out of memory");
    else
        resp_int(out, v);
}

static void incr_part(struct kv_store *s, struct request *r, const struct part *p)
{
    add_to(s, r, p, 1);
}

static void decr_part(struct kv_store *s, struct request *r, const struct part *p)
{
    add_to(s, r, p, -1);
}

static void incrby_part(struct kv_store *s, struct request *r, const struct part *p, bool negate)
{
    int64_t by;
    if (!parse_int64(r->argv[2].p, r->argv[2].len, &by)) {
        resp_error(part_out(r, p), "ERR value is not an integer or out of range");
        return;
    }
    if (negate && by == INT64_MIN) {
        resp_error(part_out(r, p), "ERR decrement would overflow"); /* as Redis 7 says it */
        return;
    }
    add_to(s, r, p, negate ? -by : by);
}

static void incrby(struct kv_store *s, struct request *r, const struct part *p)
{
    incrby_part(s, r, p, false);
}

static void decrby(struct kv_store *s, struct request *r, const struct part *p)
{
    incrby_part(s, r, p, true);
}

/* Which worker holds the key: the one running this part. */
static void owner_part(struct kv_store *s, struct request *r, const struct part *p)
{
    const char *name = store_name(s);
    resp_bulk(&r->part_reply[p->index].text, name, strlen(name));
}

static const struct command table[] = {
    { "GET", 2, CMD_KEYED, 0, get_part, NULL, NULL, GET_REPLY_MAX, NULL, false, READS },
    { "SET", -3, CMD_KEYED, 0, set_part, NULL, NULL, GET_REPLY_MAX, NULL, false, WRITES },
    { "SETNX", 3, CMD_KEYED, 0, setnx_part, NULL, NULL, SMALL_REPLY_MAX, NULL, false, WRITES },
    { "SETEX", 4, CMD_KEYED, 0, setex_part, NULL, NULL, SMALL_REPLY_MAX, NULL, false, WRITES },
    { "PSETEX", 4, CMD_KEYED, 0, psetex_part, NULL, NULL, SMALL_REPLY_MAX, NULL, false, WRITES },
    { "GETSET", 3, CMD_KEYED, 0, getset_part, NULL, NULL, GET_REPLY_MAX, NULL, false, WRITES },
    { "GETDEL", 2, CMD_KEYED, 0, getdel_part, NULL, NULL, GET_REPLY_MAX, NULL, false, WRITES },
    { "GETEX", -2, CMD_KEYED, 0, getex_part, NULL, NULL, GET_REPLY_MAX, NULL, false, WRITES },
    { "APPEND", 3, CMD_KEYED, 0, append_part, NULL, NULL, SMALL_REPLY_MAX, NULL, false, WRITES },
    { "STRLEN", 2, CMD_KEYED, 0, strlen_part, NULL, NULL, SMALL_REPLY_MAX, NULL, false, READS },
    { "GETRANGE", 4, CMD_KEYED, 0, getrange_part, NULL, NULL, GET_REPLY_MAX, NULL, false, READS },
    { "SETRANGE", 4, CMD_KEYED, 0, setrange_part, NULL, NULL, SMALL_REPLY_MAX, NULL, false, WRITES },
    { "TYPE", 2, CMD_KEYED, 0, type_part, NULL, NULL, SMALL_REPLY_MAX, NULL, false, READS },
    { "UNLINK", -2, CMD_KEYED, 1, del_part, sum_finish, NULL, 0, NULL, true, WRITES },
    { "DEL", -2, CMD_KEYED, 1, del_part, sum_finish, NULL, 0, NULL, true, WRITES },
    { "EXISTS", -2, CMD_KEYED, 1, exists_part, sum_finish, NULL, 0, NULL, false, READS },
    { "INCR", 2, CMD_KEYED, 0, incr_part, NULL, NULL, SMALL_REPLY_MAX, NULL, false, WRITES },
    { "DECR", 2, CMD_KEYED, 0, decr_part, NULL, NULL, SMALL_REPLY_MAX, NULL, false, WRITES },
    { "INCRBY", 3, CMD_KEYED, 0, incrby, NULL, NULL, SMALL_REPLY_MAX, NULL, false, WRITES },
    { "DECRBY", 3, CMD_KEYED, 0, decrby, NULL, NULL, SMALL_REPLY_MAX, NULL, false, WRITES },
    { "MGET", -2, CMD_KEYED, 1, get_part, mget_finish, NULL, GET_REPLY_MAX, NULL, false, READS },
    { "MSET", -3, CMD_KEYED, 2, mset_part, mset_finish, NULL, 0, NULL, true, WRITES },
    { "SHARD.OWNER", 2, CMD_KEYED, 0, owner_part, NULL, NULL, OWNER_REPLY_MAX, NULL, false, READS },
};

const struct command_set cmds_string = { table, sizeof table / sizeof table[0] };
