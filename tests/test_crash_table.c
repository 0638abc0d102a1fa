/* The crash table (what crashes owe, per key) and the held keymap alone, single-threaded: the order
 * among owed jobs of one key and one epoch. Such a run of jobs, all routed to one worker, becomes
 * owed in submission order, and its pieces may then reach workers in another order (a crash's
 * reroutes, jobs deferred behind a stuck job, jobs following their key at different fences): the
 * order they were made owed must decide, both in the table and in a worker's held jobs. It did not:
 * an owed job was held back only by entries of older epochs, and a worker held same-epoch jobs in
 * arrival order, so player_sessions --workers 2 --players 2 --churn-ms 1 ran blocks of one player's
 * packets out of order. */
#include <criterion/criterion.h>

#include "crash.h"
#include "held.h"

static void fn(shard_worker *w, void *arg)
{
    (void)w;
    (void)arg;
}

#define KEY 42u
#define EPOCH 7u

static struct job job(uintptr_t seq, uint64_t epoch)
{
    return (struct job){ .fn = fn, .arg = (void *)seq, .hash = KEY, .epoch = epoch, .kind = JOB_RUN };
}

/* A crashed worker's leftovers, three jobs of one key and epoch, owed in order. */
static void owe_three(struct crash_table *t, struct crash_record *x, struct job *j)
{
    j[0].next = &j[1];
    j[1].next = &j[2];
    j[2].next = NULL;
    shard__crash_owe_list(t, x, &j[0]);
}

Test(crash_table, owed_jobs_of_one_epoch_run_in_the_order_they_became_owed)
{
    struct crash_table t;
    struct crash_record x;
    shard__crash_table_init(&t);
    shard__crash_record_init(&x);
    struct job j[3] = { job(1, EPOCH), job(2, EPOCH), job(3, EPOCH) };
    owe_three(&t, &x, j);
    cr_assert_not(shard__crash_blocks(&t, &j[0]), "the first owed job may run");
    cr_assert(shard__crash_blocks(&t, &j[1]), "an owed job of the same epoch waits for the one owed before it");
    cr_assert(shard__crash_blocks(&t, &j[2]));
    /* A later job of the key, not owed, waits for all of them; one of the same epoch is not held back
     * by them (none such exists once its run is owed: it was owed with it). */
    struct job later = job(4, EPOCH + 1);
    cr_assert(shard__crash_blocks(&t, &later));
    shard__crash_paid(&t, &j[0]);
    cr_assert_not(shard__crash_blocks(&t, &j[1]));
    cr_assert(shard__crash_blocks(&t, &j[2]));
    shard__crash_paid(&t, &j[1]);
    cr_assert_not(shard__crash_blocks(&t, &j[2]));
    cr_assert(shard__crash_blocks(&t, &later));
    shard__crash_paid(&t, &j[2]);
    cr_assert_not(shard__crash_blocks(&t, &later));
    cr_assert(shard__crash_settled(&t, &x));
    shard__crash_table_destroy(&t);
}

Test(crash_table, a_worker_holds_owed_jobs_in_the_order_they_became_owed_not_as_they_arrive)
{
    struct crash_table t;
    struct crash_record x;
    shard__crash_table_init(&t);
    shard__crash_record_init(&x);
    struct job j[3] = { job(1, EPOCH), job(2, EPOCH), job(3, EPOCH) };
    owe_three(&t, &x, j);
    /* An older job of the key (not owed) is held here already, and a later one is set aside. */
    struct job old = job(0, EPOCH - 1), later = job(4, EPOCH + 1);
    struct held h;
    shard__held_init(&h, NULL);
    shard__held_push_back(&h, &old);
    shard__held_push_back(&h, &later);
    /* The pieces arrive last first, as jobs following their key from different workers can. */
    shard__held_push_prio(&h, &j[2]);
    shard__held_push_prio(&h, &j[0]);
    shard__held_push_prio(&h, &j[1]);
    struct job *order[] = { &old, &j[0], &j[1], &j[2], &later };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        cr_assert(shard__held_first_of_key(&h, order[i]), "job %zu of the key is not first", i);
        shard__held_remove(&h, order[i]);
    }
    cr_assert_not(shard__held_has_key(&h, KEY));
    shard__crash_table_destroy(&t);
}

