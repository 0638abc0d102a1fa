/* player_sessions: partitioning player sessions across cores, while the pool scales and a core crashes.
 *
 * Two network-like threads send packets (player, sequence number) for tens of thousands of players.
 * Each worker keeps its players' sessions in worker-local state, with no lock on any session: shard
 * runs all of a player's packets on one worker, one at a time, in order. While traffic flows the pool
 * grows and shrinks every --churn-ms and one worker crashes (REROUTE). When a player moves, the
 * release hook hands its session to the new owner before that player's next packet; a crash loses its
 * worker's sessions (that is what a crash is), and their players resume from the next packet.
 *
 * A player who sends nothing for --idle-ms is logged out by a keyed timer: each packet moves the
 * session's idle timer back (shard_timer_rearm; a new one only while it moves with its player), and
 * the timer's job, a job of the player, ends the session where it is. The timers move with their players (at the release, with the sessions; with the queue
 * at the crash), so a logout never runs beside a packet, nor where the session is not. Some players
 * go quiet during the run, and every player at its end.
 *
 * When traffic stops it prints the load shard measured for each worker in the ring (share of players,
 * time in jobs, averaged queue, pending timers). At the end it prints one row per worker (sessions
 * held, packets, sessions handed in and out, logouts; the workers added and removed again share one
 * row) and checks, through a verification log
 * that is not part of the design, that every packet was processed exactly once, in order, by the
 * worker holding the session; that every player was logged out exactly once after its last packet,
 * by the worker holding its session, and never by a timer its packets had cancelled; and that every
 * membership change succeeded. Exit status 0 when that held.
 *
 * One packet in 32 also makes its player give a few coins to another player, whose session may be on
 * another worker: a trade, one atomic step over both players (shard_submit_multi_each: a step on each
 * player's worker, in order), which a coin ledger checks: none lost, none doubled.
 *
 * Usage: player_sessions [--players N] [--workers W] [--seconds S] [--churn-ms M] [--idle-ms I];
 * --help says how far each goes. */
#include <errno.h>
#include <pthread.h>
#include <shard.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "options.h"

struct session {
    uint32_t    player;
    uint64_t    hash;     /* its key's (shard_job_key_hash): the release hook asks by it */
    uint64_t    next_seq;
    uint64_t    packets;
    shard_timer idle;     /* logs the player out unless a packet comes first */
    uint64_t    idle_gen; /* which arm that was (verification) */
    bool        rebuilt;  /* made anew after a crash lost the session: its old timer may still fire */
    int64_t     coins;    /* COINS when made; trades move them between players */
};

/* Coins each new session starts with, and the ledger that shows none is lost or doubled: every coin
 * made is, at the end, in a session still held (or lost with the crashed worker, or in transit), cashed
 * out at a logout, or undelivered (a trade whose taker had no session at that moment). */
#define COINS 100
static atomic_llong coins_made, coins_held, coins_out, coins_undelivered;
static atomic_long trades_made, trades_short;

/* Worker-local state: only its own worker touches it (the release hook runs on that worker too), until
 * it stops; main reads it after shard_dispatcher_destroy has joined every worker. */
struct local {
    struct session **sessions; /* by player; freed when the worker stops, keeping only `held` */
    uint64_t         packets, handed_in, handed_out, rebuilt, held, logouts;
    char             name[SHARD_NAME_MAX + 1];
    struct local    *next_local;
};

/* The options and their ranges (main): at most 2^20 players, as a packet carries its player in 20
 * bits; at most 64 workers, each with an array of players * 8 bytes (512 MiB at that corner); the
 * seconds and the churn period bound how many workers come and go, each leaving a struct local for the
 * final table: at most 60 s / (2 * 1 ms) = 30,000. */
static long long players = 20000, initial_workers = 4, seconds = 3, churn_ms = 200, idle_ms = 50;
static shard_dispatcher *disp;

