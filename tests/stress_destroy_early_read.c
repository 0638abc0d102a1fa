/* Calls that read the dispatcher and then hold no protection against destroy for a while
 * (shard_dispatcher_destroy in dispatcher.h: "a submit already inside shard when destroy is called
 * ... never touches freed memory: a submit reads the dispatcher only inside an RCU read-side section
 * or as a registered waiter"; membership calls likewise through shard__ctl_enter's count).
 *
 * A call is held at a point where it has provably read *d already, and the test looks whether it is
 * protected there (inside a read-side section: rcu_read_ongoing()):
 *   - protected: destroy is started on another thread; once it has reached its first grace period
 *     (shard__rcu_synchronize, wrapped) the call is let go; it must answer 0 or -ESHUTDOWN and
 *     nothing is freed under it (destroy waits for its section).
 *   - not protected: nothing keeps destroy from freeing d: the test reports it, lets destroy run to
 *     its end (it returns: nothing waits for the call), then lets the call go, which reads freed memory
 *     (AddressSanitizer: heap-use-after-free).
 * A call that never reaches its hold point has not read d before a protected point: it runs before
 * destroy, and the case passes.
 *
 * Cases (argv[1]; default multi):
 *   multi           shard_submit_multi of 17 keys by their bytes (default hash): distinct_hashes read
 *                   d->cfg.ring for every key before the call's read-side section (before the fix);
 *                   held in its qsort (--wrap=qsort), after every hash.
 *   try_multi_each  shard_try_submit_multi_each, the same.
 *   multi_hook      shard_submit_multi of 2 keys with a key-hash hook (shard_ring_config.hash): held in
 *                   the hook for the first key (the hook pointer came from d->cfg.ring); the second
 *                   key's hash reads d->cfg.ring again.
 *   place           shard_key_place with a key-hash hook: the key was hashed in a read-side section of
 *                   its own, which ended before shard__ctl_enter's: held between them
 *                   (--wrap=shard__membership_edit), once the hook has run. Since the fix the key is
 *                   hashed under ctl, after the call is counted: it never reaches the hold.
 *   unplace         shard_key_unplace, the same.
 * Deterministic: semaphores only, no sleeps. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <string.h>
#include <urcu.h>

#include "stress_common.h"

enum kase { MULTI, TRY_MULTI_EACH, MULTI_HOOK, PLACE, UNPLACE, CASES };
static const char *const case_name[CASES] = { "multi", "try_multi_each", "multi_hook", "place", "unplace" };
static enum kase kase;

static sem_t at_hold, go, destroy_in_gp;
static _Thread_local int armed;       /* the calling thread */
static _Thread_local int hook_called; /* it ran the hash hook: it read d->cfg.ring */
static _Thread_local int is_destroyer;
static atomic_int held, protected_at_hold, returned_unheld, gp_posted;

/* Holds the calling thread once, if armed, reporting whether it is inside a read-side section. */
static void hold_here(void)
{
    if (!armed || atomic_load(&held))
        return;
    atomic_store(&held, 1);
    atomic_store(&protected_at_hold, rcu_read_ongoing() ? 1 : 0);
    sem_post(&at_hold);
    sem_wait(&go);
}

void __real_qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));
void __wrap_qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    if (kase == MULTI || kase == TRY_MULTI_EACH)
        hold_here();
    __real_qsort(base, n, size, cmp);
}

int __real_shard__membership_edit(shard_dispatcher *disp, void *edit, const void *ctx);
int __wrap_shard__membership_edit(shard_dispatcher *disp, void *edit, const void *ctx)
{
    if ((kase == PLACE || kase == UNPLACE) && hook_called)
        hold_here();
    return __real_shard__membership_edit(disp, edit, ctx);
}

void __real_shard__rcu_synchronize(void);
void __wrap_shard__rcu_synchronize(void)
{
    if (is_destroyer && !atomic_exchange(&gp_posted, 1))
        sem_post(&destroy_in_gp);
    __real_shard__rcu_synchronize();
}

static uint64_t hook(const void *key, size_t len, void *ctx)
{
    (void)ctx;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ ((const unsigned char *)key)[i]) * 1099511628211ull;
    if (armed) {
        hook_called = 1;
        if (kase == MULTI_HOOK)
            hold_here();
    }
    return h;
}

