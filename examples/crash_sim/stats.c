/* How far chance may move what the checks measure, so that every check holds for every accepted
 * --nodes and --keys instead of only near the defaults. Two sources of chance:
 *   - which sessions land where: each session is a draw, so a count of K sessions strays from its
 *     expectation by about sqrt(K p (1 - p)), a lot relative to it when K / N is small (1,000
 *     sessions on 1,000 nodes put one session on the crashed node);
 *   - where the ring's points land: a node's share of the circle is the sum of its points' arcs, so
 *     it strays from 1/N by about 1/sqrt(points) of it, and the largest of N shares grows with N. This
 *     depends on N only (the names and the hash are fixed), so crash_sim's checks of it were run for
 *     every N it accepts: tests/crash_sim/every_node_count.sh. */
#include <math.h>

#include "crash_sim.h"

/* The failure probability a count check allows on each side. */
#define STATS_RISK 1e-9

double stats_slack(double n, double p)
{
    /* Bernstein: P(S - np >= t) <= exp(-t^2 / (2 (var + t/3))) for draws in [0, 1]; solved for t
     * with the bound equal to STATS_RISK. Unlike a normal approximation it holds for small counts,
     * where the tail is heavier (Poisson). */
    double l = log(1 / STATS_RISK), var = n * p * (1 - p);
    return l / 3 + sqrt(l * l / 9 + 2 * var * l);
}

bool stats_near(long count, long n, double p)
{
    return fabs((double)count - (double)n * p) <= stats_slack((double)n, p);
}

double stats_max_share_bound(int n, int points)
{
    /* A node's share times N is close to a Gamma(points) variable over points (the sum of its
     * points' arcs, each about exponential). Chernoff: P(G / points >= 1 + t) <=
     * exp(-points (t - ln(1 + t))); over n nodes, set n times that to 1e-3 and solve for t. */
    double target = log(n / 1e-3) / points, lo = 0, hi = 1000;
    for (int i = 0; i < 200; i++) {
        double t = (lo + hi) / 2;
        if (t - log1p(t) < target)
            lo = t;
        else
            hi = t;
    }
    return 1 + hi;
}