/* Sessions in transit between two workers, and every worker's local state (for the final table). */
static pthread_mutex_t world_lock = PTHREAD_MUTEX_INITIALIZER;
static struct session **transit;
static struct local *locals;
static char crashed_name[SHARD_NAME_MAX + 1];

/* Verification only: the last sequence number processed per player and which worker held it. */
static _Atomic uint64_t *last_seq;
static _Atomic(const struct local *) *last_holder;
/* The violations by kind, so that a failed run says what failed. */
enum violation {
    V_TIMER_MOVE, V_TIMER_ARM, V_CANCELLED_RAN, V_LOGOUT_ELSEWHERE, V_LOGOUT_MISSED, V_LOGOUT_TWICE, V_LATE_SESSION,
    V_PACKET_ORDER, V_STEP_ELSEWHERE, V_NO_MEMORY, V_SUBMIT_TRADE, V_SUBMIT_PACKET, V_COUNT
};
static const char *const violation_words[V_COUNT] = {
    [V_TIMER_MOVE] = "an idle timer neither moved nor cancelled",
    [V_TIMER_ARM] = "an idle timer not armed",
    [V_CANCELLED_RAN] = "a cancelled timer ran",
    [V_LOGOUT_ELSEWHERE] = "a logout where the session is not",
    [V_LOGOUT_MISSED] = "a logout before a processed packet reached the session",
    [V_LOGOUT_TWICE] = "a player logged out twice",
    [V_LATE_SESSION] = "a packet before its handed-over session",
    [V_PACKET_ORDER] = "a packet lost, repeated or out of order",
    [V_STEP_ELSEWHERE] = "a trade's step where the session is not",
    [V_NO_MEMORY] = "out of memory for a trade",
    [V_SUBMIT_TRADE] = "a trade not submitted",
    [V_SUBMIT_PACKET] = "a packet not submitted",
};
static atomic_long violations[V_COUNT];

static void violation(enum violation v)
{
    atomic_fetch_add(&violations[v], 1);
}

static atomic_long packets_sent, packets_done, handoffs, logouts, lost_logouts, stale_timers;
/* Verification only: logouts since the player's last packet (1 at the end, never 2); arms so far. */
static atomic_int *logged_out;
static _Atomic uint64_t *arms;
static atomic_int running = 1;

static void on_start(shard_worker *w, void *user)
{
    (void)user;
    struct local *l = calloc(1, sizeof *l);
    if (l)
        l->sessions = calloc((size_t)players, sizeof *l->sessions);
    if (!l || !l->sessions) {
        fprintf(stderr, "player_sessions: out of memory\n");
        exit(1);
    }
    snprintf(l->name, sizeof l->name, "%s", shard_worker_name(w));
    shard_worker_set_user(w, l);
    pthread_mutex_lock(&world_lock);
    l->next_local = locals;
    locals = l;
    pthread_mutex_unlock(&world_lock);
}

/* A stopped worker has run its last packet: count the sessions it still holds (none after a graceful
 * removal; a crashed worker's are lost) and free them, so that workers coming and going do not add
 * up to players * 8 bytes each. */
static void on_stop(shard_worker *w, void *user)
{
    (void)user;
    struct local *l = shard_worker_user(w);
    for (int p = 0; p < players; p++) {
        l->held += l->sessions[p] != NULL;
        if (l->sessions[p])
            atomic_fetch_add(&coins_held, l->sessions[p]->coins);
        free(l->sessions[p]);
    }
    free(l->sessions);
    l->sessions = NULL;
}

static size_t player_key(char *buf, uint32_t player)
{
    return (size_t)snprintf(buf, 24, "player-%u", player);
}

/* The release hook: sessions of players that the new ring gives to another worker leave, in order,
 * before that worker may run their next packet. */
