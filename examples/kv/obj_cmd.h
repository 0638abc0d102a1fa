/* kv_server: what the commands of lists, hashes, sets and sorted sets (cmd_list.c, cmd_hash.c,
 * cmd_set.c, cmd_zset.c, cmd_random.c) share: finding a key of a type, making and dropping one, reading
 * counts and indexes as Redis does, writing their members into replies, and the bounds of replies.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A key holds a collection only while it has members: a command that adds makes the object, fills it
 * and only then adds the key (obj_store), and a command that leaves it empty deletes the key
 * (obj_drop), as Redis does. Context: every function here runs in a keyed command's part, on the
 * worker owning its key. */
#ifndef KV_OBJ_CMD_H
#define KV_OBJ_CMD_H

#include "obj.h"
#include "server.h"

/* The bounds of these commands' part replies (struct command's part_reply_max).
 * SMALL: an integer, a score, OK, or an error: the longest is ZADD's "ERR GT, LT, and/or NX options
 * at the same time are not compatible" (70 bytes with its framing). */
#define OBJ_SMALL_REPLY_MAX 128
/* ONE: a single element (HGET, LINDEX): as GET, copied below COPY_MAX, else sent by reference. */
#define OBJ_ONE_REPLY_MAX GET_REPLY_MAX
/* MANY: a range or a pop with a count (LPOP with a count, HGETALL, SMEMBERS, SPOP, ZRANGE, ZPOPMIN,
 * and an LRANGE whose indexes mix head and tail: cmd_list.c's lrange_bound): as many elements as the
 * collection holds, of any size each, so nothing in the command bounds it. It is set to the connection's output limit (net.c's OUT_LIMIT): a connection then runs
 * one such command at a time, and its reply is the one request net.c lets go over the limit by its own
 * size. Pipelined, these commands thus run one per round trip to their worker. */
#define OBJ_MANY_REPLY_MAX LARGE_REPLY_MAX
/* A pop (LPOP RPOP SPOP ZPOPMIN) without a count replies one element (and ZPOPMIN its score): ONE's
 * bound plus a score; with a count, MANY's. A set's or sorted set's member is copied into the reply
 * whatever its size, but it leaves the store as it does: the reply holds the memory the store let go,
 * as a large value sent by reference does, so the bound holds for what the server holds. */
size_t obj_pop_reply_bound(const struct request *r);
/* A pop's count (LPOP RPOP SPOP ZPOPMIN key [count]): 1 without argv[2], else argv[2], positive.
 * Return: true; false with the error reply written (more arguments: the arity error when
 * arity_error, as LPOP and RPOP answer, else a syntax error, as SPOP and ZPOPMIN do). */
bool obj_pop_count(struct request *r, const struct part *p, bool arity_error, int64_t *count);
/* HDEL and SREM: removes the members named from argv[2] on of the part's key (of type, a kvmap),
 * deletes the key if that empties it, and replies how many there were. */
void obj_map_remove(struct kv_store *s, struct request *r, const struct part *p, enum kv_type type);

/* HINCRBY and HINCRBYFLOAT: sets field of the part's key's hash e (NULL: the key does not exist yet,
 * and is made) to the vlen bytes at val. Return: 0; -ENOMEM (nothing changed). */
int obj_hash_set(struct kv_store *s, struct request *r, const struct part *p, struct kv_entry *e,
                 const struct resp_arg *field, const char *val, size_t vlen);

#define OBJ_ERR_OOM       "ERR out of memory"
#define OBJ_ERR_INTEGER   "ERR value is not an integer or out of range"
#define OBJ_ERR_COUNT     "ERR value is out of range, must be positive"
#define OBJ_ERR_SYNTAX    "ERR syntax error"

/* resp_bulk without snprintf, in one reservation: a range writes hundreds of these per reply, and
 * snprintf's formatting was a third of LRANGE's time. */
static inline void obj_put_bulk(struct buf *b, const void *data, size_t n)
{
    char head[24];
    size_t h = sizeof head;
    head[--h] = '\n';
    head[--h] = '\r';
    size_t v = n;
    do
        head[--h] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    head[--h] = '$';
    size_t hlen = sizeof head - h;
    if (!buf_reserve(b, hlen + n + 2))
        return;
    memcpy(b->p + b->len, head + h, hlen);
    memcpy(b->p + b->len + hlen, data, n);
    memcpy(b->p + b->len + hlen + n, "\r\n", 2);
    b->len += hlen + n + 2;
}

/* A sorted set's score as Redis writes it: %.17g, and inf or -inf. */
void obj_put_score(struct buf *b, double score);
/* A set's member or a hash's field, and with value the field's value after it. */
void obj_put_member(struct buf *b, const struct kv_entry *m, bool value);
/* A sorted set's member, and with score its score after it. */
void obj_put_znode(struct buf *b, const struct obj_znode *n, bool score);

/* The part's key's entry if the key holds type: *e is NULL when the key does not exist. Return: 0;
 * -EINVAL when it holds another type (WRONGTYPE is then the part's reply). */
int  obj_lookup(struct kv_store *s, struct request *r, const struct part *p, enum kv_type type,
                struct kv_entry **e);
/* Adds the part's key (obj_lookup found none) holding obj of type. Return: 0; -ENOMEM (obj is still
 * the caller's). */
int  obj_store(struct kv_store *s, struct request *r, const struct part *p, enum kv_type type, void *obj);
/* Deletes the part's key: its collection is empty. */
void obj_drop(struct kv_store *s, struct request *r, const struct part *p);

/* Redis's "wrong number of arguments" reply, for an arity the command table cannot express. */
void obj_reply_arity(struct request *r, const struct part *p);
/* The count of LPOP, SPOP, ZPOPMIN: an integer >= 0. Return: false, the error replied, otherwise. */
bool obj_parse_count(struct request *r, const struct part *p, const struct resp_arg *a, int64_t *count);
/* An index of LRANGE, LINDEX, ZRANGE (negative: from the end). Return: as obj_parse_count. */
bool obj_parse_index(struct request *r, const struct part *p, const struct resp_arg *a, int64_t *index);
/* Redis's range [start, stop] of len elements, negative indexes counting from the end, clamped:
 * its first element and how many. */
void obj_range(int64_t start, int64_t stop, size_t len, size_t *first, size_t *n);
/* v as a bulk string: copied when short, else sent by reference (server.h). take: the caller's
 * reference goes to the reply; otherwise the reply takes one of its own. */
void obj_reply_value(struct request *r, const struct part *p, struct kv_value *v, bool take);

#endif
