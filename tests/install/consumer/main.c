/* A user's program, built against an installed shard: it must compile, link and route a key. */
#include <shard.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    shard_ring *r;
    if (shard_ring_create(&r, NULL) != 0)
        return 1;
    if (shard_ring_add(r, "a", 1) != 0 || shard_ring_add(r, "b", 1) != 0)
        return 1;
    const char *o = shard_ring_owner(r, "key", 3);
    int ok = o && (strcmp(o, "a") == 0 || strcmp(o, "b") == 0);
    printf("consumer: key -> %s\n", o ? o : "(none)");
    shard_ring_destroy(r);
    return ok ? 0 : 1;
}
