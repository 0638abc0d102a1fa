/* crash_sim: what consistent hashing buys when nodes crash.
 *
 * Simulates a cluster of N nodes (default 50) holding 1,000,000 sessions, and reproduces side by side
 * the tables the consistent-hashing literature quotes, with shard's ring and XXH3:
 *   1. one node crashes (N -> N-1) and one is added (4 -> 5): keys moved by hash % N and by the ring;
 *   2. load spread (max/mean, min/mean) for 1, 10, 100 and 200 points per node;
 *   3. replicas: 3 copies on distinct nodes survive any single crash; "next 3 points" does not;
 *   4. the alternatives on the same keys and the same crash: rendezvous (HRW), jump consistent hash,
 *      a Maglev table, and consistent hashing with bounded loads under a skewed key popularity;
 *   5. a live run on the real dispatcher: workers stand for nodes, one crashes mid-run (REROUTE).
 * How to read it: "moved" is the share of sessions that changed node (each one a disrupted session);
 * the ideal on a crash is the crashed node's own share, about 1/N. Every check it makes is printed as
 * ok/FAILED and the exit status is non-zero if any failed.
 *
 * Usage: crash_sim [--nodes N] [--keys K] [--csv] [--svg FILE] */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <shard.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

static int nodes = 50, nkeys = 1000000, csv, failures;
static const char *svg_path;
static uint64_t *key_hash; /* XXH3 of "session-<i>", seed 0: what shard_ring_hash gives by default */

static void check(int ok, const char *what)
{
    printf("  [%s] %s\n", ok ? "ok" : "FAILED", what);
    failures += !ok;
}

/* One table row; a NaN cell means "does not apply" and prints as "-". */
static void row(const char *table, const char *label, double a, double b, double c)
{
    double v[3] = { a, b, c };
    printf(csv ? "%s,%s" : "  %-38s", csv ? table : label, csv ? label : "");
    for (int i = 0; i < 3; i++) {
        if (isnan(v[i]))
            printf(csv ? "," : " %10s", "-");
        else
            printf(csv ? ",%.4f" : " %10.4f", v[i]);
    }
    putchar('\n');
}

static void header(const char *title, const char *a, const char *b, const char *c)
{
    if (!csv)
        printf("\n%s\n  %-38s %10s %10s %10s\n", title, "", a, b, c);
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static shard_ring *ring_of(int n, uint32_t vnodes, int skip)
{
    struct shard_ring_config cfg = { .vnodes = vnodes };
    shard_ring *r;
    shard_ring_create(&r, &cfg);
    struct shard_ring_member *m = calloc((size_t)n, sizeof *m);
    char (*names)[16] = calloc((size_t)n, 16);
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (i == skip)
            continue;
        snprintf(names[k], 16, "node-%d", i);
        m[k] = (struct shard_ring_member){ names[k], 1 };
        k++;
    }
    shard_ring_add_many(r, m, (size_t)k);
    free(m);
    free(names);
    return r;
}

static int node_id(const char *name)
{
    return atoi(name + 5);
}

static int ring_owner(const shard_ring *r, int k)
{
    return node_id(shard_ring_owner_of_hash(r, key_hash[k]));
}

/* ---- 1. movement ---- */

static double modulo_moved(int from, int to)
{
    long moved = 0;
    for (int k = 0; k < nkeys; k++)
        moved += key_hash[k] % (uint64_t)from != key_hash[k] % (uint64_t)to;
    return (double)moved / nkeys;
}

static int *before_owner, *after_owner;

