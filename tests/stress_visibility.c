/* Memory visibility across handoffs: what a job of key k (or the release hook) wrote on the key's
 * old owner is seen, exactly, by the next job of k on its new owner, with no lock and no atomic in
 * the application's data. ThreadSanitizer is the real judge here: any missing happens-before edge
 * between the two is reported as a data race, whether or not the hardware happened to show the
 * stale value; the CHECKs catch what a normal build can see (a lost, stale or torn state).
 *
 * Producers feed KEYS keys (each key from one producer, with seq 0, 1, 2, ...). Every job of key k
 * checks and rewrites two copies of k's state, both plain memory:
 *   - per-key memory (store[k]): WORDS words that must all agree with its seq;
 *   - worker-local memory: the worker's own kstate of k, which the release hook hands to the new
 *     owner through transit[k], a plain pointer slot (no lock: shard's ordering is the only edge),
 *     stamping it on the way; after a crash the state is lost and rebuilt from store[k].
 * After the churn the main thread reads every store[k] once shard_drain has returned.
 * Meanwhile a control thread changes membership every millisecond or so, in a cycle of eight: add v,
 * add a while v's release hook is held and crash v inside it (REROUTE: the hook finishes, the keys it
 * releases wait for it), add u, remove a, crash u while it runs a job of a gate key g (REROUTE; g's
 * queued jobs wait behind it on g's next owner L), add z taking g from L (those jobs follow g to z),
 * let the stuck job write g's state, remove z. The gate keys are fed by the control thread.
 *
 *   stress_visibility [SECONDS]   the churn above (default 3 s)
 *   stress_visibility stuck       a job of a stateful key still running when its worker is crashed
 *                                 writes the key's state after the crash, and the key's next job
 *                                 runs on the new owner, submitted by a thread with no ordering of
 *                                 its own with the stuck job, and let through by the crash table's
 *                                 lock-free check (TSan saw a race there until crash.c lowered the
 *                                 table's counts with release). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "stress_common.h"

#define KEYS 512         /* fed by the producers */
#define GATE_KEYS 256    /* fed by the control thread: the keys whose job is running at a crash */
#define ALL_KEYS (KEYS + GATE_KEYS)
#define WORDS 6
#define PRODUCERS 2

static shard_dispatcher *disp;

