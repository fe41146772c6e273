/*
 * render/svg.c: one communicator as a picture (inline SVG): a bar per group of
 * ranks that stopped at the same place, from the oldest seq drawn to the last
 * seq each enqueued (amber) and the last each completed (green). Identical ranks
 * are one row, so 4096 ranks that agree are one bar; the culprit's row is red.
 */
#include "render/svg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/model.h"
#include "analyze/words.h"

/* Rows of a picture drawn at most (the culprits' always). */
#define RN_MAX_ROWS 48

#define W 960
#define LABEL 300
#define ROW 20
#define TOP 24

struct member {
    uint64_t seq, done;
    int absent, culprit;
    int64_t rank; /* global rank, or the comm rank of an absent one */
};

struct group {
    size_t first, n;
};

static int by_state(const void *x, const void *y)
{
    const struct member *a = x, *b = y;
    if (a->absent != b->absent) return a->absent - b->absent;
    if (a->culprit != b->culprit) return b->culprit - a->culprit;
    if (a->seq != b->seq) return a->seq < b->seq ? -1 : 1;
    if (a->done != b->done) return a->done < b->done ? -1 : 1;
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

static int same(const struct member *a, const struct member *b)
{
    return a->absent == b->absent && a->culprit == b->culprit && a->seq == b->seq &&
           a->done == b->done;
}

int rn_comm_worth(const struct an *a, uint32_t ci)
{
    const struct an_comm *c = &a->comms[ci];
    for (size_t i = 0; i < a->nfindings; i++)
        if (a->findings[i].comm == ci) return 2;
    if ((int64_t)c->nmembers < c->nranks) return 1;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int64_t m = 0; m < c->nranks; m++) {
        const struct an_rcomm *rc = an_rcomm_of(a, c->member[m], ci);
        if (!rc) continue;
        if (rc->ninflight) return 1;
        lo = rc->last_seq < lo ? rc->last_seq : lo;
        hi = rc->last_seq > hi ? rc->last_seq : hi;
    }
    return lo != hi;
}

static double x_of(uint64_t s, uint64_t lo, uint64_t hi)
{
    return LABEL + (double)(W - LABEL - 150) * (double)(s - lo) / (double)(hi - lo);
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

/* One bar: ranks v[0..n), all alike. */
static void row(FILE *f, const struct member *v, size_t n, int y, uint64_t lo, uint64_t hi)
{
    int64_t *ranks = malloc(n * sizeof *ranks);
    char label[128];
    if (!ranks) return;
    for (size_t i = 0; i < n; i++) ranks[i] = v[i].rank;
    qsort(ranks, n, sizeof *ranks, cmp_i64);
    an_ranges(ranks, n, label, 40);
    free(ranks);
    const char *cls = v->culprit ? "culprit" : v->absent ? "absent" : "rank";
    fprintf(f, "<g class=\"%s\"><title>", cls);
    fprintf(f, "%s %s: ", v->absent ? "comm ranks" : n > 1 ? "ranks" : "rank", label);
    if (v->absent)
        fprintf(f, "no dump");
    else
        fprintf(f, "enqueued up to #%llu, completed up to #%llu", (unsigned long long)v->seq,
                (unsigned long long)v->done);
    fprintf(f, "</title>\n<text x=\"4\" y=\"%d\">%s%s %s (%zu)</text>\n", y + 14,
            v->culprit ? "culprit: " : "",
            v->absent ? "no dump, comm rank"
            : n > 1   ? "ranks"
                      : "rank",
            label, n);
    if (v->absent) {
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"none\"/></g>\n",
                LABEL, y + 3, W - LABEL - 150, ROW - 6);
        return;
    }
    uint64_t done = v->done < lo ? lo : v->done, seq = v->seq < lo ? lo : v->seq;
    double x0 = x_of(lo, lo, hi), xd = x_of(done, lo, hi), xs = x_of(seq, lo, hi);
    fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" class=\"done\"/>\n", x0,
            y + 3, xd - x0, ROW - 6);
    if (xs > xd)
        fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" class=\"queued\"/>\n",
                xd, y + 3, xs - xd, ROW - 6);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\">#%llu / #%llu</text></g>\n", xs + 6, y + 14,
            (unsigned long long)v->done, (unsigned long long)v->seq);
}

