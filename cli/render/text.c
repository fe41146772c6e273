/*
 * render/text.c: the analysis for a person: the verdict first (one line per
 * culprit, or one line saying healthy or why no culprit was found), then the
 * evidence per communicator, notes, and a summary table of the ranks.
 */
#include "render/text.h"

#include <stdio.h>
#include <string.h>

#include "analyze/intern.h"
#include "analyze/model.h"
#include "analyze/words.h"
#include "render/summary.h"

void rn_print_verdict(const struct an *a, FILE *out)
{
    for (size_t i = 0; i < a->nculprits; i++)
        fprintf(out, "%s\n", an_intern_get(&a->strs, a->culprits[i].text));
    if (a->nculprits) return;
    if (a->hang)
        fprintf(out, "no culprit: ops are stuck, but the dumps do not show which rank holds them "
                     "(see the evidence below)\n");
    else
        fprintf(out,
                "healthy: %zu ranks, %zu communicators: no op stuck, no mismatch, no "
                "straggler\n",
                a->nranks, a->ncomms);
}

/* Per communicator: who dumped, how far they got, who waits, and its findings. */
static int comm_evidence(const struct an *a, uint32_t ci, FILE *out)
{
    const struct an_comm *c = &a->comms[ci];
    uint64_t lo = UINT64_MAX, hi = 0, dlo = UINT64_MAX, dhi = 0;
    size_t inflight = 0, started = 0, findings = 0;
    for (int64_t m = 0; m < c->nranks; m++) {
        if (c->member[m] < 0) continue;
        const struct an_rcomm *rc = an_rcomm_of(a, c->member[m], ci);
        if (!rc) continue;
        lo = rc->last_seq < lo ? rc->last_seq : lo;
        hi = rc->last_seq > hi ? rc->last_seq : hi;
        dlo = rc->last_done < dlo ? rc->last_done : dlo;
        dhi = rc->last_done > dhi ? rc->last_done : dhi;
        inflight += rc->ninflight > 0;
        started += rc->fl.present && rc->fl.state == NG_OP_STARTED;
    }
    for (size_t i = 0; i < a->nfindings; i++) findings += a->findings[i].comm == ci;
    if (!findings && !inflight && lo == hi && (int64_t)c->nmembers == c->nranks) return 0;
    const char *name = an_intern_get(&a->strs, c->name);
    fprintf(out, "comm %016llx%s%s%s (%lld ranks, %u dumped%s):\n", (unsigned long long)c->id,
            name ? " \"" : "", name ? name : "", name ? "\"" : "", (long long)c->nranks,
            c->nmembers, c->nranks_conflict ? "; the dumps disagree on its size" : "");
    if (c->nmembers)
        fprintf(out,
                "  last seq %llu..%llu, last completed %llu..%llu; %zu ranks with ops in "
                "flight, %zu with their oldest collective started on the GPU\n",
                (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)dlo,
                (unsigned long long)dhi, inflight, started);
    for (size_t i = 0; i < a->nfindings; i++) {
        const struct an_finding *f = &a->findings[i];
        if (f->comm != ci) continue;
        char who[128];
        fprintf(out, "  %s: %s: %s\n", an_rank_name(a, f->rank, f->grank, who, sizeof who),
                an_cause_name(f->cause), an_intern_get(&a->strs, f->detail));
    }
    return 1;
}

struct table {
    FILE *out;
};

static void row(void *ctx, const char *ranks, size_t n, const char *reason, const char *status)
{
    struct table *t = ctx;
    fprintf(t->out, "  %-16s %6zu  %-12s %s\n", ranks, n, reason, status);
}

void rn_print_text(const struct an *a, FILE *out)
{
    rn_print_verdict(a, out);
    fprintf(out, "\nevidence (%zu dumps of job %s, %zu communicators, %llu ops):\n", a->nranks,
            a->job ? an_intern_get(&a->strs, a->job) : "?", a->ncomms, (unsigned long long)a->nops);
    size_t quiet = 0;
    for (uint32_t ci = 0; ci < a->ncomms; ci++)
        if (!comm_evidence(a, ci, out)) quiet++;
    if (quiet)
        fprintf(out,
                "%zu other communicator(s): every rank dumped, at the same seq, nothing in "
                "flight\n",
                quiet);
    for (size_t i = 0; i < a->nfindings; i++) {
        const struct an_finding *f = &a->findings[i];
        if (f->comm != AN_NONE) continue;
        char who[128];
        fprintf(out, "%s: %s: %s\n", an_rank_name(a, f->rank, f->grank, who, sizeof who),
                an_cause_name(f->cause), an_intern_get(&a->strs, f->detail));
    }
    for (size_t i = 0; i < a->nnotes; i++) fprintf(out, "note: %s\n", a->notes[i]);
    if (a->nbad) fprintf(out, "note: %zu file(s) not used (listed on stderr)\n", a->nbad);
    fprintf(out, "\nsummary:\n  %-16s %6s  %-12s %s\n", "ranks", "count", "dump", "state");
    struct table t = {out};
    rn_summary_rows(a, row, &t);
}
