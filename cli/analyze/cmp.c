/*
 * analyze/cmp.c: what the ranks' records of one collective say across ranks.
 *  - mismatch: at the same seq, ranks called different ops (op, count, bytes,
 *    datatype, reduction, root); the ranks of the minority are named. When a
 *    rank's op at seq s is the others' op at s + 1, it skipped one (missing).
 *  - slow: at each arrival (a burst of collectives enqueued together, counted
 *    once), the rank that came last; a rank that makes the others wait more
 *    often than chance allows is a straggler (a binomial test against an even
 *    spread, corrected for the number of ranks tested, plus a share of the
 *    waiting). Arrival comes from the GPU durations (everyone leaves a collective
 *    together, so the last to arrive waited least; no clock is compared across
 *    hosts) of the collectives timed on every rank, or the enqueue times when
 *    none is.
 */
#include "analyze/cmp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/intern.h"
#include "analyze/model.h"
#include "analyze/rank.h"
#include "analyze/words.h"
#include "dump/dump.h"

static const struct an_sig *sig(const struct an *a, uint32_t id)
{
    return (const struct an_sig *)an_intern_get(&a->sigs, id);
}

static void describe(const struct an_sig *s, char *buf, size_t n)
{
    size_t at = (size_t)snprintf(buf, n, "%s count %llu %s", dr_op_name(s->op),
                                 (unsigned long long)s->count, s->datatype);
    if (s->redop[0] && at < n) at += (size_t)snprintf(buf + at, n - at, " %s", s->redop);
    if (s->root >= 0 && at < n) snprintf(buf + at, n - at, " root %d", s->root);
}

struct variant {
    uint32_t sig, n;
    const int32_t *ranks;
};

static void blame(struct an *a, uint32_t ci, struct an_comm *c, uint64_t seq,
                  const struct variant *bad, const struct variant *good)
{
    struct an_seq *next = an_seq_at(c, seq + 1);
    int skipped = next && next->sig && bad->sig == next->sig;
    char mine[128], theirs[128], buf[512], id[24];
    describe(sig(a, bad->sig), mine, sizeof mine);
    describe(sig(a, good->sig), theirs, sizeof theirs);
    an_comm_short(a, ci, id, sizeof id);
    if (skipped)
        snprintf(buf, sizeof buf,
                 "skipped %s #%llu on comm %s (%lld ranks): its #%llu is the "
                 "others' #%llu (%s)",
                 dr_op_name(sig(a, good->sig)->op), (unsigned long long)seq, id,
                 (long long)c->nranks, (unsigned long long)seq, (unsigned long long)seq + 1, mine);
    else
        snprintf(buf, sizeof buf, "called #%llu on comm %s as %s; %u other ranks as %s",
                 (unsigned long long)seq, id, mine, good->n, theirs);
    for (uint32_t k = 0; k < bad->n && k < 2; k++) {
        if (bad->ranks[k] < 0) continue;
        struct an_finding f;
        memset(&f, 0, sizeof f);
        f.cause = skipped ? AN_MISSING : AN_MISMATCH;
        f.rank = bad->ranks[k];
        f.grank = a->ranks[f.rank].rank;
        f.comm = ci;
        f.seq = seq;
        f.peer = -1;
        f.op = sig(a, good->sig)->op;
        f.nwaiting = good->n;
        f.blocker.comm = AN_NONE;
        f.detail = an_intern_str(&a->strs, buf);
        an_add_finding(a, &f);
    }
    if (bad->n > 2)
        an_note(a, "comm %s #%llu: %u ranks called %s; two are named", id, (unsigned long long)seq,
                bad->n, mine);
}

static void mismatch_at(struct an *a, uint32_t ci, struct an_comm *c, uint64_t seq,
                        struct an_seq *s)
{
    struct variant v[16];
    int n = 0;
    v[n++] = (struct variant){s->sig, s->nsig, s->sig_ranks};
    for (uint32_t x = s->alt; x && n < 16; x = a->alts[x - 1].next)
        v[n++] = (struct variant){a->alts[x - 1].sig, a->alts[x - 1].n, a->alts[x - 1].ranks};
    int best = 0, tie = 0;
    for (int i = 1; i < n; i++) {
        if (v[i].n > v[best].n) {
            best = i;
            tie = 0;
        } else if (v[i].n == v[best].n) {
            tie = 1;
        }
    }
    char id[24], one[128], two[128];
    if (tie) {
        describe(sig(a, v[0].sig), one, sizeof one);
        describe(sig(a, v[1].sig), two, sizeof two);
        an_note(a,
                "comm %s #%llu: the ranks disagree (%u as %s, %u as %s), with no majority to "
                "tell which side is wrong",
                an_comm_short(a, ci, id, sizeof id), (unsigned long long)seq, v[0].n, one, v[1].n,
                two);
        a->hang = 1;
        return;
    }
    for (int i = 0; i < n; i++)
        if (i != best) blame(a, ci, c, seq, &v[i], &v[best]);
}