Test(crash_table, a_deferred_run_keeps_its_place_behind_the_owed_jobs_of_its_epoch)
{
    struct crash_table t;
    struct crash_record x, holder;
    shard__crash_table_init(&t);
    shard__crash_record_init(&x);
    shard__crash_record_init(&holder);
    /* A job of the key is stuck on a crashed worker; jobs of a later epoch, held by a live worker
     * behind it, are deferred there in order when that worker reaches a fence, and arrive later. */
    shard__crash_stick(&t, &x, KEY);
    struct job d[3] = { job(1, EPOCH), job(2, EPOCH), job(3, EPOCH) };
    struct held h;
    shard__held_init(&h, NULL);
    for (int i = 0; i < 3; i++)
        shard__held_push_back(&h, &d[i]);
    uint64_t made;
    shard__crash_defer_held(&t, &holder, h.head, EPOCH + 1, &made);
    cr_assert_eq(made, shard__crash_made(&t), "the count as of the look, its own entries included");
    for (int i = 0; i < 3; i++)
        cr_assert(d[i].owed_to == &holder, "job %d is behind the stuck job", i);
    for (int i = 0; i < 3; i++)
        cr_assert(shard__crash_blocks(&t, &d[i]));
    cr_assert(shard__held_first_of_key(&h, &d[0]), "deferring keeps the held order");
    shard__crash_paid(&t, &x.stuck);
    cr_assert_not(shard__crash_blocks(&t, &d[0]));
    cr_assert(shard__crash_blocks(&t, &d[1]));
    cr_assert(shard__crash_blocks(&t, &d[2]));
    /* They leave (following their key) and come back in another order. */
    for (int i = 0; i < 3; i++)
        shard__held_remove(&h, &d[i]);
    shard__held_push_prio(&h, &d[1]);
    shard__held_push_prio(&h, &d[2]);
    shard__held_push_prio(&h, &d[0]);
    for (int i = 0; i < 3; i++) {
        cr_assert(shard__held_first_of_key(&h, &d[i]), "job %d of the key is not first", i);
        cr_assert_not(shard__crash_blocks(&t, &d[i]));
        shard__held_remove(&h, &d[i]);
        shard__crash_paid(&t, &d[i]);
    }
    cr_assert(shard__crash_settled(&t, &holder));
    shard__crash_table_destroy(&t);
}

/* A fence's walk defers a key's held jobs of one epoch all at once, in held order, or none: decided
 * job by job, a crash adding an entry for the key between two of them made the later one owed and so
 * sorted ahead of the earlier, which the next walk deferred behind it: each then waited for the other
 * for ever (a review's reproducer, with a delay injected into the walk). Only jobs of older epochs
 * than the fence, of keys with an older entry, not owed already, are deferred. */
Test(crash_table, a_fence_defers_a_keys_held_run_whole_and_in_order)
{
    struct crash_table t;
    struct crash_record x, holder;
    shard__crash_table_init(&t);
    shard__crash_record_init(&x);
    shard__crash_record_init(&holder);
    shard__crash_stick(&t, &x, KEY);
    struct job k1 = job(1, EPOCH), other = job(2, EPOCH), k2 = job(3, EPOCH), k_new = job(4, EPOCH + 5);
    other.hash = KEY + 1;
    struct held h;
    shard__held_init(&h, NULL);
    shard__held_push_back(&h, &k1);
    shard__held_push_back(&h, &other);
    shard__held_push_back(&h, &k2);
    shard__held_push_back(&h, &k_new);
    uint64_t made;
    shard__crash_defer_held(&t, &holder, h.head, EPOCH + 1, &made);
    cr_assert_eq(made, shard__crash_made(&t), "the count as of the look, its own entries included");
    cr_assert(k1.owed_to == &holder && k2.owed_to == &holder, "the key's run behind the stuck job");
    cr_assert(k1.owe_seq < k2.owe_seq, "in held order");
    cr_assert_null(other.owed_to, "a key with no entry is not deferred");
    cr_assert_null(k_new.owed_to, "a job of the fence's epoch or later is not deferred");
    cr_assert(shard__held_first_of_key(&h, &k1), "the held order stands");
    shard__crash_paid(&t, &x.stuck);
    cr_assert_not(shard__crash_blocks(&t, &k1));
    cr_assert(shard__crash_blocks(&t, &k2));
    shard__crash_paid(&t, &k1);
    shard__crash_paid(&t, &k2);
    cr_assert(shard__crash_settled(&t, &holder));
    shard__crash_table_destroy(&t);
}

/* What a fence waits for: the oldest epoch of a held job that no crash owes. It is kept as jobs come
 * and go (a fence used to walk the whole list for it, twice a look, which under crash churn was most
 * of the workers' time), so it is checked here against a walk after every step of a random run of
 * pushes, removals, deferrals and take-alls; and a deferral, no longer redone on every look, is
 * checked to be skipped only where it would defer nothing. */
