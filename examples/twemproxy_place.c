/* twemproxy_place: shard's ring, built through its hooks to place keys exactly as twemproxy does.
 *
 * twemproxy (nutcracker) with "distribution: ketama" gives each server points on a 32-bit circle:
 * for a server named NAME (the node name of "host:port:weight NAME" lines) with P points,
 * MD5("NAME-j") for j in [0, P/4) yields four points each, the little-endian 32-bit words of the
 * digest. P is 160 for equal weights; in general floor(weight / total * 40 * servers) * 4, computed
 * in float as twemproxy does. A key goes to the first point at or after its hash, wrapping; with
 * "hash: fnv1a_64" that hash is FNV-1a with the 64-bit constants truncated to 32 bits (and, as
 * twemproxy reads keys through a signed char, bytes over 0x7f sign-extended).
 *
 * shard's ring has the same shape: a member of weight w gets vnodes * w points from the point hook, a
 * key the member of the smallest point >= hash(key). So vnodes = 4 and weight = P / 4, the point hook
 * is MD5 above, the hash hook is twemproxy's FNV-1a, and shard_ring_owner answers what twemproxy
 * does. One placement from the proxy to the core: the proxy picks the machine, shard the core.
 *
 * Usage: twemproxy_place NAME[:WEIGHT]... < keys   prints "key<TAB>NAME" for each line of input.
 * Up to 256 servers, each named at most 79 bytes (twemproxy hashes "NAME-INDEX" in an 86-byte buffer)
 * and of weight 1..1000000 (default 1); a server whose weight gets it no points (a small weight
 * beside large ones) is left off the ring, as twemproxy does, with a note on stderr.
 * MD5 comes from nettle (Debian nettle-dev): a well-kept implementation, not worth writing again. */
#include <math.h>
#include <nettle/md5.h>
#include <shard.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

#define KETAMA_POINTS_PER_SERVER 160
#define KETAMA_POINTS_PER_HASH   4
#define MAX_SERVERS              256
#define MAX_NAME                 79 /* "NAME-INDEX" with up to 5 digits fits twemproxy's 85 bytes */
#define MAX_WEIGHT               1000000

/* Point `index` of `member`: word index % 4 of MD5("member-(index / 4)"), little-endian. */
static uint64_t ketama_point(const char *member, uint32_t index, void *ctx)
{
    (void)ctx;
    char host[SHARD_NAME_MAX + 16];
    int n = snprintf(host, sizeof host, "%s-%u", member, index / KETAMA_POINTS_PER_HASH);
    uint8_t d[MD5_DIGEST_SIZE];
    struct md5_ctx md5;
    md5_init(&md5);
    md5_update(&md5, (size_t)n, (const uint8_t *)host);
    md5_digest(&md5, sizeof d, d);
    const uint8_t *w = d + 4 * (index % KETAMA_POINTS_PER_HASH);
    return (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
}

/* twemproxy's "fnv1a_64". */
static uint64_t twemproxy_fnv1a_64(const void *key, size_t len, void *ctx)
{
    (void)ctx;
    const signed char *k = key;
    uint32_t hash = (uint32_t)UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < len; i++) {
        hash ^= (uint32_t)k[i];
        hash *= (uint32_t)UINT64_C(0x100000001b3);
    }
    return hash;
}

/* Points of a server of weight `weight` among `servers` live servers of total weight `total`,
 * with twemproxy's float arithmetic (so that rounding agrees). */
static uint32_t ketama_points(uint32_t weight, uint32_t total, uint32_t servers)
{
    float pct = (float)weight / (float)total;
    return (uint32_t)(floorf((float)(pct * KETAMA_POINTS_PER_SERVER / 4 * (float)servers + 0.0000000001)) * 4);
}

/* Reads arg, NAME[:WEIGHT], into *name (arg cut at the colon) and *weight, or refuses it. */
static void parse_server(const struct option_program *prog, char *arg, bool after_dashes, char **name,
                         uint32_t *weight)
{
    char *colon = strrchr(arg, ':');
    size_t len = colon ? (size_t)(colon - arg) : strlen(arg);
    *weight = 1;
    if (colon) {
        const char *w = colon + 1;
        char *end;
        unsigned long v = strtoul(w, &end, 10); /* ULONG_MAX when too large: out of range as well */
        if (w[0] < '0' || w[0] > '9' || *end != '\0' || v < 1 || v > MAX_WEIGHT)
            options_refuse(prog, "'%s': WEIGHT must be a whole number in 1..%d, not '%s'", arg, MAX_WEIGHT, w);
        *weight = (uint32_t)v;
    }
    if (len == 0)
        options_refuse(prog, "'%s': a server needs a NAME", arg);
    if (len > MAX_NAME)
        options_refuse(prog, "'%s': NAME is longer than %d bytes", arg, MAX_NAME);
    if (arg[0] == '-' && !after_dashes) /* options come first: "a --help" is a mistake */
        options_refuse(prog, "'%s' looks like an option after a server; put '--' first to name a server so", arg);
    if (colon)
        *colon = '\0';
    *name = arg;
}

int main(int argc, char **argv)
{
    const struct option_program prog = {
        "twemproxy_place", "NAME[:WEIGHT]... < keys",
        "Prints \"key<TAB>NAME\" for each line of input: the server twemproxy (ketama, fnv1a_64) sends it to.\n"
        "Up to 256 servers; NAME at most 79 bytes; WEIGHT 1..1000000, default 1.",
        NULL, 0
    };
    int first = options_parse(&prog, argc, argv);
    bool after_dashes = first > 1 && strcmp(argv[first - 1], "--") == 0;
    uint32_t n = (uint32_t)(argc - first), total = 0, weights[MAX_SERVERS];
    char *names[MAX_SERVERS];
    if (n == 0)
        options_refuse(&prog, "no servers: name at least one, as NAME or NAME:WEIGHT");
    if (n > MAX_SERVERS)
        options_refuse(&prog, "%u servers, at most %d", n, MAX_SERVERS);
    for (uint32_t i = 0; i < n; i++) {
        parse_server(&prog, argv[first + i], after_dashes, &names[i], &weights[i]);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                options_refuse(&prog, "server '%s' is named twice", names[i]);
        total += weights[i]; /* at most 256 * 1000000: no overflow */
    }
    struct shard_ring_config cfg = {
        .vnodes = KETAMA_POINTS_PER_HASH, .point = ketama_point, .hash = twemproxy_fnv1a_64
    };
    shard_ring *ring;
    int err = shard_ring_create(&ring, &cfg);
    for (uint32_t i = 0; i < n && !err; i++) {
        uint32_t points = ketama_points(weights[i], total, n);
        if (points == 0) /* twemproxy gives it no point either: it never receives a key */
            fprintf(stderr, "twemproxy_place: note: %s (weight %u of %u) gets no points and no keys\n", names[i],
                    weights[i], total);
        else
            err = shard_ring_add(ring, names[i], points / KETAMA_POINTS_PER_HASH);
    }
    if (err) {
        fprintf(stderr, "twemproxy_place: %s\n", shard_strerror(err));
        return 1;
    }
    char line[4096];
    while (fgets(line, sizeof line, stdin)) {
        size_t len = strcspn(line, "\r\n");
        line[len] = '\0';
        printf("%s\t%s\n", line, shard_ring_owner(ring, line, len));
    }
    shard_ring_destroy(ring);
    return 0;
}