void an_detect_mismatch(struct an *a)
{
    for (uint32_t ci = 0; ci < a->ncomms; ci++) {
        struct an_comm *c = &a->comms[ci];
        for (size_t i = 0; i < c->nseqs; i++)
            if (c->seqs[i].alt) { /* the first seq where they differ; the rest follows from it */
                mismatch_at(a, ci, c, c->seq_base + i, &c->seqs[i]);
                break;
            }
    }
}

/* P(X >= k) for X ~ B(m, p), summed in logs from k up (the terms fall past the
 * mode, and the sum stops once they no longer change it). */
double an_binom_tail(uint32_t m, uint32_t k, double p)
{
    if (k == 0) return 1;
    if (k > m || p <= 0) return 0;
    if (p >= 1) return 1;
    double lp = log(p), lq = log1p(-p), sum = 0;
    double lt = lgamma(m + 1.0) - lgamma(k + 1.0) - lgamma(m - k + 1.0) + k * lp + (m - k) * lq;
    for (uint32_t j = k; j <= m; j++) {
        double t = exp(lt);
        sum += t;
        if (j > m * p && t < sum * 1e-17) break;
        lt += log((double)(m - j) / (j + 1.0)) + lp - lq;
    }
    return sum < 1 ? sum : 1;
}

int an_straggler_test(const uint32_t *last, const double *wait, size_t n, int64_t nranks,
                      uint32_t samples, double ntests, struct an_straggler *out)
{
    double total = 0;
    for (size_t r = 0; r < n; r++) total += wait[r];
    *out = (struct an_straggler){.rank = AN_NONE, .samples = samples, .p = 1};
    for (size_t r = 0; r < n; r++) {
        double share = total > 0 ? wait[r] / total : 0;
        if (!last[r]) continue;
        double p = an_binom_tail(samples, last[r], 1.0 / (double)nranks) * ntests;
        if (p > 1) p = 1;
        /* the rank with the least likely count; of equals, the larger share */
        if (out->rank == AN_NONE || p < out->p || (p == out->p && share > out->share))
            *out = (struct an_straggler){(uint32_t)r, last[r], samples, share, p};
    }
    return out->rank != AN_NONE && out->last >= AN_STRAGGLER_MIN &&
           out->share >= AN_STRAGGLER_SHARE && out->p < AN_STRAGGLER_ALPHA;
}

static void p_text(double p, char *buf, size_t n)
{
    if (p < 1e-9)
        snprintf(buf, n, "p < 1e-9");
    else
        snprintf(buf, n, "p = %.2g", p);
}

static void straggler(struct an *a, uint32_t ci, const uint32_t *last, const double *wait,
                      const double *raw, uint32_t samples, double ntests)
{
    const struct an_comm *c = &a->comms[ci];
    struct an_straggler st;
    int named = an_straggler_test(last, wait, a->nranks, c->nranks, samples, ntests, &st);
    char id[24], who[96], p[32];
    an_comm_short(a, ci, id, sizeof id);
    p_text(st.p, p, sizeof p);
    if (!named) {
        if (st.rank == AN_NONE) return;
        an_rank_name(a, (int32_t)st.rank, a->ranks[st.rank].rank, who, sizeof who);
        an_note(a,
                "comm %s: no straggler: %u arrivals where a rank came %.1f ms or more after "
                "the first; the most unlikely by chance: %s, last at %u (%.1f expected), "
                "%.0f%% of the waiting, %s by chance over %.0f rank(s) tested (a straggler "
                "needs %d, %.0f%% and p < %g)",
                id, samples, AN_LATE_NS / 1e6, who, st.last, samples / (double)c->nranks,
                st.share * 100, p, ntests, AN_STRAGGLER_MIN, AN_STRAGGLER_SHARE * 100,
                AN_STRAGGLER_ALPHA);
        return;
    }
    char buf[512];
    snprintf(buf, sizeof buf,
             "arrived last at %u of %u collectives on comm %s (%lld ranks) "
             "where the others waited, %.1f ms after the first on average: %.0f%% of the "
             "waiting, %s by chance (an even spread makes a rank last at %.1f; %.0f rank(s) "
             "tested)",
             st.last, samples, id, (long long)c->nranks, raw[st.rank] / st.last / 1e6,
             st.share * 100, p, samples / (double)c->nranks, ntests);
    struct an_finding f;
    memset(&f, 0, sizeof f);
    f.cause = AN_SLOW;
    f.rank = (int32_t)st.rank;
    f.grank = a->ranks[st.rank].rank;
    f.comm = ci;
    f.peer = -1;
    f.op = DR_OP_UNKNOWN;
    f.blocker.comm = AN_NONE;
    f.detail = an_intern_str(&a->strs, buf);
    an_add_finding(a, &f);
}

