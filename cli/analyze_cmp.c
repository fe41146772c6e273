/*
 * analyze_cmp.c: what the ranks' records of one collective say across ranks.
 *  - mismatch: at the same seq, ranks called different ops (op, count, bytes,
 *    datatype, reduction, root); the ranks of the minority are named. When a
 *    rank's op at seq s is the others' op at s + 1, it skipped one (missing).
 *  - slow: at each completed collective, the rank that arrived last; a rank that
 *    makes the others wait persistently is a straggler. Arrival comes from the GPU durations
 *    (everyone leaves a collective together, so the last to arrive waited least;
 *    no clock is compared across hosts) of the collectives timed on every rank,
 *    or the enqueue times when none is.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"

static const struct an_sig *sig(const struct an *a, uint32_t id)
{
    return (const struct an_sig *)ng_intern_get(&a->sigs, id);
}

static void describe(const struct an_sig *s, char *buf, size_t n)
{
    size_t at = (size_t)snprintf(buf, n, "%s count %llu %s", ng_dop_name_str(s->op),
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
        snprintf(buf, sizeof buf, "skipped %s #%llu on comm %s (%lld ranks): its #%llu is the "
                 "others' #%llu (%s)", ng_dop_name_str(sig(a, good->sig)->op),
                 (unsigned long long)seq, id, (long long)c->nranks, (unsigned long long)seq,
                 (unsigned long long)seq + 1, mine);
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
        f.detail = ng_intern_str(&a->strs, buf);
        an_add_finding(a, &f);
    }
    if (bad->n > 2) an_note(a, "comm %s #%llu: %u ranks called %s; two are named", id,
                            (unsigned long long)seq, bad->n, mine);
}

static void mismatch_at(struct an *a, uint32_t ci, struct an_comm *c, uint64_t seq, struct an_seq *s)
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
        an_note(a, "comm %s #%llu: the ranks disagree (%u as %s, %u as %s), with no majority to "
                   "tell which side is wrong", an_comm_short(a, ci, id, sizeof id),
                (unsigned long long)seq, v[0].n, one, v[1].n, two);
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

/* The rank that made the others wait longest, when it did so persistently: last
 * at AN_STRAGGLER_MIN collectives at least, and the cause of AN_STRAGGLER_SHARE of
 * all the waiting, twice as much as any other rank. Random lateness (jitter, a
 * pause now and then) spreads the waiting over the ranks. */
static void straggler(struct an *a, uint32_t ci, const uint32_t *last, const int64_t *late,
                      uint32_t waited)
{
    uint32_t best = AN_NONE;
    int64_t total = 0, second = 0;
    for (size_t r = 0; r < a->nranks; r++) {
        total += late[r];
        if (!last[r]) continue;
        if (best == AN_NONE || late[r] > late[best]) {
            if (best != AN_NONE && late[best] > second) second = late[best];
            best = (uint32_t)r;
        } else if (late[r] > second) {
            second = late[r];
        }
    }
    if (best == AN_NONE) return;
    char id[24], who[96];
    an_comm_short(a, ci, id, sizeof id);
    an_rank_name(a, (int32_t)best, a->ranks[best].rank, who, sizeof who);
    double share = total ? (double)late[best] / (double)total : 0;
    if (last[best] < AN_STRAGGLER_MIN || share < AN_STRAGGLER_SHARE || late[best] < 2 * second) {
        an_note(a, "comm %s: no straggler: %u collectives where a rank came %.1f ms or more after "
                   "the first; the waiting is spread over the ranks (at most %.0f%%, %s)", id,
                waited, AN_LATE_NS / 1e6, share * 100, who);
        return;
    }
    char buf[512];
    snprintf(buf, sizeof buf, "arrived last at %u of the %u collectives on comm %s (%lld ranks) "
             "where the others waited, %.1f ms after the first on average: %.0f%% of all the "
             "waiting", last[best], waited, id, (long long)a->comms[ci].nranks,
             (double)late[best] / last[best] / 1e6, share * 100);
    struct an_finding f;
    memset(&f, 0, sizeof f);
    f.cause = AN_SLOW;
    f.rank = (int32_t)best;
    f.grank = a->ranks[best].rank;
    f.comm = ci;
    f.peer = -1;
    f.op = NG_OP_UNKNOWN;
    f.blocker.comm = AN_NONE;
    f.detail = ng_intern_str(&a->strs, buf);
    an_add_finding(a, &f);
}

void an_detect_slow(struct an *a)
{
    uint32_t *last = calloc(a->nranks + 1, sizeof *last);
    int64_t *late = calloc(a->nranks + 1, sizeof *late);
    for (uint32_t ci = 0; last && late && ci < a->ncomms; ci++) {
        struct an_comm *c = &a->comms[ci];
        if (c->nranks < 2 || (int64_t)c->nmembers < c->nranks) continue;
        memset(last, 0, a->nranks * sizeof *last);
        memset(late, 0, a->nranks * sizeof *late);
        /* The GPU durations of the collectives timed on every rank (the timing
         * samples), whenever there are any: enqueue times say when a host got
         * there, not when its GPU did, and healthy ranks' hosts run ahead of
         * their GPUs by different amounts. */
        uint32_t timed = 0, waited = 0;
        for (size_t i = 0; i < c->nseqs; i++) timed += c->seqs[i].dn == c->nranks;
        int by_duration = timed > 0;
        for (size_t i = 0; i < c->nseqs; i++) {
            const struct an_seq *s = &c->seqs[i];
            int64_t spread;
            int32_t who;
            if (by_duration) {
                if (s->dn != c->nranks) continue;
                spread = s->dmax - s->dmin;
                who = s->d_last;
            } else if (s->en == c->nranks) {
                spread = s->emax - s->emin;
                who = s->e_last;
            } else {
                continue;
            }
            if (spread < AN_LATE_NS || who < 0) continue;
            waited++;
            last[who]++;
            late[who] += spread;
        }
        if (waited) straggler(a, ci, last, late, waited);
    }
    free(last);
    free(late);
}
