/* The worker queue's parts alone, single-threaded: the slot ring (order, capacity, wrap-around), the
 * side list (ordered by ring position) and the held list (per-key FIFO in epoch order). */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "held.h"
#include "queue.h"

static void fn_a(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
}

Test(ring_queue, fifo_order_capacity_and_wrap)
{
    struct queue q;
    cr_assert_eq(shard__queue_init(&q, 5), 0);
    cr_assert_eq(shard__queue_capacity(&q), 8, "capacity rounds up to a power of two");
    struct job scratch;
    cr_assert_null(shard__queue_pop_sc(&q, &scratch));
    cr_assert_not(shard__queue_nonempty_sc(&q));
    uint64_t next = 0;
    for (int lap = 0; lap < 5; lap++) {
        shard__queue_publish_head_sc(&q); /* the worker publishes its position before it goes idle */
        for (uint64_t i = 0; i < 8; i++)
            cr_assert(shard__queue_push_mp(&q, fn_a, (void *)(uintptr_t)(lap * 8 + i), i * 3, 7, (uint8_t)(i % 4)),
                      "lap %d push %lu", lap, (unsigned long)i);
        cr_assert_not(shard__queue_push_mp(&q, fn_a, NULL, 0, 0, ORIGIN_USER), "a full ring must refuse");
        cr_assert_not(shard__queue_has_room(&q));
        cr_assert_eq(shard__queue_length(&q), 8);
        for (uint64_t i = 0; i < 8; i++) {
            struct job *j = shard__queue_pop_sc(&q, &scratch);
            cr_assert_eq(j, &scratch);
            cr_assert_eq((uintptr_t)j->arg, next++, "out of order");
            cr_assert_eq(j->hash, i * 3);
            cr_assert_eq(j->epoch, 7);
            cr_assert_eq(j->kind, JOB_RUN);
            cr_assert_eq(j->origin, i % 4, "the job's origin (what a crash reports it as) is lost");
        }
        shard__queue_publish_head_sc(&q);
        cr_assert(shard__queue_has_room(&q));
        cr_assert_eq(shard__queue_length(&q), 0);
        cr_assert_null(shard__queue_pop_sc(&q, &scratch));
    }
    shard__queue_destroy(&q);
}

Test(ring_queue, taken_slots_are_reused_only_once_published)
{
    struct queue q;
    cr_assert_eq(shard__queue_init(&q, 256), 0); /* publishes every 32 pops */
    struct job scratch;
    for (int i = 0; i < 256; i++)
        cr_assert(shard__queue_push_mp(&q, fn_a, NULL, 0, 0, ORIGIN_USER));
    for (int i = 0; i < 31; i++)
        cr_assert_not_null(shard__queue_pop_sc(&q, &scratch));
    cr_assert_not(shard__queue_push_mp(&q, fn_a, NULL, 0, 0, ORIGIN_USER), "slots not yet published were reused");
    cr_assert_not_null(shard__queue_pop_sc(&q, &scratch)); /* the 32nd pop publishes */
    for (int i = 0; i < 32; i++)
        cr_assert(shard__queue_push_mp(&q, fn_a, NULL, 0, 0, ORIGIN_USER), "published slot %d not reusable", i);
    cr_assert_not(shard__queue_push_mp(&q, fn_a, NULL, 0, 0, ORIGIN_USER));
    shard__queue_destroy(&q);
}

Test(ring_queue, side_items_keep_their_place_in_line)
{
    struct queue q;
    cr_assert_eq(shard__queue_init(&q, 8), 0);
    struct job fence = { .kind = JOB_FENCE }, extra = { .kind = JOB_RUN, .arg = (void *)99 };
    struct job scratch;
    shard__queue_push_mp(&q, fn_a, (void *)1, 0, 0, ORIGIN_USER);
    shard__queue_push_mp(&q, fn_a, (void *)2, 0, 0, ORIGIN_USER);
    shard__queue_push_side(&q, &fence); /* after slots 1 and 2 */
    shard__queue_push_mp(&q, fn_a, (void *)3, 0, 0, ORIGIN_USER);
    shard__queue_push_side(&q, &extra); /* after slot 3 */
    cr_assert(shard__queue_nonempty_sc(&q));
    cr_assert_eq(shard__queue_pop_sc(&q, &scratch)->arg, (void *)1);
    cr_assert_eq(shard__queue_pop_sc(&q, &scratch)->arg, (void *)2);
    cr_assert_eq(shard__queue_pop_sc(&q, &scratch), &fence);
    cr_assert_eq(shard__queue_pop_sc(&q, &scratch)->arg, (void *)3);
    cr_assert_eq(shard__queue_pop_sc(&q, &scratch), &extra);
    cr_assert_null(shard__queue_pop_sc(&q, &scratch));
    cr_assert_not(shard__queue_nonempty_sc(&q));
    shard__queue_destroy(&q);
}

