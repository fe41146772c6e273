/*
 * analyze/fold.c: an_add_dump (analyze/model.h): one rank's dump into the summary.
 */
#include "analyze/fold.h"

#include <stdio.h>
#include <string.h>

#include "analyze/intern.h"
#include "analyze/model.h"
#include "analyze/where.h"
#include "dump/dump.h"

static int in_flight(int state)
{
    return state == NG_OP_SCHEDULED || state == NG_OP_STARTED;
}

/* The stream an op is ordered in: CU_STREAM_PER_THREAD (cuda.h, 0x2) is a
 * stream of each thread's own, the rest are one stream whichever thread
 * enqueues (as shim/watch/lanes.c has them). */
#define PER_THREAD_STREAM 0x2
static uint64_t lane_of(const struct dr_op *o)
{
    return o->stream == PER_THREAD_STREAM ? o->thread << 2 | PER_THREAD_STREAM : o->stream;
}

/* Keeps in *fl the in-flight op with the lowest index. */
static void keep_oldest(struct an_flight *fl, const struct dr_op *o, uint32_t comm)
{
    if (fl->present && fl->index <= o->index) return;
    fl->present = 1;
    fl->index = o->index;
    fl->seq = o->seq ? o->seq : o->p2p_seq;
    fl->stream = o->stream;
    fl->lane = lane_of(o);
    fl->thread = o->thread;
    fl->enqueue_ns = o->enqueue_ns;
    fl->comm = comm;
    fl->peer = o->seq ? -1 : o->peer;
    fl->op = o->op;
    fl->state = o->state;
    fl->timed_out = (o->flags & DR_OP_TIMEOUT) != 0;
}

static int add_comms(struct an *a, struct an_rank *r, int32_t ri, const struct dr_dump *d)
{
    r->rc0 = (uint32_t)a->nrcomms;
    for (size_t i = 0; i < d->ncomms; i++) {
        const struct dr_comm *dc = &d->comms[i];
        uint32_t c = an_comm_of(a, dc);
        if (c == AN_NONE) continue;
        struct an_comm *cm = &a->comms[c];
        if (dc->rank >= 0 && dc->rank < cm->nranks) {
            if (cm->member[dc->rank] < 0) {
                cm->member[dc->rank] = ri;
                cm->nmembers++;
            } else {
                an_note(a, "comm %016llx: comm rank %lld is claimed by two dumps (%s and %s)",
                        (unsigned long long)cm->id, (long long)dc->rank,
                        an_intern_get(&a->strs, a->ranks[cm->member[dc->rank]].path), d->path);
            }
        }
        if (!dc->parent && dc->nranks > a->world && an_claim_world(a, dc->nranks))
            a->world = dc->nranks;
        struct an_rcomm *rc = PUSH(a->rcomms, a->nrcomms, a->caprcomms);
        rc->comm = c;
        rc->comm_rank = (int32_t)dc->rank;
        rc->last_seq = dc->last_seq;
        rc->last_done = dc->last_completed_seq;
        rc->async_error = dc->last_async_error;
        rc->state = an_intern_str(&a->strs, dc->state);
        rc->peer0 = (uint32_t)a->npeers;
        for (size_t k = 0; k < dc->npeers; k++) {
            struct an_peer *p = PUSH(a->peers, a->npeers, a->cappeers);
            p->peer = (int32_t)dc->peers[k].peer;
            p->called = dc->peers[k].last_p2p_seq;
            p->done = dc->peers[k].last_completed_p2p_seq;
        }
        rc->npeers = (uint32_t)dc->npeers;
        r->nrc++;
    }
    return 0;
}

/* The rank's view of communicator id; *last caches the previous answer. */
static struct an_rcomm *rcomm_of(struct an *a, struct an_rank *r, uint64_t id, uint32_t *last)
{
    if (*last != AN_NONE && a->comms[a->rcomms[*last].comm].id == id) return &a->rcomms[*last];
    for (uint32_t i = 0; i < r->nrc; i++)
        if (a->comms[a->rcomms[r->rc0 + i].comm].id == id) {
            *last = r->rc0 + i;
            return &a->rcomms[*last];
        }
    return NULL;
}