static uint64_t walked_min(const struct held *h)
{
    uint64_t min = UINT64_MAX;
    for (const struct job *j = h->head; j; j = j->next)
        if (j->kind == JOB_RUN && !j->owed_to && j->epoch < min)
            min = j->epoch;
    return min;
}

Test(crash_table, the_oldest_unowed_epoch_held_is_kept_through_every_change)
{
    enum { N = 64, STEPS = 20000 };
    struct crash_table t;
    struct crash_record x, holder;
    shard__crash_table_init(&t);
    shard__crash_record_init(&x);
    shard__crash_record_init(&holder);
    struct job j[N];
    bool in[N] = { false };
    struct held h;
    shard__held_init(&h, NULL);
    unsigned seed = 12345, deferred = 0, skipped = 0, recomputed_after_remove = 0;
    for (int step = 0; step < STEPS; step++) {
        seed = seed * 1103515245u + 12345u;
        unsigned r = seed >> 16, i = r % N;
        if (!in[i] && r % 7 != 0) {
            /* Epochs from a narrow window, so that several jobs share the oldest; a key from 8, so
             * that deferrals find entries; a few owed already (rerouted), pushed to the front. */
            j[i] = job(i, 10 + (r >> 6) % 5);
            j[i].hash = KEY + (r >> 9) % 8;
            if ((r >> 12) % 5 == 0) {
                shard__crash_owe_list(&t, &x, &j[i]);
                shard__held_push_prio(&h, &j[i]);
            } else {
                shard__held_push_back(&h, &j[i]);
            }
            in[i] = true;
        } else if (in[i] && r % 7 != 0) {
            bool was_min = !j[i].owed_to && j[i].epoch == walked_min(&h);
            shard__held_remove(&h, &j[i]);
            if (j[i].owed_to)
                shard__crash_paid(&t, &j[i]);
            in[i] = false;
            recomputed_after_remove += was_min && walked_min(&h) != j[i].epoch;
        } else if (r % 14 == 0) {
            /* Now and then a stuck job on one key; and a fence's deferral of what waits behind it, as
             * walk.c does it: skipped when shard__held_defer_due says nothing can have changed, and
             * then there must be nothing to defer. */
            if (!x.stuck.in_table && (r >> 4) % 3 == 0)
                shard__crash_stick(&t, &x, KEY + (r >> 5) % 8);
            uint64_t epoch = 10 + (r >> 8) % 6;
            if (shard__held_defer_due(&h, shard__crash_made(&t), epoch)) {
                size_t n = shard__crash_defer_held(&t, &holder, h.head, epoch, &h.deferred_made);
                deferred += (unsigned)n;
                if (n)
                    shard__held_owed_changed(&h);
            } else {
                skipped++;
                for (struct job *k = h.head; k; k = k->next)
                    cr_assert_not(k->kind == JOB_RUN && !k->owed_to && k->epoch < epoch && shard__crash_blocks(&t, k),
                                  "step %d: a deferral was skipped where job %zu waits behind an entry", step,
                                  (size_t)(k - j));
            }
        } else {
            /* Everything leaves at once (a crash takes a worker's held jobs); the stuck job returns. */
            for (struct job *k = shard__held_take_all(&h), *next; k; k = next) {
                next = k->next;
                if (k->owed_to)
                    shard__crash_paid(&t, k);
                in[k - j] = false;
            }
            if (x.stuck.in_table)
                shard__crash_paid(&t, &x.stuck);
        }
        cr_assert_eq(shard__held_min_unowed_epoch(&h), walked_min(&h), "step %d", step);
    }
    cr_assert_gt(deferred, 100, "deferrals made jobs owed (%u)", deferred);
    cr_assert_gt(skipped, 100, "deferrals skipped (%u)", skipped);
    cr_assert_gt(recomputed_after_remove, 100, "removals of the last oldest job (%u)", recomputed_after_remove);
    shard__crash_table_destroy(&t);
}

/* A table of many claims grows its keymap (at most 2 keys a bucket) instead of walking chains of
 * hundreds of keys at each claim, look and payment: 633 jobs of 1,024 keys behind a stuck key took
 * 11.6 s to drain with 4,096 buckets (a hostile test, 2026-12-06). Every claim still holds its key
 * back after the growth, none holds another's, and the table empties. */
