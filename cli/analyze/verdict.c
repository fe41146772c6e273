/*
 * analyze/verdict.c: from findings to culprits. A rank blamed on one
 * communicator may itself be waiting on another (it never called the op because
 * it is stuck in an earlier one; its stream is held by an op of another
 * communicator, or of another of its streams): the chain is followed to the
 * finding at its end, whose rank is named with that finding's cause. Each step
 * goes to the findings at the place of the op the rank waits in (a collective:
 * its communicator; a send or receive: the link with its peer), the rank's own
 * included, and only there does the cause table's order choose between them.
 * One culprit per rank (analyze/model.h).
 */
#include "analyze/verdict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/cmp.h"
#include "analyze/hang.h"
#include "analyze/launcher.h"
#include "analyze/model.h"
#include "analyze/p2p.h"
#include "analyze/rank.h"
#include "analyze/words.h"

#define MAX_CHAIN 16

/* The op that rank ri waits on: its oldest in flight of all its streams (the
 * lowest index: the ring's order is the order of enqueue). */
static const struct an_flight *waits_on(const struct an *a, int32_t ri)
{
    const struct an_rank *r = &a->ranks[ri];
    const struct an_flight *best = NULL;
    for (uint32_t s = 0; s < r->nst; s++) {
        const struct an_flight *f = &a->streams[r->st0 + s];
        if (f->present && f->comm != AN_NONE && (!best || f->index < best->index)) best = f;
    }
    return best;
}

/* f is a finding at the place of op fl of rank ri: for a collective, on its
 * communicator and about no link; for a send or receive, about the link of ri
 * with its peer (either side, or the peer that left no dump). */
static int at_place(const struct an *a, int32_t ri, const struct an_flight *fl,
                    const struct an_finding *f)
{
    if (f->comm != fl->comm || f->cause == AN_SLOW) return 0;
    if (fl->peer < 0) return f->peer < 0;
    const struct an_comm *c = &a->comms[fl->comm];
    if (f->peer < 0 || fl->peer >= c->nranks) return 0;
    int32_t q = c->member[fl->peer];
    if (q < 0) return f->rank < 0 && f->comm_rank == fl->peer && f->peer == ri;
    return (f->rank == q && f->peer == ri) || (f->rank == ri && f->peer == q);
}

/* The finding that explains why op fl of rank ri does not end, other than from:
 * the first cause of the table among those at its place. */
static const struct an_finding *blamed_at(const struct an *a, int32_t ri,
                                          const struct an_flight *fl, const struct an_finding *from)
{
    const struct an_finding *best = NULL;
    for (size_t i = 0; i < a->nfindings; i++) {
        const struct an_finding *f = &a->findings[i];
        if (f == from || !at_place(a, ri, fl, f)) continue;
        if (!best || f->cause < best->cause) best = f;
    }
    return best;
}

/* f (p2p): its rank called fewer sends and receives with f->peer on f->comm,
 * and waits in o. When o is on the same communicator, the rank was held by o
 * only when the op it did not call comes after o: a collective the peer called
 * before the op that waits for the rank (their programs order the communicator's
 * ops alike). A rank that waits in an op the peer called after the unmatched
 * one went past it: the chain ends there. */
static int went_past(const struct an *a, const struct an_finding *f, const struct an_flight *o)
{
    if (o->comm != f->comm || f->peer < 0) return 0;
    const struct an_comm *c = &a->comms[f->comm];
    if (o->peer >= 0) return o->peer < c->nranks && c->member[o->peer] == f->peer;
    const struct an_rcomm *mine = an_rcomm_of(a, f->rank, f->comm);
    const struct an_rcomm *qc = an_rcomm_of(a, f->peer, f->comm);
    if (!mine || !qc) return 1;
    const struct an_peer *pq = NULL;
    for (uint32_t i = 0; i < qc->npeers; i++)
        if (a->peers[qc->peer0 + i].peer == mine->comm_rank) pq = &a->peers[qc->peer0 + i];
    if (qc->last_seq < o->seq) return 1; /* the peer never called o */
    return pq && pq->fl.present && qc->fl.present && qc->fl.seq <= o->seq &&
           qc->fl.index > pq->fl.index;
}

