/* spsc_mesh: the hand-rolled shard-per-core mesh, as Seastar's smp queues are: one SPSC ring per
 * ordered pair of workers (from, to), self -> self included, each worker a thread that busy-polls
 * the N rings it consumes. A pass over them drains each ring up to the tail it read, publishing the
 * ring's head once per drained batch; what the pass sends is written into the destinations' rings
 * at once but their tails are published once per destination, at the end of the pass (the
 * producer's batch). Requests go to XXH3(key) % N, answers to the origin's index; an entry is the
 * msg pointer, with bit 0 set for an answer. Never full: ring (from, to) holds at most from's depth
 * requests and to's depth answers (MESH_CAP >= 2 * depth), so a full ring is a bug and fails the run.
 *
 * The two synchronising edges of a ring:
 *   T: the producer's release store of tail, after it wrote the slots below it; the consumer's
 *      acquire load of tail, before it reads them (and the msgs they point to).
 *   H: the consumer's release store of head, after it read the slots below it; the producer's acquire
 *      load of head, before it overwrites them. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urcu/arch.h> /* caa_cpu_relax */

#include "mesh.h"

struct ring {
    _Alignas(64) _Atomic uint32_t tail; /* written by the producer (T) */
    _Alignas(64) _Atomic uint32_t head; /* written by the consumer (H) */
    _Alignas(64) uintptr_t slot[MESH_CAP];
};
static struct ring *rings; /* rings[from * workers + to] */
static pthread_t threads[MESH_MAXW];

/* A worker's private ends of its rings: on its own stack. */
struct ends {
    uint32_t tx_tail[MESH_MAXW]; /* next slot to write in (me, d) */
    uint32_t tx_head[MESH_MAXW]; /* head of (me, d) last read: the room known */
    uint32_t rx_head[MESH_MAXW]; /* next slot to read in (f, me) */
    uint64_t dirty;              /* destinations written and not yet published */
};

static void ring_full(int from, uint32_t to)
{
    fprintf(stderr, "bench_mesh: spsc_mesh: ring %d -> %u full (more than 2 x depth in it)\n", from, to);
    exit(1);
}

static inline void push(struct ends *x, int me, uint32_t d, uintptr_t e)
{
    struct ring *r = &rings[me * mrun.workers + (int)d];
    uint32_t tail = x->tx_tail[d];
    if (tail - x->tx_head[d] >= MESH_CAP) {
        x->tx_head[d] = atomic_load_explicit(&r->head, memory_order_acquire); /* H */
        if (tail - x->tx_head[d] >= MESH_CAP)
            ring_full(me, d);
    }
    r->slot[tail & (MESH_CAP - 1)] = e;
    x->tx_tail[d] = tail + 1;
    x->dirty |= UINT64_C(1) << d;
}

static inline void publish(struct ends *x, int me)
{
    for (uint64_t m = x->dirty; m; m &= m - 1) {
        int d = __builtin_ctzll(m);
        atomic_store_explicit(&rings[me * mrun.workers + d].tail, x->tx_tail[d], memory_order_release); /* T */
    }
    x->dirty = 0;
}

static inline void handle(struct ends *x, int me, struct wstate *s, uintptr_t e)
{
    struct msg *m = (struct msg *)(e & ~(uintptr_t)1);
    if (e & 1) {
        if (mesh_answered(s, m))
            push(x, me, mesh_route(m->key), (uintptr_t)m);
    } else {
        push(x, me, mesh_serve(s, m), (uintptr_t)m | 1);
    }
}

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    mesh_pin_self(me);
    struct wstate *s = &mesh_ws[me];
    struct ends x;
    memset(&x, 0, sizeof x);
    for (int slot = 0; slot < mrun.depth; slot++) {
        mesh_issue(s, &s->msgs[slot]);
        push(&x, me, mesh_route(s->msgs[slot].key), (uintptr_t)&s->msgs[slot]);
    }
    publish(&x, me);
    for (;;) {
        bool any = false;
        for (int f = 0; f < mrun.workers; f++) {
            struct ring *r = &rings[f * mrun.workers + me];
            uint32_t head = x.rx_head[f];
            uint32_t tail = atomic_load_explicit(&r->tail, memory_order_acquire); /* T */
            if (head == tail)
                continue;
            any = true;
            do
                handle(&x, me, s, r->slot[head & (MESH_CAP - 1)]);
            while (++head != tail);
            x.rx_head[f] = head;
            atomic_store_explicit(&r->head, head, memory_order_release); /* H */
        }
        publish(&x, me);
        if (!any) {
            /* Every worker finished: no request and no answer is left in any ring. */
            if (atomic_load_explicit(&mesh_finished, memory_order_relaxed) == mrun.workers)
                return NULL;
            caa_cpu_relax();
        }
    }
}

static void spsc_start(const struct mesh_run *r)
{
    mrun = *r;
    size_t n = (size_t)mrun.workers * (size_t)mrun.workers;
    if (!(rings = aligned_alloc(64, n * sizeof *rings)))
        abort();
    memset(rings, 0, n * sizeof *rings);
    for (uint32_t k = 0; k < MESH_KEYS; k++)
        mesh_owner[k] = (uint8_t)mesh_route(k);
    for (int i = 0; i < mrun.workers; i++)
        threads[i] = mesh_spawn(worker, (void *)(intptr_t)i);
}

static void spsc_finish(void)
{
    for (int i = 0; i < mrun.workers; i++)
        pthread_join(threads[i], NULL);
    free(rings);
    rings = NULL;
}

const struct mesh_ops mesh_spsc = {
    .name = "spsc_mesh",
    .start = spsc_start,
    .finish = spsc_finish,
};
