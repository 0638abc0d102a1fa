/* kv_server: commands of expiry (EXPIRE PEXPIRE EXPIREAT PEXPIREAT, TTL PTTL EXPIRETIME PEXPIRETIME,
 * PERSIST), on keys of any type. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * The expiry itself, and how it follows a key across workers, is expire.h's. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "expire.h"
#include "server.h"
#include "watch.h"

/* EXPIRE's condition (Redis 7): NX only without an expiry, XX only with one, GT only to a later time
 * and LT to an earlier one, where no expiry counts as later than any time. */
enum expire_cond { COND_NONE, COND_NX, COND_XX, COND_GT, COND_LT };

static bool cond_holds(enum expire_cond c, const struct kv_entry *e, int64_t at_ms)
{
    int64_t had = expire_at(e);
    switch (c) {
    case COND_NONE:
        return true;
    case COND_NX:
        return had == 0;
    case COND_XX:
        return had != 0;
    case COND_GT:
        return had != 0 && at_ms > had;
    case COND_LT:
        return had == 0 || at_ms < had;
    }
    return false;
}

/* The condition in argv[3..]. Return: true; false with the error reply written. */
static bool parse_cond(const struct request *r, enum expire_cond *c, struct buf *out)
{
    static const char *const words[] = { NULL, "NX", "XX", "GT", "LT" };
    *c = COND_NONE;
    bool nx = false, xx = false, gt = false, lt = false;
    for (uint32_t i = 3; i < r->argc; i++) {
        enum expire_cond got = COND_NONE;
        for (int w = COND_NX; w <= COND_LT; w++)
            if (r->argv[i].len == 2 && strncasecmp(r->argv[i].p, words[w], 2) == 0)
                got = (enum expire_cond)w;
        if (got == COND_NONE) {
            char msg[96];
            snprintf(msg, sizeof msg, "ERR Unsupported option %.60s", r->argv[i].p);
            resp_error(out, msg);
            return false;
        }
        nx |= got == COND_NX, xx |= got == COND_XX, gt |= got == COND_GT, lt |= got == COND_LT;
        *c = got;
    }
    if (nx && (xx || gt || lt)) {
        resp_error(out, "ERR NX and XX, GT or LT options at the same time are not compatible");
        return false;
    }
    if (gt && lt) {
        resp_error(out, "ERR GT and LT options at the same time are not compatible");
        return false;
    }
    return true;
}

/* EXPIRE and its kin: 1 when the expiry was set (a time already past deletes the key), 0 when the
 * key does not exist or the condition does not hold. */
static void expire_with(struct kv_store *s, struct request *r, const struct part *p, int64_t unit_ms,
                        bool relative)
{
    struct buf *out = part_out(r, p);
    enum expire_cond c;
    if (!parse_cond(r, &c, out))
        return;
    int64_t at_ms;
    int err = expire_deadline(r->argv[2].p, r->argv[2].len, unit_ms, relative, &at_ms);
    if (err == -EINVAL) {
        resp_error(out, "ERR value is not an integer or out of range");
        return;
    }
    if (err) {
        char name[16] = { 0 }, msg[64];
        for (size_t i = 0; i + 1 < sizeof name && r->cmd->name[i]; i++)
            name[i] = (char)tolower((unsigned char)r->cmd->name[i]); /* as Redis names it */
        snprintf(msg, sizeof msg, "ERR invalid expire time in '%s' command", name);
        resp_error(out, msg);
        return;
    }
    struct kv_entry *e = store_find(s, HASHED_KEY(r, p));
    if (!e || !cond_holds(c, e, at_ms)) {
        resp_int(out, 0);
        watch_unchanged();
        return;
    }
    if (at_ms <= kv_now_ms())
        store_del(s, HASHED_KEY(r, p));
    else if (expire_set(e, at_ms) != 0) {
        resp_error(out, "ERR out of memory");
        return;
    }
    resp_int(out, 1);
}