static uint64_t fill(int k, uint64_t seq, int i)
{
    uint64_t z = ((uint64_t)k << 40) ^ (seq << 4) ^ (uint64_t)i;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t key_of(char *buf, int k)
{
    return (size_t)snprintf(buf, 24, "k%d", k);
}

/* A worker's record: its local states, and what the control thread tells it. Kept until the end (the
 * crashed flag is read by later jobs of keys it wrote). */
struct kstate;
struct wlocal {
    char            name[SHARD_NAME_MAX + 1];
    struct kstate  *state[ALL_KEYS]; /* its worker only */
    long            handed_in, rebuilt;
    atomic_bool     crashed;     /* set by the control thread before it crashes the worker */
    atomic_bool     hold_hook, hook_held; /* park the next release hook (control thread) */
    atomic_ulong    hook_epoch;  /* epoch of its last release hook, for the control thread */
    struct wlocal  *next;
};

/* Worker-local state of one key: plain words, moved by the release hook. */
struct kstate {
    int      key;
    uint64_t seq;                /* jobs of the key run so far */
    uint64_t word[WORDS];        /* fill(key, seq, i) */
    uint64_t hooks, hook_seq, hook_word; /* written by the hook that handed it over last */
};

/* Per-key memory, plain: written by every job of the key, wherever it runs. */
static struct {
    uint64_t       seq;
    uint64_t       word[WORDS];
    struct wlocal *writer;       /* the worker of the last job */
} store[ALL_KEYS];

static struct kstate *transit[ALL_KEYS]; /* plain: hook of the old owner -> a job on the new owner */

static pthread_mutex_t locals_lock = PTHREAD_MUTEX_INITIALIZER;
static struct wlocal *locals;
static atomic_long jobs_run, handoffs, hook_crashes, job_crashes, rebuilds;
static atomic_bool destroying;

static struct wlocal *local_named(const char *name)
{
    pthread_mutex_lock(&locals_lock);
    struct wlocal *l = locals;
    while (l && strcmp(l->name, name) != 0)
        l = l->next;
    pthread_mutex_unlock(&locals_lock);
    return l;
}

static void on_start(shard_worker *w, void *user)
{
    (void)user;
    struct wlocal *l = calloc(1, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", shard_worker_name(w));
    shard_worker_set_user(w, l);
    pthread_mutex_lock(&locals_lock);
    l->next = locals;
    locals = l;
    pthread_mutex_unlock(&locals_lock);
}

static void on_stop(shard_worker *w, void *user)
{
    (void)user;
    struct wlocal *l = shard_worker_user(w);
    long held = 0;
    for (int k = 0; k < ALL_KEYS; k++) {
        held += l->state[k] != NULL;
        free(l->state[k]); /* a crashed worker's states are lost with it */
        l->state[k] = NULL;
    }
    /* A removed worker's last release hook handed every key it had on. */
    CHECK(held == 0 || shard_worker_crashed(w) || atomic_load(&destroying), "removed worker %s stopped holding %ld keys",
          l->name, held);
}

static void check_words(const char *what, int k, uint64_t seq, const uint64_t *word)
{
    for (int i = 0; i < WORDS; i++)
        CHECK(word[i] == fill(k, seq, i), "key %d: %s word %d does not match seq %llu", k, what, i,
              (unsigned long long)seq);
}

static void on_release(shard_worker *w, const struct shard_handoff *h, void *user)
{
    (void)user;
    struct wlocal *l = shard_worker_user(w);
    if (atomic_load(&l->hold_hook)) {
        /* The control thread crashes this worker now; everything below happens after the crash. */
        atomic_store(&l->hook_held, true);
        while (atomic_load(&l->hold_hook))
            sched_yield();
    }
    char key[24];
    for (int k = 0; k < ALL_KEYS; k++) {
        struct kstate *s = l->state[k];
        if (!s || !shard_handoff_moves(h, key, key_of(key, k)))
            continue;
        check_words("local state at release", k, s->seq, s->word);
        s->hooks++;
        s->hook_seq = s->seq;
        s->hook_word = fill(k, s->seq, WORDS) ^ s->hooks;
        CHECK(transit[k] == NULL, "key %d: a second state in transit", k);
        transit[k] = s;
        l->state[k] = NULL;
        atomic_fetch_add_explicit(&handoffs, 1, memory_order_relaxed);
    }
    atomic_store(&l->hook_epoch, h->epoch);
}

static void job(shard_worker *w, void *arg)
{
    uintptr_t v = (uintptr_t)arg;
    int k = (int)(v & 0xffff);
    uint64_t seq = (uint64_t)(v >> 16);
    struct wlocal *l = shard_worker_user(w);

    /* Per-key memory: the previous job's writes, exactly, wherever it ran. */
    CHECK(store[k].seq == seq, "key %d: store says %llu jobs ran, this is job %llu", k,
          (unsigned long long)store[k].seq, (unsigned long long)seq);
    check_words("store", k, store[k].seq, store[k].word);
    struct wlocal *prev = store[k].writer;

    /* Worker-local memory: here already, handed over through transit, or lost with a crashed worker. */
    struct kstate *s = l->state[k];
    if (!s && (s = transit[k]) != NULL) {
        transit[k] = NULL;
        CHECK(s->hook_seq == s->seq && s->hook_word == (fill(k, s->seq, WORDS) ^ s->hooks),
              "key %d: the release hook's stamp is not seen (seq %llu, hook saw %llu)", k,
              (unsigned long long)s->seq, (unsigned long long)s->hook_seq);
        l->handed_in++;
    } else if (!s) {
        CHECK(seq == 0 || (prev && atomic_load(&prev->crashed)),
              "key %d: job %llu on %s finds no state, and its last holder %s did not crash", k,
              (unsigned long long)seq, l->name, prev ? prev->name : "-");
        s = calloc(1, sizeof *s);
        s->key = k;
        s->seq = store[k].seq; /* rebuilt from the per-key copy */
        memcpy(s->word, store[k].word, sizeof s->word);
        if (seq > 0) {
            l->rebuilt++;
            atomic_fetch_add_explicit(&rebuilds, 1, memory_order_relaxed);
        }
    }
    l->state[k] = s;
    CHECK(s->key == k && s->seq == seq, "key %d: local state says %llu jobs ran, this is job %llu", k,
          (unsigned long long)s->seq, (unsigned long long)seq);
    check_words("local state", k, s->seq, s->word);

    s->seq = seq + 1;
    store[k].seq = seq + 1;
    for (int i = 0; i < WORDS; i++)
        s->word[i] = store[k].word[i] = fill(k, seq + 1, i);
    store[k].writer = l;
    atomic_fetch_add_explicit(&jobs_run, 1, memory_order_relaxed);
}

static atomic_bool stop;
static atomic_int changes_made;
static uint64_t submitted[ALL_KEYS]; /* per key, by its one producer; read by main after the join */

static void *producer(void *arg)
{
    int p = (int)(long)arg;
    char key[24];
    for (uint64_t round = 0; !atomic_load(&stop); round++) {
        /* The first rounds wait for a membership change each, so that changes overlap the jobs
         * however fast the producers run. */
        while (round < 6 && atomic_load(&changes_made) < (int)round && !atomic_load(&stop))
            sched_yield();
        for (int k = p; k < KEYS; k += PRODUCERS) {
            uintptr_t v = (uintptr_t)(submitted[k] << 16 | (uint64_t)k);
            int err = shard_submit(disp, key, key_of(key, k), job, (void *)v);
            CHECK(err == 0, "submit: %s", shard_strerror(err));
            submitted[k]++;
        }
    }
    return NULL;
}

/* A job of a gate key that parks its worker until the control thread has crashed it, and then does
 * what every job does: its writes to the key's state come after the crash, from the crashed worker.
 * Gates are numbered by the control thread's cycle and never close again: a crashed worker's thread
 * may be slow to see its gate open, and the next cycle may pick the same key (whose gate job then
 * waits for this one). */
static atomic_uint gate_entered, gate_opened; /* the latest cycle whose gate job entered / opened */
static unsigned gate_cycle[ALL_KEYS];         /* control thread, before it submits a gate job */

static void gate_job(shard_worker *w, void *arg)
{
    unsigned cycle = gate_cycle[(uintptr_t)arg & 0xffff];
    atomic_store(&gate_entered, cycle);
    while (atomic_load(&gate_opened) < cycle)
        sched_yield();
    job(w, arg);
}

/* The member that owns key k in ring r. */
static const char *owner_of(const shard_ring *r, int k)
{
    char key[24];
    return shard_ring_owner(r, key, key_of(key, k));
}

/* A gate key whose owner is name now. Context: the control thread (no change under way). */
static int gate_key(const char *name)
{
    shard_ring *r;
    CHECK(shard_dispatcher_ring(disp, &r) == 0, "ring");
    int k = KEYS;
    while (k < ALL_KEYS - 1 && strcmp(owner_of(r, k), name) != 0)
        k++;
    shard_ring_destroy(r);
    return k;
}

/* Submits the next job of gate key k (the control thread is its one producer); with wait false,
 * only if its owner's queue has room. Return: whether it was accepted. */
static bool submit_gate(int k, shard_job_fn fn, bool wait)
{
    char key[24];
    uintptr_t v = (uintptr_t)(submitted[k] << 16 | (uint64_t)k);
    int err = (wait ? shard_submit : shard_try_submit)(disp, key, key_of(key, k), fn, (void *)v);
    CHECK(err == 0 || (!wait && err == -EAGAIN), "submit to gate key: %s", shard_strerror(err));
    submitted[k] += err == 0;
    return err == 0;
}

/* A name that, added with weight 1, takes gate key k from its owner; *from is that owner. */
static void taker_of(int k, unsigned i, char *name, char *from)
{
    shard_ring *r;
    CHECK(shard_dispatcher_ring(disp, &r) == 0, "ring");
    snprintf(from, SHARD_NAME_MAX + 1, "%s", owner_of(r, k));
    for (unsigned c = 0;; c++) {
        snprintf(name, 24, "z%u.%u", i, c);
        CHECK(shard_ring_add(r, name, 1) == 0, "ring add");
        bool takes = strcmp(owner_of(r, k), name) == 0;
        shard_ring_remove(r, name);
        if (takes)
            break;
    }
    shard_ring_destroy(r);
}

static void wait_for(atomic_bool *flag)
{
    while (!atomic_load(flag))
        sched_yield();
}

static void change(int err, const char *what, const char *name)
{
    CHECK(err == 0, "%s %s: %s", what, name, shard_strerror(err));
    atomic_fetch_add(&changes_made, 1);
    stress_pause_ms(1);
}

static void *control(void *arg)
{
    (void)arg;
    for (unsigned i = 0; !atomic_load(&stop); i++) {
        char v[16], a[16], u[16];
        snprintf(v, sizeof v, "v%u", i);
        snprintf(a, sizeof a, "a%u", i);
        snprintf(u, sizeof u, "u%u", i);

        change(shard_worker_add(disp, v, 1 + i % 2), "add", v);
        /* Adding a takes keys from v: v's release hook runs, and is crashed while it is held. */
        struct wlocal *lv;
        while (!(lv = local_named(v))) /* its start hook runs on its own thread */
            sched_yield();
        atomic_store(&lv->hold_hook, true);
        change(shard_worker_add(disp, a, 1), "add", a);
        wait_for(&lv->hook_held);
        atomic_store(&lv->crashed, true);
        change(shard_worker_crash(disp, v, SHARD_CRASH_REROUTE), "crash in its hook", v);
        atomic_store(&lv->hold_hook, false);
        atomic_fetch_add(&hook_crashes, 1);

        change(shard_worker_add(disp, u, 1), "add", u);
        change(shard_worker_remove(disp, a), "remove", a);
        /* u is crashed while it runs a job of gate key g. The next job of g, queued behind it on u
         * if there is room (u is parked: waiting for room would wait for ever), is rerouted to g's
         * next owner L; the one after it is submitted to L after the crash. L holds both behind the
         * stuck job. Then z is added, taking g from L: at its fence L makes them crash entries, runs
         * its release hook, and they follow g to z (follow.c). Only then does the stuck job go on,
         * writing g's state: the jobs on z must see it. */
        int g = gate_key(u);
        gate_cycle[g] = i + 1;
        submit_gate(g, gate_job, true);
        while (atomic_load(&gate_entered) < i + 1)
            sched_yield();
        bool queued = submit_gate(g, job, false);
        atomic_store(&local_named(u)->crashed, true);
        change(shard_worker_crash(disp, u, SHARD_CRASH_REROUTE), "crash in a job", u);
        submit_gate(g, job, true);
        if (!queued)
            submit_gate(g, job, true);
        char z[24], from[SHARD_NAME_MAX + 1];
        taker_of(g, i, z, from);
        struct wlocal *lfrom;
        while (!(lfrom = local_named(from)))
            sched_yield();
        change(shard_worker_add(disp, z, 1), "add", z);
        struct shard_stats st;
        CHECK(shard_dispatcher_stats(disp, &st) == 0, "stats");
        while (atomic_load(&lfrom->hook_epoch) < st.epoch) /* L reached the fence of z's add */
            sched_yield();
        atomic_store(&gate_opened, i + 1);
        change(shard_worker_remove(disp, z), "remove", z);
        atomic_fetch_add(&job_crashes, 1);
    }
    return NULL;
}

static void free_all(void)
{
    for (int k = 0; k < ALL_KEYS; k++) {
        free(transit[k]);
        transit[k] = NULL;
    }
    while (locals) {
        struct wlocal *next = locals->next;
        free(locals);
        locals = next;
    }
}

static void churn(int seconds)
{
    for (int k = 0; k < ALL_KEYS; k++) {
        store[k].seq = 0;
        for (int i = 0; i < WORDS; i++)
            store[k].word[i] = fill(k, 0, i);
    }
    struct shard_config cfg = { .workers = 2, .queue_capacity = 64, .on_worker_start = on_start,
                                .on_worker_stop = on_stop, .on_release = on_release };
    CHECK(shard_dispatcher_create(&disp, &cfg) == 0, "create");
    pthread_t prod[PRODUCERS], ctl;
    pthread_create(&ctl, NULL, control, NULL);
    for (long p = 0; p < PRODUCERS; p++)
        pthread_create(&prod[p], NULL, producer, (void *)p);
    for (int i = 0; i < seconds * 100; i++)
        stress_pause_ms(10); /* how long the churn runs, not an ordering */
    atomic_store(&stop, true);
    for (int p = 0; p < PRODUCERS; p++)
        pthread_join(prod[p], NULL);
    pthread_join(ctl, NULL);
    CHECK(shard_drain(disp) == 0, "drain");
    /* Every job submitted before the drain has run, and happens before its return: read their
     * writes here, plainly, while the workers still live (TSan checks drain's edges too). Not the
     * gate keys': drain does not wait for a job still running on a crashed worker. */
    for (int k = 0; k < KEYS; k++) {
        CHECK(store[k].seq == submitted[k], "key %d: %llu of %llu jobs ran", k, (unsigned long long)store[k].seq,
              (unsigned long long)submitted[k]);
        check_words("store after drain", k, store[k].seq, store[k].word);
    }
    atomic_store(&destroying, true);
    shard_dispatcher_destroy(disp); /* joins the workers: what they did happens before what follows */
    long total = 0;
    for (int k = 0; k < ALL_KEYS; k++) {
        CHECK(store[k].seq == submitted[k], "key %d: %llu of %llu jobs ran", k, (unsigned long long)store[k].seq,
              (unsigned long long)submitted[k]);
        total += (long)submitted[k];
    }
    CHECK(atomic_load(&jobs_run) == total, "%ld jobs ran, %ld submitted", atomic_load(&jobs_run), total);
    CHECK(atomic_load(&handoffs) > 0 && atomic_load(&hook_crashes) > 0 && atomic_load(&job_crashes) > 0,
          "nothing moved (%ld handoffs, %ld crashes in a hook, %ld in a job)", atomic_load(&handoffs),
          atomic_load(&hook_crashes), atomic_load(&job_crashes));
    printf("churn: %ld jobs over %d keys (%d of them gate keys), %d membership changes (%ld crashes in a release hook, %ld in a job), "
           "%ld states handed over by release hooks, %ld rebuilt after crashes\n",
           total, ALL_KEYS, GATE_KEYS, atomic_load(&changes_made), atomic_load(&hook_crashes), atomic_load(&job_crashes),
           atomic_load(&handoffs), atomic_load(&rebuilds));
    free_all();
}

/* ---- stuck: the job running when its worker crashes ---- */

static atomic_bool stuck_entered, stuck_go, victim_stopped, read_done;

static void stuck_job(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    atomic_store(&stuck_entered, true);
    while (!atomic_load(&stuck_go))
        sched_yield();
    /* After the crash: the key's state, written by the job its key is fenced for. */
    store[0].seq = 1;
    for (int i = 0; i < WORDS; i++)
        store[0].word[i] = fill(0, 1, i);
}

static void stuck_stop(shard_worker *w, void *user)
{
    (void)user;
    /* Runs on the crashed worker after its stuck job returned and paid its entry (run.c's
     * job_returned): relaxed, so the main thread learns when, but orders nothing. */
    if (shard_worker_crashed(w))
        atomic_store_explicit(&victim_stopped, true, memory_order_relaxed);
}

static void stuck_read(shard_worker *w, void *arg)
{
    (void)w, (void)arg;
    CHECK(store[0].seq == 1, "the stuck job's write is not seen");
    check_words("store after the stuck job", 0, store[0].seq, store[0].word);
    atomic_store(&read_done, true);
}

static void stuck(void)
{
    for (int round = 0; round < 5; round++) {
        store[0].seq = 0;
        for (int i = 0; i < WORDS; i++)
            store[0].word[i] = fill(0, 0, i);
        atomic_store(&stuck_go, false);
        atomic_store(&stuck_entered, false);
        atomic_store_explicit(&victim_stopped, false, memory_order_relaxed);
        struct shard_config cfg = { .workers = 3, .on_worker_stop = stuck_stop };
        CHECK(shard_dispatcher_create(&disp, &cfg) == 0, "create");
        char key[24], victim[SHARD_NAME_MAX + 1];
        size_t n = key_of(key, 0);
        shard_ring *r;
        CHECK(shard_dispatcher_ring(disp, &r) == 0, "ring");
        snprintf(victim, sizeof victim, "%s", shard_ring_owner(r, key, n));
        shard_ring_destroy(r);
        CHECK(shard_submit(disp, key, n, stuck_job, NULL) == 0, "submit");
        wait_for(&stuck_entered);
        CHECK(shard_worker_crash(disp, victim, SHARD_CRASH_REROUTE) == 0, "crash");
        atomic_store(&stuck_go, true);
        /* Once the crashed worker has stopped, the key's entry is paid: the next job's check finds
         * no entry and takes no lock. This thread has no ordering with the stuck job. */
        while (!atomic_load_explicit(&victim_stopped, memory_order_relaxed))
            sched_yield();
        atomic_store(&read_done, false);
        CHECK(shard_submit(disp, key, n, stuck_read, NULL) == 0, "submit");
        wait_for(&read_done);
        shard_dispatcher_destroy(disp);
    }
    printf("stuck: 5 rounds\n");
}

int main(int argc, char **argv)
{
    alarm(120); /* a hang fails the run with SIGALRM rather than the test's timeout */
    if (argc > 1 && strcmp(argv[1], "stuck") == 0) {
        stuck();
        return stress_result("stress_visibility stuck");
    }
    int seconds = argc > 1 ? atoi(argv[1]) : 3;
    churn(seconds < 1 ? 1 : seconds);
    return stress_result("stress_visibility");
}