/* A job beyond a full ring (a worker's submit, an outbox's delivery) keeps what it stands for: a DROP
 * crash reports a timer's or a multi-key job's by it. */
Test(ring_queue, a_side_record_keeps_the_origin)
{
    struct queue q;
    cr_assert_eq(shard__queue_init(&q, 2), 0);
    struct job scratch;
    cr_assert(shard__queue_push_mp(&q, fn_a, (void *)1, 5, 1, ORIGIN_MULTI_PART));
    cr_assert(shard__queue_push_side_new(&q, NULL, fn_a, (void *)2, 6, 1, ORIGIN_TIMER));
    struct job *j = shard__queue_pop_sc(&q, &scratch);
    cr_assert_eq(j, &scratch);
    cr_assert_eq(j->origin, ORIGIN_MULTI_PART);
    j = shard__queue_pop_sc(&q, &scratch);
    cr_assert_neq(j, &scratch, "the side record itself comes out");
    cr_assert_eq(j->arg, (void *)2);
    cr_assert_eq(j->origin, ORIGIN_TIMER);
    cr_assert_eq(j->kind, JOB_RUN);
    free(j);
    cr_assert_null(shard__queue_pop_sc(&q, &scratch));
    shard__queue_destroy(&q);
}

/* A slot's seq holds the position in its low 56 bits and the job's origin above (queue.h): positions
 * that cross 2^56 still come out in order, each once, with their origins, and a slot that holds an
 * earlier lap's job is not taken for the next position. (A queue starts at position 0, where a slot
 * never written cannot be met at 2^56 - 1; this one starts 6 below it, so that each slot is
 * written before that position comes.) */
Test(ring_queue, positions_across_the_origin_bits)
{
    struct queue q;
    cr_assert_eq(shard__queue_init(&q, 4), 0);
    uint64_t start = (UINT64_C(1) << 56) - 6;
    atomic_store(&q.tail, start);
    atomic_store(&q.head_cache, start);
    q.head = start;
    atomic_store(&q.head_pub, start);
    struct job scratch;
    cr_assert_null(shard__queue_pop_sc(&q, &scratch), "a slot never written was taken");
    for (uint64_t i = 0; i < 12; i++) {
        uint8_t origin = (uint8_t)(ORIGIN_MULTI_WHOLE - i % 5);
        cr_assert(shard__queue_push_mp(&q, fn_a, (void *)(uintptr_t)i, i, 3, origin), "push %lu", (unsigned long)i);
        struct job *j = shard__queue_pop_sc(&q, &scratch);
        cr_assert_not_null(j, "position %lu's job not taken", (unsigned long)(start + i));
        cr_assert_eq((uintptr_t)j->arg, i);
        cr_assert_eq(j->origin, origin, "position %lu: origin %u, not %u", (unsigned long)(start + i), j->origin, origin);
        cr_assert_null(shard__queue_pop_sc(&q, &scratch), "position %lu taken twice, or before it was written",
                       (unsigned long)(start + i + 1));
        shard__queue_publish_head_sc(&q);
    }
    shard__queue_destroy(&q);
}

static struct job mk(uint64_t hash, uint64_t epoch)
{
    struct job j = { 0 };
    j.kind = JOB_RUN;
    j.hash = hash;
    j.epoch = epoch;
    return j;
}

Test(held, per_key_fifo_in_epoch_order)
{
    struct held h;
    shard__held_init(&h, NULL);
    struct job a1 = mk(1, 5), a2 = mk(1, 5), b1 = mk(2, 3), a0 = mk(1, 4), a3 = mk(1, 7);
    shard__held_push_back(&h, &a1);
    shard__held_push_back(&h, &b1);
    shard__held_push_back(&h, &a2);
    cr_assert(shard__held_has_key(&h, 1));
    cr_assert(shard__held_has_key(&h, 2));
    cr_assert_not(shard__held_has_key(&h, 3));
    cr_assert(shard__held_first_of_key(&h, &a1));
    cr_assert(shard__held_first_of_key(&h, &b1));
    cr_assert_not(shard__held_first_of_key(&h, &a2));
    /* An older epoch of key 1 goes first; a newer one last; equal epochs keep arrival order. */
    shard__held_push_prio(&h, &a0);
    shard__held_push_back(&h, &a3);
    cr_assert(shard__held_first_of_key(&h, &a0));
    cr_assert_eq(h.head, &a0, "rerouted jobs lead the order list");
    shard__held_remove(&h, &a0);
    cr_assert(shard__held_first_of_key(&h, &a1));
    shard__held_remove(&h, &a1);
    cr_assert(shard__held_first_of_key(&h, &a2));
    shard__held_remove(&h, &a2);
    cr_assert(shard__held_first_of_key(&h, &a3));
    shard__held_remove(&h, &a3);
    cr_assert_not(shard__held_has_key(&h, 1));
    cr_assert_eq(h.count, 1);
    shard__held_remove(&h, &b1);
    cr_assert_eq(h.count, 0);
    cr_assert_null(h.head);
}