static void movement(void)
{
    header("1. Keys moved (share of all sessions)", "hash % N", "ring", "ideal");
    int crashed = nodes / 3;
    shard_ring *full = ring_of(nodes, 200, -1), *less = ring_of(nodes, 200, crashed);
    long moved = 0, wrong_target = 0;
    for (int k = 0; k < nkeys; k++) {
        before_owner[k] = ring_owner(full, k);
        after_owner[k] = ring_owner(less, k);
        if (before_owner[k] == after_owner[k])
            continue;
        moved++;
        const char *next[2];
        shard_ring_owners_of_hash(full, key_hash[k], next, 2);
        wrong_target += before_owner[k] != crashed || node_id(next[1]) != after_owner[k];
    }
    char label[64];
    snprintf(label, sizeof label, "node-%d of %d crashes (%d -> %d)", crashed, nodes, nodes, nodes - 1);
    /* hash % N after a crash renumbers the survivors: N -> N-1 buckets */
    row("movement", label, modulo_moved(nodes, nodes - 1), (double)moved / nkeys, 1.0 / nodes);
    shard_ring *four = ring_of(4, 200, -1), *five = ring_of(5, 200, -1);
    long m45 = 0;
    for (int k = 0; k < nkeys; k++)
        m45 += ring_owner(four, k) != ring_owner(five, k);
    row("movement", "scale out 4 -> 5 (200 points/node)", modulo_moved(4, 5), (double)m45 / nkeys, 0.2);
    char what[128];
    snprintf(what, sizeof what, "only the crashed node's sessions moved, each to its next clockwise node (%ld moved)", moved);
    check(wrong_target == 0 && moved > 0, what);
    check(fabs((double)moved / nkeys - 1.0 / nodes) < 0.5 / nodes, "the ring moved about 1/N of the sessions");
    check(modulo_moved(nodes, nodes - 1) > 0.9, "hash % N moved almost every session");
    shard_ring_destroy(four);
    shard_ring_destroy(five);
    shard_ring_destroy(less);
    shard_ring_destroy(full);
}

/* ---- 2. spread ---- */

static void load_of(const int *owner, double *max, double *min, int n)
{
    long *count = calloc((size_t)nodes, sizeof *count);
    for (int k = 0; k < nkeys; k++)
        count[owner[k]]++;
    double mean = (double)nkeys / n;
    *max = 0;
    *min = 1e18;
    for (int i = 0; i < nodes; i++) {
        if (!count[i])
            continue;
        *max = fmax(*max, count[i] / mean);
        *min = fmin(*min, count[i] / mean);
    }
    free(count);
}

static void spread(void)
{
    header("2. Load spread (sessions per node / mean)", "max/mean", "min/mean", "points");
    static const uint32_t v[] = { 1, 10, 100, 200 };
    double max200 = 0, max1 = 0;
    int *owner = malloc((size_t)nkeys * sizeof *owner);
    for (int i = 0; i < 4; i++) {
        shard_ring *r = ring_of(nodes, v[i], -1);
        for (int k = 0; k < nkeys; k++)
            owner[k] = ring_owner(r, k);
        double max, min;
        load_of(owner, &max, &min, nodes);
        char label[64];
        snprintf(label, sizeof label, "%u point%s per node", v[i], v[i] == 1 ? "" : "s");
        row("spread", label, max, min, (double)shard_ring_point_count(r));
        if (v[i] == 1)
            max1 = max;
        if (v[i] == 200)
            max200 = max;
        shard_ring_destroy(r);
    }
    free(owner);
    check(max1 > 2.0, "one point per node is badly skewed");
    check(max200 < 1.25, "200 points per node bring the largest node near the mean");
}

/* ---- 3. replicas ---- */