Test(crash_table, many_claims_grow_the_keymap_and_each_still_holds_its_key)
{
    enum { N = 100000 };
    static struct crash_table t;
    static struct job claims[N];
    struct crash_record owner;
    shard__crash_table_init(&t);
    shard__crash_record_init(&owner);
    for (size_t i = 0; i < N; i++) {
        claims[i].hash = 0x9e3779b97f4a7c15u * (i + 1);
        shard__crash_claim(&t, &owner, &claims[i]);
    }
    cr_assert_geq(t.owed.mask + 1, N / 2, "%zu buckets for %d claims: more than 2 keys a bucket", t.owed.mask + 1, N);
    for (size_t i = 0; i < N; i += 7) {
        struct job later = job(i, EPOCH);
        later.hash = claims[i].hash;
        cr_assert(shard__crash_blocks(&t, &later), "claim %zu no longer holds its key", i);
        later.hash = claims[i].hash + 1; /* no claim of its own */
        cr_assert_not(shard__crash_blocks(&t, &later), "a key next to claim %zu is held", i);
    }
    for (size_t i = 0; i < N; i++) {
        shard__crash_paid(&t, &claims[i]);
        if (i + 1 < N)
            cr_assert_geq(t.owed.mask + 1, N / 2, "the keymap shrank with %zu claims left", N - 1 - i);
    }
    cr_assert(shard__crash_settled(&t, &owner));
    cr_assert_not(shard__crash_any(&t));
    cr_assert_eq(t.owed.mask + 1, KEYMAP_BUCKETS, "the emptied table kept its %zu buckets", t.owed.mask + 1);
    shard__crash_table_destroy(&t);
}

/* Growth counts keys, not entries: a crash's 20,000 rerouted jobs of one key leave the keymap as it
 * was (sized by entries, one busy key grew it, and a stripe over its share of entries took every
 * lock for nothing at each later entry: the review's finding); 20,000 of as many keys grow it, through
 * the crash's list as through claims, and keep their order. */
Test(crash_table, growth_counts_keys_not_entries)
{
    enum { N = 20000 };
    static struct crash_table t;
    static struct job one[N], many[N];
    struct crash_record x, y;
    shard__crash_table_init(&t);
    shard__crash_record_init(&x);
    shard__crash_record_init(&y);
    for (size_t i = 0; i < N; i++) {
        one[i] = job(i, EPOCH);
        one[i].next = i + 1 < N ? &one[i + 1] : NULL;
    }
    shard__crash_owe_list(&t, &x, &one[0]);
    cr_assert_eq(t.owed.mask + 1, KEYMAP_BUCKETS, "one key's %d entries grew the keymap", N);
    for (size_t i = 0; i < N; i++) {
        many[i] = job(i, EPOCH);
        many[i].hash = 0x9e3779b97f4a7c15u * (i + 1);
        many[i].next = i + 1 < N ? &many[i + 1] : NULL;
    }
    shard__crash_owe_list(&t, &y, &many[0]);
    cr_assert_geq(t.owed.mask + 1, N / 2, "%zu buckets for %d keys", t.owed.mask + 1, N + 1);
    for (size_t i = 0; i < N; i++) {
        cr_assert_not(shard__crash_blocks(&t, &many[i]), "owed job %zu is its key's first", i);
        cr_assert_eq(shard__crash_blocks(&t, &one[i]), i > 0, "owed job %zu of one key out of order", i);
    }
    for (size_t i = 0; i < N; i++) {
        shard__crash_paid(&t, &one[i]);
        shard__crash_paid(&t, &many[i]);
    }
    cr_assert(shard__crash_settled(&t, &x) && shard__crash_settled(&t, &y));
    cr_assert_eq(t.owed.mask + 1, KEYMAP_BUCKETS, "the emptied table kept its %zu buckets", t.owed.mask + 1);
    /* Grown again after the shrink: the next burst finds the buckets it needs. */
    shard__crash_owe_list(&t, &y, &many[0]);
    cr_assert_geq(t.owed.mask + 1, N / 2, "%zu buckets for %d keys after a shrink", t.owed.mask + 1, N);
    for (size_t i = 0; i < N; i++)
        cr_assert_not(shard__crash_blocks(&t, &many[i]), "owed job %zu is its key's first", i);
    for (size_t i = 0; i < N; i++)
        shard__crash_paid(&t, &many[i]);
    cr_assert_eq(t.owed.mask + 1, KEYMAP_BUCKETS, "emptied twice, %zu buckets", t.owed.mask + 1);
    shard__crash_table_destroy(&t);
}
