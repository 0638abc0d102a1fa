/* The jobs the crash-race stress tests submit (stress_drop_race, stress_multi_drop_whole), and what
 * each checks when it runs or is dropped: no two jobs of a key at once, each producer's jobs of a key
 * in order, a job run once or dropped once (never both), a job with steps done only after every step,
 * with its keys still held, and dropped only before its first step. Beside stress_common.h's
 * stress_run, which checks single-key jobs that are never dropped (each seq the very next), these
 * allow the gaps that drops leave, and jobs of several keys. The test owns the keys and the jobs;
 * race_keys points at its keys. SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_RACE_JOBS_H
#define SHARD_RACE_JOBS_H

#include "stress_common.h"

#define RACE_MAXK      5 /* keys a job */
#define RACE_PRODUCERS 2

struct race_key {
    char       name[32];
    size_t     len;
    int        owner;                            /* the worker's index, where the test needs it */
    atomic_int running;
    int        last_seq[RACE_PRODUCERS]; /* plain: TSan checks the key's hand-over */
};

enum race_job_kind { RACE_SINGLE, RACE_MULTI, RACE_STEPS };

struct race_job {
    int                  p, nk, spin; /* its producer, its keys, its work (a spin count) */
    int                  k[RACE_MAXK];
    int                  seq[RACE_MAXK];
    enum race_job_kind kind;
    atomic_int           runs, drops, steps_run;
};

static struct race_key *race_keys;

static inline void race_spin(int n)
{
    for (volatile int i = 0; i < n; i++)
        ;
}

static inline void race_key_enter(const struct race_job *j, int i)
{
    struct race_key *K = &race_keys[j->k[i]];
    CHECK(atomic_fetch_add(&K->running, 1) == 0, "key %s: two jobs at once", K->name);
    CHECK(j->seq[i] > K->last_seq[j->p], "key %s p%d: seq %d after %d", K->name, j->p, j->seq[i], K->last_seq[j->p]);
    K->last_seq[j->p] = j->seq[i];
}

static inline void race_key_leave(const struct race_job *j, int i)
{
    atomic_fetch_sub(&race_keys[j->k[i]].running, 1);
}

static void race_single_fn(shard_worker *w, void *arg)
{
    (void)w;
    struct race_job *j = arg;
    race_key_enter(j, 0);
    race_spin(j->spin);
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "single ran twice");
    race_key_leave(j, 0);
}

static void race_multi_fn(shard_worker *w, void *arg)
{
    (void)w;
    struct race_job *j = arg;
    for (int i = 0; i < j->nk; i++)
        race_key_enter(j, i);
    race_spin(j->spin);
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "multi ran twice");
    CHECK(atomic_load(&j->drops) == 0, "multi ran after it was dropped");
    for (int i = 0; i < j->nk; i++)
        race_key_leave(j, i);
}

static void race_step_fn(shard_worker *w, void *arg, size_t index)
{
    (void)w;
    struct race_job *j = arg;
    CHECK((int)index < j->nk, "step index %zu", index);
    race_key_enter(j, (int)index);
    race_spin(j->spin);
    atomic_fetch_add(&j->steps_run, 1);
    race_key_leave(j, (int)index);
}

static void race_done_fn(shard_worker *w, void *arg)
{
    (void)w;
    struct race_job *j = arg;
    for (int i = 0; i < j->nk; i++) { /* every key still held: none runs anything else */
        struct race_key *K = &race_keys[j->k[i]];
        CHECK(atomic_fetch_add(&K->running, 1) == 0, "done: key %s busy", K->name);
        race_key_leave(j, i);
    }
    CHECK(atomic_load(&j->steps_run) == j->nk, "done after %d of %d steps", atomic_load(&j->steps_run), j->nk);
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "steps job done twice");
    CHECK(atomic_load(&j->drops) == 0, "steps job ran after it was dropped");
}

/* The dispatcher's on_dropped: a multi-key job is heard of once, with its own fn and arg. */
static void race_on_dropped(shard_job_fn fn, void *arg, void *user)
{
    (void)user;
    if (fn != race_single_fn && fn != race_multi_fn && fn != race_done_fn)
        return;
    struct race_job *j = arg;
    CHECK(atomic_fetch_add(&j->drops, 1) == 0, "dropped twice (kind %d)", (int)j->kind);
    CHECK(atomic_load(&j->runs) == 0, "dropped after it ran");
    CHECK(j->kind != RACE_STEPS || atomic_load(&j->steps_run) == 0, "steps job dropped after a step ran");
}

/* Submits j as its kind says; refused, it counts as dropped (never queued). */
static inline void race_job_submit(shard_dispatcher *d, struct race_job *j)
{
    int rc;
    if (j->kind == RACE_SINGLE) {
        struct race_key *K = &race_keys[j->k[0]];
        rc = shard_submit(d, K->name, K->len, race_single_fn, j);
    } else {
        struct shard_key sk[RACE_MAXK];
        for (int i = 0; i < j->nk; i++)
            sk[i] = (struct shard_key){ race_keys[j->k[i]].name, race_keys[j->k[i]].len };
        rc = j->kind == RACE_STEPS ? shard_submit_multi_each(d, sk, (size_t)j->nk, race_step_fn, race_done_fn, j)
                                     : shard_submit_multi(d, sk, (size_t)j->nk, race_multi_fn, j);
    }
    CHECK(rc == 0, "submit: %d", rc);
    if (rc)
        atomic_fetch_add(&j->drops, 1);
}

/* After a round: each of jobs[0..n) ran once or was dropped once; adds to *ran and *dropped. */
static inline void race_jobs_check(const struct race_job *jobs, int n, int round, long *ran, long *dropped)
{
    for (int i = 0; i < n; i++) {
        const struct race_job *j = &jobs[i];
        int r = atomic_load(&j->runs), dr = atomic_load(&j->drops);
        CHECK(r + dr == 1, "round %d p%d job %d (kind %d, %d keys): runs %d drops %d", round, j->p, i, (int)j->kind,
              j->nk, r, dr);
        *ran += r;
        *dropped += dr;
    }
}

/* A job of key k, one a key after a round (tail[k]): each must run once the round's jobs are done. */
static inline void race_tail_submit(shard_dispatcher *d, struct race_job *tail, int k, int seq)
{
    memset(tail, 0, sizeof *tail);
    tail->nk = 1;
    tail->k[0] = k;
    tail->seq[0] = seq;
    CHECK(shard_submit(d, race_keys[k].name, race_keys[k].len, race_single_fn, tail) == 0, "tail");
}

#endif
