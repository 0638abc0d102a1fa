/* The picture of one crash, for docs/examples.md (crash_sim --svg FILE). Four panels:
 *   A  the ring: node N/3's arcs (red) are scattered all round it, so its sessions spread widely;
 *   B  sessions per node: what each node kept (grey) and what it took over (blue), with axes;
 *   C  a zoom on a few dozen points: after the crash each red arc belongs to the next node clockwise;
 *   D  the share of all sessions the crash moved: hash % N against the ring and the ideal 1/N.
 * One colour code throughout: grey unchanged, red the crashed node, blue the nodes that took over.
 * Adjacent arcs or bars of one colour are drawn as one path, so the file stays a few tens of KB for
 * any N and K. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "crash_sim.h"

#define WIDTH      1200
#define HEIGHT     1000
#define INK        "#222"
#define MUTED      "#666"
#define GRID       "#e6e6e6"
#define GREY       "#c4c4c4"
#define GREY_ALT   "#dcdcdc" /* for a grey arc next to a grey arc of another node */
#define RED        "#d62728"
#define BLUE       "#1f6fb4"
#define BLUE_LIGHT "#a9cbe8"
#define ZOOM_POINTS 24

static const double tau = 6.283185307179586;

/* 1234567 -> "1,234,567" */
static const char *thousands(char *buf, long v)
{
    char digits[24];
    int n = snprintf(digits, sizeof digits, "%ld", v), o = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

/* 1, 2 or 5 times a power of ten, so that [0, max] takes about `ticks` steps */
static double nice_step(double max, int ticks)
{
    double raw = max / ticks, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

/* A line of text at (x, y); s is escaped for XML. */
static void text(FILE *f, double x, double y, const char *anchor, const char *style, const char *s)
{
    fprintf(f, "<text x='%.1f' y='%.1f' text-anchor='%s' %s>", x, y, anchor, style);
    for (; *s; s++)
        fputs(*s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '&' ? "&amp;" : (char[2]){ *s, 0 }, f);
    fputs("</text>\n", f);
}

/* Point i of `full` (indices wrap), as a turn of the circle and its owner. */
static double point_turn(const struct sim *s, long i, int *owner)
{
    long np = (long)shard_ring_point_count(s->full);
    uint64_t p;
    const char *o;
    shard_ring_point(s->full, (size_t)(((i % np) + np) % np), &p, &o);
    if (owner)
        *owner = sim_node_id(o);
    return sim_turn(p);
}

/* The node that gets point i's arc once the crashed node is gone: the next survivor clockwise. */
static int taker_of(const struct sim *s, long i)
{
    int owner;
    do
        point_turn(s, i++, &owner);
    while (owner == s->crashed);
    return owner;
}

struct ring_xy {
    double cx, cy;
};

static void polar(struct ring_xy c, double turn, double r, double *x, double *y)
{
    *x = c.cx + r * sin(turn * tau);
    *y = c.cy - r * cos(turn * tau);
}

/* Panel A. zoom_at: where panel C looks, as a turn. */
static void ring_panel(FILE *f, const struct sim *s, double zoom_at)
{
    struct ring_xy c = { 250, 395 };
    double r = 140, x, y, x2, y2;
    char buf[160], n1[24];
    snprintf(buf, sizeof buf, "A. The ring: %d nodes, %d points each", s->nodes, SIM_POINTS);
    text(f, 40, 158, "start", "font-size='17' font-weight='bold'", buf);
    snprintf(buf, sizeof buf, "red ticks: node-%d's %d arcs; grey: the other nodes'", s->crashed, SIM_POINTS);
    text(f, 40, 182, "start", "fill='" MUTED "'", buf);
    fprintf(f, "<circle cx='%.0f' cy='%.0f' r='%.0f' fill='none' stroke='" GREY "' stroke-width='18'/>\n", c.cx,
            c.cy, r);
    /* one path for all the ticks; the arcs themselves are too thin to see at this scale */
    fputs("<path stroke='" RED "' stroke-width='1.3' d='", f);
    size_t np = shard_ring_point_count(s->full);
    for (size_t i = 0; i < np; i++) {
        int owner;
        double t1 = point_turn(s, (long)i, &owner), t0 = point_turn(s, (long)i - 1, NULL);
        if (owner != s->crashed)
            continue;
        double mid = t0 + fmod(t1 - t0 + 1, 1) / 2;
        polar(c, mid, r - 9, &x, &y);
        polar(c, mid, r + 24, &x2, &y2);
        fprintf(f, "M%.1f %.1fL%.1f %.1f", x, y, x2, y2);
    }
    fputs("'/>\n", f);
    /* hash 0 at the top, and the direction lookups walk */
    polar(c, 0, r + 32, &x, &y);
    text(f, x, y - 4, "middle", "font-size='11' fill='" MUTED "'", "hash 0");
    polar(c, -0.06, r - 30, &x, &y);
    polar(c, 0.06, r - 30, &x2, &y2);
    fprintf(f, "<path d='M%.1f %.1fA%.0f %.0f 0 0 1 %.1f %.1f' fill='none' stroke='" MUTED "' stroke-width='1.5' "
               "marker-end='url(#arrow)'/>\n", x, y, r - 30, r - 30, x2, y2);
    text(f, c.cx, c.cy - r + 48, "middle", "font-size='11' fill='" MUTED "'", "clockwise");
    /* where panel C zooms in */
    polar(c, zoom_at, r + 30, &x, &y);
    polar(c, zoom_at, r + 54, &x2, &y2);
    fprintf(f, "<path d='M%.1f %.1fL%.1f %.1f' stroke='" INK "' stroke-width='2'/>\n", x, y, x2, y2);
    polar(c, zoom_at, r + 66, &x, &y);
    text(f, x, y + 5, "middle", "font-size='13' font-weight='bold'", "C");
    snprintf(buf, sizeof buf, "node-%d owned %.3g%%", s->crashed, 100 * s->share[s->crashed]);
    text(f, c.cx, c.cy - 8, "middle", "font-size='14'", buf);
    snprintf(buf, sizeof buf, "of the circle: %s sessions", thousands(n1, s->count_before[s->crashed]));
    text(f, c.cx, c.cy + 12, "middle", "font-size='14'", buf);
}

/* Panel B. */
static void bars_panel(FILE *f, const struct sim *s)
{
    double x0 = 590, x1 = 1160, y0 = 225, y1 = 480, max = 1;
    int n = s->nodes, c = s->crashed, takers = 0;
    char buf[200], n1[24], n2[24];
    for (int i = 0; i < n; i++) {
        max = fmax(max, (double)s->count_after[i]);
        max = fmax(max, (double)s->count_before[i]);
        takers += i != c && s->count_after[i] > s->count_before[i];
    }
    text(f, 520, 158, "start", "font-size='17' font-weight='bold'", "B. Sessions per node, before and after the crash");
    snprintf(buf, sizeof buf, "node-%d's %s sessions went to %d of the %d other nodes, about %s each", c,
             thousands(n1, s->count_before[c]), takers, n - 1,
             thousands(n2, takers ? lround((double)s->count_before[c] / takers) : 0));
    text(f, 520, 182, "start", "fill='" MUTED "'", buf);
    double step = nice_step(max, 5), top = ceil(max / step) * step, sy = (y1 - y0) / top;
    for (double v = 0; v <= top + step / 2; v += step) {
        double y = y1 - v * sy;
        fprintf(f, "<path d='M%.0f %.1fH%.0f' stroke='" GRID "'/>\n", x0, y, x1);
        text(f, x0 - 6, y + 4, "end", "font-size='11'", thousands(n1, lround(v)));
    }
    fprintf(f, "<text transform='translate(%.0f %.0f) rotate(-90)' text-anchor='middle'>sessions on the node</text>\n",
            x0 - 62, (y0 + y1) / 2);
    double bw = (x1 - x0) / n, gap = bw >= 4 ? bw * 0.2 : 0;
    /* grey: kept; blue: taken over; red: the crashed node's, all of which moved */
    const char *fills[3] = { GREY, BLUE, RED };
    for (int layer = 0; layer < 3; layer++) {
        fprintf(f, "<path fill='%s' d='", fills[layer]);
        for (int i = 0; i < n; i++) {
            double base = layer == 1 ? (double)s->count_before[i] : 0,
                   h = layer == 0 ? (i == c ? 0 : (double)s->count_before[i])
                     : layer == 1 ? (i == c ? 0 : (double)(s->count_after[i] - s->count_before[i]))
                                  : (i == c ? (double)s->count_before[i] : 0);
            if (h > 0)
                fprintf(f, "M%.2f %.2fh%.2fv%.2fh%.2fz", x0 + i * bw + gap / 2, y1 - (base + h) * sy, bw - gap,
                        h * sy, gap - bw);
        }
        fputs("'/>\n", f);
    }
    fprintf(f, "<path d='M%.0f %.0fV%.0fH%.0f' fill='none' stroke='" INK "'/>\n", x0, y0 - 5, y1, x1);
    /* x axis: node numbers, and the crashed one in red */
    int xstep = (int)fmax(1, nice_step(n, 10));
    for (int i = 0; i < n; i += xstep) {
        double x = x0 + (i + 0.5) * bw;
        fprintf(f, "<path d='M%.1f %.0fv5' stroke='" INK "'/>\n", x, y1);
        snprintf(buf, sizeof buf, "%d", i);
        text(f, x, y1 + 18, "middle", "font-size='11'", buf);
    }
    double xc = x0 + (c + 0.5) * bw;
    snprintf(buf, sizeof buf, "node-%d crashed", c);
    text(f, fmin(fmax(xc, x0 + 60), x1 - 60), y0 - 8, "middle", "font-size='12' fill='" RED "'", buf);
    fprintf(f, "<path d='M%.1f %.0fV%.1f' stroke='" RED "' stroke-dasharray='3 3'/>\n", xc, y0 - 4,
            y1 - (double)s->count_before[c] * sy - 2);
    text(f, (x0 + x1) / 2, y1 + 38, "middle", "", "node number");
}

/* Panel C: points [first, first + ZOOM_POINTS) of `full`, laid out flat, before and after. */
static void zoom_panel(FILE *f, const struct sim *s, long first)
{
    double xa = 130, xb = 1160, yb = 660, ya = 740, h = 34;
    double t_left = point_turn(s, first - 1, NULL);
    double span = fmod(point_turn(s, first + ZOOM_POINTS - 1, NULL) - t_left + 1, 1);
    char buf[200];
    char n1[24];
    snprintf(buf, sizeof buf, "C. Zoom on %d of the ring's %s points (%.3f%% of the circle, marked C on the ring)",
             ZOOM_POINTS, thousands(n1, (long)shard_ring_point_count(s->full)), 100 * span);
    text(f, 40, 600, "start", "font-size='17' font-weight='bold'", buf);
    snprintf(buf, sizeof buf,
             "A session belongs to the first point clockwise from its hash. When node-%d goes, each of its arcs joins "
             "the arc of the next node clockwise; no other arc changes.", s->crashed);
    text(f, 40, 622, "start", "fill='" MUTED "'", buf);
    text(f, xa - 12, yb + h / 2 + 5, "end", "font-weight='bold'", "before");
    text(f, xa - 12, ya + h / 2 + 5, "end", "font-weight='bold'", "after");
    /* Runs of equal (owner, colour) are one rectangle; row 0 is before, row 1 after. */
    for (int row = 0; row < 2; row++) {
        double y = row ? ya : yb;
        bool grey_alt = false;
        long i = first;
        while (i < first + ZOOM_POINTS) {
            int owner, prev_owner, next_owner;
            double t0 = fmod(point_turn(s, i - 1, &prev_owner) - t_left + 1, 1);
            point_turn(s, i, &owner);
            bool crashed = owner == s->crashed, taken = row == 1 && crashed;
            int who = taken ? taker_of(s, i) : owner;
            long j = i + 1;
            for (; j < first + ZOOM_POINTS; j++) {
                point_turn(s, j, &next_owner);
                if ((next_owner == s->crashed) != crashed || (row == 1 && crashed ? taker_of(s, j) : next_owner) != who)
                    break;
            }
            double t1 = fmod(point_turn(s, j - 1, NULL) - t_left + 1, 1);
            double x0 = xa + (xb - xa) * t0 / span, x1 = xa + (xb - xa) * t1 / span;
            /* after the crash: the arc right after a crashed one is the taker's own */
            bool taker = row == 1 && !crashed && i > first && prev_owner == s->crashed;
            const char *fill = crashed ? (row == 0 ? RED : BLUE) : taker ? BLUE_LIGHT : grey_alt ? GREY_ALT : GREY;
            if (!crashed && !taker)
                grey_alt = !grey_alt;
            fprintf(f, "<rect x='%.1f' y='%.0f' width='%.1f' height='%.0f' fill='%s' stroke='white'/>\n", x0, y,
                    x1 - x0, h, fill);
            if (x1 - x0 >= 18) {
                snprintf(buf, sizeof buf, "%d", who);
                text(f, (x0 + x1) / 2, y + h / 2 + 4, "middle",
                     crashed ? "font-size='11' fill='white'" : "font-size='11'", buf);
            }
            if (row == 0 && crashed) {
                /* where this arc goes: down to the after row, to the next node clockwise */
                snprintf(buf, sizeof buf, "to node-%d", taker_of(s, i));
                double xm = (x0 + x1) / 2;
                fprintf(f, "<path d='M%.1f %.0fV%.0f' stroke='" INK "' stroke-width='1.3' marker-end='url(#arrow)'/>\n",
                        xm, yb + h + 2, ya - 4);
                bool left = xm > xb - 80; /* keep the label inside the strip */
                text(f, left ? xm - 5 : xm + 5, (yb + h + ya) / 2 + 4, left ? "end" : "start", "font-size='11'", buf);
            }
            i = j;
        }
    }
    /* axis: position on the ring */
    double yx = ya + h + 8;
    fprintf(f, "<path d='M%.0f %.0fH%.0f' stroke='" INK "' marker-end='url(#arrow)'/>\n", xa, yx, xb + 14);
    for (int k = 0; k <= 4; k++) {
        double x = xa + (xb - xa) * k / 4;
        fprintf(f, "<path d='M%.1f %.0fv5' stroke='" INK "'/>\n", x, yx);
        snprintf(buf, sizeof buf, "%.5f", fmod(t_left + span * k / 4, 1));
        text(f, x, yx + 18, "middle", "font-size='11'", buf);
    }
    text(f, (xa + xb) / 2, yx + 36, "middle", "",
         "position on the ring, as a fraction of the full circle (clockwise: hash increasing); numbers in arcs: owner node");
}

/* Panel D. */
static void moved_panel(FILE *f, const struct sim *s, double modulo, double ring)
{
    double xa = 330, xb = 1100, y = 882, bh = 16;
    char buf[160];
    text(f, 40, 860, "start", "font-size='17' font-weight='bold'", "D. Share of all sessions the crash moved");
    struct {
        const char *label, *fill;
        double      value;
    } bar[3] = { { "hash % N (N -> N-1 buckets)", "#e6852a", modulo },
                 { "consistent-hash ring", RED, ring },
                 { "ideal: the node's own 1/N", "none", 1.0 / s->nodes } };
    for (int k = 0; k <= 5; k++) {
        double x = xa + (xb - xa) * k / 5;
        fprintf(f, "<path d='M%.1f %.0fV%.0f' stroke='" GRID "'/>\n", x, y - 6, y + 3 * (bh + 6));
        snprintf(buf, sizeof buf, "%d%%", 20 * k);
        text(f, x, y + 3 * (bh + 6) + 14, "middle", "font-size='11'", buf);
    }
    for (int i = 0; i < 3; i++) {
        double yy = y + i * (bh + 6), w = (xb - xa) * bar[i].value;
        text(f, xa - 10, yy + bh - 3, "end", "", bar[i].label);
        fprintf(f, "<rect x='%.0f' y='%.0f' width='%.1f' height='%.0f' fill='%s' stroke='%s'/>\n", xa, yy, fmax(w, 1),
                bh, bar[i].fill, i == 2 ? INK : "none");
        snprintf(buf, sizeof buf, "%.2f%%", 100 * bar[i].value);
        text(f, xa + w + 6, yy + bh - 3, "start", "font-weight='bold'", buf);
    }
    fprintf(f, "<path d='M%.0f %.0fV%.0f' stroke='" INK "'/>\n", xa, y - 6, y + 3 * (bh + 6));
    text(f, (xa + xb) / 2, y + 3 * (bh + 6) + 32, "middle", "", "sessions that changed node, as a share of all sessions");
}

/* The stretch of ZOOM_POINTS points with the most of the crashed node's, for panel C. */
static long zoom_first(const struct sim *s)
{
    long np = (long)shard_ring_point_count(s->full), best = 0, best_count = -1, count = 0;
    int owner;
    for (long i = 0; i < np; i++) {
        point_turn(s, i, &owner);
        count += owner == s->crashed;
        if (i >= ZOOM_POINTS) {
            point_turn(s, i - ZOOM_POINTS, &owner);
            count -= owner == s->crashed;
        }
        /* a crashed arc at either edge would be cut off: want none there */
        int first_owner, last_owner;
        point_turn(s, i - ZOOM_POINTS + 1, &first_owner);
        point_turn(s, i, &last_owner);
        if (i >= ZOOM_POINTS - 1 && count > best_count && first_owner != s->crashed && last_owner != s->crashed) {
            best_count = count;
            best = i - ZOOM_POINTS + 1;
        }
    }
    return best;
}

void svg_write(FILE *f, const struct sim *s)
{
    long modulo = 0, moved = 0;
    for (int k = 0; k < s->keys; k++) {
        modulo += s->key_hash[k] % (uint64_t)s->nodes != s->key_hash[k] % (uint64_t)(s->nodes - 1);
        moved += s->before[k] != s->after[k];
    }
    char buf[240], n1[24], n2[24];
    fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' viewBox='0 0 %d %d' "
               "font-family='DejaVu Sans, Helvetica, Arial, sans-serif' font-size='13' fill='" INK "'>\n"
               "<defs><marker id='arrow' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='7' markerHeight='7' "
               "orient='auto'><path d='M0 0L10 5L0 10z' fill='" INK "'/></marker></defs>\n"
               "<rect width='%d' height='%d' fill='white'/>\n",
            WIDTH, HEIGHT, WIDTH, HEIGHT, WIDTH, HEIGHT);
    snprintf(buf, sizeof buf, "One of %d nodes crashes: what moves on a consistent-hash ring", s->nodes);
    text(f, 40, 44, "start", "font-size='24' font-weight='bold'", buf);
    snprintf(buf, sizeof buf,
             "node-%d fails; %s of %s sessions (%.2f%%) change node, each to the next node clockwise on the ring. "
             "With hash %% N: %.1f%%.",
             s->crashed, thousands(n1, moved), thousands(n2, s->keys), 100.0 * moved / s->keys, 100.0 * modulo / s->keys);
    text(f, 40, 72, "start", "font-size='15'", buf);
    /* legend; labels are about 7 px a character at 13 px */
    static const struct {
        const char *fill, *label;
    } legend[4] = { { GREY, "unchanged" },
                    { RED, "the crashed node: its arcs, its sessions" },
                    { BLUE, "taken over by the next node clockwise" },
                    { BLUE_LIGHT, "that node's own arc" } };
    double lx = 40;
    for (int i = 0; i < 4; i++) {
        fprintf(f, "<rect x='%.0f' y='100' width='18' height='14' fill='%s'/>\n", lx, legend[i].fill);
        text(f, lx + 25, 112, "start", "", legend[i].label);
        lx += 25 + 7 * (double)strlen(legend[i].label) + 40;
    }
    long first = zoom_first(s);
    double zoom_at = point_turn(s, first + ZOOM_POINTS / 2, NULL);
    ring_panel(f, s, zoom_at);
    bars_panel(f, s);
    zoom_panel(f, s, first);
    moved_panel(f, s, (double)modulo / s->keys, (double)moved / s->keys);
    fputs("</svg>\n", f);
}
