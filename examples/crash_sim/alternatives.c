/* Table 4: the alternatives to a ring on the same sessions and the same crash: rendezvous hashing
 * (HRW), jump consistent hash, a Maglev table, and consistent hashing with bounded loads under a
 * skewed popularity. Each is written here in a few lines, as its paper gives it. */
#include <math.h>
#include <stdlib.h>
#include <time.h>
#include <xxhash.h>

#include "crash_sim.h"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Largest session count over the mean, for an owner per session. */
static double max_over_mean(const struct sim *s, const int *owner)
{
    long *count = calloc((size_t)s->nodes, sizeof *count), max = 0;
    for (int k = 0; k < s->keys; k++)
        count[owner[k]]++;
    for (int i = 0; i < s->nodes; i++)
        max = count[i] > max ? count[i] : max;
    free(count);
    return (double)max * s->nodes / s->keys;
}

static uint64_t hrw_score(uint64_t key, int node)
{
    uint64_t x = key ^ ((uint64_t)node * 0x9e3779b97f4a7c15ull);
    return XXH3_64bits(&x, sizeof x);
}

/* The key's owner among nodes 0..n-1: the highest score. */
static int hrw_owner(uint64_t key, int n)
{
    int best = 0;
    uint64_t best_s = hrw_score(key, 0);
    for (int i = 1; i < n; i++) {
        uint64_t s = hrw_score(key, i);
        if (s > best_s) {
            best = i;
            best_s = s;
        }
    }
    return best;
}

/* Its owner with all n nodes and without node `skip`, in one pass over the scores. */
static void hrw_owners(uint64_t key, int n, int skip, int *with, int *without)
{
    uint64_t best_s = 0, best_without_s = 0;
    *with = *without = -1;
    for (int i = 0; i < n; i++) {
        uint64_t s = hrw_score(key, i);
        if (*with < 0 || s > best_s) {
            *with = i;
            best_s = s;
        }
        if (i != skip && (*without < 0 || s > best_without_s)) {
            *without = i;
            best_without_s = s;
        }
    }
}

static int32_t jump_hash(uint64_t key, int32_t buckets)
{
    int64_t b = -1, j = 0;
    while (j < buckets) {
        b = j;
        key = key * 2862933555777941757ULL + 1;
        j = (int64_t)((double)(b + 1) * ((double)(1LL << 31) / (double)((key >> 33) + 1)));
    }
    return (int32_t)b;
}

#define MAGLEV_M 65537u

static void maglev_build(int *table, int n, int skip)
{
    uint64_t *off = calloc((size_t)n, 8), *step = calloc((size_t)n, 8), *next = calloc((size_t)n, 8);
    for (int i = 0; i < n; i++) {
        char name[16];
        int len = snprintf(name, sizeof name, "node-%d", i);
        off[i] = XXH3_64bits_withSeed(name, (size_t)len, 1) % MAGLEV_M;
        step[i] = XXH3_64bits_withSeed(name, (size_t)len, 2) % (MAGLEV_M - 1) + 1;
    }
    for (uint32_t i = 0; i < MAGLEV_M; i++)
        table[i] = -1;
    for (uint32_t filled = 0; filled < MAGLEV_M;)
        for (int i = 0; i < n && filled < MAGLEV_M; i++) {
            if (i == skip)
                continue;
            uint64_t c;
            do
                c = (off[i] + next[i]++ * step[i]) % MAGLEV_M;
            while (table[c] >= 0);
            table[c] = i;
            filled++;
        }
    free(off);
    free(step);
    free(next);
}

/* Bounded loads (Mirrokni et al.) with session k weighing 1/(k+1)^0.8: each session goes to the
 * first node clockwise with room under c times the mean; if none has room, to the least loaded.
 * That fallback is what makes the cap provable for weighted sessions: a session fits nowhere only
 * if every node is above c*mean - w, and the least loaded is below the mean, so w > (c-1)*mean;
 * the node it lands on ends below mean + w. Once above the cap it takes nothing more: no session
 * fits it, and being above the mean it is not the least loaded. Writes the largest load over the
 * mean, unbounded and bounded, and the largest the argument allows. */
static void bounded_loads(const struct sim *s, double c, double *max_free, double *max_bound, double *limit)
{
    int n = s->nodes;
    double total = 0, *load = calloc((size_t)n, sizeof *load), *free_load = calloc((size_t)n, sizeof *free_load);
    const char **cand = malloc((size_t)n * sizeof *cand);
    for (int k = 0; k < s->keys; k++)
        total += pow(k + 1, -0.8);
    double mean = total / n, cap = c * mean, heaviest_misfit = 0;
    for (int k = 0; k < s->keys; k++) {
        double w = pow(k + 1, -0.8);
        size_t m = shard_ring_owners_of_hash(s->full, s->key_hash[k], cand, n < 8 ? (size_t)n : 8);
        free_load[sim_node_id(cand[0])] += w;
        int pick = -1;
        for (;;) {
            for (size_t i = 0; i < m && pick < 0; i++)
                if (load[sim_node_id(cand[i])] + w <= cap)
                    pick = sim_node_id(cand[i]);
            if (pick >= 0 || m == (size_t)n)
                break;
            m = shard_ring_owners_of_hash(s->full, s->key_hash[k], cand, (size_t)n); /* all of them */
        }
        if (pick < 0) { /* it fits nowhere: the least loaded node */
            heaviest_misfit = fmax(heaviest_misfit, w);
            pick = 0;
            for (int i = 1; i < n; i++)
                if (load[i] < load[pick])
                    pick = i;
        }
        load[pick] += w;
    }
    *max_free = *max_bound = 0;
    for (int i = 0; i < n; i++) {
        *max_free = fmax(*max_free, free_load[i] / mean);
        *max_bound = fmax(*max_bound, load[i] / mean);
    }
    *limit = fmax(c, 1 + heaviest_misfit / mean);
    free(cand);
    free(load);
    free(free_load);
}

