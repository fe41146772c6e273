/*
 * render/html.c: the stacks of the ranks (ranks whose threads stand in the same
 * frames are one group: thousands of waiting ranks are one entry, the culprit
 * another), the summary table and the evidence, as HTML.
 */
#include "render/html.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/intern.h"
#include "analyze/model.h"
#include "analyze/words.h"
#include "render/escape.h"
#include "render/summary.h"
#include "render/text.h"

/* Groups of identical stacks shown at most (the culprits' always). */
#define RN_MAX_STACK_GROUPS 32

struct sgroup {
    uint32_t key; /* interned list of the ranks' thread stacks */
    int64_t *ranks;
    size_t n, cap;
    int32_t first; /* an->ranks index of one of them */
    int culprit;
};

/* What makes two ranks' stacks the same: each thread's name and frames, not its tid. */
static uint32_t stack_key(const struct an *a, const struct an_rank *r, struct an_intern *keys)
{
    uint32_t *ids = malloc((2 * r->nth + 1) * sizeof *ids);
    if (!ids) return 0;
    size_t n = 0;
    ids[n++] = r->has_threads;
    for (uint32_t t = 0; t < r->nth; t++) {
        ids[n++] = a->threads[r->th0 + t].name;
        ids[n++] = a->threads[r->th0 + t].stack;
    }
    uint32_t k = an_intern(keys, ids, n * sizeof *ids);
    free(ids);
    return k;
}

static int by_weight(const void *x, const void *y)
{
    const struct sgroup *a = x, *b = y;
    if (a->culprit != b->culprit) return b->culprit - a->culprit;
    if (a->n != b->n) return a->n > b->n ? -1 : 1;
    return a->ranks[0] < b->ranks[0] ? -1 : a->ranks[0] > b->ranks[0];
}

static void one_group(const struct an *a, const struct sgroup *g, FILE *f)
{
    char ranges[200], who[160];
    const struct an_rank *r = &a->ranks[g->first];
    an_ranges(g->ranks, g->n, ranges, sizeof ranges);
    fprintf(f, "<details%s><summary class=\"%s\">%s ranks %s (%zu)", g->culprit ? " open" : "",
            g->culprit ? "culprit" : "rank", g->culprit ? "culprit:" : "", ranges, g->n);
    an_rank_name(a, g->first, r->rank, who, sizeof who);
    fputs(": the stacks of ", f);
    rn_escape(f, who);
    fputs("</summary>\n", f);
    if (!r->nth) fputs("<p>No stacks in this dump (a crash dump, or schema 1.x).</p>\n", f);
    for (uint32_t t = 0; t < r->nth; t++) {
        const struct an_thread *th = &a->threads[r->th0 + t];
        fprintf(f, "<h4>thread %lld ", (long long)th->tid);
        rn_escape(f, an_intern_get(&a->strs, th->name));
        if (th->syscall) {
            fputs(", in ", f);
            rn_escape(f, an_intern_get(&a->strs, th->syscall));
        }
        if (th->where) {
            fputs(": ", f);
            rn_escape(f, an_intern_get(&a->strs, th->where));
        }
        fputs("</h4>\n<pre class=\"stack\">", f);
        rn_escape(f, th->stack ? an_intern_get(&a->strs, th->stack) : "(no frames)");
        fputs("</pre>\n", f);
    }
    fputs("</details>\n", f);
}

void rn_stacks(const struct an *a, FILE *f)
{
    struct an_intern keys = {0};
    struct sgroup *g = NULL;
    size_t ng = 0, cap = 0;
    for (size_t i = 0; i < a->nranks; i++) {
        uint32_t k = stack_key(a, &a->ranks[i], &keys);
        int c = an_is_culprit(a, (int32_t)i);
        size_t x;
        for (x = 0; x < ng; x++)
            if (g[x].key == k && g[x].culprit == c) break;
        if (x == ng) {
            g = an_grow(g, &ng, &cap, sizeof *g);
            g[x].key = k;
            g[x].first = (int32_t)i;
            g[x].culprit = c;
        }
        g[x].ranks = an_grow(g[x].ranks, &g[x].n, &g[x].cap, sizeof *g[x].ranks);
        g[x].ranks[g[x].n - 1] = a->ranks[i].rank;
    }
    if (ng > 1) qsort(g, ng, sizeof *g, by_weight);
    fprintf(f,
            "<p>%zu ranks, %zu different sets of stacks; ranks whose threads stand in the same "
            "frames are one entry.</p>\n",
            a->nranks, ng);
    for (size_t x = 0; x < ng; x++) {
        if (x < RN_MAX_STACK_GROUPS || g[x].culprit)
            one_group(a, &g[x], f);
        else if (x == RN_MAX_STACK_GROUPS)
            fprintf(f, "<p>%zu more groups not shown.</p>\n", ng - RN_MAX_STACK_GROUPS);
    }
    for (size_t x = 0; x < ng; x++) free(g[x].ranks);
    free(g);
    an_intern_free(&keys);
}

static void row(void *ctx, const char *ranks, size_t n, const char *reason, const char *status)
{
    FILE *f = ctx;
    fputs("<tr><td>", f);
    rn_escape(f, ranks);
    fprintf(f, "</td><td>%zu</td><td>", n);
    rn_escape(f, reason);
    fputs("</td><td>", f);
    rn_escape(f, status);
    fputs("</td></tr>\n", f);
}

void rn_summary(const struct an *a, FILE *f)
{
    fputs("<table><tr><th>ranks</th><th>count</th><th>dump</th><th>state</th></tr>\n", f);
    rn_summary_rows(a, row, f);
    fputs("</table>\n", f);
}

void rn_evidence(const struct an *a, FILE *f)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) return;
    rn_print_text(a, m);
    fclose(m);
    fputs("<pre class=\"evidence\">", f);
    rn_escape(f, text);
    fputs("</pre>\n", f);
    free(text);
}
