/*
 * analyze_dumps.h: small dumps for the analyzer's Check suites (test_analyze_*.c),
 * written by hand into a test's directory and read back through the real reader
 * (an_read_dir), as `ncclguard analyze` reads them. A rank's dump is a struct fdump:
 * its communicators (comm) and ops (op); ad_write puts it in a file, ad_analyze runs
 * the verdict on the directory, ad_culprits says it as text. Called from the tests
 * (one thread each: Check runs every test in a process of its own).
 *
 * Every field left zero takes the value of a plain dump: reason "timeout", started
 * ops flagged "timeout", communicators "ready" without an async error, AllReduce-like
 * ops of 8 float32 with "sum" and no root, result 0.
 */
#ifndef NCCLGUARD_ANALYZE_DUMPS_H
#define NCCLGUARD_ANALYZE_DUMPS_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/model.h"
#include "analyze/read.h"
#include "analyze/verdict.h"

/* Communicators of the fixtures: 00..0aa is the world, bb and cc are splits. */
#define W "00000000000000aa"
#define S1 "00000000000000bb"
#define S2 "00000000000000cc"
/* Streams: a rank's world (or pipeline) stream and its tensor-parallel one. */
#define SW "0000000000000a00"
#define ST "0000000000000b00"

#define AD_TIME_NS 1000000000000LL /* a dump's time_ns, unless it says another */

struct fop {
    int index;
    const char *comm;
    int seq, p2p, peer; /* seq 0: a send or receive (p2p: its p2p_seq, peer: comm rank) */
    const char *op, *stream, *state;
    int count; /* 0: 8 */
};

/* The rest of an op, set through the pointer that op() returns. */
struct fopx {
    const char *datatype; /* NULL: float32 */
    const char *redop;    /* NULL: sum for a collective, null for a send or receive */
    const char *root;     /* the root's JSON text, NULL: null */
    int result;           /* its ncclResult_t (a failed op's) */
    int thread;           /* the enqueuing thread, 0: the rank's one (1000 + rank) */
    int timeout;          /* flagged "timeout" in any state (a started op is, unless untimed) */
};

struct fdop {
    struct fop o;
    struct fopx x;
};

struct fcomm {
    const char *id;
    int rank, nranks, last, done;
    const char *peers;     /* the peers array's text, NULL: [] */
    long long async_error; /* last_async_error */
    const char *state;     /* NULL: ready */
};

#define MAXF 16
struct fdump {
    int rank;
    struct fcomm comms[MAXF];
    struct fdop ops[MAXF];
    int ncomms, nops;
    const char *reason; /* NULL: timeout */
    long long time_ns;  /* 0: AD_TIME_NS */
    int untimed;        /* its started ops carry no "timeout" flag */
};

/* The enqueue time of the op at index i (as ad_write writes it). */
static inline long long ad_enqueue_ns(int i)
{
    return AD_TIME_NS - 100000 + i * 1000LL;
}

static inline struct fcomm *comm(struct fdump *d, const char *id, int rank, int nranks, int last,
                                 int done, const char *peers)
{
    ck_assert_int_lt(d->ncomms, MAXF);
    d->comms[d->ncomms] = (struct fcomm){id, rank, nranks, last, done, peers, 0, NULL};
    return &d->comms[d->ncomms++];
}

static inline struct fopx *op(struct fdump *d, struct fop o)
{
    ck_assert_int_lt(d->nops, MAXF);
    d->ops[d->nops] = (struct fdop){o, {NULL, NULL, NULL, 0, 0, 0}};
    return &d->ops[d->nops++].x;
}

static inline const struct fcomm *ad_comm_of(const struct fdump *d, const char *id)
{
    for (int i = 0; i < d->ncomms; i++)
        if (!strcmp(d->comms[i].id, id)) return &d->comms[i];
    ck_abort_msg("rank %d: op on comm %s, which its dump does not list", d->rank, id);
    return NULL;
}

