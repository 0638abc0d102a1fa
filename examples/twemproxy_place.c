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
 * MD5 comes from nettle (Debian nettle-dev): a well-kept implementation, not worth writing again. */
#include <math.h>
#include <nettle/md5.h>
#include <shard.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KETAMA_POINTS_PER_SERVER 160
#define KETAMA_POINTS_PER_HASH   4

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

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: twemproxy_place NAME[:WEIGHT]... < keys\n");
        return 2;
    }
    uint32_t n = (uint32_t)(argc - 1), total = 0, weights[256];
    char *names[256];
    if (n > 256) {
        fprintf(stderr, "twemproxy_place: at most 256 servers\n");
        return 2;
    }
    for (uint32_t i = 0; i < n; i++) {
        names[i] = argv[i + 1];
        char *colon = strrchr(names[i], ':');
        weights[i] = colon ? (uint32_t)strtoul(colon + 1, NULL, 10) : 1;
        if (colon)
            *colon = '\0';
        if (weights[i] == 0) {
            fprintf(stderr, "twemproxy_place: %s: weight must be at least 1\n", names[i]);
            return 2;
        }
        total += weights[i];
    }
    struct shard_ring_config cfg = {
        .vnodes = KETAMA_POINTS_PER_HASH, .point = ketama_point, .hash = twemproxy_fnv1a_64
    };
    shard_ring *ring;
    int err = shard_ring_create(&ring, &cfg);
    for (uint32_t i = 0; i < n && !err; i++)
        err = shard_ring_add(ring, names[i], ketama_points(weights[i], total, n) / KETAMA_POINTS_PER_HASH);
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