static void nop(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
}

static void step(shard_worker *w, void *arg, size_t key)
{
    (void)w, (void)arg, (void)key;
}

static shard_dispatcher *d;
static atomic_int result;
static char key_bytes[17][8];
static struct shard_key keys[17];

static void *caller(void *arg)
{
    (void)arg;
    armed = 1;
    int r;
    switch (kase) {
    case MULTI: r = shard_submit_multi(d, keys, 17, nop, NULL); break;
    case TRY_MULTI_EACH: r = shard_try_submit_multi_each(d, keys, 17, step, NULL, NULL); break;
    case MULTI_HOOK: r = shard_submit_multi(d, keys, 2, nop, NULL); break;
    case PLACE: r = shard_key_place(d, "k", 1, "w0"); break;
    default: r = shard_key_unplace(d, "k", 1); break;
    }
    armed = 0;
    atomic_store(&result, r);
    if (!atomic_load(&held)) {
        atomic_store(&returned_unheld, 1);
        sem_post(&at_hold);
    }
    return NULL;
}

static void *destroyer(void *arg)
{
    (void)arg;
    is_destroyer = 1;
    shard_dispatcher_destroy(d);
    return NULL;
}

int main(int argc, char **argv)
{
    kase = MULTI;
    if (argc > 1) {
        for (kase = 0; kase < CASES && strcmp(argv[1], case_name[kase]) != 0; kase++)
            ;
        if (kase == CASES) {
            fprintf(stderr, "usage: %s [multi|try_multi_each|multi_hook|place|unplace]\n", argv[0]);
            return 2;
        }
    }
    sem_init(&at_hold, 0, 0);
    sem_init(&go, 0, 0);
    sem_init(&destroy_in_gp, 0, 0);
    for (int i = 0; i < 17; i++) {
        snprintf(key_bytes[i], sizeof key_bytes[i], "key%d", i);
        keys[i] = (struct shard_key){ key_bytes[i], strlen(key_bytes[i]) };
    }
    struct shard_config cfg = { .workers = 2 };
    if (kase == MULTI_HOOK || kase == PLACE || kase == UNPLACE)
        cfg.ring.hash = hook;
    CHECK(shard_dispatcher_create(&d, &cfg) == 0, "create");
    if (kase == UNPLACE)
        CHECK(shard_key_place(d, "k", 1, "w1") == 0, "place k before unplacing it");
    pthread_t ct, dt;
    pthread_create(&ct, NULL, caller, NULL);
    sem_wait(&at_hold);
    if (atomic_load(&returned_unheld)) {
        /* It never read d before a protected point: it ran before destroy. */
        pthread_join(ct, NULL);
        printf("%s: not held (no read of the dispatcher before its protection); returned %s\n",
               case_name[kase], shard_strerror(atomic_load(&result)));
        shard_dispatcher_destroy(d);
    } else if (atomic_load(&protected_at_hold)) {
        pthread_create(&dt, NULL, destroyer, NULL);
        sem_wait(&destroy_in_gp); /* shutdown is set; destroy's grace period waits for the call */
        sem_post(&go);
        pthread_join(ct, NULL);
        pthread_join(dt, NULL);
        int r = atomic_load(&result);
        CHECK(r == 0 || r == -ESHUTDOWN || (kase == TRY_MULTI_EACH && r == -EAGAIN) ||
                  (kase == UNPLACE && r == -ENOENT),
              "%s racing destroy: %s", case_name[kase], shard_strerror(r));
        printf("%s: held inside a read-side section; destroy waited; returned %s\n", case_name[kase],
               shard_strerror(r));
    } else {
        CHECK(false, "%s: the call read the dispatcher, then holds no read-side section, no waiter "
                     "registration and no ctl count: destroy frees the dispatcher under it",
              case_name[kase]);
        shard_dispatcher_destroy(d); /* returns: nothing waits for the held call */
        printf("%s: destroy returned while the call was inside shard, having read the dispatcher; "
               "letting the call go (AddressSanitizer: heap-use-after-free)\n",
               case_name[kase]);
        fflush(stdout);
        sem_post(&go);
        pthread_join(ct, NULL);
        printf("%s: the call returned %s after destroy\n", case_name[kase], shard_strerror(atomic_load(&result)));
    }
    return stress_result("stress_destroy_early_read");
}