/* The groups to draw: every culprit's, then the largest, RN_MAX_ROWS at most, in order. */
static size_t pick(struct group *g, size_t ng, const struct member *v)
{
    if (ng <= RN_MAX_ROWS) return ng;
    unsigned char *keep = calloc(ng, 1);
    size_t kept = 0;
    for (size_t i = 0; keep && i < ng && kept < RN_MAX_ROWS; i++)
        if (v[g[i].first].culprit || v[g[i].first].absent) keep[i] = 1, kept++;
    while (keep && kept < RN_MAX_ROWS) {
        size_t best = ng;
        for (size_t i = 0; i < ng; i++)
            if (!keep[i] && (best == ng || g[i].n > g[best].n)) best = i;
        keep[best] = 1;
        kept++;
    }
    size_t n = 0;
    for (size_t i = 0; i < ng; i++)
        if (!keep || keep[i]) g[n++] = g[i];
    free(keep);
    return n;
}

void rn_comm_svg(const struct an *a, uint32_t ci, FILE *f)
{
    const struct an_comm *c = &a->comms[ci];
    size_t n = (size_t)c->nranks;
    struct member *v = calloc(n ? n : 1, sizeof *v);
    struct group *g = calloc(n ? n : 1, sizeof *g);
    if (!v || !g) goto out;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t m = 0; m < n; m++) {
        int32_t ri = c->member[m];
        const struct an_rcomm *rc = ri >= 0 ? an_rcomm_of(a, ri, ci) : NULL;
        v[m].absent = !rc;
        v[m].rank = rc ? a->ranks[ri].rank : (int64_t)m;
        if (!rc) continue;
        v[m].seq = rc->last_seq;
        v[m].done = rc->last_done;
        v[m].culprit = an_is_culprit(a, ri);
        lo = rc->last_done < lo ? rc->last_done : lo;
        hi = rc->last_seq > hi ? rc->last_seq : hi;
    }
    if (lo == UINT64_MAX) lo = hi = 0;
    lo = hi - lo < 10 ? (hi > 10 ? hi - 10 : 0) : lo - (hi - lo) / 10; /* room to see the bars */
    if (hi <= lo) hi = lo + 1;
    qsort(v, n, sizeof *v, by_state);
    size_t ng = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && same(&v[j], &v[i])) j++;
        g[ng++] = (struct group){i, j - i};
        i = j;
    }
    size_t all = ng;
    ng = pick(g, ng, v);
    int h = TOP + (int)ng * ROW + 24;
    fprintf(f,
            "<svg class=\"comm\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" role=\"img\">\n",
            W, h, W, h);
    fprintf(f,
            "<text x=\"4\" y=\"16\" class=\"head\">%zu ranks in %zu group(s)%s; bars: completed "
            "(green), enqueued not completed (amber)</text>\n",
            n, all, all > ng ? ", the largest and the culprits' drawn" : "");
    for (size_t i = 0; i < ng; i++) row(f, &v[g[i].first], g[i].n, TOP + (int)i * ROW, lo, hi);
    int y = TOP + (int)ng * ROW + 16;
    fprintf(f, "<text x=\"%d\" y=\"%d\">#%llu</text><text x=\"%.0f\" y=\"%d\">#%llu</text>\n",
            LABEL, y, (unsigned long long)lo, x_of(hi, lo, hi) - 20, y, (unsigned long long)hi);
    fprintf(f, "</svg>\n");
out:
    free(v);
    free(g);
}