static void on_release(shard_worker *w, const struct shard_handoff *h, void *user)
{
    (void)user;
    struct local *l = shard_worker_user(w);
    for (int p = 0; p < players; p++) {
        if (!l->sessions[p] || !shard_handoff_moves_hash(h, l->sessions[p]->hash))
            continue;
        pthread_mutex_lock(&world_lock);
        transit[p] = l->sessions[p];
        pthread_mutex_unlock(&world_lock);
        l->sessions[p] = NULL;
        l->handed_out++;
        atomic_fetch_add(&handoffs, 1);
    }
}

static void on_idle(shard_worker *w, void *arg);

/* The session's idle timer starts again. Its old one is pending (a logout would have ended the session
 * before this packet): its deadline moves, in the wheel of this worker, which holds the session. Only
 * while it moves with its key (a change a moment ago) is it cancelled, which says 0 (it will not run),
 * and armed anew. */
static void rearm_idle(struct session *s)
{
    if (s->idle && shard_timer_rearm(disp, s->idle, (uint64_t)idle_ms * 1000000u) == 0)
        return;
    if (s->idle && shard_timer_cancel(disp, s->idle) != 0)
        violation(V_TIMER_MOVE);
    s->idle_gen = atomic_fetch_add(&arms[s->player], 1) + 1;
    char key[24];
    void *arg = (void *)(uintptr_t)(s->idle_gen << 20 | s->player);
    if (shard_submit_after(disp, key, player_key(key, s->player), (uint64_t)idle_ms * 1000000u, on_idle, arg, &s->idle) != 0)
        violation(V_TIMER_ARM);
}

/* A session, wherever it is for this worker: its own, or handed to it by a release hook. The log
 * records the worker that takes a session in, whatever job takes it (a trade's step as well as a
 * packet): a session taken in by a worker that then crashes is lost with it. */
static struct session *take_session(struct local *l, uint32_t player, int *after_crash)
{
    struct session *s = l->sessions[player];
    if (s)
        return s;
    pthread_mutex_lock(&world_lock);
    s = transit[player];
    transit[player] = NULL;
    *after_crash = atomic_load(&last_holder[player]) && strcmp(atomic_load(&last_holder[player])->name, crashed_name) == 0;
    pthread_mutex_unlock(&world_lock);
    if (s) {
        l->handed_in++;
        l->sessions[player] = s;
        atomic_store(&last_holder[player], l);
    }
    return s;
}

/* A job's argument: the player in the low 20 bits, a number (a packet's sequence, a timer's arm) above. */
static uint32_t unpack(void *arg, uint64_t *high)
{
    uint64_t packed = (uint64_t)(uintptr_t)arg;
    *high = packed >> 20;
    return (uint32_t)(packed & 0xfffff);
}

/* The idle timer: the player sent nothing for idle_ms, log it out. It runs as a job of the player, so
 * no packet runs beside it, and the session is here (or was lost with a crashed worker). */
static void on_idle(shard_worker *w, void *arg)
{
    uint64_t gen;
    uint32_t player = unpack(arg, &gen);
    struct local *l = shard_worker_user(w);
    int after_crash = 0;
    struct session *s = take_session(l, player, &after_crash);
    if (s && s->idle_gen != gen) {
        /* Not the session's timer: one armed by a session a crash lost may still run; any other
         * was cancelled, and must not. */
        if (!s->rebuilt || gen >= s->idle_gen)
            violation(V_CANCELLED_RAN);
        atomic_fetch_add(&stale_timers, 1);
        return;
    }
    if (!s) {
        if (!after_crash)
            violation(V_LOGOUT_ELSEWHERE); /* logged out where its session is not */
        atomic_fetch_add(&lost_logouts, 1);
    } else {
        if (atomic_load(&last_seq[player]) != s->next_seq)
            violation(V_LOGOUT_MISSED); /* a packet was processed that this session did not see */
        l->sessions[player] = NULL;
        atomic_fetch_add(&coins_out, s->coins);
        free(s);
        l->logouts++;
    }
    if (atomic_fetch_add(&logged_out[player], 1) != 0)
        violation(V_LOGOUT_TWICE); /* logged out twice with no packet in between */
    atomic_fetch_add(&logouts, 1);
}

