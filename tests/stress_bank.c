/* The bank test (Jepsen's, in process): transfers between accounts as multi-key jobs, under churn.
 * Producers submit, each in its own stream, single-key deposits and transfers of random amounts
 * between random pairs and triples of accounts (shard_submit_multi), while the control thread adds
 * and removes workers, crashes them (REROUTE and DROP), places and unplaces accounts, and the balancer
 * moves hot ones. Checked once everything is drained: the total is conserved exactly (the starting
 * money plus every deposit that ran), every job ran once or was dropped once (never both, never twice),
 * no job overlapped another job of one of its accounts, each producer's jobs of an account ran in its
 * submission order (gaps only where a job was dropped), and nothing waited for ever (drain returns;
 * ctest's timeout fails a hang). Runs under TSan too, where the accounts' plain balances are the
 * happens-before check.
 * With `each`, transfers are shard_submit_multi_each jobs (one step an account, where its jobs run,
 * in order: the source's step pays if it has the money, the others' take what it paid) and, in place
 * of deposits, audits read every account
 * in one multi-key job (half of them as steps): each must find the total the bank started with, which
 * a transfer seen half done would break.
 *   stress_bank [SECONDS [ACCOUNTS [each]]]   (default 3 s, 2000 accounts (each: 512); under
 *                                               sanitizers 2 s, 500 (each: 256)) */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "stress_common.h"

#define PRODUCERS 3
#define MAX_JOBS 400000 /* a producer's, at most */
#define WORKERS 3

enum kind { DEPOSIT, TRANSFER, AUDIT };

struct bank_job {
    uint8_t    kind, n, producer;
    uint32_t   acct[3];
    uint32_t   seq[3];     /* the producer's sequence number of this job among its jobs of acct[i] */
    int64_t    amount;
    atomic_int runs, drops;
    atomic_llong seen;     /* an audit by steps: the balances its steps read */
    bool       paid;       /* a transfer by steps: its source's step found the money */
};

static shard_dispatcher *disp;
static int accounts;
static int64_t *balance;         /* plain: only the jobs of an account touch it */
static atomic_int *busy;         /* jobs of the account running now: never more than one */
static uint32_t *last_seq;       /* [account * PRODUCERS + producer]: seq + 1 of its last job run */
static char (*names)[16];
static struct bank_job *jobs[PRODUCERS];
static long njobs[PRODUCERS];
static atomic_long deposited, transfers_done, transfers_short;
static atomic_long ended; /* jobs run to their end (done's, with steps) or dropped, each once; its
                           * increment, a job's last write, publishes the balances to main */
static atomic_int stop, control_stop;
static atomic_int changes;
static bool each;                /* transfers by steps, audits in place of deposits */
static struct shard_key *all_keys; /* every account, for audits */
static atomic_long audits;
static const int64_t start = 1000;

static void enter(const struct bank_job *j, shard_worker *w)
{
    for (int i = 0; i < j->n; i++)
        CHECK(atomic_fetch_add(&busy[j->acct[i]], 1) == 0, "account %u: two jobs at once (%s)", j->acct[i],
              shard_worker_name(w));
    for (int i = 0; i < j->n; i++) {
        uint32_t *last = &last_seq[j->acct[i] * PRODUCERS + j->producer];
        CHECK(j->seq[i] >= *last, "account %u producer %d: ran #%u after #%u", j->acct[i], j->producer, j->seq[i],
              *last - 1);
        *last = j->seq[i] + 1;
    }
}

static void leave(const struct bank_job *j)
{
    for (int i = 0; i < j->n; i++)
        atomic_fetch_sub(&busy[j->acct[i]], 1);
}

static void deposit(shard_worker *w, void *arg)
{
    struct bank_job *j = arg;
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "a deposit ran twice");
    enter(j, w);
    balance[j->acct[0]] += j->amount;
    atomic_fetch_add_explicit(&deposited, j->amount, memory_order_relaxed);
    leave(j);
    atomic_fetch_add(&ended, 1);
}

/* From acct[0] to the others, evenly, if it has the money. */
static void transfer(shard_worker *w, void *arg)
{
    struct bank_job *j = arg;
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "a transfer ran twice");
    enter(j, w);
    int64_t share = j->amount / (j->n - 1);
    if (balance[j->acct[0]] >= share * (j->n - 1)) {
        balance[j->acct[0]] -= share * (j->n - 1);
        for (int i = 1; i < j->n; i++)
            balance[j->acct[i]] += share;
        atomic_fetch_add_explicit(&transfers_done, 1, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&transfers_short, 1, memory_order_relaxed);
    }
    leave(j);
    atomic_fetch_add(&ended, 1);
}