/* The next finding of the chain after f, or NULL when f's rank is its end. */
static const struct an_finding *next_of(const struct an *a, const struct an_finding *f)
{
    if (f->rank < 0) return NULL;
    switch (f->cause) {
    case AN_MISSING:
    case AN_P2P: {
        const struct an_flight *w = waits_on(a, f->rank);
        if (!w || (f->cause == AN_P2P && went_past(a, f, w))) return NULL;
        return blamed_at(a, f->rank, w, f);
    }
    case AN_GPU_NOT_STARTED:
        if (f->held.present) return blamed_at(a, f->rank, &f->held, f);
        if (f->blocker.comm == AN_NONE || f->blocker.state != NG_OP_STARTED) return NULL;
        return blamed_at(a, f->rank, &f->blocker, f);
    default: return NULL;
    }
}

static int same_rank(const struct an_finding *x, const struct an_finding *y)
{
    if (x->rank >= 0 || y->rank >= 0) return x->rank == y->rank;
    if (x->grank >= 0 || y->grank >= 0) return x->grank == y->grank;
    return x->comm == y->comm && x->comm_rank == y->comm_rank;
}

static void add_culprit(struct an *a, const struct an_culprit *c)
{
    for (size_t i = 0; i < a->nculprits; i++) {
        struct an_culprit *o = &a->culprits[i];
        if (!same_rank(&o->f, &c->f)) continue;
        /* the winning cause; for one cause, the longer chain: it shows the ranks that
         * were blamed and are not the culprit */
        if (c->f.cause < o->f.cause || (c->f.cause == o->f.cause && c->nchain > o->nchain) ||
            (c->f.cause == o->f.cause && c->nchain == o->nchain && c->f.since_ns &&
             (!o->f.since_ns || c->f.since_ns < o->f.since_ns)))
            *o = *c;
        return;
    }
    a->culprits = an_grow(a->culprits, &a->nculprits, &a->capculprits, sizeof *a->culprits);
    a->culprits[a->nculprits - 1] = *c;
}

static void follow(struct an *a, const struct an_finding *start)
{
    struct an_culprit c;
    memset(&c, 0, sizeof c);
    const struct an_finding *f = start;
    for (;;) {
        uint32_t fi = (uint32_t)(f - a->findings);
        for (int i = 0; i < c.nchain; i++)
            if (c.path[i] == fi) {
                an_note(a,
                        "a cycle of waits: %d ranks wait on each other (a deadlock of the "
                        "order of calls)",
                        c.nchain - i);
                return;
            }
        if (c.nchain < MAX_CHAIN) {
            c.path[c.nchain] = fi;
            c.chain[c.nchain++] = f->rank;
        }
        const struct an_finding *n = next_of(a, f);
        if (!n || c.nchain == MAX_CHAIN) break;
        f = n;
    }
    c.f = *f;
    add_culprit(a, &c);
}

/* A rank that died (crashed, or left no dump) explains the waits of the others:
 * their ops stay in flight, scheduled or started as each rank's watchdog last
 * saw them. Those waits are no culprits then; a mismatch or an async error is
 * evidence of its own and stays. */
static void crash_explains_waits(struct an *a)
{
    int died = 0;
    for (size_t i = 0; i < a->nculprits; i++)
        died |= a->culprits[i].f.cause == AN_CRASHED || a->culprits[i].f.cause == AN_NO_DUMP;
    if (!died) return;
    size_t kept = 0;
    for (size_t i = 0; i < a->nculprits; i++)
        if (a->culprits[i].f.cause <= AN_MISMATCH) a->culprits[kept++] = a->culprits[i];
    a->nculprits = kept;
}

static int by_rank(const void *x, const void *y)
{
    const struct an_culprit *a = x, *b = y;
    if (a->f.cause != b->f.cause) return a->f.cause - b->f.cause;
    return a->f.grank < b->f.grank ? -1 : a->f.grank > b->f.grank;
}

int an_verdict(struct an *a)
{
    if (!a->nranks) return AN_EXIT_UNUSABLE;
    a->hang = an_stuck(a);
    an_detect_crashed(a);
    an_detect_async_error(a);
    an_detect_mismatch(a);
    if (a->hang) {
        an_detect_collectives(a);
        an_detect_p2p(a);
    }
    an_launcher_lines(a);
    for (size_t i = 0; i < a->nfindings; i++) follow(a, &a->findings[i]);
    if (!a->nculprits && !a->hang) {
        size_t before = a->nfindings;
        an_detect_slow(a);
        for (size_t i = before; i < a->nfindings; i++) follow(a, &a->findings[i]);
    }
    crash_explains_waits(a);
    if (a->nculprits > 1) qsort(a->culprits, a->nculprits, sizeof *a->culprits, by_rank);
    an_verdict_lines(a);
    if (a->nculprits) return AN_EXIT_CULPRIT;
    return a->hang ? AN_EXIT_NO_CULPRIT : AN_EXIT_HEALTHY;
}