static void add_inflight(struct an *a, struct an_rank *r, struct an_rcomm *rc,
                         const struct dr_op *o)
{
    r->ninflight++;
    if (!r->oldest_ns || (o->enqueue_ns && o->enqueue_ns < r->oldest_ns))
        r->oldest_ns = o->enqueue_ns;
    uint32_t s;
    for (s = 0; s < r->nst; s++)
        if (a->streams[r->st0 + s].lane == lane_of(o)) break;
    if (s == r->nst) {
        (void)PUSH(a->streams, a->nstreams, a->capstreams);
        r->nst++;
    }
    keep_oldest(&a->streams[r->st0 + s], o, rc ? rc->comm : AN_NONE);
    if (!rc) return;
    rc->ninflight++;
    if (o->seq) {
        keep_oldest(&rc->fl, o, rc->comm);
        return;
    }
    for (uint32_t i = 0; i < rc->npeers; i++)
        if (a->peers[rc->peer0 + i].peer == o->peer)
            keep_oldest(&a->peers[rc->peer0 + i].fl, o, rc->comm);
}

static void add_ops(struct an *a, struct an_rank *r, int32_t ri, const struct dr_dump *d)
{
    uint32_t last = AN_NONE;
    r->st0 = (uint32_t)a->nstreams;
    for (size_t i = 0; i < d->nops; i++) {
        const struct dr_op *o = &d->ops[i];
        struct an_rcomm *rc = rcomm_of(a, r, o->comm, &last);
        if (o->flags & DR_OP_TIMEOUT) r->timeouts++;
        if (o->state == NG_OP_FAILED && o->result && !r->failed_result)
            r->failed_result = o->result;
        if (rc && !rc->nops++)
            rc->last_thread = o->thread; /* its newest op: in flight
                                                               first, newest first */
        if (in_flight(o->state)) add_inflight(a, r, rc, o);
        if (!rc || !o->seq) continue;
        struct an_seq *s = an_seq_slot(a, &a->comms[rc->comm], o->seq);
        if (!s) continue;
        an_count_sig(a, s, an_sig_of(a, o), ri);
        if (o->state == NG_OP_COMPLETED) an_count_arrival(s, o, ri);
    }
    r->nops = d->nops;
    a->nops += d->nops;
}

static void add_threads(struct an *a, struct an_rank *r, const struct dr_dump *d)
{
    r->th0 = (uint32_t)a->nthreads;
    r->main = AN_NONE;
    r->has_threads = (uint8_t)d->has_threads;
    for (size_t i = 0; i < d->nthreads; i++) {
        struct an_thread *t = PUSH(a->threads, a->nthreads, a->capthreads);
        an_thread_of(a, d, &d->threads[i], t, &a->strs);
        if (d->threads[i].tid == d->pid || (r->main == AN_NONE && d->nthreads == 1))
            r->main = r->nth;
        r->nth++;
    }
    if (d->python && d->python->why) r->python_why = an_intern_str(&a->strs, d->python->why);
    r->has_python = d->python && d->python->nthreads;
}

int an_add_dump(struct an *a, const struct dr_dump *d)
{
    char why[512];
    if (a->opt.incident && (!d->incident || strcmp(d->incident, a->opt.incident))) {
        snprintf(why, sizeof why, "incident %s, not %s (--incident): ignored",
                 d->incident ? d->incident : "none", a->opt.incident);
        an_add_bad(a, d->path, why);
        return 1;
    }
    uint32_t dup = d->rank >= 0 ? an_u64map_get(&a->rank_by_grank, (uint64_t)d->rank) : AN_NONE;
    if (dup != AN_NONE) {
        snprintf(why, sizeof why, "a second dump of rank %lld (the first read: %s): ignored",
                 (long long)d->rank, an_intern_get(&a->strs, a->ranks[dup].path));
        an_add_bad(a, d->path, why);
        return 1;
    }
    if (!a->job) a->job = an_intern_str(&a->strs, d->job);
    int32_t ri = (int32_t)a->nranks;
    struct an_rank *r = PUSH(a->ranks, a->nranks, a->capranks);
    r->rank = d->rank;
    r->pid = d->pid;
    r->time_ns = d->time_ns;
    r->path = an_intern_str(&a->strs, d->path);
    r->host = an_intern_str(&a->strs, d->host);
    r->incident = an_intern_str(&a->strs, d->incident);
    r->reason = an_intern_str(&a->strs, d->reason);
    r->ras = an_intern_str(&a->strs, d->ras);
    r->major = d->major;
    r->minor = d->minor;
    r->crashed = d->reason && !strcmp(d->reason, "crash");
    a->read_bytes += d->bytes;
    if (d->rank >= 0) {
        an_u64map_put(&a->rank_by_grank, (uint64_t)d->rank, (uint32_t)ri);
        /* the job's size is a claim too: the ranks without a dump are listed */
        if (d->rank + 1 > a->world && an_claim_world(a, d->rank + 1)) a->world = d->rank + 1;
    }
    add_comms(a, r, ri, d);
    add_ops(a, r, ri, d);
    add_threads(a, r, d);
    return 0;
}