void alternatives(const struct sim *s)
{
    report_table("alternatives", "4. Alternatives, same keys, same crash", "moved", "max/mean", "ns/lookup");
    int n = s->nodes, crashed = s->crashed, keys = s->keys;
    int *b = calloc((size_t)keys, sizeof *b), *a = calloc((size_t)keys, sizeof *a);
    double t0 = now_ns();
    long sink = 0;
    for (int k = 0; k < keys; k++)
        sink += sim_node_id(shard_ring_owner_of_hash(s->full, s->key_hash[k]));
    double ring_ns = (now_ns() - t0) / keys;
    long ring_moved = 0;
    for (int k = 0; k < keys; k++)
        ring_moved += s->before[k] != s->after[k];
    report_row("ring, 200 points/node", (double)ring_moved / keys, max_over_mean(s, s->before), ring_ns);

    /* rendezvous: timed on up to 100,000 sessions (a lookup costs N hashes); then every session's
     * owner with and without the crashed node, to see who moved */
    int timed = keys < 100000 ? keys : 100000;
    t0 = now_ns();
    for (int k = 0; k < timed; k++)
        sink += hrw_owner(s->key_hash[k], n);
    double hrw_ns = (now_ns() - t0) / timed;
    long hrw_moved = 0, hrw_wrong = 0;
    for (int k = 0; k < keys; k++) {
        hrw_owners(s->key_hash[k], n, crashed, &b[k], &a[k]);
        hrw_moved += a[k] != b[k];
        hrw_wrong += a[k] != b[k] && b[k] != crashed;
    }
    report_row("rendezvous (HRW): O(N) a lookup", (double)hrw_moved / keys, max_over_mean(s, b), hrw_ns);

    /* jump: it can only drop the last bucket; removing node `crashed` means renumbering */
    t0 = now_ns();
    for (int k = 0; k < keys; k++)
        b[k] = jump_hash(s->key_hash[k], n);
    double jump_ns = (now_ns() - t0) / keys;
    long jump_moved = 0;
    for (int k = 0; k < keys; k++) {
        int j = jump_hash(s->key_hash[k], n - 1);
        a[k] = j < crashed ? j : j + 1; /* survivors keep their names, buckets shift */
        jump_moved += a[k] != b[k];
    }
    report_row("jump hash (no middle removal)", (double)jump_moved / keys, max_over_mean(s, b), jump_ns);

    int *t1 = malloc(MAGLEV_M * sizeof *t1), *t2 = malloc(MAGLEV_M * sizeof *t2);
    maglev_build(t1, n, -1);
    maglev_build(t2, n, crashed);
    long changed = 0, own = 0, mag_moved = 0;
    for (uint32_t i = 0; i < MAGLEV_M; i++) {
        changed += t1[i] != t2[i];
        own += t1[i] == crashed;
    }
    t0 = now_ns();
    for (int k = 0; k < keys; k++)
        b[k] = t1[s->key_hash[k] % MAGLEV_M];
    double mag_ns = (now_ns() - t0) / keys;
    for (int k = 0; k < keys; k++)
        mag_moved += t2[s->key_hash[k] % MAGLEV_M] != b[k];
    report_row("Maglev table (65,537 entries)", (double)mag_moved / keys, max_over_mean(s, b), mag_ns);

    double max_free, max_bound, limit;
    bounded_loads(s, 1.25, &max_free, &max_bound, &limit);
    report_row("ring, skewed popularity: max/mean", NAN, max_free, NAN);
    report_row("bounded loads (c = 1.25): max/mean", NAN, max_bound, NAN);

    double p = 1.0 / n;
    report_check(hrw_wrong == 0 && stats_near(hrw_moved, keys, p),
                 "rendezvous moves only the crashed node's sessions too, about 1/N of them");
    /* Jump hash keeps bucket b < crashed, moves every bucket from crashed on (renumbered), except
     * the 1/(N-1) of the last bucket's sessions that N-1 buckets send to bucket N-2, now N-1. */
    double jump_p = (double)(n - crashed) / n - 1.0 / ((double)n * (n - 1));
    report_check(stats_near(jump_moved, keys, jump_p),
                 "jump hash cannot remove node-%d without renumbering: about %.4f moved", crashed, jump_p);
    /* The table depends on N only; the sessions sample it. */
    report_check(changed > own && stats_near(mag_moved, keys, (double)changed / MAGLEV_M),
                 "Maglev moves more than the minimum: %.4f of its table changed, the crashed node had %.4f",
                 (double)changed / MAGLEV_M, (double)own / MAGLEV_M);
    if (limit > 1.25)
        report_check(max_bound <= limit + 1e-9,
                     "bounded loads keep every node under %.2fx the mean (1.25x, or the mean plus a session that "
                     "fit nowhere)", limit);
    else
        report_check(max_bound <= limit + 1e-9, "bounded loads keep every node under 1.25x the mean");
    if (sink == -1)
        fputc('\n', report_text());
    free(t1);
    free(t2);
    free(a);
    free(b);
}
