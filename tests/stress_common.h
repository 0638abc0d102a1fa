/* Helpers of the stress programs: a plain harness (they also run under ThreadSanitizer, where
 * Criterion cannot) with CHECK that reports and fails, and a per-(producer, key) order checker. */
#ifndef SHARD_STRESS_COMMON_H
#define SHARD_STRESS_COMMON_H

#include <shard.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define STRESS_SANITIZED 1
#else
#define STRESS_SANITIZED 0
#endif

static atomic_int stress_failures;

#define CHECK(cond, ...)                                                                          \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            if (atomic_fetch_add(&stress_failures, 1) < 20) {                                     \
                fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);          \
                fprintf(stderr, __VA_ARGS__);                                                     \
                fputc('\n', stderr);                                                              \
            }                                                                                     \
        }                                                                                         \
    } while (0)

static inline void stress_pause_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L }; /* tv_nsec must stay under 1e9 */
    nanosleep(&ts, NULL);
}

/* Drains d until done(ctx) holds, for 10 s at most. A job a worker was running when it crashed is
 * stuck until it returns, and drain waits neither for it nor for the jobs behind its keys
 * (dispatcher.h): a quick job is only slow, but under a sanitizer on a loaded machine its thread may be
 * preempted in it past one drain (stress_drop_race failed so in CI). A job that never runs is still
 * caught: the caller checks after, or done itself (stress_none_open: the run fails here, with the
 * counts). Return: whether done held. */
static inline bool stress_drain_until(shard_dispatcher *d, bool (*done)(void *ctx), void *ctx)
{
    for (int tries = 0; tries < 10000; tries++) {
        CHECK(shard_drain(d) == 0, "drain");
        if (done(ctx))
            return true;
        stress_pause_ms(1);
    }
    struct shard_stats st;
    CHECK(shard_dispatcher_stats(d, &st) == 0, "stats");
    CHECK(false, "the work did not end in 10 s of draining (multi-key jobs: %llu open, %llu waiting)",
          (unsigned long long)st.multi_open, (unsigned long long)st.multi_waiting);
    return false;
}

/* Whether no multi-key job of d (a shard_dispatcher) is open or waiting, by its stats: a condition
 * for stress_drain_until. A multi-key job stops counting as open only after it has let its keys go
 * (multi.c's end()), so a later job of its keys may run before it does; and one that ran on a crashed
 * worker, or behind a stuck key, is one no drain waits for. */
static inline bool stress_none_open(void *d)
{
    struct shard_stats st;
    CHECK(shard_dispatcher_stats(d, &st) == 0, "stats");
    return st.multi_open == 0 && st.multi_waiting == 0;
}

/* xorshift64: the programs' random choices (s not 0). */
static inline uint32_t stress_rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 11);
}

/* One call in three sleeps 0-200 us, counted in *delays: what a program that wraps the library's lock
 * calls (-Wl,--wrap) does inside them to hold a race window open. Nothing waits for the sleep. */
static inline void stress_jitter(atomic_long *delays)
{
    static _Thread_local uint64_t rng;
    if (!rng)
        rng = (uintptr_t)&rng * 0x9e3779b97f4a7c15ull | 1;
    uint32_t r = stress_rnd(&rng);
    if (r % 3)
        return;
    atomic_fetch_add_explicit(delays, 1, memory_order_relaxed);
    struct timespec ts = { 0, (long)(r >> 2) % 200000 };
    nanosleep(&ts, NULL);
}

/* One submitted job: which producer, which key, its sequence number in that (producer, key) stream. */
struct stress_job {
    int         producer, key;
    unsigned    seq;
    atomic_int  runs;
};

/* What the jobs of one key check as they run. */
struct stress_key {
    atomic_int          running;        /* jobs of this key running now: must never exceed 1 */
    unsigned           *next_seq;       /* per producer: the seq expected next */
};

static inline void stress_run(struct stress_key *k, struct stress_job *j, shard_worker *w)
{
    CHECK(atomic_fetch_add(&k->running, 1) == 0, "key %d ran on two workers at once (%s)", j->key,
          shard_worker_name(w));
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "job p%d k%d #%u ran twice", j->producer, j->key, j->seq);
    CHECK(k->next_seq[j->producer] == j->seq, "key %d producer %d: ran #%u, expected #%u", j->key, j->producer,
          j->seq, k->next_seq[j->producer]);
    k->next_seq[j->producer] = j->seq + 1;
    atomic_fetch_sub(&k->running, 1);
}

static const char *stress_watchdog_name = "stress";

static void stress_watchdog_fired(int sig)
{
    (void)sig;
    static const char msg[] = ": hang (watchdog)\n0 passed, 1 failed\n";
    /* write(2) only: the one output a signal handler may make. */
    if (write(2, stress_watchdog_name, strlen(stress_watchdog_name)) < 0 || write(2, msg, sizeof msg - 1) < 0)
        _exit(1);
    _exit(1);
}

/* Fails the run, naming it, if it is still running in seconds (0: stops the watchdog): a hang fails
 * with a message rather than by the test's timeout. */
static inline void stress_watchdog(const char *name, unsigned seconds)
{
    stress_watchdog_name = name;
    signal(SIGALRM, stress_watchdog_fired);
    alarm(seconds);
}

static inline int stress_result(const char *name)
{
    int f = atomic_load(&stress_failures);
    printf("%s: %s (%d failed checks)\n", name, f ? "FAILED" : "ok", f);
    /* The plain closing line CI reads. */
    printf("%d passed, %d failed\n", f ? 0 : 1, f ? 1 : 0);
    return f ? 1 : 0;
}

#endif
