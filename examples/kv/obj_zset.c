/* kv_server: a sorted set: a skip list with spans, and an index of its nodes by member.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Hand-written, as Redis's own zskiplist: Debian has no well-kept C library of ordered maps with rank
 * queries (glibc's tsearch is a red-black tree without ranks or a successor step; libavl and
 * libbsd's tree.h have neither ranks), and ZRANGE by rank wants them. Each link records how many nodes
 * it jumps over (its span), so that finding a rank costs O(log n) like finding a score: ZRANGE costs
 * O(log n + elements returned), ZPOPMIN O(log n) per member.
 *
 * The index (for ZSCORE, and to find a member's node when its score changes) chains the nodes
 * themselves through their chain field: one allocation per member holds its node, its links and its
 * bytes. It grows at one node per bucket and shrinks below one in eight. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "obj.h"

#define MAX_HEIGHT 32 /* enough for 4^32 members at p = 1/4 */
#define INDEX_MIN_BITS 2

struct zlink {
    struct obj_znode *next;
    size_t            span; /* rank of next minus rank of this node; with no next: the nodes after */
};

struct obj_znode {
    double            score;
    struct obj_znode *prev;  /* level 0's backward link; NULL for the first node */
    struct obj_znode *chain; /* the index's bucket */
    uint64_t          hash;  /* kv_hash of the member */
    uint32_t          len, height;
    struct zlink      link[]; /* height links, then the member's len bytes */
};

struct obj_zset {
    struct obj_znode  *head; /* MAX_HEIGHT links, no member */
    struct obj_znode  *last;
    size_t             n;
    uint32_t           height; /* of the tallest node */
    struct obj_znode **bucket; /* the index: 2^bits chains */
    uint32_t           bits;
};

static char *member_of(const struct obj_znode *n)
{
    return (char *)(n->link + n->height);
}

static struct obj_znode *node_new(uint32_t height, double score, const void *member, size_t len)
{
    struct obj_znode *n = malloc(sizeof *n + height * sizeof(struct zlink) + len);
    if (!n)
        return NULL;
    *n = (struct obj_znode){ .score = score, .len = (uint32_t)len, .height = height };
    if (len)
        memcpy(member_of(n), member, len); /* the head node has no member (NULL) */
    return n;
}

/* p = 1/4 per level, as Redis: about 1.33 links per node. */
static uint32_t random_height(void)
{
    uint64_t r = obj_random();
    uint32_t h = 1;
    while (h < MAX_HEIGHT && (r & 3) == 0) {
        h++;
        r >>= 2;
    }
    return h;
}

struct obj_zset *obj_zset_new(void)
{
    struct obj_zset *z = calloc(1, sizeof *z);
    if (!z)
        return NULL;
    z->head = node_new(MAX_HEIGHT, 0, NULL, 0);
    z->bucket = calloc((size_t)1 << INDEX_MIN_BITS, sizeof *z->bucket);
    if (!z->head || !z->bucket) {
        free(z->head);
        free(z->bucket);
        free(z);
        return NULL;
    }
    for (uint32_t i = 0; i < MAX_HEIGHT; i++)
        z->head->link[i] = (struct zlink){ NULL, 0 };
    z->height = 1;
    z->bits = INDEX_MIN_BITS;
    return z;
}

void obj_zset_free(struct obj_zset *z)
{
    if (!z)
        return;
    for (struct obj_znode *n = z->head, *next; n; n = next) {
        next = n->link[0].next;
        free(n);
    }
    free(z->bucket);
    free(z);
}

size_t obj_zset_len(const struct obj_zset *z)
{
    return z->n;
}

/* Whether n comes before (score, member). */
static bool before(const struct obj_znode *n, double score, const char *member, size_t len)
{
    if (n->score != score)
        return n->score < score;
    int c = memcmp(member_of(n), member, n->len < len ? n->len : len);
    return c < 0 || (c == 0 && n->len < len);
}

/* A hash's chain: its top bits, so that the chains run in hash order at every size (obj_zset_range),
 * as a kvmap's buckets do. */
static struct obj_znode **bucket_of(const struct obj_zset *z, uint64_t hash)
{
    return &z->bucket[hash >> (64 - z->bits)];
}

