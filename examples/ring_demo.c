/* ring_demo: the consistent-hash ring in thirty lines of output.
 *
 * Builds a ring of five servers, prints who owns a few player ids, removes one server and shows that
 * only the keys it owned moved (every other key kept its owner), then compares with hash % N.
 * Exit status 0 when that held. */
#include <shard.h>
#include <stdio.h>
#include <string.h>

#define KEYS 100000

int main(void)
{
    static const char *servers[] = { "alpha", "bravo", "charlie", "delta", "echo" };
    shard_ring *ring;
    if (shard_ring_create(&ring, NULL) != 0)
        return 1;
    for (int i = 0; i < 5; i++)
        if (shard_ring_add(ring, servers[i], 1) != 0)
            return 1;
    printf("ring: %zu members, %zu points, checksum %016llx\n", shard_ring_member_count(ring),
           shard_ring_point_count(ring), (unsigned long long)shard_ring_checksum(ring));

    char key[32];
    for (int p = 1; p <= 6; p++) {
        int n = snprintf(key, sizeof key, "player-%d", p);
        printf("  %-10s -> %s\n", key, shard_ring_owner(ring, key, (size_t)n));
    }

    /* Remember every key's owner, remove one server, and count what moved. */
    static const char *before[KEYS];
    for (int k = 0; k < KEYS; k++) {
        int n = snprintf(key, sizeof key, "player-%d", k);
        before[k] = shard_ring_owner(ring, key, (size_t)n);
    }
    /* Strings for "charlie" die with its removal: compare by identity first, then drop them. */
    int owned = 0, moved = 0, wrong = 0;
    for (int k = 0; k < KEYS; k++)
        if (strcmp(before[k], "charlie") == 0) {
            owned++;
            before[k] = NULL;
        }
    if (shard_ring_remove(ring, "charlie") != 0)
        return 1;
    for (int k = 0; k < KEYS; k++) {
        int n = snprintf(key, sizeof key, "player-%d", k);
        const char *now = shard_ring_owner(ring, key, (size_t)n);
        if (before[k] == NULL)
            moved++;
        else if (now != before[k])
            wrong++; /* a key of a surviving server moved: consistent hashing failed */
    }
    int modulo_moved = 0;
    for (int k = 0; k < KEYS; k++) {
        int n = snprintf(key, sizeof key, "player-%d", k);
        uint64_t h = shard_ring_hash(ring, key, (size_t)n);
        modulo_moved += h % 5 != h % 4;
    }
    printf("removed charlie: it owned %d of %d keys (%.1f%%); %d moved, %d others moved\n", owned, KEYS,
           100.0 * owned / KEYS, moved, wrong);
    printf("hash %% N going 5 -> 4 would have moved %d keys (%.1f%%)\n", modulo_moved,
           100.0 * modulo_moved / KEYS);
    shard_ring_destroy(ring);
    if (wrong != 0) {
        printf("FAILED: keys of surviving servers moved\n");
        return 1;
    }
    printf("OK: only charlie's keys moved\n");
    return 0;
}