static int usable(const struct an_comm *c)
{
    return c->nranks >= 2 && (int64_t)c->nmembers >= c->nranks;
}

struct arrival {
    int64_t spread;
    int32_t who;
};

static int by_spread(const void *x, const void *y)
{
    int64_t a = ((const struct arrival *)x)->spread, b = ((const struct arrival *)y)->spread;
    return a < b ? -1 : a > b;
}

/* The arrivals of c: per burst of collectives (enqueued within AN_BURST_NS of the one
 * before), the one with the widest spread, when that is AN_LATE_NS or more. */
static size_t arrivals(const struct an_comm *c, struct arrival *out)
{
    /* The GPU durations of the collectives timed on every rank (the timing
     * samples), whenever there are any: enqueue times say when a host got
     * there, not when its GPU did, and healthy ranks' hosts run ahead of
     * their GPUs by different amounts. */
    uint32_t timed = 0;
    for (size_t i = 0; i < c->nseqs; i++) timed += c->seqs[i].dn == c->nranks;
    int by_duration = timed > 0;
    size_t n = 0;
    struct arrival cur = {0, -1};
    int64_t prev = 0;
    int have_prev = 0;
    for (size_t i = 0; i <= c->nseqs; i++) {
        const struct an_seq *s = i < c->nseqs ? &c->seqs[i] : NULL;
        int known = s && s->en == c->nranks;
        if (!s || !known || !have_prev || s->emin - prev >= AN_BURST_NS) { /* a new burst */
            if (cur.who >= 0 && cur.spread >= AN_LATE_NS) out[n++] = cur;
            cur = (struct arrival){0, -1};
        }
        if (!s) break;
        have_prev = known;
        if (known) prev = s->emin;
        struct arrival x = {0, -1};
        if (by_duration && s->dn == c->nranks)
            x = (struct arrival){s->dmax - s->dmin, s->d_last};
        else if (!by_duration && known)
            x = (struct arrival){s->emax - s->emin, s->e_last};
        if (x.who >= 0 && (cur.who < 0 || x.spread > cur.spread)) cur = x;
    }
    return n;
}

void an_detect_slow(struct an *a)
{
    uint32_t *last = calloc(a->nranks + 1, sizeof *last);
    double *wait = calloc(a->nranks + 1, sizeof *wait);
    double *raw = calloc(a->nranks + 1, sizeof *raw);
    double ntests = 0; /* every rank of every communicator compared */
    for (uint32_t ci = 0; ci < a->ncomms; ci++)
        if (usable(&a->comms[ci])) ntests += (double)a->comms[ci].nranks;
    for (uint32_t ci = 0; last && wait && raw && ci < a->ncomms; ci++) {
        struct an_comm *c = &a->comms[ci];
        if (!usable(c) || !c->nseqs) continue;
        struct arrival *arr = malloc(c->nseqs * sizeof *arr);
        size_t n = arr ? arrivals(c, arr) : 0;
        if (n) {
            memset(last, 0, a->nranks * sizeof *last);
            memset(wait, 0, a->nranks * sizeof *wait);
            memset(raw, 0, a->nranks * sizeof *raw);
            /* a wait counts up to AN_STRAGGLER_CAP times the median: one stall of
             * the machine does not outweigh the rest */
            qsort(arr, n, sizeof *arr, by_spread);
            double cap = AN_STRAGGLER_CAP * (double)arr[n / 2].spread;
            for (size_t i = 0; i < n; i++) {
                double w = (double)arr[i].spread < cap ? (double)arr[i].spread : cap;
                last[arr[i].who]++;
                wait[arr[i].who] += w;
                raw[arr[i].who] += (double)arr[i].spread;
            }
            straggler(a, ci, last, wait, raw, (uint32_t)n, ntests);
        }
        free(arr);
    }
    free(last);
    free(wait);
    free(raw);
}