/* Rebuilds the index with 2^bits chains; without memory it keeps the old ones (longer chains). */
static void index_resize(struct obj_zset *z, uint32_t bits)
{
    struct obj_znode **bucket = calloc((size_t)1 << bits, sizeof *bucket);
    if (!bucket)
        return;
    struct obj_znode **old = z->bucket;
    size_t nold = (size_t)1 << z->bits;
    z->bucket = bucket;
    z->bits = bits;
    for (size_t b = 0; b < nold; b++)
        for (struct obj_znode *n = old[b], *next; n; n = next) {
            next = n->chain;
            struct obj_znode **head = bucket_of(z, n->hash);
            n->chain = *head;
            *head = n;
        }
    free(old);
}

static struct obj_znode *index_find(const struct obj_zset *z, uint64_t hash, const void *member,
                                    size_t len)
{
    for (struct obj_znode *n = *bucket_of(z, hash); n; n = n->chain)
        if (n->hash == hash && n->len == len && memcmp(member_of(n), member, len) == 0)
            return n;
    return NULL;
}

static void index_unlink(struct obj_zset *z, struct obj_znode *n)
{
    struct obj_znode **p = bucket_of(z, n->hash);
    while (*p != n)
        p = &(*p)->chain;
    *p = n->chain;
}

void obj_zset_range(const struct obj_zset *z, uint64_t from, uint64_t to,
                    void (*fn)(const struct obj_znode *n, void *ctx), void *ctx)
{
    if (from > to)
        return;
    for (size_t b = from >> (64 - z->bits), last = to >> (64 - z->bits); b <= last; b++)
        for (const struct obj_znode *n = z->bucket[b]; n; n = n->chain)
            if (n->hash >= from && n->hash <= to)
                fn(n, ctx);
}

const struct obj_znode *obj_zset_find(const struct obj_zset *z, const void *member, size_t len)
{
    return index_find(z, kv_hash(member, len), member, len);
}

/* Links n (its score and member set) into the list at its place. */
static void list_link(struct obj_zset *z, struct obj_znode *n)
{
    struct obj_znode *update[MAX_HEIGHT];
    size_t rank[MAX_HEIGHT]; /* rank of update[i], the head being 0 */
    struct obj_znode *x = z->head;
    for (uint32_t i = z->height; i-- > 0;) {
        rank[i] = i + 1 == z->height ? 0 : rank[i + 1];
        while (x->link[i].next && before(x->link[i].next, n->score, member_of(n), n->len)) {
            rank[i] += x->link[i].span;
            x = x->link[i].next;
        }
        update[i] = x;
    }
    if (n->height > z->height) {
        for (uint32_t i = z->height; i < n->height; i++) {
            rank[i] = 0;
            update[i] = z->head;
            update[i]->link[i].span = z->n;
        }
        z->height = n->height;
    }
    for (uint32_t i = 0; i < n->height; i++) {
        n->link[i].next = update[i]->link[i].next;
        update[i]->link[i].next = n;
        /* n takes the part of update[i]'s span that lies after it */
        n->link[i].span = update[i]->link[i].span - (rank[0] - rank[i]);
        update[i]->link[i].span = (rank[0] - rank[i]) + 1;
    }
    for (uint32_t i = n->height; i < z->height; i++)
        update[i]->link[i].span++; /* links jumping over n */
    n->prev = update[0] == z->head ? NULL : update[0];
    if (n->link[0].next)
        n->link[0].next->prev = n;
    else
        z->last = n;
    z->n++;
}

/* Unlinks n from the list (not from the index). */
static void list_unlink(struct obj_zset *z, struct obj_znode *n)
{
    struct obj_znode *update[MAX_HEIGHT];
    struct obj_znode *x = z->head;
    for (uint32_t i = z->height; i-- > 0;) {
        while (x->link[i].next && before(x->link[i].next, n->score, member_of(n), n->len))
            x = x->link[i].next;
        update[i] = x;
    }
    for (uint32_t i = 0; i < z->height; i++) {
        if (update[i]->link[i].next == n) {
            update[i]->link[i].span += n->link[i].span - 1;
            update[i]->link[i].next = n->link[i].next;
        } else {
            update[i]->link[i].span--;
        }
    }
    if (n->link[0].next)
        n->link[0].next->prev = n->prev;
    else
        z->last = n->prev;
    while (z->height > 1 && !z->head->link[z->height - 1].next)
        z->height--;
    z->n--;
}

