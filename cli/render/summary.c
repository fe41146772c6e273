/*
 * render/summary.c: the summary table: where each rank is, ranks in the same
 * state and with the same dump reason grouped into one row (thousands of ranks
 * waiting in the same collective are one line).
 */
#include "render/summary.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/intern.h"
#include "analyze/model.h"
#include "analyze/words.h"
#include "dump/dump.h"

struct row {
    uint32_t status, reason;
    int64_t grank;
};

static uint32_t status_of(const struct an *a, const struct an_rank *r, struct an_intern *strs)
{
    char buf[512], id[24];
    if (r->crashed) return an_intern_str(strs, "crashed");
    const struct an_flight *w = NULL;
    for (uint32_t s = 0; s < r->nst; s++) {
        const struct an_flight *f = &a->streams[r->st0 + s];
        if (f->present && (!w || f->enqueue_ns < w->enqueue_ns)) w = f;
    }
    if (w) {
        an_comm_short(a, w->comm, id, sizeof id);
        if (w->peer >= 0)
            snprintf(buf, sizeof buf, "waits in %s #%llu with comm rank %d on %s (%s)",
                     dr_op_name(w->op), (unsigned long long)w->seq, w->peer, id,
                     dr_state_name(w->state));
        else
            snprintf(buf, sizeof buf, "waits in %s #%llu on %s (%s)", dr_op_name(w->op),
                     (unsigned long long)w->seq, id, dr_state_name(w->state));
        return an_intern_str(strs, buf);
    }
    if (r->main == AN_NONE) return an_intern_str(strs, "no op in flight");
    const struct an_thread *t = &a->threads[r->th0 + r->main];
    snprintf(buf, sizeof buf, "no op in flight; main thread in %s",
             t->where ? an_intern_get(&a->strs, t->where) : "no frame of the job");
    return an_intern_str(strs, buf);
}

static int by_key(const void *x, const void *y)
{
    const struct row *a = x, *b = y;
    if (a->status != b->status) return a->status < b->status ? -1 : 1;
    if (a->reason != b->reason) return a->reason < b->reason ? -1 : 1;
    return a->grank < b->grank ? -1 : a->grank > b->grank;
}

struct group {
    size_t first, n;
    int64_t low;
};

static int by_low(const void *x, const void *y)
{
    const struct group *a = x, *b = y;
    return a->low < b->low ? -1 : a->low > b->low;
}

void rn_summary_rows(const struct an *a,
                     void (*row)(void *ctx, const char *ranks, size_t n, const char *reason,
                                 const char *status),
                     void *ctx)
{
    struct an_intern strs = {0};
    size_t n = 0, cap = 0;
    struct row *rows = NULL;
    uint32_t nodump = an_intern_str(&strs, "no dump");
    for (size_t i = 0; i < a->nranks; i++) {
        rows = an_grow(rows, &n, &cap, sizeof *rows);
        rows[n - 1] = (struct row){status_of(a, &a->ranks[i], &strs),
                                   an_intern_str(&strs,
                                                 an_intern_get(&a->strs, a->ranks[i].reason)),
                                   a->ranks[i].rank};
    }
    for (int64_t g = 0; g < a->world; g++)
        if (an_u64map_get(&a->rank_by_grank, (uint64_t)g) == AN_NONE) {
            rows = an_grow(rows, &n, &cap, sizeof *rows);
            rows[n - 1] = (struct row){nodump, 0, g};
        }
    if (n > 1) qsort(rows, n, sizeof *rows, by_key);
    struct group *groups = NULL;
    size_t ng = 0, capg = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && rows[j].status == rows[i].status && rows[j].reason == rows[i].reason) j++;
        groups = an_grow(groups, &ng, &capg, sizeof *groups);
        groups[ng - 1] = (struct group){i, j - i, rows[i].grank};
        i = j;
    }
    if (ng > 1) qsort(groups, ng, sizeof *groups, by_low);
    int64_t *ranks = malloc((n + 1) * sizeof *ranks);
    for (size_t g = 0; ranks && g < ng; g++) {
        char text[160];
        for (size_t k = 0; k < groups[g].n; k++) ranks[k] = rows[groups[g].first + k].grank;
        const struct row *r = &rows[groups[g].first];
        row(ctx, an_ranges(ranks, groups[g].n, text, sizeof text), groups[g].n,
            r->reason ? an_intern_get(&strs, r->reason) : "-", an_intern_get(&strs, r->status));
    }
    free(ranks);
    free(groups);
    free(rows);
    an_intern_free(&strs);
}