static void replicas(void)
{
    header("3. Replicas (3 copies): sessions left with no live copy", "1 crash", "rack of 5", "dup nodes");
    shard_ring *r = ring_of(nodes, 200, -1);
    int crashed = nodes / 3, rack0 = (nodes / 5) * 2; /* nodes rack0 .. rack0+4 share a rack */
    long lost_one = 0, lost_rack = 0, naive_lost_one = 0, naive_dup = 0, fewer_than_two = 0;
    size_t np = shard_ring_point_count(r);
    for (int k = 0; k < nkeys; k++) {
        const char *own[3];
        shard_ring_owners_of_hash(r, key_hash[k], own, 3);
        int live = 0, rack_live = 0;
        for (int i = 0; i < 3; i++) {
            int id = node_id(own[i]);
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
            if (p < key_hash[k])
                lo = mid + 1;
            else
                hi = mid;
        }
        int ids[3], nlive = 0;
        for (int i = 0; i < 3; i++) {
            const char *o;
            shard_ring_point(r, (lo + (size_t)i) % np, NULL, &o);
            ids[i] = node_id(o);
            nlive += ids[i] != crashed;
        }
        naive_dup += ids[0] == ids[1] || ids[1] == ids[2] || ids[0] == ids[2];
        naive_lost_one += nlive == 0;
    }
    row("replicas", "distinct nodes (shard_ring_owners)", (double)lost_one / nkeys, (double)lost_rack / nkeys,
        0);
    row("replicas", "next 3 points, whoever owns them", (double)naive_lost_one / nkeys, NAN, (double)naive_dup / nkeys);
    check(lost_one == 0 && fewer_than_two == 0, "with distinct replicas one crash leaves every session 2 live copies");
    check(naive_dup > 0, "next-3-points puts some sessions' copies on one node twice");
    shard_ring_destroy(r);
}

/* ---- 4. alternatives ---- */

static uint64_t hrw_score(uint64_t key, int node)
{
    uint64_t x = key ^ ((uint64_t)node * 0x9e3779b97f4a7c15ull);
    return XXH3_64bits(&x, sizeof x);
}

