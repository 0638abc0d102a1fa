/* Tables 1-3, on shard's ring: what a crash moves (against hash % N), how evenly points spread the
 * load, and whether replicas on distinct nodes survive a crash. Each check states what holds for
 * every accepted --nodes and --keys, with stats.c's allowance for chance where chance is involved. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "crash_sim.h"

static long modulo_moved(const struct sim *s, int from, int to)
{
    long moved = 0;
    for (int k = 0; k < s->keys; k++)
        moved += s->key_hash[k] % (uint64_t)from != s->key_hash[k] % (uint64_t)to;
    return moved;
}

static void movement(const struct sim *s)
{
    report_table("movement", "1. Keys moved (share of all sessions)", "hash % N", "ring", "ideal");
    int n = s->nodes, c = s->crashed;
    long keys = s->keys, moved = 0, wrong_target = 0;
    for (int k = 0; k < s->keys; k++) {
        if (s->before[k] == s->after[k])
            continue;
        moved++;
        const char *next[2];
        shard_ring_owners_of_hash(s->full, s->key_hash[k], next, 2);
        wrong_target += s->before[k] != c || sim_node_id(next[1]) != s->after[k];
    }
    /* hash % N after a crash renumbers the survivors: N -> N-1 buckets */
    long modulo = modulo_moved(s, n, n - 1);
    char label[64];
    snprintf(label, sizeof label, "node-%d of %d crashes (%d -> %d)", c, n, n, n - 1);
    report_row(label, (double)modulo / keys, (double)moved / keys, 1.0 / n);
    report_value("movement", label, "ring: sessions moved", (double)moved);
    shard_ring *four = sim_ring(4, SIM_POINTS, -1), *five = sim_ring(5, SIM_POINTS, -1);
    long scale_out = 0;
    for (int k = 0; k < s->keys; k++)
        scale_out += strcmp(shard_ring_owner_of_hash(four, s->key_hash[k]),
                            shard_ring_owner_of_hash(five, s->key_hash[k])) != 0;
    report_row("scale out 4 -> 5 (200 points/node)", (double)modulo_moved(s, 4, 5) / keys,
               (double)scale_out / keys, 0.2);
    shard_ring_destroy(four);
    shard_ring_destroy(five);

    report_check(wrong_target == 0 && moved == s->count_before[c],
                 "only node-%d's sessions moved, each to its next clockwise node (%ld moved)", c, moved);
    /* The crashed node's share of the circle is Beta(P, (N-1)P) for P points a node: 6 standard
     * deviations allow for the ring (it depends on N only; every accepted N was tried), then the
     * sessions on that share are draws. */
    double p = 1.0 / n, ring_sd = sqrt(p * (1 - p) / (n * SIM_POINTS + 1.0));
    report_check(fabs(s->share[c] - p) <= 6 * ring_sd && stats_near(moved, keys, s->share[c]),
                 "the ring moved about 1/N of the sessions: node-%d held %.4f of the circle (1/N = %.4f)", c,
                 s->share[c], p);
    /* a session stays only if h % N == h % (N-1): N-1 of every N(N-1) hashes */
    report_check(stats_near(modulo, keys, 1 - p), "hash %% N moved about (N-1)/N = %.4f of the sessions", 1 - p);
}

static void spread(const struct sim *s)
{
    report_table("spread", "2. Load spread (each node's share of the circle / mean share)", "max/mean", "min/mean",
                 "points");
    static const uint32_t points[] = { 1, 10, 100, SIM_POINTS };
    int n = s->nodes;
    double max1 = 0, max_full = 0, *share = malloc((size_t)n * sizeof *share);
    /* Shares, not session counts: with few sessions a node, counting would measure the sampling. */
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        shard_ring *r = sim_ring(n, points[i], -1);
        sim_ring_shares(r, n, share);
        double max = 0, min = 1;
        for (int j = 0; j < n; j++) {
            max = fmax(max, share[j] * n);
            min = fmin(min, share[j] * n);
        }
        char label[64];
        snprintf(label, sizeof label, "%u point%s per node", points[i], points[i] == 1 ? "" : "s");
        report_row(label, max, min, (double)shard_ring_point_count(r));
        if (points[i] == 1)
            max1 = max;
        if (points[i] == SIM_POINTS)
            max_full = max;
        shard_ring_destroy(r);
    }
    free(share);
    double bound = stats_max_share_bound(n, SIM_POINTS);
    report_check(max_full <= bound,
                 "200 points per node keep the largest node under %.2fx the mean (the bound for %d nodes)", bound, n);
    report_check(max1 > bound, "one point per node does not: its largest node holds %.2fx the mean", max1);
}

