/* libFuzzer target: a byte string is a program of dispatcher calls, valid and invalid: submit and
 * try_submit (arbitrary keys, NULL ones), add (arbitrary names and weights, 0 included), remove, crash
 * (both policies and invalid ones), drain, stats, ring copies. Checks: each call returns 0 or one of its
 * documented errors; a failed call changes nothing visible (epoch); and at the end every accepted job
 * ended exactly once: run, or handed to on_dropped. */
#include <errno.h>
#include <shard.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

#define MAX_JOBS 512

static atomic_int ended[MAX_JOBS];
static atomic_long dropped;

static void run(shard_worker *w, void *arg)
{
    (void)w;
    atomic_fetch_add(&ended[(uintptr_t)arg], 1);
}

static void on_dropped(shard_job_fn fn, void *arg, void *user)
{
    (void)fn;
    (void)user;
    atomic_fetch_add(&ended[(uintptr_t)arg], 1);
    atomic_fetch_add(&dropped, 1);
}

static void name(struct input *in, char *out)
{
    /* w0..w3 exist at first; x* are new; an empty name is invalid */
    static const char *names[] = { "w0", "w1", "w2", "w3", "x0", "x1", "x2", "" };
    snprintf(out, 8, "%s", names[byte(in) % 8]);
}

static uint64_t epoch(shard_dispatcher *d)
{
    struct shard_stats st;
    CHECK(shard_dispatcher_stats(d, &st) == 0);
    return st.epoch;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct input in = { data, size };
    struct shard_config cfg = { .workers = 1 + byte(&in) % 4, .queue_capacity = 1 + byte(&in) % 16,
                                .on_dropped = on_dropped };
    shard_dispatcher *d;
    CHECK(shard_dispatcher_create(&d, &cfg) == 0);
    for (int i = 0; i < MAX_JOBS; i++)
        atomic_store(&ended[i], 0);
    atomic_store(&dropped, 0);
    int accepted = 0;
    for (int steps = 0; in.n && steps < 64; steps++) {
        char nm[8];
        uint8_t op = byte(&in) % 8;
        uint64_t e = epoch(d);
        int err;
        switch (op) {
        case 0:
        case 1: {
            uint8_t key[4];
            size_t len = byte(&in) % 5;
            for (size_t i = 0; i < len && i < 4; i++)
                key[i] = byte(&in);
            if (len == 4)
                len = 3;
            const void *k = byte(&in) % 16 == 0 ? NULL : key; /* NULL with len > 0 is invalid */
            if (accepted >= MAX_JOBS)
                break;
            err = op == 0 ? shard_try_submit(d, k, len, run, (void *)(uintptr_t)accepted)
                          : shard_submit(d, k, len, run, (void *)(uintptr_t)accepted);
            CHECK(err == 0 || err == -EAGAIN || (err == -EINVAL && !k && len > 0));
            accepted += err == 0;
            break;
        }
        case 2:
            name(&in, nm);
            err = shard_worker_add(d, nm, byte(&in) % 3);
            CHECK(err == 0 || err == -EEXIST || err == -EINVAL);
            CHECK(err != 0 || epoch(d) == e + 1);
            break;
        case 3:
            name(&in, nm);
            err = shard_worker_remove(d, nm);
            CHECK(err == 0 || err == -ENOENT || err == -EBUSY || err == -EINVAL);
            break;
        case 4:
            name(&in, nm);
            err = shard_worker_crash(d, nm, (enum shard_crash_policy)(byte(&in) % 3));
            CHECK(err == 0 || err == -ENOENT || err == -EBUSY || err == -EINVAL);
            break;
        case 5:
            CHECK(shard_drain(d) == 0);
            break;
        case 6: {
            shard_ring *r;
            CHECK(shard_dispatcher_ring(d, &r) == 0);
            struct shard_stats st;
            CHECK(shard_dispatcher_stats(d, &st) == 0);
            CHECK(st.workers == shard_ring_member_count(r));
            CHECK(st.ring_checksum == shard_ring_checksum(r));
            shard_ring_destroy(r);
            break;
        }
        default: {
            struct shard_worker_stats ws[16];
            long n = shard_dispatcher_worker_stats(d, ws, 16);
            CHECK(n >= 1);
            break;
        }
        }
        if (op >= 3 && op <= 4 && err != 0)
            CHECK(epoch(d) == e); /* a failed call has no effect */
    }
    CHECK(shard_drain(d) == 0);
    shard_dispatcher_destroy(d);
    for (int i = 0; i < accepted; i++)
        CHECK(atomic_load(&ended[i]) == 1);
    for (int i = accepted; i < MAX_JOBS; i++)
        CHECK(atomic_load(&ended[i]) == 0);
    return 0;
}
