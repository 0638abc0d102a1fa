/* ring_demo: the consistent-hash ring in ten lines of output.
 *
 * Builds a ring of five servers, prints who owns a few player ids, removes one server and shows that
 * only the keys it owned moved (every other key kept its owner), then compares with hash % N.
 * Exit status 0 when that held. --servers and --keys change the sizes; --help says how far. */
#include <shard.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

int main(int argc, char **argv)
{
    static const char *names[] = {
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliett",
        "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
        "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
    };
    long long servers = 5, keys = 100000;
    const struct option_spec options[] = {
        { "--servers", OPTION_INT, &servers, 2, 26, "servers on the ring: alpha, bravo, ...; the middle one is removed" },
        { "--keys", OPTION_INT, &keys, 1, 1000000, "player ids whose owners are compared" },
    };
    const struct option_program prog = {
        "ring_demo", NULL, "Removes one server from a consistent-hash ring and checks that only its keys moved.",
        options, sizeof options / sizeof options[0]
    };
    options_parse(&prog, argc, argv);

    shard_ring *ring;
    if (shard_ring_create(&ring, NULL) != 0)
        return 1;
    for (int i = 0; i < servers; i++)
        if (shard_ring_add(ring, names[i], 1) != 0)
            return 1;
    printf("ring: %zu members, %zu points, checksum %016llx\n", shard_ring_member_count(ring),
           shard_ring_point_count(ring), (unsigned long long)shard_ring_checksum(ring));

    char key[32];
    for (int p = 1; p <= 6; p++) {
        int n = snprintf(key, sizeof key, "player-%d", p);
        printf("  %-10s -> %s\n", key, shard_ring_owner(ring, key, (size_t)n));
    }

    /* Remember every key's owner, remove the middle server (charlie of five), and count what moved. */
    const char *gone = names[servers / 2];
    const char **before = malloc((size_t)keys * sizeof *before);
    if (!before)
        return 1;
    for (int k = 0; k < keys; k++) {
        int n = snprintf(key, sizeof key, "player-%d", k);
        before[k] = shard_ring_owner(ring, key, (size_t)n);
    }
    /* Strings of the removed server die with its removal: compare by identity first, then drop them. */
    int owned = 0, moved = 0, wrong = 0;
    for (int k = 0; k < keys; k++)
        if (strcmp(before[k], gone) == 0) {
            owned++;
            before[k] = NULL;
        }
    if (shard_ring_remove(ring, gone) != 0)
        return 1;
    for (int k = 0; k < keys; k++) {
        int n = snprintf(key, sizeof key, "player-%d", k);
        const char *now = shard_ring_owner(ring, key, (size_t)n);
        if (before[k] == NULL)
            moved++;
        else if (now != before[k])
            wrong++; /* a key of a surviving server moved: consistent hashing failed */
    }
    int modulo_moved = 0;
    for (int k = 0; k < keys; k++) {
        int n = snprintf(key, sizeof key, "player-%d", k);
        uint64_t h = shard_ring_hash(ring, key, (size_t)n);
        modulo_moved += h % (uint64_t)servers != h % (uint64_t)(servers - 1);
    }
    printf("removed %s: it owned %d of %lld keys (%.1f%%); %d moved, %d others moved\n", gone, owned, keys,
           100.0 * owned / (double)keys, moved, wrong);
    printf("hash %% N going %lld -> %lld would have moved %d keys (%.1f%%)\n", servers, servers - 1, modulo_moved,
           100.0 * modulo_moved / (double)keys);
    shard_ring_destroy(ring);
    free(before);
    if (wrong != 0) {
        printf("FAILED: keys of surviving servers moved\n");
        return 1;
    }
    printf("OK: only %s's keys moved\n", gone);
    return 0;
}