/* The share of the circle whose next three points (the naive replicas) name some node twice. */
static double naive_dup_share(const shard_ring *r)
{
    size_t np = shard_ring_point_count(r);
    double dup = 0;
    uint64_t prev;
    shard_ring_point(r, np - 1, &prev, NULL);
    for (size_t i = 0; i < np; i++) {
        uint64_t p;
        const char *o[3];
        shard_ring_point(r, i, &p, &o[0]);
        shard_ring_point(r, (i + 1) % np, NULL, &o[1]);
        shard_ring_point(r, (i + 2) % np, NULL, &o[2]);
        if (strcmp(o[0], o[1]) == 0 || strcmp(o[1], o[2]) == 0 || strcmp(o[0], o[2]) == 0)
            dup += sim_turn(p - prev);
        prev = p;
    }
    return dup;
}

static void replicas(const struct sim *s)
{
    report_table("replicas", "3. Replicas (3 copies): sessions left with no live copy", "1 crash", "rack of 5",
                 "dup nodes");
    const shard_ring *r = s->full;
    int crashed = s->crashed, rack0 = (s->nodes / 5) * 2; /* nodes rack0 .. rack0+4 share a rack */
    if (rack0 > s->nodes - 5)
        rack0 = s->nodes - 5;
    long lost_one = 0, lost_rack = 0, naive_lost_one = 0, naive_dup = 0, fewer_than_two = 0;
    size_t np = shard_ring_point_count(r);
    for (int k = 0; k < s->keys; k++) {
        const char *own[3];
        shard_ring_owners_of_hash(r, s->key_hash[k], own, 3);
        int live = 0, rack_live = 0;
        for (int i = 0; i < 3; i++) {
            int id = sim_node_id(own[i]);
            live += id != crashed;
            rack_live += id < rack0 || id >= rack0 + 5;
        }
        lost_one += live == 0;
        fewer_than_two += live < 2;
        lost_rack += rack_live == 0;
        /* naive: the next three points, whoever owns them */
        uint64_t p;
        size_t lo = 0, hi = np;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            shard_ring_point(r, mid, &p, NULL);
            if (p < s->key_hash[k])
                lo = mid + 1;
            else
                hi = mid;
        }
        int ids[3], nlive = 0;
        for (int i = 0; i < 3; i++) {
            const char *o;
            shard_ring_point(r, (lo + (size_t)i) % np, NULL, &o);
            ids[i] = sim_node_id(o);
            nlive += ids[i] != crashed;
        }
        naive_dup += ids[0] == ids[1] || ids[1] == ids[2] || ids[0] == ids[2];
        naive_lost_one += nlive == 0;
    }
    double keys = s->keys, dup_share = naive_dup_share(r);
    report_row("distinct nodes (shard_ring_owners)", lost_one / keys, lost_rack / keys, 0);
    report_row("next 3 points, whoever owns them", naive_lost_one / keys, NAN, naive_dup / keys);
    report_check(lost_one == 0 && fewer_than_two == 0,
                 "with distinct replicas one crash leaves every session 2 live copies");
    /* on the circle, not on the sessions: with few sessions none may land on such an arc */
    report_check(dup_share > 0, "next-3-points puts copies on one node twice for %.4f of the circle", dup_share);
}

void ring_tables(const struct sim *s)
{
    movement(s);
    spread(s);
    replicas(s);
}
