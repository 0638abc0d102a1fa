/* shard: the round trip as jobs. A request is a job of its key, submitted with shard_submit from the
 * origin's job; the owner runs it and answers with a job of the origin's own key (a key the ring
 * gives to the origin, found at start), whose run sends the slot's next request. Worker i is "wi"
 * with mesh_ws[i] as its user pointer; pin_per_core pins it to the i-th CPU (as the meshes pin
 * theirs), poll_us is the run's. */
#include <shard.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mesh.h"

static shard_dispatcher *disp;
/* Each worker's own key: written by start before the first job, read-only after. */
static char   origin_key[MESH_MAXW][32];
static size_t origin_len[MESH_MAXW];

static void req_job(shard_worker *w, void *arg);

static void die(const char *what, int err)
{
    fprintf(stderr, "bench_mesh: %s: %s\n", what, shard_strerror(err));
    exit(1);
}

static void ans_job(shard_worker *w, void *arg)
{
    struct msg *m = arg;
    if (mesh_answered(shard_worker_user(w), m)) {
        int err = shard_submit(disp, mesh_keys[m->key], mesh_key_len[m->key], req_job, m);
        if (err)
            die("shard_submit (request)", err);
    }
}

static void req_job(shard_worker *w, void *arg)
{
    struct msg *m = arg;
    uint32_t o = mesh_serve(shard_worker_user(w), m);
    int err = shard_submit(disp, origin_key[o], origin_len[o], ans_job, m);
    if (err)
        die("shard_submit (answer)", err);
}

/* A job of worker i's own key: sends its depth requests. */
static void start_job(shard_worker *w, void *arg)
{
    (void)arg;
    struct wstate *s = shard_worker_user(w);
    for (int slot = 0; slot < mrun.depth; slot++) {
        struct msg *m = &s->msgs[slot];
        mesh_issue(s, m);
        int err = shard_submit(disp, mesh_keys[m->key], mesh_key_len[m->key], req_job, m);
        if (err)
            die("shard_submit (first requests)", err);
    }
}

static void on_start(shard_worker *w, void *user)
{
    (void)user;
    shard_worker_set_user(w, &mesh_ws[atoi(shard_worker_name(w) + 1)]); /* "w0", "w1", ... */
}

static int worker_index(const char *name)
{
    return name ? atoi(name + 1) : -1;
}

static void sh_start(const struct mesh_run *r)
{
    mrun = *r;
    /* Room for every request and answer that can be in one queue (all in flight at one worker): a
     * full queue would take a worker's submit beyond capacity with a malloc. */
    uint32_t cap = SHARD_DEFAULT_QUEUE_CAPACITY;
    while (cap < (uint32_t)((mrun.workers + 1) * mrun.depth))
        cap *= 2;
    struct shard_config cfg = { .workers = (uint32_t)mrun.workers, .queue_capacity = cap,
                                .pin_per_core = mrun.pin, .poll_us = mrun.poll_us, .on_worker_start = on_start };
    int err = shard_dispatcher_create(&disp, &cfg);
    if (err)
        die("shard_dispatcher_create", err);
    shard_ring *ring;
    if ((err = shard_dispatcher_ring(disp, &ring)))
        die("shard_dispatcher_ring", err);
    for (uint32_t k = 0; k < MESH_KEYS; k++)
        mesh_owner[k] = (uint8_t)worker_index(shard_ring_owner(ring, mesh_keys[k], mesh_key_len[k]));
    for (int i = 0; i < mrun.workers; i++) {
        for (unsigned c = 0;; c++) {
            origin_len[i] = (size_t)snprintf(origin_key[i], sizeof origin_key[i], "origin:%d:%u", i, c);
            if (worker_index(shard_ring_owner(ring, origin_key[i], origin_len[i])) == i)
                break;
        }
    }
    shard_ring_destroy(ring);
    for (int i = 0; i < mrun.workers; i++)
        if ((err = shard_submit(disp, origin_key[i], origin_len[i], start_job, NULL)))
            die("shard_submit (start)", err);
}

static void sh_finish(void)
{
    while (atomic_load_explicit(&mesh_finished, memory_order_relaxed) < mrun.workers)
        nanosleep(&(struct timespec){ .tv_nsec = 200000 }, NULL);
    shard_dispatcher_destroy(disp); /* joins the workers: their counters are main's to read */
    disp = NULL;
}

const struct mesh_ops mesh_shard = {
    .name = "shard",
    .start = sh_start,
    .finish = sh_finish,
};