Test(held, colliding_buckets_and_control_items)
{
    struct held h;
    shard__held_init(&h, NULL);
    /* Hashes that share a bucket stay separate keys. */
    struct job x = mk(7, 1), y = mk(7 + KEYMAP_BUCKETS, 1), z = mk(7, 2);
    struct job fence = { 0 };
    fence.kind = JOB_FENCE;
    fence.epoch = 2;
    shard__held_push_back(&h, &x);
    shard__held_push_back(&h, &fence);
    shard__held_push_back(&h, &y);
    shard__held_push_back(&h, &z);
    cr_assert(shard__held_first_of_key(&h, &x));
    cr_assert(shard__held_first_of_key(&h, &y));
    cr_assert_not(shard__held_first_of_key(&h, &z));
    shard__held_remove(&h, &fence); /* control items are in the order list only */
    shard__held_remove(&h, &y);
    cr_assert(shard__held_has_key(&h, 7));
    cr_assert_not(shard__held_has_key(&h, 7 + KEYMAP_BUCKETS));
    struct job *all = shard__held_take_all(&h);
    cr_assert_eq(all, &x);
    cr_assert_eq(all->next, &z);
    cr_assert_eq(h.count, 0);
    cr_assert_not(shard__held_has_key(&h, 7));
}

Test(held, removing_from_the_middle_of_a_key)
{
    struct held h;
    shard__held_init(&h, NULL);
    struct job j[5];
    for (int i = 0; i < 5; i++) {
        j[i] = mk(9, (uint64_t)i);
        shard__held_push_back(&h, &j[i]);
    }
    shard__held_remove(&h, &j[2]);
    shard__held_remove(&h, &j[4]);
    struct job late = mk(9, 9);
    shard__held_push_back(&h, &late); /* the tail moved back when j[4] left */
    int order[] = { 0, 1, 3 };
    for (int i = 0; i < 3; i++) {
        cr_assert(shard__held_first_of_key(&h, &j[order[i]]), "step %d", i);
        shard__held_remove(&h, &j[order[i]]);
    }
    cr_assert(shard__held_first_of_key(&h, &late));
}

/* The keymap against a model: random inserts (epochs out of order, so many go before a key's tail,
 * where the insert starts from the last such one) and removals anywhere; each key's FIFO must stay
 * in epoch order, stable for equal epochs, with its tail right. */
Test(keymap, epoch_order_against_a_model)
{
    enum { NJOBS = 600, NKEYS = 3 };
    static struct job jobs[NJOBS];
    static bool in[NJOBS];
    static long inserted_at[NJOBS];
    struct keymap m;
    shard__keymap_init(&m, KEYMAP_CRASH);
    srand(7);
    long clock = 0;
    for (long it = 0; it < 300000; it++) {
        int i = rand() % NJOBS;
        if (!in[i]) {
            jobs[i].hash = 1 + (uint64_t)(rand() % NKEYS);
            jobs[i].epoch = (uint64_t)(rand() % 6);
            inserted_at[i] = clock++;
            shard__keymap_insert(&m, &jobs[i]);
            in[i] = true;
        } else if (rand() % 3 == 0) {
            shard__keymap_remove(&m, &jobs[i], NULL);
            in[i] = false;
        }
        if (it % 500)
            continue;
        for (uint64_t h = 1; h <= NKEYS; h++) {
            size_t want = 0, got = 0;
            for (int k = 0; k < NJOBS; k++)
                want += in[k] && jobs[k].hash == h;
            const struct job *first = shard__keymap_first(&m, h), *prev = NULL;
            for (const struct job *p = first; p; prev = p, p = p->links[KEYMAP_CRASH].next, got++)
                cr_assert(!prev || prev->epoch < p->epoch ||
                              (prev->epoch == p->epoch && inserted_at[prev - jobs] < inserted_at[p - jobs]),
                          "key %lu out of order at step %ld", (unsigned long)h, it);
            cr_assert_eq(got, want, "key %lu: %zu jobs in the map, %zu in the model", (unsigned long)h, got, want);
            cr_assert(!first || first->links[KEYMAP_CRASH].tail == prev, "key %lu: wrong tail", (unsigned long)h);
        }
    }
}

