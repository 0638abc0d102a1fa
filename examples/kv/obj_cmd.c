/* kv_server: what the commands of collections share (obj_cmd.h). SPDX-License-Identifier: LGPL-2.1-or-later */
#include "obj_cmd.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "watch.h"

int obj_lookup(struct kv_store *s, struct request *r, const struct part *p, enum kv_type type,
               struct kv_entry **e)
{
    *e = store_find(s, HASHED_KEY(r, p));
    if (*e && (*e)->type != type) {
        *e = NULL;
        resp_error(part_out(r, p), WRONGTYPE);
        watch_unchanged(); /* every caller returns at once */
        return -EINVAL;
    }
    return 0;
}

int obj_store(struct kv_store *s, struct request *r, const struct part *p, enum kv_type type, void *obj)
{
    struct kv_entry *e = kv_entry_new_obj(HASHED_KEY(r, p), type, obj);
    if (!e)
        return -ENOMEM;
    store_add(s, e);
    return 0;
}

void obj_drop(struct kv_store *s, struct request *r, const struct part *p)
{
    store_del(s, HASHED_KEY(r, p));
}

void obj_reply_arity(struct request *r, const struct part *p)
{
    char name[32], text[96];
    size_t n = 0;
    /* Redis names the command in lower case */
    for (const char *c = r->cmd->name; *c && n < sizeof name - 1; c++)
        name[n++] = (char)tolower((unsigned char)*c);
    name[n] = '\0';
    snprintf(text, sizeof text, "ERR wrong number of arguments for '%s' command", name);
    resp_error(part_out(r, p), text);
}

bool obj_parse_count(struct request *r, const struct part *p, const struct resp_arg *a, int64_t *count)
{
    if (!parse_int64(a->p, a->len, count) || *count < 0) {
        resp_error(part_out(r, p), OBJ_ERR_COUNT);
        return false;
    }
    return true;
}

bool obj_parse_index(struct request *r, const struct part *p, const struct resp_arg *a, int64_t *index)
{
    if (!parse_int64(a->p, a->len, index)) {
        resp_error(part_out(r, p), OBJ_ERR_INTEGER);
        return false;
    }
    return true;
}

void obj_range(int64_t start, int64_t stop, size_t len, size_t *first, size_t *n)
{
    int64_t l = (int64_t)len;
    if (start < 0)
        start = start < -l ? 0 : l + start;
    if (stop < 0)
        stop = l + stop; /* may stay negative: then empty */
    if (stop >= l)
        stop = l - 1;
    *first = (size_t)start;
    *n = start > stop || start >= l ? 0 : (size_t)(stop - start + 1);
}

void obj_reply_value(struct request *r, const struct part *p, struct kv_value *v, bool take)
{
    struct part_reply *out = &r->part_reply[p->index];
    if (v->len < COPY_MAX) {
        resp_bulk(&out->text, v->data, v->len);
        if (take)
            kv_value_put(v);
    } else {
        resp_bulk_header(&out->text, v->len);
        out->value = take ? v : kv_value_get(v);
    }
}

size_t obj_pop_reply_bound(const struct request *r)
{
    return r->argc == 2 ? OBJ_ONE_REPLY_MAX + OBJ_SMALL_REPLY_MAX : OBJ_MANY_REPLY_MAX;
}

bool obj_pop_count(struct request *r, const struct part *p, bool arity_error, int64_t *count)
{
    *count = 1;
    if (r->argc > 3) {
        if (arity_error)
            obj_reply_arity(r, p);
        else
            resp_error(part_out(r, p), OBJ_ERR_SYNTAX);
        return false;
    }
    return r->argc < 3 || obj_parse_count(r, p, &r->argv[2], count);
}

void obj_map_remove(struct kv_store *s, struct request *r, const struct part *p, enum kv_type type)
{
    struct kv_entry *e;
    int64_t n = 0;
    if (obj_lookup(s, r, p, type, &e) != 0)
        return;
    for (uint32_t i = 2; e && i < r->argc; i++)
        n += obj_map_del(e->obj, r->argv[i].p, r->argv[i].len);
    if (e && ((struct kvmap *)e->obj)->n == 0)
        obj_drop(s, r, p);
    if (n == 0)
        watch_unchanged();
    resp_int(part_out(r, p), n);
}

int obj_hash_set(struct kv_store *s, struct request *r, const struct part *p, struct kv_entry *e,
                 const struct resp_arg *field, const char *val, size_t vlen)
{
    struct kvmap *m = e ? e->obj : obj_map_new();
    if (!m)
        return -ENOMEM;
    uint64_t hash = kv_hash(field->p, field->len);
    struct kv_entry *f = kvmap_find(m, hash, field->p, field->len);
    if (f)
        return kv_entry_set(f, val, vlen);
    f = obj_member_new(hash, field->p, field->len, val, vlen);
    if (f && !e && obj_store(s, r, p, KV_HASH, m) != 0) {
        kv_entry_free(f);
        f = NULL;
    }
    if (!f) {
        if (!e)
            obj_map_free(m);
        return -ENOMEM;
    }
    kvmap_insert(m, f);
    return 0;
}

void obj_put_score(struct buf *b, double score)
{
    char text[32];
    int n = isinf(score) ? snprintf(text, sizeof text, "%s", score > 0 ? "inf" : "-inf")
                         : snprintf(text, sizeof text, "%.17g", score);
    obj_put_bulk(b, text, (size_t)n);
}

void obj_put_member(struct buf *b, const struct kv_entry *m, bool value)
{
    obj_put_bulk(b, m->key, m->klen);
    if (value)
        obj_put_bulk(b, m->val->data, m->val->len);
}

void obj_put_znode(struct buf *b, const struct obj_znode *n, bool score)
{
    size_t len;
    const char *m = obj_znode_member(n, &len);
    obj_put_bulk(b, m, len);
    if (score)
        obj_put_score(b, obj_znode_score(n));
}
