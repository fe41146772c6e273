/*
 * analyze/hang.c: a collective that does not end, per communicator. The ranks
 * in flight wait at the lowest seq W that any of them has in flight; then
 *  - a rank whose last seq is below W never called it (missing);
 *  - a member that left no dump is the one they wait for (no_dump), and a member
 *    that dumped without this communicator never created it (missing);
 *  - when every member called W, a rank that has W scheduled while others have
 *    it started has a GPU that never reached it (gpu_not_started); the oldest
 *    op of its stream says what holds it. When that op is scheduled too, an older
 *    NCCL op stuck on another of the rank's streams is what the stream most
 *    likely waits for (frameworks order their streams with events, which the
 *    shim does not see): the finding's `held`, an inference.
 */
#include "analyze/hang.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/intern.h"
#include "analyze/model.h"
#include "analyze/rank.h"
#include "analyze/words.h"
#include "dump/dump.h"

struct wait {
    uint64_t seq; /* W, 0 when nobody waits */
    uint32_t n;   /* ranks that wait */
    int64_t since;
    uint8_t op, started; /* a rank has W started */
};

static struct wait waiting(const struct an *a, const struct an_comm *c, uint32_t ci)
{
    struct wait w = {0};
    for (int64_t m = 0; m < c->nranks; m++) {
        if (c->member[m] < 0) continue;
        const struct an_rcomm *rc = an_rcomm_of(a, c->member[m], ci);
        if (!rc || !rc->fl.present) continue;
        if (!w.seq || rc->fl.seq < w.seq) {
            w.seq = rc->fl.seq;
            w.op = rc->fl.op;
        }
    }
    for (int64_t m = 0; w.seq && m < c->nranks; m++) {
        if (c->member[m] < 0) continue;
        const struct an_rcomm *rc = an_rcomm_of(a, c->member[m], ci);
        if (!rc || !rc->fl.present) continue;
        w.n++;
        if (!w.since || rc->fl.enqueue_ns < w.since) w.since = rc->fl.enqueue_ns;
        if (rc->fl.seq == w.seq && rc->fl.state == NG_OP_STARTED) w.started = 1;
    }
    return w;
}

/* The global rank of comm rank k of c, which no dump lists; -1 when the dumps
 * cannot tell. A communicator of the whole job whose members all have their
 * global rank as comm rank maps every one so; otherwise only a lone absent
 * member and a lone rank without a dump go together. */
static int64_t grank_of(const struct an *a, const struct an_comm *c, int64_t k, int64_t nodump,
                        size_t n_nodump)
{
    int identity = c->nranks == a->world;
    for (int64_t m = 0; identity && m < c->nranks; m++)
        if (c->member[m] >= 0 && a->ranks[c->member[m]].rank != m) identity = 0;
    if (identity) return k;
    if ((int64_t)c->nmembers == c->nranks - 1 && n_nodump == 1) return nodump;
    return -1;
}

static void base_finding(const struct an *a, struct an_finding *f, int cause, uint32_t ci,
                         const struct wait *w)
{
    memset(f, 0, sizeof *f);
    f->cause = cause;
    f->comm = ci;
    f->peer = -1;
    f->seq = w->seq;
    f->op = w->op;
    f->nwaiting = w->n;
    f->since_ns = w->since;
    f->blocker.comm = AN_NONE;
    (void)a;
}

static void detail(struct an *a, struct an_finding *f, const char *fmt, const char *op,
                   unsigned long long seq, const struct an_comm *c)
{
    char buf[512], id[24];
    snprintf(buf, sizeof buf, fmt, op, seq, an_comm_short(a, f->comm, id, sizeof id),
             (long long)c->nranks);
    f->detail = an_intern_str(&a->strs, buf);
}

/* The op the waiting ranks know at seq (its signature), else W's. */
static uint8_t op_at(struct an_comm *c, uint64_t seq, const struct wait *w, const struct an *a)
{
    struct an_seq *s = an_seq_at(c, seq);
    if (s && s->sig) return ((const struct an_sig *)an_intern_get(&a->sigs, s->sig))->op;
    return w->op;
}

static void absent_members(struct an *a, uint32_t ci, const struct wait *w, int64_t nodump,
                           size_t n_nodump)
{
    struct an_comm *c = &a->comms[ci];
    int64_t absent = c->nranks - (int64_t)c->nmembers;
    if (absent > AN_MAX_ABSENT) { /* the dumps are incomplete, not 3000 culprits */
        char id[24];
        an_note(a,
                "comm %s: %lld of its %lld ranks left no dump; no culprit is named among "
                "them",
                an_comm_short(a, ci, id, sizeof id), (long long)absent, (long long)c->nranks);
        return;
    }
    for (int64_t k = 0; k < c->nranks; k++) {
        if (c->member[k] >= 0) continue;
        int64_t g = grank_of(a, c, k, nodump, n_nodump);
        uint32_t ri = g >= 0 ? an_u64map_get(&a->rank_by_grank, (uint64_t)g) : AN_NONE;
        struct an_finding f;
        base_finding(a, &f, ri == AN_NONE ? AN_NO_DUMP : AN_MISSING, ci, w);
        f.rank = ri == AN_NONE ? -1 : (int32_t)ri;
        f.grank = g;
        f.comm_rank = k;
        char buf[256], id[24];
        an_comm_short(a, ci, id, sizeof id);
        if (ri == AN_NONE && w->seq)
            snprintf(buf, sizeof buf,
                     "left no dump, while the others wait in %s #%llu on comm %s "
                     "(%lld ranks)",
                     dr_op_name(w->op), (unsigned long long)w->seq, id, (long long)c->nranks);
        else if (ri == AN_NONE)
            snprintf(buf, sizeof buf,
                     "left no dump, while the others wait for it to create comm "
                     "%s (%lld ranks)",
                     id, (long long)c->nranks);
        else
            snprintf(buf, sizeof buf,
                     "never created comm %s (%lld ranks), which the others wait "
                     "%s",
                     id, (long long)c->nranks, w->seq ? "in" : "to create");
        f.detail = an_intern_str(&a->strs, buf);
        an_add_finding(a, &f);
    }
}