/* A transfer's step for its account i: the source gives, the others take. */
static void transfer_step(shard_worker *w, void *arg, size_t i)
{
    struct bank_job *j = arg;
    uint32_t a = j->acct[i];
    CHECK(shard_job_key_hash(w) == shard_dispatcher_key_hash(disp, names[a], strlen(names[a])),
          "a step of account %u ran as another key's job", a);
    CHECK(atomic_fetch_add(&busy[a], 1) == 0, "account %u: two jobs at once (%s)", a, shard_worker_name(w));
    uint32_t *last = &last_seq[a * PRODUCERS + j->producer];
    CHECK(j->seq[i] >= *last, "account %u producer %d: step of #%u after #%u", a, j->producer, j->seq[i], *last - 1);
    *last = j->seq[i] + 1;
    /* Steps run in the keys' order: the source's first, and the others see whether it paid. */
    int64_t share = j->amount / (j->n - 1);
    if (i == 0) {
        j->paid = balance[a] >= share * (j->n - 1);
        if (j->paid)
            balance[a] -= share * (j->n - 1);
    } else if (j->paid) {
        balance[a] += share;
    }
    atomic_fetch_sub(&busy[a], 1);
}

static void transfer_done(shard_worker *w, void *arg)
{
    (void)w;
    struct bank_job *j = arg;
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "a transfer's done ran twice");
    atomic_fetch_add_explicit(j->paid ? &transfers_done : &transfers_short, 1, memory_order_relaxed);
    atomic_fetch_add(&ended, 1);
}

/* An audit in one job: every account, the total the bank started with. */
static void audit(shard_worker *w, void *arg)
{
    (void)w;
    struct bank_job *j = arg;
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "an audit ran twice");
    int64_t total = 0;
    for (int a = 0; a < accounts; a++)
        total += balance[a];
    CHECK(total == start * accounts, "an audit saw %lld, not %lld: a transfer half done", (long long)total,
          (long long)start * accounts);
    atomic_fetch_add(&audits, 1);
    atomic_fetch_add(&ended, 1);
}

static void audit_step(shard_worker *w, void *arg, size_t i)
{
    (void)w;
    struct bank_job *j = arg;
    atomic_fetch_add_explicit(&j->seen, balance[i], memory_order_relaxed);
}

static void audit_done(shard_worker *w, void *arg)
{
    (void)w;
    struct bank_job *j = arg;
    CHECK(atomic_fetch_add(&j->runs, 1) == 0, "an audit ran twice");
    long long seen = atomic_load_explicit(&j->seen, memory_order_relaxed);
    CHECK(seen == start * accounts, "an audit by steps saw %lld, not %lld: a transfer half done", seen,
          (long long)start * accounts);
    atomic_fetch_add(&audits, 1);
    atomic_fetch_add(&ended, 1);
}

static void on_dropped(shard_job_fn fn, void *arg, void *user)
{
    (void)user;
    CHECK(fn == deposit || fn == transfer || fn == transfer_done || fn == audit || fn == audit_done,
          "on_dropped got a job that is not the user's");
    struct bank_job *j = arg;
    CHECK(atomic_fetch_add(&j->drops, 1) == 0, "a job dropped twice");
    atomic_fetch_add(&ended, 1);
}

/* Whether every job accepted has ended (the producers have stopped), and no multi-key job is open or
 * waiting: `ended` is a job's last write, but a multi-key job stops counting as open only after its fn
 * (or done) has returned and its accounts are let go (multi.c's end()), and the last job may be one
 * the drain just returned did not wait for (a crash stuck it, or the accounts behind it): the check
 * after would read it open. */
static bool all_ended(void *ctx)
{
    (void)ctx;
    long submitted = 0;
    for (int p = 0; p < PRODUCERS; p++)
        submitted += njobs[p];
    if (atomic_load(&ended) < submitted)
        return false;
    return stress_none_open(disp);
}