static void expire_part(struct kv_store *s, struct request *r, const struct part *p)
{
    expire_with(s, r, p, 1000, true);
}

static void pexpire_part(struct kv_store *s, struct request *r, const struct part *p)
{
    expire_with(s, r, p, 1, true);
}

static void expireat_part(struct kv_store *s, struct request *r, const struct part *p)
{
    expire_with(s, r, p, 1000, false);
}

static void pexpireat_part(struct kv_store *s, struct request *r, const struct part *p)
{
    expire_with(s, r, p, 1, false);
}

/* TTL and its kin: -2 for no key, -1 for a key without expiry, else the time left (relative) or the
 * time of expiry, in units of unit_ms (in seconds rounded to the nearest, as Redis does, also the
 * time of expiry). */
static void ttl_with(struct kv_store *s, struct request *r, const struct part *p, int64_t unit_ms,
                     bool relative)
{
    struct kv_entry *e = store_find(s, HASHED_KEY(r, p));
    int64_t v;
    if (!e) {
        v = -2;
    } else if (!e->exp) {
        v = -1;
    } else {
        int64_t t = relative ? e->exp->at_ms - kv_now_ms() : e->exp->at_ms;
        t = t > 0 ? t : 0;
        /* (t + unit_ms / 2) / unit_ms without the sum, which PXAT 9223372036854775807 overflows */
        v = t / unit_ms + (t % unit_ms >= unit_ms - unit_ms / 2);
    }
    resp_int(part_out(r, p), v);
}

static void ttl_part(struct kv_store *s, struct request *r, const struct part *p)
{
    ttl_with(s, r, p, 1000, true);
}

static void pttl_part(struct kv_store *s, struct request *r, const struct part *p)
{
    ttl_with(s, r, p, 1, true);
}

static void expiretime_part(struct kv_store *s, struct request *r, const struct part *p)
{
    ttl_with(s, r, p, 1000, false);
}

static void pexpiretime_part(struct kv_store *s, struct request *r, const struct part *p)
{
    ttl_with(s, r, p, 1, false);
}

static void persist_part(struct kv_store *s, struct request *r, const struct part *p)
{
    struct kv_entry *e = store_find(s, HASHED_KEY(r, p));
    bool had = e && e->exp;
    if (had)
        expire_clear(e);
    else
        watch_unchanged();
    resp_int(part_out(r, p), had);
}

static const struct command table[] = {
    { "EXPIRE", -3, CMD_KEYED, 0, expire_part, NULL, NULL, SMALL_REPLY_MAX, NULL, false, WRITES },
    { "PEXPIRE", -3, CMD_KEYED, 0, pexpire_part, NULL, NULL, SMALL_REPLY_MAX, NULL, false, WRITES },
    { "EXPIREAT", -3, CMD_KEYED, 0, expireat_part, NULL, NULL, SMALL_REPLY_MAX, NULL, false, WRITES },
    { "PEXPIREAT", -3, CMD_KEYED, 0, pexpireat_part, NULL, NULL, SMALL_REPLY_MAX, NULL, false, WRITES },
    { "TTL", 2, CMD_KEYED, 0, ttl_part, NULL, NULL, SMALL_REPLY_MAX, NULL, false, READS },
    { "PTTL", 2, CMD_KEYED, 0, pttl_part, NULL, NULL, SMALL_REPLY_MAX, NULL, false, READS },
    { "EXPIRETIME", 2, CMD_KEYED, 0, expiretime_part, NULL, NULL, SMALL_REPLY_MAX, NULL, false, READS },
    { "PEXPIRETIME", 2, CMD_KEYED, 0, pexpiretime_part, NULL, NULL, SMALL_REPLY_MAX, NULL, false, READS },
    { "PERSIST", 2, CMD_KEYED, 0, persist_part, NULL, NULL, SMALL_REPLY_MAX, NULL, false, WRITES },
};

const struct command_set cmds_expire = { table, sizeof table / sizeof table[0] };
