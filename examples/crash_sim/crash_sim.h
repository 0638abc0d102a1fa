/* crash_sim's parts, one concept a file:
 *   sim.c           the simulated cluster: N nodes on a ring, K sessions, one crash (owned state)
 *   stats.c         how far chance may move what the checks measure
 *   report.c        the tables as text or CSV, and the checks
 *   ring_tables.c   tables 1-3 on shard's ring: movement, load spread, replicas
 *   alternatives.c  table 4: rendezvous, jump hash, Maglev, bounded loads
 *   live.c          table 5: a crash on the real dispatcher
 *   svg.c           the picture
 * Single-threaded except live.c, which says what its jobs touch. */
#ifndef CRASH_SIM_H
#define CRASH_SIM_H

#include <shard.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define SIM_POINTS 200 /* points per node on the rings that tables 1, 3 and 4 and the picture use */

/* The cluster before and after node `crashed` fails. Built by sim_create, read-only afterwards. */
struct sim {
    int         nodes, keys, crashed; /* N, K, and the node that crashes: N / 3 */
    uint64_t   *key_hash;             /* XXH3 of "session-<k>", seed 0: what shard_ring_hash gives */
    int        *before, *after;       /* each session's owner on `full` and on `less` */
    long       *count_before, *count_after; /* sessions per node on each */
    double     *share;                /* each node's share of the circle on `full` */
    shard_ring *full, *less;          /* SIM_POINTS points a node; `less` lacks the crashed node */
};

/* Builds the rings and places every session on both. Return: 0, or -ENOMEM. Pair with sim_free. */
int sim_create(struct sim *s, int nodes, int keys);
void sim_free(struct sim *s);
/* A ring of nodes "node-0".."node-<n-1>" with `points` points each, without node `skip` (-1: none).
 * Return: NULL when out of memory. */
shard_ring *sim_ring(int n, uint32_t points, int skip);
/* The number in a member's name "node-<i>". */
int sim_node_id(const char *name);
/* Each node's share of the circle on r, into share[0..n) (nodes missing from r get 0). */
void sim_ring_shares(const shard_ring *r, int n, double *share);
/* A position on the ring as a fraction of the circle, [0, 1). */
double sim_turn(uint64_t point);

/* Bernstein's inequality: a sum of n independent draws of probability p strays further than this
 * from n * p with probability under 1e-9 on either side. */
double stats_slack(double n, double p);
/* Whether `count` of n draws is within stats_slack of n * p. */
bool stats_near(long count, long n, double p);
/* The largest of n nodes' shares of a random ring with `points` points a node, over the mean, stays
 * under this with probability 0.999 (a Chernoff bound). */
double stats_max_share_bound(int n, int points);

/* The report: human text on stdout, or with csv CSV on stdout and the text on stderr. */
void  report_start(bool csv);
FILE *report_text(void);
/* Starts a table: its CSV name, its title and the names of its three columns. */
void  report_table(const char *name, const char *title, const char *a, const char *b, const char *c);
/* One row of the current table; a NaN cell does not apply ("-" in the text, no CSV record). */
void  report_row(const char *label, double a, double b, double c);
/* A CSV record only: values the text does not print (per-node counts, exact counts). */
void  report_value(const char *table, const char *row, const char *measure, double value);
/* Prints a check as [ok] or [FAILED]; a failed one makes the exit status 1. */
__attribute__((format(printf, 2, 3))) void report_check(bool ok, const char *fmt, ...);
int   report_failures(void);

void ring_tables(const struct sim *s);  /* tables 1-3 */
void alternatives(const struct sim *s); /* table 4 */
void skew_run_table(void);               /* table 6 */
void live_run(void);                    /* table 5 */

/* Writes the picture of s's crash to f (opened by the caller, who closes it). */
void svg_write(FILE *f, const struct sim *s);

#endif
