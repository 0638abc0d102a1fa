/* crash_sim: what consistent hashing buys when nodes crash.
 *
 * Simulates a cluster of N nodes (default 50) holding K sessions (default 1,000,000), crashes node
 * N/3, and reproduces side by side the tables the consistent-hashing literature quotes, with
 * shard's ring and XXH3:
 *   1. one node crashes (N -> N-1) and one is added (4 -> 5): sessions moved by hash % N and by the ring;
 *   2. load spread (max/mean, min/mean) for 1, 10, 100 and 200 points per node;
 *   3. replicas: 3 copies on distinct nodes survive any single crash; "next 3 points" does not;
 *   4. the alternatives on the same sessions and the same crash: rendezvous (HRW), jump consistent
 *      hash, a Maglev table, and consistent hashing with bounded loads under a skewed popularity;
 *   5. a live run on the real dispatcher: workers stand for nodes, one crashes mid-run (REROUTE);
 *   6. skewed popularity on the real dispatcher, with and without its balancer.
 * How to read it: "moved" is the share of sessions that changed node (each one a disrupted session);
 * the ideal on a crash is the crashed node's own share, about 1/N. Every check is printed as
 * ok/FAILED; each allows for chance (stats.c), so it holds for every accepted --nodes and --keys.
 *
 * Usage: crash_sim [--nodes N] [--keys K] [--csv] [--svg FILE]   (--help for the ranges)
 * Exit status: 0 when every check held, 1 when one failed, 2 for a bad command line or a --svg file
 * that cannot be written (found before the simulation starts). */
#include <errno.h>
#include <string.h>

#include "crash_sim.h"
#include "options.h"

/* Per-node counts for CSV readers: they add up to the session count before and after. */
static void report_nodes(const struct sim *s)
{
    for (int i = 0; i < s->nodes; i++) {
        char row[16];
        snprintf(row, sizeof row, "node-%d", i);
        report_value("nodes", row, "sessions before", (double)s->count_before[i]);
        report_value("nodes", row, "sessions after", (double)s->count_after[i]);
        report_value("nodes", row, "share of the circle", s->share[i]);
    }
}

int main(int argc, char **argv)
{
    long long nodes = 50, keys = 1000000;
    bool csv = false;
    const char *svg_path = NULL;
    const struct option_spec options[] = {
        { "--nodes", OPTION_INT, &nodes, 6, 1000, "nodes in the cluster (node N/3 crashes)" },
        /* the rendezvous row costs nodes x keys hashes: 1000 x 2,000,000 takes about 6 s */
        { "--keys", OPTION_INT, &keys, 1000, 2000000, "sessions placed on the nodes" },
        { "--csv", OPTION_FLAG, &csv, 0, 0,
          "every number as CSV on stdout (table,row,measure,value); the text and checks go to stderr" },
        { "--svg", OPTION_STRING, &svg_path, 0, 0, "also draw the crash as an SVG picture into this file" },
    };
    const struct option_program program = {
        "crash_sim", NULL,
        "What consistent hashing moves when a node crashes, against hash % N.\n"
        "Exit status: 0 every check held, 1 a check failed, 2 a bad command line or --svg file.",
        options, sizeof options / sizeof options[0]
    };
    options_parse(&program, argc, argv);

    FILE *svg = NULL;
    if (svg_path && !(svg = fopen(svg_path, "w"))) {
        fprintf(stderr, "crash_sim: cannot write the picture to '%s': %s\n", svg_path, strerror(errno));
        return 2;
    }
    struct sim s;
    if (sim_create(&s, (int)nodes, (int)keys) != 0) {
        fprintf(stderr, "crash_sim: out of memory for %lld sessions\n", keys);
        return 2;
    }
    report_start(csv);
    fprintf(report_text(), "crash_sim: %d nodes, %d sessions; node-%d crashes\n", s.nodes, s.keys, s.crashed);
    report_value("run", "cluster", "nodes", s.nodes);
    report_value("run", "cluster", "sessions", s.keys);
    report_value("run", "cluster", "crashed node", s.crashed);
    report_value("run", "cluster", "points per node", SIM_POINTS);
    ring_tables(&s);
    alternatives(&s);
    live_run();
    skew_run_table();
    report_nodes(&s);
    int status = report_failures() ? 1 : 0;
    if (svg) {
        svg_write(svg, &s);
        /* ferror first: fclose alone does not report an earlier write that failed */
        int write_error = ferror(svg);
        if (fclose(svg) != 0 || write_error) {
            fprintf(stderr, "crash_sim: writing '%s' failed\n", svg_path);
            status = 2;
        } else {
            fprintf(report_text(), "\nwrote %s\n", svg_path);
        }
    }
    fprintf(report_text(), "\n%s\n", report_failures() ? "FAILED: see the checks above" : "OK: every check held");
    sim_free(&s);
    return status;
}
