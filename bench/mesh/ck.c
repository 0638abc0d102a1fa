/* ck_mesh: the mesh of spsc.c with Concurrency Kit's ck_ring for each ordered pair (libck-dev; built
 * only with it, see bench/CMakeLists.txt), as a ck user writes it: ck_ring_enqueue_spsc a send and
 * ck_ring_dequeue_spsc a receive, each publishing its own tail or head (ck has neither a batch
 * enqueue nor a batch dequeue). The same busy polling, routing and entries as spsc.c; a ring of
 * MESH_CAP slots holds MESH_CAP - 1, still above 2 * depth, so a full ring fails the run. */
#include <ck_ring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urcu/arch.h> /* caa_cpu_relax */

#include "mesh.h"

struct ckr {
    _Alignas(64) ck_ring_t ring;
    ck_ring_buffer_t buf[MESH_CAP];
};
static struct ckr *rings; /* rings[from * workers + to] */
static pthread_t threads[MESH_MAXW];

static inline void push(int me, uint32_t d, uintptr_t e)
{
    struct ckr *r = &rings[me * mrun.workers + (int)d];
    if (!ck_ring_enqueue_spsc(&r->ring, r->buf, (void *)e)) {
        fprintf(stderr, "bench_mesh: ck_mesh: ring %d -> %u full (more than 2 x depth in it)\n", me, d);
        exit(1);
    }
}

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    mesh_pin_self(me);
    struct wstate *s = &mesh_ws[me];
    for (int slot = 0; slot < mrun.depth; slot++) {
        mesh_issue(s, &s->msgs[slot]);
        push(me, mesh_route(s->msgs[slot].key), (uintptr_t)&s->msgs[slot]);
    }
    for (;;) {
        bool any = false;
        for (int f = 0; f < mrun.workers; f++) {
            struct ckr *r = &rings[f * mrun.workers + me];
            void *v;
            while (ck_ring_dequeue_spsc(&r->ring, r->buf, &v)) {
                uintptr_t e = (uintptr_t)v;
                struct msg *m = (struct msg *)(e & ~(uintptr_t)1);
                any = true;
                if (e & 1) {
                    if (mesh_answered(s, m))
                        push(me, mesh_route(m->key), (uintptr_t)m);
                } else {
                    push(me, mesh_serve(s, m), (uintptr_t)m | 1);
                }
            }
        }
        if (!any) {
            if (atomic_load_explicit(&mesh_finished, memory_order_relaxed) == mrun.workers)
                return NULL;
            caa_cpu_relax();
        }
    }
}

static void ck_start(const struct mesh_run *r)
{
    mrun = *r;
    size_t n = (size_t)mrun.workers * (size_t)mrun.workers;
    if (!(rings = aligned_alloc(64, n * sizeof *rings)))
        abort();
    memset(rings, 0, n * sizeof *rings);
    for (size_t i = 0; i < n; i++)
        ck_ring_init(&rings[i].ring, MESH_CAP);
    for (uint32_t k = 0; k < MESH_KEYS; k++)
        mesh_owner[k] = (uint8_t)mesh_route(k);
    for (int i = 0; i < mrun.workers; i++)
        threads[i] = mesh_spawn(worker, (void *)(intptr_t)i);
}

static void ck_finish(void)
{
    for (int i = 0; i < mrun.workers; i++)
        pthread_join(threads[i], NULL);
    free(rings);
    rings = NULL;
}

const struct mesh_ops mesh_ck = {
    .name = "ck_mesh",
    .start = ck_start,
    .finish = ck_finish,
};