static inline int ad_in_flight(const struct fop *o)
{
    return !strcmp(o->state, "scheduled") || !strcmp(o->state, "started");
}

/* Ops as the shim writes them: those in flight first, then the rest, newest first. */
static inline int ad_op_order(const void *x, const void *y)
{
    const struct fop *a = &((const struct fdop *)x)->o, *b = &((const struct fdop *)y)->o;
    if (ad_in_flight(a) != ad_in_flight(b)) return ad_in_flight(b) - ad_in_flight(a);
    return b->index - a->index;
}

static inline void ad_put_op(FILE *f, const struct fdump *d, const struct fdop *od, int first)
{
    const struct fop *o = &od->o;
    const struct fopx *x = &od->x;
    const struct fcomm *c = ad_comm_of(d, o->comm);
    long long t = ad_enqueue_ns(o->index);
    int done = !strcmp(o->state, "completed"), started = !strcmp(o->state, "started");
    char seq[24] = "null", p2p[24] = "null", peer[24] = "null", redop[32] = "null";
    if (o->seq)
        snprintf(seq, sizeof seq, "%d", o->seq);
    else
        snprintf(p2p, sizeof p2p, "%d", o->p2p), snprintf(peer, sizeof peer, "%d", o->peer);
    if (x->redop || o->seq) snprintf(redop, sizeof redop, "\"%s\"", x->redop ? x->redop : "sum");
    char start[32] = "null", end[32] = "null";
    if (done || started) snprintf(start, sizeof start, "%lld", t + 10);
    if (done) snprintf(end, sizeof end, "%lld", t + 20);
    int count = o->count ? o->count : 8;
    fprintf(f,
            "%s{\"index\":%d,\"comm\":\"%s\",\"comm_rank\":%d,\"comm_nranks\":%d,"
            "\"seq\":%s,\"p2p_seq\":%s,\"op\":\"%s\",\"count\":%d,\"datatype\":\"%s\","
            "\"bytes\":%d,\"redop\":%s,\"root\":%s,\"peer\":%s,\"stream\":\"%s\","
            "\"group\":null,\"thread\":%d,\"enqueue_ns\":%lld,\"enqueue_mono_ns\":%lld,"
            "\"state\":\"%s\",\"gpu_start_ns\":%s,\"gpu_end_ns\":%s,\"seen_start_ns\":null,"
            "\"seen_end_ns\":null,\"result\":%d,\"flags\":[%s],\"marker\":null}",
            first ? "" : ",\n", o->index, o->comm, c->rank, c->nranks, seq, p2p, o->op, count,
            x->datatype ? x->datatype : "float32", count * 4, redop, x->root ? x->root : "null",
            peer, o->stream, x->thread ? x->thread : 1000 + d->rank, t, t, o->state, start, end,
            x->result, (started && !d->untimed) || x->timeout ? "\"timeout\"" : "");
}