static void stream_blocker(const struct an *a, int32_t ri, const struct an_rcomm *rc,
                           struct an_flight *out)
{
    const struct an_rank *r = &a->ranks[ri];
    for (uint32_t s = 0; s < r->nst; s++)
        if (a->streams[r->st0 + s].lane == rc->fl.lane) *out = a->streams[r->st0 + s];
}

/* The oldest NCCL op in flight on another stream of rank ri than f->blocker's,
 * enqueued before it (a stream can wait only for work enqueued before the wait),
 * when f->blocker never started: what that stream most likely waits for. */
void an_stream_holder(const struct an *a, int32_t ri, struct an_finding *f)
{
    const struct an_flight *b = &f->blocker;
    memset(&f->held, 0, sizeof f->held);
    f->held.comm = AN_NONE;
    if (ri < 0 || !b->present || b->state != NG_OP_SCHEDULED) return;
    const struct an_rank *r = &a->ranks[ri];
    const struct an_flight *best = NULL;
    for (uint32_t s = 0; s < r->nst; s++) {
        const struct an_flight *o = &a->streams[r->st0 + s];
        if (!o->present || o->comm == AN_NONE || o->lane == b->lane || o->index >= b->index)
            continue;
        if (!best || o->index < best->index) best = o;
    }
    if (best) f->held = *best;
}

static void one_comm(struct an *a, uint32_t ci, int64_t nodump, size_t n_nodump, int crashed)
{
    struct an_comm *c = &a->comms[ci];
    struct wait w = waiting(a, c, ci);
    int initializing = 0;
    for (int64_t m = 0; m < c->nranks && !w.seq; m++) {
        const struct an_rcomm *rc = c->member[m] >= 0 ? an_rcomm_of(a, c->member[m], ci) : NULL;
        const char *st = rc ? an_intern_get(&a->strs, rc->state) : NULL;
        if (st && !strcmp(st, "initializing")) initializing = 1;
    }
    if (!w.seq && !initializing) return;
    size_t before = a->nfindings;
    for (int64_t m = 0; w.seq && m < c->nranks; m++) {
        if (c->member[m] < 0) continue;
        const struct an_rcomm *rc = an_rcomm_of(a, c->member[m], ci);
        if (!rc || rc->last_seq >= w.seq) continue;
        struct an_finding f;
        base_finding(a, &f, AN_MISSING, ci, &w);
        f.rank = c->member[m];
        f.grank = a->ranks[f.rank].rank;
        f.comm_rank = m;
        f.seq = rc->last_seq + 1;
        f.op = op_at(c, f.seq, &w, a);
        detail(a, &f, "never called %s #%llu on comm %s (%lld ranks)", dr_op_name(f.op), f.seq, c);
        an_add_finding(a, &f);
    }
    /* Members without a dump are blamed only when no rank that dumped explains the
     * wait, and no rank crashed: ranks that a launcher stops after a crash often
     * leave no dump (a SIGTERM while idle writes none). */
    if (a->nfindings == before && (int64_t)c->nmembers < c->nranks && !crashed &&
        n_nodump <= AN_MAX_ABSENT)
        absent_members(a, ci, &w, nodump, n_nodump);
    /* A communicator of one rank waits for no peer: its op that timed out before
     * its GPU started it is not started, with no peer to compare it with. */
    int alone = c->nranks == 1;
    if (a->nfindings > before || (!w.started && !alone)) return;
    for (int64_t m = 0; m < c->nranks; m++) {
        if (c->member[m] < 0) continue;
        const struct an_rcomm *rc = an_rcomm_of(a, c->member[m], ci);
        if (!rc || !rc->fl.present || rc->fl.seq != w.seq || rc->fl.state != NG_OP_SCHEDULED ||
            (alone && !rc->fl.timed_out))
            continue;
        struct an_finding f;
        base_finding(a, &f, AN_GPU_NOT_STARTED, ci, &w);
        f.rank = c->member[m];
        f.grank = a->ranks[f.rank].rank;
        f.comm_rank = m;
        f.blocker = rc->fl;
        stream_blocker(a, f.rank, rc, &f.blocker);
        an_stream_holder(a, f.rank, &f);
        detail(a, &f, "enqueued %s #%llu on comm %s (%lld ranks), but its GPU never started it",
               dr_op_name(f.op), f.seq, c);
        an_add_finding(a, &f);
    }
}

void an_detect_collectives(struct an *a)
{
    /* the ranks of the job without a dump: a lone one can be placed */
    int64_t nodump = -1;
    size_t n_nodump = 0;
    for (int64_t g = 0; g < a->world; g++)
        if (an_u64map_get(&a->rank_by_grank, (uint64_t)g) == AN_NONE) {
            if (!n_nodump) nodump = g;
            n_nodump++;
        }
    int crashed = 0;
    for (size_t i = 0; i < a->nranks; i++) crashed |= a->ranks[i].crashed;
    if (n_nodump > AN_MAX_ABSENT)
        an_note(a,
                "%zu of the job's %lld ranks left no dump: the dumps are incomplete, and no "
                "culprit is named among the ranks without one",
                n_nodump, (long long)a->world);
    for (uint32_t ci = 0; ci < a->ncomms; ci++)
        if (a->comms[ci].nranks > 0) one_comm(a, ci, nodump, n_nodump, crashed);
}
