/* kv_server: the command registry: every file's table of commands (cmd_*.c), looked up by name.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Each cmd_*.c file holds one family of commands and its table (a command_set); command_init sorts
 * pointers to all of them once, before any network thread starts (the order COMMAND lists them in),
 * and files them in an open-addressing table by a case-folded hash of the name: a lookup, on every
 * request, is then one pass over a few bytes (folding and hashing them) and usually one compare of
 * folded names, where a binary search took about seven case-insensitive compares (a tenth of a SET's
 * CPU, perf), and a strncasecmp a slot still 6 % of a GET's. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net_internal.h"
#include "server.h"

bool parse_int64(const char *s, size_t len, int64_t *out)
{
    if (len == 0 || len > 20)
        return false;
    bool neg = s[0] == '-';
    size_t i = neg;
    if (i == len || (s[i] == '0' && len > i + 1) || (neg && s[i] == '0'))
        return false;
    uint64_t v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX)
        return false;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

/* Every family's table; a new cmd_*.c file adds its set here. */
static const struct command_set *const sets[] = {
    &cmds_string, &cmds_server, &cmds_list, &cmds_hash, &cmds_set, &cmds_zset, &cmds_keyspace,
    &cmds_expire, &cmds_move, &cmds_float, &cmds_random, &cmds_scan,
};

static const struct command **index_by_name;
static size_t                 indexed;
/* No command's name is longer: a longer argument is no command, unhashed. */
#define NAME_MAX_LEN 32

/* A name folded to lower case (ASCII letters only, as strncasecmp in the C locale), zero after its end:
 * two names are the same command when their lengths and these are equal. */
struct folded {
    char c[NAME_MAX_LEN];
};

/* The table: a power of two of at least twice the commands' slots, NULL for empty; names' lengths
 * and folded names beside. */
static const struct command **by_hash;
static uint8_t               *by_hash_len;
static struct folded         *by_hash_name;
static size_t                 hash_mask;

static char fold(char c)
{
    return (char)(c | ((c >= 'A' && c <= 'Z') ? 0x20 : 0));
}

/* FNV-1a over the name's len (at most NAME_MAX_LEN) bytes folded to lower case, which it leaves in f
 * (commands are ASCII, and any other byte only has to hash the same way each time). */
static size_t name_hash(const char *p, size_t len, struct folded *f)
{
    uint32_t h = 2166136261u;
    *f = (struct folded){ { 0 } };
    for (size_t i = 0; i < len; i++) {
        f->c[i] = fold(p[i]);
        h = (h ^ (uint8_t)f->c[i]) * 16777619u;
    }
    return h;
}

static int name_cmp(const char *a, size_t alen, const char *b)
{
    size_t blen = strlen(b);
    int c = strncasecmp(a, b, alen < blen ? alen : blen);
    if (c != 0)
        return c;
    return alen < blen ? -1 : alen > blen;
}

static int by_name(const void *a, const void *b)
{
    const struct command *x = *(const struct command *const *)a, *y = *(const struct command *const *)b;
    return name_cmp(x->name, strlen(x->name), y->name);
}

int command_init(void)
{
    size_t n = 0;
    for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++)
        n += sets[s]->n;
    index_by_name = malloc(n * sizeof *index_by_name);
    if (!index_by_name)
        return -ENOMEM;
    for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++)
        for (size_t i = 0; i < sets[s]->n; i++)
            index_by_name[indexed++] = &sets[s]->cmds[i];
    qsort(index_by_name, indexed, sizeof *index_by_name, by_name);
    for (size_t i = 1; i < indexed; i++)
        if (by_name(&index_by_name[i - 1], &index_by_name[i]) == 0) {
            fprintf(stderr, "kv_server: command %s defined twice\n", index_by_name[i]->name);
            abort(); /* a programming error, found at the first start */
        }
    size_t size = 64;
    while (size < 2 * indexed)
        size *= 2;
    by_hash = calloc(size, sizeof *by_hash);
    by_hash_len = calloc(size, 1);
    by_hash_name = calloc(size, sizeof *by_hash_name);
    if (!by_hash || !by_hash_len || !by_hash_name) {
        command_free();
        return -ENOMEM;
    }
    hash_mask = size - 1;
    for (size_t i = 0; i < indexed; i++) {
        size_t len = strlen(index_by_name[i]->name);
        if (len > NAME_MAX_LEN) {
            fprintf(stderr, "kv_server: command %s is longer than %d bytes\n", index_by_name[i]->name, NAME_MAX_LEN);
            abort(); /* a programming error, found at the first start */
        }
        struct folded f;
        size_t at = name_hash(index_by_name[i]->name, len, &f) & hash_mask;
        while (by_hash[at])
            at = (at + 1) & hash_mask;
        by_hash[at] = index_by_name[i];
        by_hash_len[at] = (uint8_t)len;
        by_hash_name[at] = f;
    }
    return 0;
}

void command_free(void)
{
    free(index_by_name);
    free(by_hash);
    free(by_hash_len);
    free(by_hash_name);
    index_by_name = NULL;
    by_hash = NULL;
    by_hash_len = NULL;
    by_hash_name = NULL;
    indexed = 0;
}

const struct command *command_lookup(const struct resp_arg *arg)
{
    if (arg->len > NAME_MAX_LEN || !by_hash)
        return NULL;
    /* The table is at most half full: a probe ends at an empty slot soon. */
    struct folded f;
    for (size_t at = name_hash(arg->p, arg->len, &f) & hash_mask; by_hash[at]; at = (at + 1) & hash_mask)
        if (by_hash_len[at] == arg->len && memcmp(&f, &by_hash_name[at], sizeof f) == 0)
            return by_hash[at];
    return NULL;
}

size_t command_count(void)
{
    return indexed;
}

const struct command *command_at(size_t i)
{
    return i < indexed ? index_by_name[i] : NULL;
}

bool command_args_ok(const struct command *cmd, uint32_t argc, char *why, size_t n)
{
    bool ok = cmd->arity >= 0 ? argc == (uint32_t)cmd->arity : argc >= (uint32_t)-cmd->arity;
    if (ok && cmd->key_step > 1)
        ok = (argc - 1) % (uint32_t)cmd->key_step == 0;
    if (!ok) {
        char name[32] = { 0 };
        for (size_t i = 0; i + 1 < sizeof name && cmd->name[i]; i++)
            name[i] = (char)tolower((unsigned char)cmd->name[i]); /* as Redis names it */
        snprintf(why, n, "ERR wrong number of arguments for '%s' command", name);
    }
    return ok;
}