static void *producer(void *arg)
{
    int p = (int)(intptr_t)arg;
    uint32_t *seq = calloc((size_t)accounts, sizeof *seq);
    unsigned x = 2654435761u * (unsigned)(p + 1);
    long n = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed) && n < MAX_JOBS) {
        struct bank_job *j = &jobs[p][n];
        x = x * 1103515245u + 12345u;
        j->producer = (uint8_t)p;
        j->kind = (x >> 16) % 4 == 0 ? DEPOSIT : TRANSFER;
        if (each && j->kind == DEPOSIT) {
            /* An audit now and then, in place of deposits. */
            if (n % 64 != 0)
                j->kind = TRANSFER;
            else {
                j->kind = AUDIT;
                int err = n % 128 ? shard_submit_multi(disp, all_keys, (size_t)accounts, audit, j)
                                  : shard_submit_multi_each(disp, all_keys, (size_t)accounts, audit_step, audit_done, j);
                CHECK(err == 0, "audit submit: %s", shard_strerror(err));
                n++;
                continue;
            }
        }
        j->n = j->kind == DEPOSIT ? 1 : 2 + (uint8_t)((x >> 20) % 2);
        j->amount = 1 + (int64_t)((x >> 8) % 300);
        struct shard_key keys[3];
        for (int i = 0; i < j->n; i++) {
            uint32_t a;
            bool again;
            do {
                x = x * 1103515245u + 12345u;
                a = (x >> 8) % (uint32_t)accounts;
                again = false;
                for (int k = 0; k < i; k++)
                    again |= j->acct[k] == a;
            } while (again);
            j->acct[i] = a;
            j->seq[i] = seq[a]++;
            keys[i] = (struct shard_key){ names[a], strlen(names[a]) };
        }
        int err = j->kind == DEPOSIT ? shard_submit(disp, keys[0].key, keys[0].len, deposit, j)
                  : each             ? shard_submit_multi_each(disp, keys, j->n, transfer_step, transfer_done, j)
                                     : shard_submit_multi(disp, keys, j->n, transfer, j);
        CHECK(err == 0, "submit: %s", shard_strerror(err));
        n++;
    }
    njobs[p] = n;
    free(seq);
    return NULL;
}