/* Writes d as DIR/ncclguard-rR-h-PID.json. */
static inline void ad_write(const char *dir, struct fdump *d)
{
    char path[128];
    snprintf(path, sizeof path, "%s/ncclguard-r%d-h-%d.json", dir, d->rank, 1000 + d->rank);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "{\"schema\":\"ncclguard.dump/2\",\"reason\":\"%s\",\"incident\":\"1-r0@h\","
            "\"time_ns\":%lld,\"host\":\"h\",\"pid\":%d,\"rank\":%d,"
            "\"local_rank\":%d,\"job\":\"chains\",\"versions\":{\"ncclguard\":\"0.1.0\","
            "\"nccl\":null,\"cuda_driver\":null,\"python\":null},\"env\":{},"
            "\"flight\":{\"capacity\":64,\"recorded\":%d,\"overwritten\":0,"
            "\"dropped_inflight\":0},\"comms\":[",
            d->reason ? d->reason : "timeout", d->time_ns ? d->time_ns : AD_TIME_NS, 1000 + d->rank,
            d->rank, d->rank, d->nops);
    for (int i = 0; i < d->ncomms; i++) {
        const struct fcomm *c = &d->comms[i];
        fprintf(f,
                "%s{\"id\":\"%s\",\"rank\":%d,\"nranks\":%d,\"device\":0,\"name\":null,"
                "\"state\":\"%s\",\"blocking\":true,\"parent\":%s,\"created_ns\":1,"
                "\"last_seq\":%d,\"last_completed_seq\":%d,\"last_async_error\":%lld,"
                "\"peers\":%s}",
                i ? "," : "", c->id, c->rank, c->nranks, c->state ? c->state : "ready",
                strcmp(c->id, W) ? "\"" W "\"" : "null", c->last, c->done, c->async_error,
                c->peers ? c->peers : "[]");
    }
    fprintf(f, "],\"ops\":[");
    qsort(d->ops, (size_t)d->nops, sizeof d->ops[0], ad_op_order);
    for (int i = 0; i < d->nops; i++) ad_put_op(f, d, &d->ops[i], i == 0);
    fprintf(f,
            "],\"threads\":[{\"tid\":%d,\"name\":\"job\",\"state\":\"S\",\"syscall\":null,"
            "\"stack_from\":\"self\",\"frames\":[{\"pc\":\"0000000000001000\","
            "\"module\":\"/job/train\",\"offset\":0,\"function\":\"main\","
            "\"function_offset\":4,\"build_id\":null}]}],\"python\":null}\n",
            1000 + d->rank);
    ck_assert_int_eq(fclose(f), 0);
}

/* Reads dir into a (freed first: a starts zeroed, or from an earlier call) with the
 * options o (NULL: none), and runs the verdict; its exit status. */
static inline int ad_analyze(struct an *a, const char *dir, const struct an_opts *o)
{
    struct an_opts none;
    memset(&none, 0, sizeof none);
    none.threads = 1;
    an_free(a);
    an_init(a, o ? o : &none);
    ck_assert_int_eq(an_read_dir(a, dir), 0);
    return an_verdict(a);
}

/* The last two hex digits of communicator c's id, "00" for none. */
static inline const char *ad_comm_tag(const struct an *a, uint32_t c)
{
    static char tag[8];
    snprintf(tag, sizeof tag, "%02llx",
             c == AN_NONE ? 0ULL : (unsigned long long)(a->comms[c].id & 0xff));
    return tag;
}

/* The culprits of a's verdict, in its order, as "RANK CAUSE; ..." (RANK: the global
 * rank, -1 unknown); with chain, each followed by "[R/CAUSE/CC ...]", the findings of
 * its chain, where CC is ad_comm_tag of the link's communicator. */
static inline const char *ad_culprits(const struct an *a, int chain)
{
    static char out[1024];
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < a->nculprits && at < sizeof out; i++) {
        const struct an_culprit *c = &a->culprits[i];
        at += (size_t)snprintf(out + at, sizeof out - at, "%s%lld %s%s", i ? "; " : "",
                               (long long)c->f.grank, an_cause_name(c->f.cause), chain ? " [" : "");
        for (int k = 0; chain && k < c->nchain && at < sizeof out; k++) {
            const struct an_finding *l = &a->findings[c->path[k]];
            at += (size_t)snprintf(out + at, sizeof out - at, "%s%lld/%s/%s", k ? " " : "",
                                   (long long)l->grank, an_cause_name(l->cause),
                                   ad_comm_tag(a, l->comm));
        }
        if (chain && at < sizeof out) at += (size_t)snprintf(out + at, sizeof out - at, "]");
    }
    return out;
}

/* 1 when one of a's notes holds s. */
static inline int ad_noted(const struct an *a, const char *s)
{
    for (size_t i = 0; i < a->nnotes; i++)
        if (strstr(a->notes[i], s)) return 1;
    return 0;
}

#endif
