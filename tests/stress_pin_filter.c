/* Clones that share a pin filter, changed by two threads while two others read the ring they came
 * from. Each writer, in 8 rounds on fresh clones, pins thousands of new hashes and unpins half of the
 * original's pins (setting bits in the filter the readers read, then rebuilding its own as it fills);
 * the readers look up the original's pins and the writers' hashes all the while. Checked: a reader
 * always gets the original's answer (its pins; the points for the writers' hashes), each clone ends
 * with exactly its own pins, and (under TSan) no access races. Public calls only. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "stress_common.h"

#define MEMBERS 8
#define BASE 2000
#define NEW (STRESS_SANITIZED ? 6000 : 30000)
#define ROUNDS 8
#define STEP (NEW / (BASE / 2)) /* a writer unpins one of the original's pins every STEP pins */

static const char *const names[MEMBERS] = { "w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7" };
static shard_ring *base, *plain, *clones[2];
static uint64_t base_h[BASE], new_h[2][NEW];
static const char *plain_owner[2][NEW];
static atomic_int writers_done;

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ROUNDS rounds, each on a fresh clone of the original (the other writer clones and destroys its own
 * meanwhile: the shared counts change under both); the last round's clone is kept for the checks. */
static void *writer(void *arg)
{
    long k = (long)arg;
    for (int round = 0; round < ROUNDS; round++) {
        shard_ring *c;
        CHECK(shard_ring_clone(base, &c) == 0, "writer %ld clone", k);
        for (int i = 0; i < NEW; i++) {
            CHECK(shard_ring_pin(c, new_h[k][i], names[(i + k + round) % MEMBERS]) == 0, "writer %ld pin %d", k, i);
            if (i % STEP == 0) /* base_h[2j + k], j < BASE / 2: every one of parity k */
                CHECK(shard_ring_unpin(c, base_h[2 * (i / STEP) + k]) == 0, "writer %ld unpin", k);
        }
        if (round + 1 < ROUNDS)
            shard_ring_destroy(c);
        else
            clones[k] = c;
    }
    atomic_fetch_add(&writers_done, 1);
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    long rounds = 0;
    do {
        for (int i = 0; i < BASE; i++)
            CHECK(strcmp(shard_ring_owner_of_hash(base, base_h[i]), names[i % MEMBERS]) == 0, "base pin %d", i);
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < NEW; i += 7)
                CHECK(strcmp(shard_ring_owner_of_hash(base, new_h[k][i]), plain_owner[k][i]) == 0,
                      "a clone's pin %d seen in the original", i);
        rounds++;
    } while (atomic_load(&writers_done) < 2);
    CHECK(rounds > 0, "no round");
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(shard_ring_create(&base, NULL) == 0 && shard_ring_create(&plain, NULL) == 0, "create");
    for (int i = 0; i < MEMBERS; i++)
        CHECK(shard_ring_add(base, names[i], 1) == 0 && shard_ring_add(plain, names[i], 1) == 0, "add");
    uint64_t seed = 1;
    for (int i = 0; i < BASE; i++)
        CHECK(shard_ring_pin(base, base_h[i] = mix(&seed), names[i % MEMBERS]) == 0, "base pin");
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < NEW; i++)
            plain_owner[k][i] = shard_ring_owner_of_hash(plain, new_h[k][i] = mix(&seed));
    }
    pthread_t t[4];
    for (long i = 0; i < 2; i++) {
        pthread_create(&t[i], NULL, writer, (void *)i);
        pthread_create(&t[2 + i], NULL, reader, NULL);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < NEW; i++)
            CHECK(strcmp(shard_ring_owner_of_hash(clones[k], new_h[k][i]), names[(i + k + ROUNDS - 1) % MEMBERS]) == 0,
                  "clone %d, its pin %d", k, i);
        for (int i = 0; i < BASE; i++) {
            bool gone = i % 2 == k; /* writer k unpinned every base_h of parity k */
            const char *want = gone ? shard_ring_owner_of_hash(plain, base_h[i]) : names[i % MEMBERS];
            CHECK(strcmp(shard_ring_owner_of_hash(clones[k], base_h[i]), want) == 0, "clone %d, base pin %d", k, i);
        }
        CHECK(shard_ring_pin_count(clones[k]) == (size_t)NEW + BASE / 2, "clone %d: %zu pins", k,
              shard_ring_pin_count(clones[k]));
        shard_ring_destroy(clones[k]);
    }
    shard_ring_destroy(base);
    shard_ring_destroy(plain);
    printf("pin filter: %d rounds of %d pins in each of 2 clones beside 2 readers\n", ROUNDS, NEW);
    return stress_result("stress_pin_filter");
}