static void on_packet(shard_worker *w, void *arg)
{
    uint64_t seq;
    uint32_t player = unpack(arg, &seq);
    struct local *l = shard_worker_user(w);
    int after_crash = 0;
    struct session *s = take_session(l, player, &after_crash);
    if (!s) {
        /* A new session: the player's first packet, or its first after a logout or after a crash
         * lost its session; anything else is a session that did not arrive first. */
        bool was_out = atomic_load(&logged_out[player]) != 0;
        if (seq > 0 && !after_crash && !was_out)
            violation(V_LATE_SESSION);
        l->rebuilt += seq > 0 && !was_out;
        s = calloc(1, sizeof *s);
        s->player = player;
        s->hash = shard_job_key_hash(w);
        s->next_seq = seq;
        s->rebuilt = seq > 0 && !was_out;
        s->coins = COINS;
        atomic_fetch_add(&coins_made, COINS);
        l->sessions[player] = s;
    }
    /* The session must expect this packet, and so must the log: anything else is a lost, repeated or
     * reordered packet. */
    if (s->next_seq != seq || atomic_load(&last_seq[player]) != seq)
        violation(V_PACKET_ORDER);
    s->next_seq = seq + 1;
    s->packets++;
    l->packets++;
    atomic_store(&last_seq[player], seq + 1);
    atomic_store(&last_holder[player], l);
    atomic_store(&logged_out[player], 0);
    rearm_idle(s);
    atomic_fetch_add_explicit(&packets_done, 1, memory_order_relaxed);
}

/* A trade: amount coins from giver to taker, players whose sessions are on any workers, as one atomic
 * step of a multi-key job with steps: the giver's step, on the worker holding its session, pays if
 * the session has the coins; then the taker's, on its worker, takes what was paid. No packet or logout
 * of either player runs in between, wherever their sessions move meanwhile. */
struct trade {
    uint32_t giver, taker;
    int64_t  amount;
    bool     paid;
};

static void trade_step(shard_worker *w, void *arg, size_t i)
{
    struct trade *t = arg;
    struct local *l = shard_worker_user(w);
    int after_crash = 0;
    uint32_t player = i == 0 ? t->giver : t->taker;
    struct session *s = take_session(l, player, &after_crash);
    /* A player with a session (it sent a packet, no logout since) has it here, unless a crash lost it. */
    if (!s && atomic_load(&last_seq[player]) > 0 && !atomic_load(&logged_out[player]) && !after_crash)
        violation(V_STEP_ELSEWHERE);
    if (i == 0) {
        t->paid = s && s->coins >= t->amount;
        if (t->paid)
            s->coins -= t->amount;
    } else if (t->paid) {
        if (s)
            s->coins += t->amount;
        else
            atomic_fetch_add(&coins_undelivered, t->amount);
    }
}

static void trade_done(shard_worker *w, void *arg)
{
    (void)w;
    struct trade *t = arg;
    atomic_fetch_add_explicit(t->paid ? &trades_made : &trades_short, 1, memory_order_relaxed);
    free(t);
}

/* Player p, at its packet seq, gives a few coins to another player (one packet in 32). */
static void maybe_trade(int p, uint64_t seq)
{
    if (seq % 32 != 31)
        return;
    struct trade *t = malloc(sizeof *t);
    if (!t) {
        violation(V_NO_MEMORY);
        return;
    }
    uint32_t q = (uint32_t)(((uint64_t)p * 7919u + seq * 104729u) % (uint64_t)players);
    if ((int)q == p)
        q = (q + 1) % (uint32_t)players;
    *t = (struct trade){ (uint32_t)p, q, 1 + (int64_t)(seq % 10), false };
    char kg[24], kt[24];
    struct shard_key keys[2] = { { kg, player_key(kg, t->giver) }, { kt, player_key(kt, t->taker) } };
    if (shard_submit_multi_each(disp, keys, 2, trade_step, trade_done, t) != 0) {
        violation(V_SUBMIT_TRADE);
        free(t);
    }
}