static void *control(void *arg)
{
    (void)arg;
    unsigned next = 0, oldest = 0, round = 0;
    while (!atomic_load(&control_stop)) {
        char name[16];
        snprintf(name, sizeof name, "c%u", next++);
        int err = shard_worker_add(disp, name, 1);
        CHECK(err == 0, "add %s: %s", name, shard_strerror(err));
        atomic_fetch_add(&changes, 1);
        if (next - oldest > 2) {
            snprintf(name, sizeof name, "c%u", oldest);
            int how = oldest % 3;
            if (each && how == 2 && oldest % 12 != 2)
                how = 1; /* an audit has a part on every worker: DROP crashes drop most of them */
            oldest++;
            err = how == 0   ? shard_worker_remove(disp, name)
                  : how == 1 ? shard_worker_crash(disp, name, SHARD_CRASH_REROUTE)
                             : shard_worker_crash(disp, name, SHARD_CRASH_DROP);
            CHECK(err == 0, "remove/crash %s: %s", name, shard_strerror(err));
            atomic_fetch_add(&changes, 1);
        }
        /* An account placed on a worker of the ring, and one let go. */
        unsigned a = (round * 7919u) % (unsigned)accounts;
        err = shard_key_place(disp, names[a], strlen(names[a]), round % 2 ? "w0" : "w1");
        CHECK(err == 0, "place: %s", shard_strerror(err));
        if (round >= 4) {
            unsigned b = ((round - 4) * 7919u) % (unsigned)accounts;
            err = shard_key_unplace(disp, names[b], strlen(names[b]));
            CHECK(err == 0 || err == -ENOENT, "unplace: %s", shard_strerror(err));
        }
        round++;
        stress_pause_ms(2); /* the pace of the churn, not synchronisation */
    }
    return NULL;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int seconds = argc > 1 ? atoi(argv[1]) : STRESS_SANITIZED ? 2 : 3;
    each = argc > 3 && strcmp(argv[3], "each") == 0;
    accounts = argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : each ? (STRESS_SANITIZED ? 256 : 512)
                                                                     : (STRESS_SANITIZED ? 500 : 2000);
    if (seconds < 1 || accounts < 4 || (each && accounts > SHARD_MULTI_MAX_KEYS) || (argc > 3 && !each)) {
        fprintf(stderr, "usage: stress_bank [SECONDS >= 1 [ACCOUNTS >= 4 (0: the default) [each]]]\n");
        return 2;
    }
    balance = calloc((size_t)accounts, sizeof *balance);
    busy = calloc((size_t)accounts, sizeof *busy);
    last_seq = calloc((size_t)accounts * PRODUCERS, sizeof *last_seq);
    names = calloc((size_t)accounts, sizeof *names);
    for (int p = 0; p < PRODUCERS; p++)
        jobs[p] = calloc(MAX_JOBS, sizeof *jobs[p]);
    all_keys = calloc((size_t)accounts, sizeof *all_keys);
    for (int a = 0; a < accounts; a++) {
        balance[a] = start;
        snprintf(names[a], sizeof names[a], "acct-%d", a);
        all_keys[a] = (struct shard_key){ names[a], strlen(names[a]) };
    }
    struct shard_config cfg = { .workers = WORKERS, .queue_capacity = 256, .on_dropped = on_dropped,
                                .balance = { .interval_ms = 20 } };
    CHECK(shard_dispatcher_create(&disp, &cfg) == 0, "create");
    pthread_t prod[PRODUCERS], ctl;
    for (int p = 0; p < PRODUCERS; p++)
        pthread_create(&prod[p], NULL, producer, (void *)(intptr_t)p);
    pthread_create(&ctl, NULL, control, NULL);
    /* SECONDS, and on (up to a minute) until the control thread has made ten changes: they are what
     * is under test, and a loaded machine (a sanitizer beside other jobs) makes them slower. */
    for (int t = 0; t < 600 && (t < seconds * 10 || atomic_load(&changes) < 10); t++)
        stress_pause_ms(100); /* how long the test runs, not synchronisation */
    atomic_store(&stop, 1);
    for (int p = 0; p < PRODUCERS; p++)
        pthread_join(prod[p], NULL);
    atomic_store(&control_stop, 1);
    pthread_join(ctl, NULL);
    /* Until every job has ended: a crash may have stuck one, and the jobs behind its accounts with it
     * (stress_common.h); an audit holds every account. */
    stress_drain_until(disp, all_ended, NULL);

    long submitted = 0, multi = 0, ran = 0, dropped = 0;
    int64_t dropped_deposits = 0;
    for (int p = 0; p < PRODUCERS; p++)
        for (long i = 0; i < njobs[p]; i++) {
            struct bank_job *j = &jobs[p][i];
            int r = atomic_load(&j->runs), dr = atomic_load(&j->drops);
            submitted++;
            multi += j->n > 1 || j->kind == AUDIT;
            ran += r;
            dropped += dr;
            if (dr && j->kind == DEPOSIT)
                dropped_deposits += j->amount;
            CHECK(r + dr == 1, "producer %d job %ld (%s of %d accounts): ran %d times, dropped %d times", p, i,
                  j->kind == DEPOSIT ? "deposit" : j->kind == AUDIT ? "audit" : "transfer", j->n, r, dr);
        }
    int64_t total = 0;
    for (int a = 0; a < accounts; a++) {
        total += balance[a];
        CHECK(balance[a] >= 0, "account %d is overdrawn: %lld", a, (long long)balance[a]);
    }
    int64_t expect = start * accounts + atomic_load(&deposited);
    CHECK(total == expect, "total %lld, expected %lld (the start %lld plus deposits %ld)", (long long)total,
          (long long)expect, (long long)(start * accounts), atomic_load(&deposited));
    struct shard_stats st;
    CHECK(shard_dispatcher_stats(disp, &st) == 0, "stats");
    CHECK((long)st.dropped == dropped, "stats count %llu dropped, on_dropped heard of %ld",
          (unsigned long long)st.dropped, dropped);
    CHECK(atomic_load(&changes) >= 10, "only %d membership changes", atomic_load(&changes));
    CHECK(multi > 0 && atomic_load(&transfers_done) > 0, "no transfer ran");
    CHECK(!each || atomic_load(&audits) > 0, "no audit ran");
    printf("bank%s: %ld jobs (%ld multi-key), %ld ran, %ld dropped (%lld in deposits), %ld transfers made, %ld short "
           "of money, %ld audits; %d membership changes, %llu balancer moves; total %lld conserved\n",
           each ? " (steps)" : "", submitted, multi, ran, dropped, (long long)dropped_deposits,
           atomic_load(&transfers_done), atomic_load(&transfers_short), atomic_load(&audits), atomic_load(&changes),
           (unsigned long long)st.balance_moves, (long long)total);
    shard_dispatcher_destroy(disp);
    for (int p = 0; p < PRODUCERS; p++)
        free(jobs[p]);
    free(balance);
    free(busy);
    free(last_seq);
    free(names);
    free(all_keys);
    int failures = atomic_load(&stress_failures);
    printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
    return failures ? 1 : 0;
}