int obj_zset_set(struct obj_zset *z, const void *member, size_t len, double score)
{
    uint64_t hash = kv_hash(member, len);
    struct obj_znode *n = index_find(z, hash, member, len);
    if (n) {
        if (n->score == score)
            return 0;
        struct obj_znode *next = n->link[0].next;
        if ((!n->prev || n->prev->score < score) && (!next || next->score > score)) {
            n->score = score; /* its place does not change */
            return 0;
        }
        list_unlink(z, n);
        n->score = score;
        list_link(z, n);
        return 0;
    }
    if (len > UINT32_MAX)
        return -ENOMEM;
    n = node_new(random_height(), score, member, len);
    if (!n)
        return -ENOMEM;
    n->hash = hash;
    list_link(z, n);
    if (z->n > ((size_t)1 << z->bits))
        index_resize(z, z->bits + 1);
    struct obj_znode **head = bucket_of(z, hash);
    n->chain = *head;
    *head = n;
    return 1;
}

bool obj_zset_del(struct obj_zset *z, const void *member, size_t len)
{
    struct obj_znode *n = index_find(z, kv_hash(member, len), member, len);
    if (!n)
        return false;
    index_unlink(z, n);
    list_unlink(z, n);
    free(n);
    if (z->bits > INDEX_MIN_BITS && z->n < ((size_t)1 << z->bits) / 8)
        index_resize(z, z->bits - 1);
    return true;
}

const struct obj_znode *obj_zset_at(const struct obj_zset *z, size_t rank)
{
    const struct obj_znode *x = z->head;
    size_t seen = 0; /* rank of x + 1, the head being 0 */
    for (uint32_t i = z->height; i-- > 0;) {
        while (x->link[i].next && seen + x->link[i].span <= rank + 1) {
            seen += x->link[i].span;
            x = x->link[i].next;
        }
        if (seen == rank + 1)
            return x;
    }
    return NULL;
}

size_t obj_zset_rank(const struct obj_zset *z, const struct obj_znode *n)
{
    const struct obj_znode *x = z->head;
    size_t seen = 0; /* rank of x + 1, the head being 0 */
    for (uint32_t i = z->height; i-- > 0;)
        while (x->link[i].next && before(x->link[i].next, n->score, member_of(n), n->len)) {
            seen += x->link[i].span;
            x = x->link[i].next;
        }
    return seen; /* x is the node before n */
}

const struct obj_znode *obj_zset_first_from(const struct obj_zset *z, double min, bool exclusive)
{
    const struct obj_znode *x = z->head;
    for (uint32_t i = z->height; i-- > 0;)
        while (x->link[i].next && (x->link[i].next->score < min || (exclusive && x->link[i].next->score == min)))
            x = x->link[i].next;
    return x->link[0].next;
}

/* n's member against member: memcmp, the shorter first on a tie (Redis's sdscmp). */
static int member_cmp(const struct obj_znode *n, const void *member, size_t len)
{
    int c = memcmp(member_of(n), member, n->len < len ? n->len : len);
    return c ? c : (n->len > len) - (n->len < len);
}

const struct obj_znode *obj_zset_first_lex(const struct obj_zset *z, const void *member, size_t len, bool exclusive)
{
    const struct obj_znode *x = z->head;
    for (uint32_t i = z->height; i-- > 0;)
        while (x->link[i].next && member_cmp(x->link[i].next, member, len) < (int)exclusive)
            x = x->link[i].next;
    return x->link[0].next;
}

const struct obj_znode *obj_zset_last_lex(const struct obj_zset *z, const void *member, size_t len, bool exclusive)
{
    const struct obj_znode *x = z->head;
    for (uint32_t i = z->height; i-- > 0;)
        while (x->link[i].next && member_cmp(x->link[i].next, member, len) < (int)!exclusive)
            x = x->link[i].next;
    return x == z->head ? NULL : x;
}

int obj_znode_member_cmp(const struct obj_znode *n, const void *member, size_t len)
{
    return member_cmp(n, member, len);
}

const struct obj_znode *obj_znode_next(const struct obj_znode *n)
{
    return n->link[0].next;
}

const struct obj_znode *obj_znode_prev(const struct obj_znode *n)
{
    return n->prev;
}

double obj_znode_score(const struct obj_znode *n)
{
    return n->score;
}

const char *obj_znode_member(const struct obj_znode *n, size_t *len)
{
    *len = n->len;
    return member_of(n);
}