static double now(void);
static double run_start;

/* One player in 16 goes quiet partway through the run, at its own moment: it is logged out then. */
static bool quiet(int p, double elapsed)
{
    return p % 16 == 0 && elapsed > seconds * (0.1 + 0.8 * (double)((unsigned)p * 2654435761u % 1000) / 1000);
}

static void *network(void *arg)
{
    int half = (int)(long)arg;
    uint64_t *seq = calloc((size_t)players, sizeof *seq);
    char key[24];
    while (atomic_load(&running)) {
        double elapsed = now() - run_start;
        for (int p = half; p < players; p += 2) {
            if (quiet(p, elapsed))
                continue;
            void *packet = (void *)(uintptr_t)(seq[p] << 20 | (uint64_t)p);
            if (shard_submit(disp, key, player_key(key, (uint32_t)p), on_packet, packet) != 0)
                violation(V_SUBMIT_PACKET);
            maybe_trade(p, seq[p]);
            seq[p]++;
            atomic_fetch_add_explicit(&packets_sent, 1, memory_order_relaxed);
        }
    }
    free(seq);
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void pause_ms(long long ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* Membership changes that failed: each is a failure of the run (main thread only). */
static int failed_changes;

static void changed(int err, const char *what, const char *name)
{
    if (err) {
        fprintf(stderr, "player_sessions: %s %s failed: %s\n", what, name, shard_strerror(err));
        failed_changes++;
    }
}

/* Crashes w1; its name goes where on_packet reads it first (under the lock), so that a session lost
 * with w1 is not taken for a late handoff. */
static void crash_w1(void)
{
    pthread_mutex_lock(&world_lock);
    snprintf(crashed_name, sizeof crashed_name, "w1");
    pthread_mutex_unlock(&world_lock);
    changed(shard_worker_crash(disp, crashed_name, SHARD_CRASH_REROUTE), "crash of", crashed_name);
}

/* Scales the pool up and down by one extra worker, and crashes w1 halfway through. The extra worker
 * is added when none is in the pool and removed when one is, so the crash in between does not upset
 * the alternation. Returns the name of the extra worker still in the pool, or "". */
static const char *churn(double start)
{
    static char extra[32];
    int added = 0, changes = 0, crashed = 0, tty = isatty(1);
    double last_print = start;
    long last_done = 0;
    while (now() - start < seconds) {
        pause_ms(churn_ms);
        if (!crashed && now() - start > seconds / 2.0) {
            crash_w1();
            crashed = 1;
        } else if (!extra[0]) {
            snprintf(extra, sizeof extra, "extra-%d", added++);
            int err = shard_worker_add(disp, extra, 1);
            changed(err, "adding", extra);
            if (err)
                extra[0] = '\0';
        } else {
            int err = shard_worker_remove(disp, extra);
            changed(err, "removing", extra);
            if (!err)
                extra[0] = '\0';
        }
        changes++;
        if (tty && now() - last_print > 0.25) {
            struct shard_stats st;
            shard_dispatcher_stats(disp, &st);
            long done = atomic_load(&packets_done);
            printf("\r%8.0f packets/s  %zu workers  %ld handoffs  ", (done - last_done) / (now() - last_print),
                   st.workers, atomic_load(&handoffs));
            fflush(stdout);
            last_print = now();
            last_done = done;
        }
    }
    if (!crashed) { /* changes so slow that the run ended before its halfway mark was seen */
        crash_w1();
        changes++;
    }
    if (tty)
        printf("\n");
    printf("%d membership changes, one of them a crash of %s\n", changes, crashed_name);
    return extra;
}

/* The load each worker in the ring carries, as shard measures it: the share of players the ring gives
 * it, its time in jobs, its queue averaged over the last second, its pending idle timers. */
static void print_load(void)
{
    struct shard_worker_stats st[64];
    long n = shard_dispatcher_worker_stats(disp, st, 64);
    printf("\n%-12s %8s %10s %12s %11s %8s\n", "load", "share", "busy ms", "jobs", "queue avg", "timers");
    for (long i = 0; i < n && i < 64; i++)
        if (st[i].state == SHARD_WORKER_RUNNING)
            printf("%-12s %7.1f%% %10llu %12llu %11.1f %8llu\n", st[i].name, 100 * st[i].share,
                   (unsigned long long)(st[i].busy_ns / 1000000), (unsigned long long)st[i].executed, st[i].queued_avg,
                   (unsigned long long)st[i].timers);
}

static void print_row(const char *name, const struct local *l, const char *note)
{
    printf("%-12s %10llu %12llu %10llu %10llu %10llu %10llu%s\n", name, (unsigned long long)l->held,
           (unsigned long long)l->packets, (unsigned long long)l->handed_in, (unsigned long long)l->handed_out,
           (unsigned long long)l->rebuilt, (unsigned long long)l->logouts, note);
}

int main(int argc, char **argv)
{
    const struct option_spec options[] = {
        { "--players", OPTION_INT, &players, 2, 1 << 20, "players, each with a session and its own packets" },
        { "--workers", OPTION_INT, &initial_workers, 2, 64, "workers at the start, named w0, w1, ...; w1 crashes" },
        { "--seconds", OPTION_INT, &seconds, 1, 60, "how long the packets flow" },
        { "--churn-ms", OPTION_INT, &churn_ms, 1, 1000, "milliseconds between two membership changes" },
        { "--idle-ms", OPTION_INT, &idle_ms, 1, 10000, "a player silent this long is logged out" },
    };
    const struct option_program prog = {
        "player_sessions", NULL,
        "Worker-local player sessions handed over while the pool scales and a worker crashes, and idle\n"
        "players logged out by keyed timers; checks that every packet ran exactly once, in order, where\n"
        "its session was, and every player was logged out once after its last packet, where it was.",
        options, sizeof options / sizeof options[0]
    };
    options_parse(&prog, argc, argv);
    transit = calloc((size_t)players, sizeof *transit);
    last_seq = calloc((size_t)players, sizeof *last_seq);
    last_holder = calloc((size_t)players, sizeof *last_holder);
    logged_out = calloc((size_t)players, sizeof *logged_out);
    arms = calloc((size_t)players, sizeof *arms);
    struct shard_config cfg = { .workers = (uint32_t)initial_workers, .on_worker_start = on_start,
                                .on_worker_stop = on_stop, .on_release = on_release };
    int err = transit && last_seq && last_holder && logged_out && arms ? shard_dispatcher_create(&disp, &cfg) : -ENOMEM;
    if (err) {
        fprintf(stderr, "player_sessions: cannot start: %s\n", shard_strerror(err));
        return 1;
    }
    printf("player_sessions: %lld players, %lld workers, %lld s, a membership change every %lld ms, logout after "
           "%lld ms idle\n", players, initial_workers, seconds, churn_ms, idle_ms);
    pthread_t net[2];
    double start = now();
    run_start = start;
    for (long i = 0; i < 2; i++)
        pthread_create(&net[i], NULL, network, (void *)i);
    const char *extra = churn(start);
    atomic_store(&running, 0);
    for (int i = 0; i < 2; i++)
        pthread_join(net[i], NULL);
    shard_drain(disp);
    print_load();
    double elapsed = now() - start;
    /* Every player is quiet now: each session's idle timer logs it out. Waiting for deadlines to pass
     * (timers pending), then for the logouts' jobs (drain). */
    for (struct shard_stats st;;) {
        shard_dispatcher_stats(disp, &st);
        if (st.timers == 0)
            break;
        pause_ms(idle_ms < 10 ? idle_ms : 10);
    }
    shard_drain(disp);
    shard_dispatcher_destroy(disp); /* every worker has stopped: their state is final */

    printf("\n%-12s %10s %12s %10s %10s %10s %10s\n", "worker", "sessions", "packets", "handed in", "handed out", "rebuilt",
           "logouts");
    struct local removed = { 0 };
    int nremoved = 0;
    for (struct local *l = locals; l; l = l->next_local) {
        if (strncmp(l->name, "extra-", 6) == 0 && strcmp(l->name, extra) != 0) {
            removed.held += l->held; /* an extra worker added, then removed: one row for them all */
            removed.packets += l->packets;
            removed.handed_in += l->handed_in;
            removed.handed_out += l->handed_out;
            removed.rebuilt += l->rebuilt;
            removed.logouts += l->logouts;
            nremoved++;
            continue;
        }
        print_row(l->name, l, strcmp(l->name, crashed_name) == 0 ? "  (crashed: its sessions were lost)" : "");
    }
    char note[64];
    snprintf(note, sizeof note, "  (%d workers added, then removed)", nremoved);
    if (nremoved)
        print_row("extra-*", &removed, note);
    /* Every player that sent a packet was logged out once after its last one. */
    long not_out = 0;
    for (int p = 0; p < players; p++)
        not_out += atomic_load(&last_seq[p]) > 0 && atomic_load(&logged_out[p]) != 1;
    /* Every coin made is somewhere: held at the end (a crashed worker's included), in transit, cashed out
     * at a logout, or undelivered. */
    long long in_transit = 0;
    for (int p = 0; p < players; p++)
        in_transit += transit[p] ? transit[p]->coins : 0;
    long long made = atomic_load(&coins_made), found = atomic_load(&coins_held) + in_transit + atomic_load(&coins_out) +
                                                    atomic_load(&coins_undelivered);
    printf("\n%ld trades between players as multi-key jobs (%ld short of coins), %lld coins made, %lld accounted "
           "for (%lld undelivered: no session)\n",
           atomic_load(&trades_made), atomic_load(&trades_short), made, found, (long long)atomic_load(&coins_undelivered));
    long sent = atomic_load(&packets_sent), done = atomic_load(&packets_done), errs = not_out + (made != found);
    for (int v = 0; v < V_COUNT; v++)
        errs += atomic_load(&violations[v]);
    printf("\n%ld packets sent, %ld processed (%.0f/s), %ld handoffs, %ld logouts (%ld of sessions a crash lost, %ld "
           "timers of those ignored), %ld violations\n",
           sent, done, done / elapsed, atomic_load(&handoffs), atomic_load(&logouts), atomic_load(&lost_logouts),
           atomic_load(&stale_timers), errs);
    for (int v = 0; v < V_COUNT; v++)
        if (atomic_load(&violations[v]))
            printf("  %ld: %s\n", atomic_load(&violations[v]), violation_words[v]);
    if (not_out)
        printf("  %ld: a player not logged out exactly once after its last packet\n", not_out);
    if (made != found)
        printf("  %lld coins lost or doubled\n", made - found);
    int ok = sent == done && errs == 0 && failed_changes == 0;
    printf("%s\n", ok ? "OK: every packet processed exactly once, in order, by the worker holding its session; every "
                        "player logged out once after its last packet, where its session was; no coin lost or doubled "
                        "by the trades"
                      : failed_changes ? "FAILED: a membership change failed"
                                       : "FAILED: packets lost, repeated, out of order, sessions handed over late, or "
                                         "logouts missing, repeated or misplaced");
    for (struct local *l = locals, *next; l; l = next) {
        next = l->next_local;
        free(l);
    }
    for (int p = 0; p < players; p++)
        free(transit[p]);
    free(transit);
    free(last_seq);
    free(last_holder);
    free((void *)logged_out);
    free((void *)arms);
    return ok ? 0 : 1;
}
