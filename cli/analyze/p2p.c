/*
 * analyze/p2p.c: the broken link of a pipeline, from comms[].peers. On each pair
 * of ranks of a communicator, each side counts the sends and receives it called
 * with the other: the side that counts fewer stopped there (p2p); equal counts
 * with one side's op scheduled and the other's started mean that side's GPU never
 * reached it (gpu_not_started); a peer that left no dump is the one waited for.
 */
#include "analyze/p2p.h"

#include <stdio.h>
#include <string.h>

#include "analyze/hang.h"
#include "analyze/intern.h"
#include "analyze/model.h"
#include "analyze/rank.h"
#include "analyze/words.h"
#include "dump/dump.h"

static const struct an_peer *peer_entry(const struct an *a, const struct an_rcomm *rc, int32_t q)
{
    for (uint32_t i = 0; rc && i < rc->npeers; i++)
        if (a->peers[rc->peer0 + i].peer == q) return &a->peers[rc->peer0 + i];
    return NULL;
}

static struct an_finding base(int cause, uint32_t ci, int32_t rank, const struct an *a)
{
    struct an_finding f;
    memset(&f, 0, sizeof f);
    f.cause = cause;
    f.comm = ci;
    f.rank = rank;
    f.grank = rank >= 0 ? a->ranks[rank].rank : -1;
    f.peer = -1;
    f.op = DR_OP_UNKNOWN;
    f.nwaiting = 1;
    f.blocker.comm = AN_NONE;
    return f;
}

/* q (the rank at fault) against m, who waits: q never called the op that
 * matches m's oldest one in flight with it. */
static void stopped(struct an *a, uint32_t ci, int32_t mi, int32_t qi, const struct an_peer *pm,
                    uint64_t q_called)
{
    char buf[512], id[24], other[96];
    struct an_finding f = base(AN_P2P, ci, qi, a);
    f.comm_rank = -1;
    f.peer = mi;
    f.seq = q_called + 1;
    f.since_ns = pm->fl.present ? pm->fl.enqueue_ns : 0;
    /* f.op stays unknown: which of its ops is missing the counts do not say (a group's
     * Send and Recv end together, so the other side's oldest op may be matched) */
    an_rank_name(a, mi, a->ranks[mi].rank, other, sizeof other);
    int n = snprintf(buf, sizeof buf,
                     "stopped the point-to-point link with %s on comm %s: it "
                     "called %llu sends and receives with it, the other side %llu",
                     other, an_comm_short(a, ci, id, sizeof id), (unsigned long long)q_called,
                     (unsigned long long)pm->called);
    if (pm->fl.present && n > 0 && (size_t)n < sizeof buf)
        snprintf(buf + n, sizeof buf - (size_t)n, ", whose %s #%llu waits for it",
                 dr_op_name(pm->fl.op), (unsigned long long)pm->fl.seq);
    f.detail = an_intern_str(&a->strs, buf);
    an_add_finding(a, &f);
}

static void not_started(struct an *a, uint32_t ci, int32_t qi, int32_t mi, const struct an_peer *pq)
{
    char buf[512], id[24], other[96];
    struct an_finding f = base(AN_GPU_NOT_STARTED, ci, qi, a);
    f.peer = mi;
    f.seq = pq->fl.seq;
    f.op = pq->fl.op;
    f.since_ns = pq->fl.enqueue_ns;
    f.blocker = pq->fl;
    const struct an_rank *r = &a->ranks[qi];
    for (uint32_t s = 0; s < r->nst; s++)
        if (a->streams[r->st0 + s].lane == pq->fl.lane) f.blocker = a->streams[r->st0 + s];
    an_stream_holder(a, qi, &f);
    an_rank_name(a, mi, a->ranks[mi].rank, other, sizeof other);
    snprintf(buf, sizeof buf, "enqueued %s #%llu with %s on comm %s, but its GPU never started it",
             dr_op_name(f.op), (unsigned long long)f.seq, other,
             an_comm_short(a, ci, id, sizeof id));
    f.detail = an_intern_str(&a->strs, buf);
    an_add_finding(a, &f);
}

static void no_dump(struct an *a, uint32_t ci, int32_t mi, int32_t q, const struct an_peer *pm)
{
    char buf[512], id[24], other[96];
    const struct an_comm *c = &a->comms[ci];
    struct an_finding f = base(AN_NO_DUMP, ci, -1, a);
    int identity = c->nranks == a->world;
    for (int64_t m = 0; identity && m < c->nranks; m++)
        if (c->member[m] >= 0 && a->ranks[c->member[m]].rank != m) identity = 0;
    f.grank = identity ? q : -1;
    f.comm_rank = q;
    f.peer = mi;
    f.seq = pm->fl.seq;
    f.op = pm->fl.op;
    f.since_ns = pm->fl.enqueue_ns;
    an_rank_name(a, mi, a->ranks[mi].rank, other, sizeof other);
    snprintf(buf, sizeof buf, "left no dump, while %s waits in %s #%llu with it on comm %s", other,
             dr_op_name(f.op), (unsigned long long)f.seq, an_comm_short(a, ci, id, sizeof id));
    f.detail = an_intern_str(&a->strs, buf);
    an_add_finding(a, &f);
}

/* fl is the oldest op of its stream on rank ri: the one the stream waits in,
 * not one queued behind another. */
static int at_head(const struct an *a, int32_t ri, const struct an_flight *fl)
{
    const struct an_rank *r = &a->ranks[ri];
    for (uint32_t s = 0; s < r->nst; s++)
        if (a->streams[r->st0 + s].lane == fl->lane)
            return a->streams[r->st0 + s].index == fl->index;
    return 0;
}

static void one_pair(struct an *a, uint32_t ci, int32_t m, const struct an_peer *pm)
{
    const struct an_comm *c = &a->comms[ci];
    int32_t mi = c->member[m], q = pm->peer;
    if (q < 0 || q >= c->nranks || q == m || !pm->fl.present || !at_head(a, mi, &pm->fl)) return;
    int32_t qi = c->member[q];
    if (qi < 0) {
        if (pm->fl.state == NG_OP_STARTED && c->nranks - (int64_t)c->nmembers <= AN_MAX_ABSENT &&
            (int64_t)a->nranks >= a->world - AN_MAX_ABSENT)
            no_dump(a, ci, mi, q, pm);
        return;
    }
    const struct an_peer *pq = peer_entry(a, an_rcomm_of(a, qi, ci), m);
    uint64_t q_called = pq ? pq->called : 0;
    if (pm->called > q_called) {
        stopped(a, ci, mi, qi, pm, q_called);
        return;
    }
    if (pm->called == q_called && pq && pq->fl.present && pm->fl.state == NG_OP_STARTED &&
        pq->fl.state == NG_OP_SCHEDULED)
        not_started(a, ci, qi, mi, pq);
}

void an_detect_p2p(struct an *a)
{
    for (uint32_t ci = 0; ci < a->ncomms; ci++) {
        const struct an_comm *c = &a->comms[ci];
        for (int64_t m = 0; m < c->nranks; m++) {
            if (c->member[m] < 0) continue;
            const struct an_rcomm *rc = an_rcomm_of(a, c->member[m], ci);
            for (uint32_t i = 0; rc && i < rc->npeers; i++)
                one_pair(a, ci, (int32_t)m, &a->peers[rc->peer0 + i]);
        }
    }
}
