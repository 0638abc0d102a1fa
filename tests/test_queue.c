/* The worker queue's parts alone, single-threaded: the record pool (capacity, count, reuse), the MPSC
 * FIFO (order, empty, stub recycling) and the held list (per-key FIFO in epoch order). */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "held.h"
#include "queue.h"

Test(pool, holds_exactly_its_capacity)
{
    struct job_pool p;
    cr_assert_eq(pool_init(&p, 5), 0);
    cr_assert_eq(pool_free_count(&p), 5);
    struct job *got[5];
    for (int i = 0; i < 5; i++) {
        got[i] = pool_pop_mp(&p);
        cr_assert_not_null(got[i]);
        for (int k = 0; k < i; k++)
            cr_assert_neq(got[i], got[k], "a record handed out twice");
    }
    cr_assert_null(pool_pop_mp(&p), "a full pool must say so");
    cr_assert_eq(pool_free_count(&p), 0);
    pool_push_chain_mp(&p, got[2], got[2], 1);
    cr_assert_eq(pool_free_count(&p), 1);
    cr_assert_eq(pool_pop_mp(&p), got[2]);
    /* A chain of three returns at once. */
    pool_link(&p, got[0], got[1]);
    pool_link(&p, got[1], got[4]);
    pool_push_chain_mp(&p, got[0], got[4], 3);
    cr_assert_eq(pool_free_count(&p), 3);
    int n = 0;
    while (pool_pop_mp(&p))
        n++;
    cr_assert_eq(n, 3);
    pool_destroy(&p);
}

Test(mpsc, fifo_order_through_the_stub)
{
    struct queue q;
    queue_init(&q);
    cr_assert_not(queue_nonempty_sc(&q));
    cr_assert_null(queue_pop_sc(&q));
    struct job jobs[10] = { 0 };
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 10; i++) {
            jobs[i].epoch = (uint64_t)(round * 10 + i);
            queue_push_mp(&q, &jobs[i]);
        }
        cr_assert(queue_nonempty_sc(&q));
        for (int i = 0; i < 10; i++) {
            struct job *j = queue_pop_sc(&q);
            cr_assert_eq(j, &jobs[i], "round %d: item %d out of order", round, i);
        }
        cr_assert_null(queue_pop_sc(&q));
        cr_assert_not(queue_nonempty_sc(&q));
    }
    /* Interleaved pushes and pops. */
    queue_push_mp(&q, &jobs[0]);
    queue_push_mp(&q, &jobs[1]);
    cr_assert_eq(queue_pop_sc(&q), &jobs[0]);
    queue_push_mp(&q, &jobs[2]);
    cr_assert_eq(queue_pop_sc(&q), &jobs[1]);
    cr_assert_eq(queue_pop_sc(&q), &jobs[2]);
    cr_assert_null(queue_pop_sc(&q));
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
    held_init(&h);
    struct job a1 = mk(1, 5), a2 = mk(1, 5), b1 = mk(2, 3), a0 = mk(1, 4), a3 = mk(1, 7);
    held_push_back(&h, &a1);
    held_push_back(&h, &b1);
    held_push_back(&h, &a2);
    cr_assert(held_has_key(&h, 1));
    cr_assert(held_has_key(&h, 2));
    cr_assert_not(held_has_key(&h, 3));
    cr_assert(held_first_of_key(&h, &a1));
    cr_assert(held_first_of_key(&h, &b1));
    cr_assert_not(held_first_of_key(&h, &a2));
    /* An older epoch of key 1 goes first; a newer one last; equal epochs keep arrival order. */
    held_push_prio(&h, &a0);
    held_push_back(&h, &a3);
    cr_assert(held_first_of_key(&h, &a0));
    cr_assert_eq(h.head, &a0, "rerouted jobs lead the order list");
    held_remove(&h, &a0);
    cr_assert(held_first_of_key(&h, &a1));
    held_remove(&h, &a1);
    cr_assert(held_first_of_key(&h, &a2));
    held_remove(&h, &a2);
    cr_assert(held_first_of_key(&h, &a3));
    held_remove(&h, &a3);
    cr_assert_not(held_has_key(&h, 1));
    cr_assert_eq(h.count, 1);
    held_remove(&h, &b1);
    cr_assert_eq(h.count, 0);
    cr_assert_null(h.head);
}

Test(held, colliding_buckets_and_control_items)
{
    struct held h;
    held_init(&h);
    /* Hashes that share a bucket stay separate keys. */
    struct job x = mk(7, 1), y = mk(7 + KEYMAP_BUCKETS, 1), z = mk(7, 2);
    struct job fence = { 0 };
    fence.kind = JOB_FENCE;
    fence.epoch = 2;
    held_push_back(&h, &x);
    held_push_back(&h, &fence);
    held_push_back(&h, &y);
    held_push_back(&h, &z);
    cr_assert(held_first_of_key(&h, &x));
    cr_assert(held_first_of_key(&h, &y));
    cr_assert_not(held_first_of_key(&h, &z));
    held_remove(&h, &fence); /* control items are in the order list only */
    held_remove(&h, &y);
    cr_assert(held_has_key(&h, 7));
    cr_assert_not(held_has_key(&h, 7 + KEYMAP_BUCKETS));
    struct job *all = held_take_all(&h);
    cr_assert_eq(all, &x);
    cr_assert_eq(all->held_next, &z);
    cr_assert_eq(h.count, 0);
    cr_assert_not(held_has_key(&h, 7));
}

Test(held, removing_from_the_middle_of_a_key)
{
    struct held h;
    held_init(&h);
    struct job j[5];
    for (int i = 0; i < 5; i++) {
        j[i] = mk(9, (uint64_t)i);
        held_push_back(&h, &j[i]);
    }
    held_remove(&h, &j[2]);
    held_remove(&h, &j[4]);
    struct job late = mk(9, 9);
    held_push_back(&h, &late); /* the tail moved back when j[4] left */
    int order[] = { 0, 1, 3 };
    for (int i = 0; i < 3; i++) {
        cr_assert(held_first_of_key(&h, &j[order[i]]), "step %d", i);
        held_remove(&h, &j[order[i]]);
    }
    cr_assert(held_first_of_key(&h, &late));
}