static int hrw_owner(uint64_t key, int n, int skip)
{
    int best = -1;
    uint64_t best_s = 0;
    for (int i = 0; i < n; i++) {
        if (i == skip)
            continue;
        uint64_t s = hrw_score(key, i);
        if (best < 0 || s > best_s) {
            best = i;
            best_s = s;
        }
    }
    return best;
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

static void alternatives(void)
{
    header("4. Alternatives, same keys, same crash", "moved", "max/mean", "ns/lookup");
    int crashed = nodes / 3, *b = malloc((size_t)nkeys * sizeof *b), *a = malloc((size_t)nkeys * sizeof *a);
    double max, min, t0;
    /* the ring (results of table 1) */
    load_of(before_owner, &max, &min, nodes);
    shard_ring *r = ring_of(nodes, 200, -1);
    t0 = now_ns();
    long sink = 0;
    for (int k = 0; k < nkeys; k++)
        sink += ring_owner(r, k);
    double ring_ns = (now_ns() - t0) / nkeys;
    long moved = 0;
    for (int k = 0; k < nkeys; k++)
        moved += before_owner[k] != after_owner[k];
    row("alternatives", "ring, 200 points/node", (double)moved / nkeys, max, ring_ns);
    /* rendezvous */
    t0 = now_ns();
    for (int k = 0; k < nkeys; k++)
        b[k] = hrw_owner(key_hash[k], nodes, -1);
    double hrw_ns = (now_ns() - t0) / nkeys;
    moved = 0;
    for (int k = 0; k < nkeys; k++) {
        a[k] = b[k] == crashed ? hrw_owner(key_hash[k], nodes, crashed) : b[k];
        moved += a[k] != b[k];
    }
    load_of(b, &max, &min, nodes);
    row("alternatives", "rendezvous (HRW): O(N) a lookup", (double)moved / nkeys, max, hrw_ns);
    double hrw_moved = (double)moved / nkeys;
    /* jump: it can only drop the last bucket; removing node `crashed` means renumbering */
    t0 = now_ns();
    for (int k = 0; k < nkeys; k++)
        b[k] = jump_hash(key_hash[k], nodes);
    double jump_ns = (now_ns() - t0) / nkeys;
    moved = 0;
    for (int k = 0; k < nkeys; k++) {
        int j = jump_hash(key_hash[k], nodes - 1);
        a[k] = j < crashed ? j : j + 1; /* survivors keep their names, buckets shift */
        moved += a[k] != b[k];
    }
    load_of(b, &max, &min, nodes);
    row("alternatives", "jump hash (no middle removal)", (double)moved / nkeys, max, jump_ns);
    double jump_moved = (double)moved / nkeys;
    /* maglev */
    int *t1 = malloc(MAGLEV_M * sizeof *t1), *t2 = malloc(MAGLEV_M * sizeof *t2);
    maglev_build(t1, nodes, -1);
    maglev_build(t2, nodes, crashed);
    t0 = now_ns();
    for (int k = 0; k < nkeys; k++)
        b[k] = t1[key_hash[k] % MAGLEV_M];
    double mag_ns = (now_ns() - t0) / nkeys;
    moved = 0;
    for (int k = 0; k < nkeys; k++)
        moved += t2[key_hash[k] % MAGLEV_M] != b[k];
    load_of(b, &max, &min, nodes);
    row("alternatives", "Maglev table (65,537 entries)", (double)moved / nkeys, max, mag_ns);
    double mag_moved = (double)moved / nkeys;
    /* bounded loads under a power-law popularity: weight of key k ~ 1/(k+1)^0.8 */
    double total = 0, *w = malloc((size_t)nkeys * sizeof *w);
    for (int k = 0; k < nkeys; k++)
        total += w[k] = 1.0 / pow(k + 1, 0.8);
    double cap = 1.25 * total / nodes, *load = calloc((size_t)nodes, sizeof *load), *free_load = calloc((size_t)nodes, sizeof *free_load);
    for (int k = 0; k < nkeys; k++) {
        const char *cand[64];
        size_t n = shard_ring_owners_of_hash(r, key_hash[k], cand, (size_t)(nodes < 64 ? nodes : 64));
        free_load[node_id(cand[0])] += w[k];
        size_t i = 0;
        while (i + 1 < n && load[node_id(cand[i])] + w[k] > cap)
            i++;
        load[node_id(cand[i])] += w[k];
    }
    double mx_free = 0, mx_bound = 0;
    for (int i = 0; i < nodes; i++) {
        mx_free = fmax(mx_free, free_load[i] / (total / nodes));
        mx_bound = fmax(mx_bound, load[i] / (total / nodes));
    }
    row("alternatives", "ring, skewed popularity: max/mean", NAN, mx_free, NAN);
    row("alternatives", "bounded loads (c = 1.25): max/mean", NAN, mx_bound, NAN);
    check(hrw_moved < 1.5 / nodes, "rendezvous moves only the crashed node's keys too");
    check(jump_moved > 0.2, "jump hash cannot remove an arbitrary node without moving many keys");
    check(mag_moved >= (1.0 / nodes) * 0.9 && mag_moved < 3.0 / nodes, "Maglev moves a little more than the minimum");
    check(mx_bound <= 1.25 + 1e-9 || mx_bound < mx_free, "bounded loads cap the hottest node");
    if (sink == -1)
        puts("");
    free(w);
    free(load);
    free(free_load);
    free(t1);
    free(t2);
    free(a);
    free(b);
    shard_ring_destroy(r);
}

/* ---- 5. live, on the dispatcher ---- */

#define LIVE_WORKERS 8
#define LIVE_SESSIONS 20000

/* Where a session's jobs ran: worker names, copied (a crashed worker's memory is freed once it is
 * finished with, so its shard_worker pointer and name do not outlive it). */
struct live_session {
    char       home[8], first[8];
    atomic_int jobs;
};

static struct live_session live[LIVE_SESSIONS];
static shard_dispatcher *disp;
static atomic_int producing;

static void session_job(shard_worker *w, void *arg)
{
    struct live_session *s = arg;
    if (!s->first[0])
        snprintf(s->first, sizeof s->first, "%s", shard_worker_name(w));
    snprintf(s->home, sizeof s->home, "%s", shard_worker_name(w));
    atomic_fetch_add_explicit(&s->jobs, 1, memory_order_relaxed);
}

static size_t live_key(char *buf, int i)
{
    return (size_t)snprintf(buf, 24, "session-%d", i);
}

static void *live_producer(void *arg)
{
    (void)arg;
    char k[24];
    for (int round = 0; round < 20; round++)
        for (int i = 0; i < LIVE_SESSIONS; i++)
            shard_submit(disp, k, live_key(k, i), session_job, &live[i]);
    atomic_store(&producing, 0);
    return NULL;
}

static void live_run(void)
{
    struct shard_config cfg = { .workers = LIVE_WORKERS };
    if (shard_dispatcher_create(&disp, &cfg) != 0) {
        check(0, "create the dispatcher");
        return;
    }
    char k[24];
    for (int i = 0; i < LIVE_SESSIONS; i++)
        shard_submit(disp, k, live_key(k, i), session_job, &live[i]);
    shard_drain(disp);
    atomic_store(&producing, 1);
    pthread_t t;
    pthread_create(&t, NULL, live_producer, NULL);
    int err = shard_worker_crash(disp, "w3", SHARD_CRASH_REROUTE); /* while traffic flows */
    pthread_join(t, NULL);
    shard_drain(disp);
    long moved = 0, wrong = 0, ran = 0, modulo = 0;
    for (int i = 0; i < LIVE_SESSIONS; i++) {
        ran += atomic_load(&live[i].jobs);
        if (strcmp(live[i].home, live[i].first) != 0) {
            moved++;
            wrong += strcmp(live[i].first, "w3") != 0;
        }
        uint64_t h = XXH3_64bits(k, live_key(k, i));
        modulo += h % LIVE_WORKERS != h % (LIVE_WORKERS - 1);
    }
    char title[128];
    snprintf(title, sizeof title, "5. Live: %d workers, %d sessions, 21 jobs each; w3 crashes mid-run (REROUTE)",
             LIVE_WORKERS, LIVE_SESSIONS);
    header(title, "moved", "hash % N", "jobs lost");
    row("live", "sessions disrupted by the crash", (double)moved / LIVE_SESSIONS, (double)modulo / LIVE_SESSIONS,
        (double)(21L * LIVE_SESSIONS - ran));
    check(err == 0, "crash accepted");
    check(ran == 21L * LIVE_SESSIONS, "every job ran exactly once, none lost");
    check(wrong == 0 && moved > 0, "only the crashed worker's sessions moved");
    shard_dispatcher_destroy(disp);
}

/* ---- SVG ---- */

static void svg(void)
{
    FILE *f = fopen(svg_path, "w");
    if (!f) {
        fprintf(stderr, "crash_sim: %s: %s\n", svg_path, strerror(errno));
        failures++;
        return;
    }
    int crashed = nodes / 3;
    shard_ring *r = ring_of(nodes, 200, -1), *less = ring_of(nodes, 200, crashed);
    double cx = 330, cy = 330, R = 280;
    fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='1100' height='680' font-family='sans-serif' font-size='12'>\n"
               "<rect width='1100' height='680' fill='white'/>\n"
               "<text x='20' y='24' font-size='16'>Ring of %d nodes x 200 points; node-%d crashes</text>\n"
               "<text x='20' y='44'>outer: owner before; inner: owner after (the crashed node's arcs, recoloured); dots: sessions</text>\n",
            nodes, crashed);
    for (int ring = 0; ring < 2; ring++) {
        shard_ring *rr = ring ? less : r;
        double rad = ring ? R - 22 : R;
        size_t n = shard_ring_point_count(rr);
        for (size_t i = 0; i < n; i++) {
            uint64_t p0, p1;
            const char *o;
            shard_ring_point(rr, i == 0 ? n - 1 : i - 1, &p0, NULL);
            shard_ring_point(rr, i, &p1, &o);
            double a0 = (double)p0 / 18446744073709551616.0 * 2 * M_PI, a1 = (double)p1 / 18446744073709551616.0 * 2 * M_PI;
            if (i == 0)
                a0 -= 2 * M_PI;
            int id = node_id(o);
            const char *width = !ring && id == crashed ? "16" : "12";
            fprintf(f, "<path d='M %.1f %.1f A %.0f %.0f 0 %d 1 %.1f %.1f' stroke='hsl(%d,65%%,%d%%)' stroke-width='%s' fill='none'/>\n",
                    cx + rad * sin(a0), cy - rad * cos(a0), rad, rad, a1 - a0 > M_PI, cx + rad * sin(a1),
                    cy - rad * cos(a1), id * 360 / nodes, !ring && id == crashed ? 20 : 55, width);
        }
    }
    for (int k = 0; k < 300 && k < nkeys; k++) {
        double a = (double)key_hash[k] / 18446744073709551616.0 * 2 * M_PI;
        fprintf(f, "<circle cx='%.1f' cy='%.1f' r='2' fill='%s'/>\n", cx + (R - 45) * sin(a), cy - (R - 45) * cos(a),
                before_owner[k] == crashed ? "red" : "#444");
    }
    long *b = calloc((size_t)nodes, sizeof *b), *a = calloc((size_t)nodes, sizeof *a), mx = 1;
    for (int k = 0; k < nkeys; k++) {
        b[before_owner[k]]++;
        a[after_owner[k]]++;
    }
    for (int i = 0; i < nodes; i++)
        mx = b[i] > mx ? b[i] : a[i] > mx ? a[i] : mx;
    fprintf(f, "<text x='680' y='80' font-size='14'>sessions per node: before (grey), after (blue)</text>\n");
    double bw = 380.0 / nodes;
    for (int i = 0; i < nodes; i++) {
        double hb = 500.0 * b[i] / mx, ha = 500.0 * a[i] / mx, x = 690 + i * bw;
        fprintf(f, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='%s'/>\n", x, 620 - hb, bw * 0.45, hb,
                i == crashed ? "red" : "#aaa");
        fprintf(f, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='#36c'/>\n", x + bw * 0.45, 620 - ha, bw * 0.45, ha);
    }
    fprintf(f, "<text x='690' y='640'>node-0 ... node-%d (red: the crashed node)</text>\n</svg>\n", nodes - 1);
    fclose(f);
    free(a);
    free(b);
    shard_ring_destroy(r);
    shard_ring_destroy(less);
    printf("\nwrote %s\n", svg_path);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--nodes") == 0 && i + 1 < argc)
            nodes = atoi(argv[++i]);
        else if (strcmp(argv[i], "--keys") == 0 && i + 1 < argc)
            nkeys = atoi(argv[++i]);
        else if (strcmp(argv[i], "--csv") == 0)
            csv = 1;
        else if (strcmp(argv[i], "--svg") == 0 && i + 1 < argc)
            svg_path = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--nodes N] [--keys K] [--csv] [--svg FILE]\n", argv[0]);
            return 2;
        }
    }
    if (nodes < 6 || nodes > 1000 || nkeys < 1000) {
        fprintf(stderr, "crash_sim: --nodes must be 6..1000 and --keys at least 1000\n");
        return 2;
    }
    key_hash = malloc((size_t)nkeys * sizeof *key_hash);
    before_owner = malloc((size_t)nkeys * sizeof *before_owner);
    after_owner = malloc((size_t)nkeys * sizeof *after_owner);
    for (int k = 0; k < nkeys; k++) {
        char key[24];
        int len = snprintf(key, sizeof key, "session-%d", k);
        key_hash[k] = XXH3_64bits(key, (size_t)len);
    }
    if (csv)
        printf("table,row,a,b,c\n");
    else
        printf("crash_sim: %d nodes, %d sessions\n", nodes, nkeys);
    movement();
    spread();
    replicas();
    alternatives();
    live_run();
    if (svg_path)
        svg();
    if (!csv)
        printf("\n%s\n", failures ? "FAILED: see the checks above" : "OK: every check held");
    free(key_hash);
    free(before_owner);
    free(after_owner);
    return failures ? 1 : 0;
}