/* Growing: 40,000 keys of 3 jobs each, inserted out of epoch order, into a map grown as they come (2
 * a bucket, as its owners ask), with removals between: every key found again, each FIFO whole, in
 * order and with its tail, keys sharing a low-bits bucket (the crash table's stripes) told apart;
 * emptied and reset, it is back to its first buckets. */
Test(keymap, grows_and_keeps_every_fifo)
{
    enum { NKEYS = 40000, PER = 3 };
    static struct job jobs[NKEYS * PER];
    struct keymap m;
    shard__keymap_init(&m, KEYMAP_HELD);
    size_t in = 0;
    for (size_t k = 0; k < NKEYS; k++) {
        /* Every eighth key shares its low bits with the one before (same first bucket, another grown). */
        uint64_t hash = k % 8 == 7 ? jobs[(k - 1) * PER].hash + ((uint64_t)1 << 44) : 0x9e3779b97f4a7c15u * (k + 1);
        for (size_t e = 0; e < PER; e++) {
            struct job *j = &jobs[k * PER + e];
            j->hash = hash;
            j->epoch = (e + 2) % PER; /* 2, 0, 1: the later two go before the tail (the hint's path) */
            shard__keymap_insert(&m, j);
            if (++in > 2 * (m.mask + 1))
                shard__keymap_fit(&m, in);
        }
        if (k % 5 == 4) {
            shard__keymap_remove(&m, &jobs[(k - 2) * PER + 1], NULL); /* one from a FIFO's middle */
            in--;
        }
    }
    cr_assert_geq(m.mask + 1, in / 2, "%zu buckets for %zu jobs", m.mask + 1, in);
    for (size_t k = 0; k < NKEYS; k++) {
        const struct job *first = shard__keymap_first(&m, jobs[k * PER].hash), *p = first;
        cr_assert(first && first->hash == jobs[k * PER].hash, "key %zu: not found after growing", k);
        cr_assert_eq(first->links[KEYMAP_HELD].tail, &jobs[k * PER], "key %zu: its tail (epoch 2) lost", k);
        size_t n = 0;
        for (const struct job *prev = NULL; p; prev = p, p = p->links[KEYMAP_HELD].next, n++)
            cr_assert(!prev || prev->epoch < p->epoch, "key %zu out of order", k);
        cr_assert_eq(n, (k % 5 == 2) ? PER - 1 : PER, "key %zu: %zu jobs", k, n);
    }
    for (size_t k = 0; k < NKEYS * PER; k++)
        if (shard__keymap_first(&m, jobs[k].hash))
            for (const struct job *p; (p = shard__keymap_first(&m, jobs[k].hash));)
                shard__keymap_remove(&m, (struct job *)p, NULL);
    shard__keymap_reset(&m);
    cr_assert_eq(m.mask + 1, KEYMAP_BUCKETS);
    cr_assert_eq(m.bucket, m.first);
    cr_assert_null(shard__keymap_first(&m, jobs[0].hash));
}

/* A worker holding many keys' jobs: its keymap grows with them (at most 2 a bucket), each job stays
 * its key's first, and once the last leaves the map is back to its first buckets (not kept at its
 * peak). */
Test(held, many_keys_grow_the_keymap_and_it_shrinks_when_empty)
{
    enum { N = 20000 };
    static struct job j[N];
    struct held h;
    shard__held_init(&h, NULL);
    for (size_t i = 0; i < N; i++) {
        j[i] = (struct job){ .kind = JOB_RUN, .hash = 0x9e3779b97f4a7c15u * (i + 1), .epoch = 1 };
        shard__held_push_back(&h, &j[i]);
    }
    cr_assert_geq(h.keys.mask + 1, N / 2, "%zu buckets for %d keys", h.keys.mask + 1, N);
    for (size_t i = 0; i < N; i++)
        cr_assert(shard__held_first_of_key(&h, &j[i]), "job %zu lost its key", i);
    for (size_t i = 0; i < N; i++)
        shard__held_remove(&h, &j[i]);
    cr_assert_eq(h.keys.bucket, h.keys.first, "an empty held map kept its grown table");
    cr_assert_eq(h.keys.mask + 1, KEYMAP_BUCKETS);
    shard__held_destroy(&h);
}
