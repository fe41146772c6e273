/*
 * analyze/model.h: the model of `ncclguard analyze` and `ncclguard report`.
 *
 * Dumps are read one at a time (dump/dump.h) and folded into a compact summary
 * (analyze/model.c): per rank its communicators, the oldest op it has in flight
 * on each communicator, peer and stream, and where its threads are; per
 * communicator and seq, aggregates across ranks (the op's signature, who arrived
 * last). No op is kept. Then the detectors (analyze/hang.c, analyze/cmp.c,
 * analyze/rank.c) turn the summary into findings, each blaming one rank for one
 * cause, and the verdict (analyze/verdict.c) follows each finding's chain to the
 * rank at its end. The printers (render/text.c, render/json.c, report*.c)
 * only read the result.
 */
#ifndef NCCLGUARD_CLI_ANALYZE_MODEL_H
#define NCCLGUARD_CLI_ANALYZE_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "analyze/intern.h"
#include "dump/dump.h"
#include "json/json.h"

#define AN_NONE UINT32_MAX

/* Exit statuses (docs/analysis.md). */
#define AN_EXIT_HEALTHY 0
#define AN_EXIT_CULPRIT 1
#define AN_EXIT_NO_CULPRIT 2
#define AN_EXIT_UNUSABLE 3

/* Stragglers (analyze/cmp.c, docs/analysis.md). A rank counts as the last to
 * arrive at a collective only when it came LATE_NS or more after the first; the
 * collectives a communicator's ranks enqueued within BURST_NS of the one before are
 * one arrival (the ranks meet at one of them, the rest follow in step), counted
 * once, at the one with the widest spread. A rank is a straggler when it was last
 * at STRAGGLER_MIN arrivals at least, caused STRAGGLER_SHARE of the waiting (each
 * arrival's wait counted up to STRAGGLER_CAP times their median), and an even
 * spread (each rank last with odds 1/n) would make it last that often with a
 * probability below STRAGGLER_ALPHA, once multiplied by the number of ranks tested
 * on all communicators. */
#define AN_LATE_NS 2000000LL
#define AN_BURST_NS 1000000LL
#define AN_STRAGGLER_MIN 8
#define AN_STRAGGLER_SHARE 0.5
#define AN_STRAGGLER_CAP 4.0
#define AN_STRAGGLER_ALPHA 1e-3
/* More members of a communicator without a dump than this are missing dumps, not
 * culprits. */
#define AN_MAX_ABSENT 4
/* An op in flight this long at dump time counts as stuck even without a timeout. */
#define AN_STUCK_NS 60000000000LL

/* Causes, in the order in which they win when one rank has several. */
enum an_cause {
    AN_CRASHED,
    AN_NO_DUMP,
    AN_ASYNC_ERROR,
    AN_MISMATCH,
    AN_MISSING,
    AN_GPU_NOT_STARTED,
    AN_P2P,
    AN_SLOW,
    AN_NCAUSES
};
#define AN_CAUSE_NAMES \
    "crashed", "no_dump", "async_error", "mismatch", "missing", "gpu_not_started", "p2p", "slow"
const char *an_cause_name(int cause); /* analyze/model.c */

/* An op's signature, interned (an->sigs): what must agree across ranks at one seq. */
struct an_sig {
    uint64_t count; /* and datatype: they say the bytes */
    int32_t root;
    uint8_t op;
    char datatype[16], redop[24];
};

/* A thread of a rank: names interned; `where` is its innermost frames that belong
 * to the job, "f ← g ← h", `py` the same for its Python thread, `stack` every frame
 * (the report's text). idle: it waits for work (a condition variable, a queue, a
 * futex outside the job's frames); ours: a thread of ncclguard. */
struct an_thread {
    int64_t tid;
    uint32_t name, syscall, where, py, stack;
    uint8_t idle, ours;
};

/* The oldest op in flight of one kind (per communicator, peer or stream). */
struct an_flight {
    uint64_t index, seq, stream, thread; /* seq: p2p_seq for a point-to-point op */
    uint64_t lane; /* the stream as the GPU orders it: per thread for CU_STREAM_PER_THREAD */
    int64_t enqueue_ns;
    uint32_t comm; /* an->comms index */
    int32_t peer;  /* comm rank, -1 for collectives */
    uint8_t op, state, present;
    uint8_t timed_out; /* the shim's timeout fired on it (flags "timeout") */
};

struct an_peer {
    int32_t peer; /* comm rank */
    uint64_t called, done;
    struct an_flight fl; /* its oldest p2p op in flight */
};

/* One rank's view of one communicator. */
struct an_rcomm {
    uint32_t comm;
    int32_t comm_rank;
    uint64_t last_seq, last_done;
    int64_t async_error;
    uint32_t state;         /* interned */
    uint32_t peer0, npeers; /* an->peers */
    uint64_t last_thread;   /* the thread of its newest op */
    uint64_t nops;          /* its ops in the dump */
    struct an_flight fl;    /* its oldest collective in flight */
    uint32_t ninflight;
};

struct an_rank {
    int64_t rank, pid, time_ns; /* rank: global, -1 unknown */
    uint32_t path, host, incident, reason, ras;
    int major, minor;
    uint32_t rc0, nrc;   /* an->rcomms */
    uint32_t st0, nst;   /* an->streams: oldest op in flight per stream */
    uint32_t th0, nth;   /* an->threads */
    uint32_t main;       /* index into its threads, AN_NONE */
    uint32_t python_why; /* why there are no Python stacks, interned */
    uint64_t nops, ninflight, timeouts;
    int64_t oldest_ns;     /* enqueue_ns of its oldest op in flight, 0 none */
    int32_t failed_result; /* result of a failed op, 0 none */
    uint8_t crashed, has_threads;
    uint8_t has_python; /* its dump has Python stacks */
};

/* Per communicator and seq, over the ranks that recorded it. */
struct an_seq {
    uint32_t sig, nsig;             /* the first signature seen, ranks with it */
    int32_t sig_ranks[2];           /* the first two of them (an->ranks) */
    uint32_t alt;                   /* other signatures: an->alts index + 1 */
    uint32_t n;                     /* ranks that recorded it */
    uint32_t dn, en;                /* of those completed: with GPU times, enqueue times */
    int32_t d_last, e_last;         /* who arrived last, by each measure */
    int64_t dmin, dmax, emin, emax; /* GPU durations (the last waited least), enqueues */
};

struct an_alt {
    uint32_t sig, n, next;
    int32_t ranks[2];
};

struct an_comm {
    uint64_t id, parent;
    int64_t nranks;
    uint32_t name;
    int32_t *member; /* comm rank -> an->ranks index, -1 none */
    uint32_t nmembers;
    int nranks_conflict;
    uint64_t seq_base; /* an_seq of seq s: seqs[s - seq_base] */
    struct an_seq *seqs;
    size_t nseqs, capseqs;
    uint64_t seqs_dropped;
};

struct an_finding {
    int cause;
    int32_t rank;  /* an->ranks, -1: a rank that left no dump */
    int64_t grank; /* global rank, -1 unknown */
    int64_t comm_rank;
    uint32_t comm; /* AN_NONE: not about one communicator */
    uint64_t seq;  /* collective seq, or p2p_seq with peer >= 0 */
    int32_t peer;  /* p2p: the other side (an->ranks), -1 */
    uint8_t op;
    uint32_t detail;          /* interned: what the rank did or did not do */
    uint32_t nwaiting;        /* ranks that wait on it */
    int64_t since_ns;         /* when the first of them enqueued it */
    struct an_flight blocker; /* gpu_not_started: the oldest op of its stream */
    struct an_flight held;    /* gpu_not_started, when that op is scheduled: the
                                          * oldest NCCL op stuck on another of its streams,
                                          * older than it, which its stream most likely
                                          * waits for (inferred: the shim sees no event
                                          * waits); present 0 when none */
    uint32_t launcher;        /* the launcher's line about the rank, interned */
};

#define AN_ALSO 2
struct an_culprit {
    struct an_finding f; /* the finding at the end of the chain */
    int32_t chain[16];   /* ranks followed (an->ranks, -1 no dump), in order,
                                          * one per link: a rank twice when its chain goes
                                          * on at another of its communicators */
    uint32_t path[16];   /* the findings followed (an->findings), in order */
    int nchain;
    uint32_t text;          /* the verdict line, interned */
    uint32_t thread;        /* the thread shown (index into its threads) */
    uint32_t also[AN_ALSO]; /* other threads shown, when it is idle */
    uint32_t nalso;
};

struct an_opts {
    const char *incident;     /* --incident */
    const char *launcher_log; /* --launcher-log */
    enum ng_json_backend backend;
    int threads, progress;
};

struct an {
    struct an_opts opt;
    struct an_intern strs;
    struct an_intern sigs; /* struct an_sig, by value */
#define AN_SIG_CACHE 16
    struct an_sig sig_cache[AN_SIG_CACHE];
    uint32_t sig_cache_id[AN_SIG_CACHE];
    struct an_rank *ranks;
    size_t nranks, capranks;
    struct an_rcomm *rcomms;
    size_t nrcomms, caprcomms;
    struct an_peer *peers;
    size_t npeers, cappeers;
    struct an_flight *streams;
    size_t nstreams, capstreams;
    struct an_thread *threads;
    size_t nthreads, capthreads;
    struct an_comm *comms;
    size_t ncomms, capcomms;
    struct an_u64map comm_by_id;    /* id -> comms index */
    struct an_u64map rank_by_grank; /* global rank -> ranks index */
    struct an_alt *alts;
    size_t nalts, capalts;
    uint32_t job;  /* interned */
    int64_t world; /* the job's size, as the dumps tell it */
    uint64_t bytes, nops;
    /* results */
    int hang; /* something is stuck (a timeout, a crash, ...) */
    struct an_finding *findings;
    size_t nfindings, capfindings;
    struct an_culprit *culprits;
    size_t nculprits, capculprits;
    char **notes; /* evidence lines not tied to a finding */
    size_t nnotes, capnotes;
    char **bad; /* "FILE: why" for each file not used */
    size_t nbad, capbad;
    size_t files;
    /* the memory bound (docs/analysis.md): tables sized by what a dump claims
     * (members by a communicator's size, seqs by their span) take at most
     * AN_CLAIM_FLOOR + AN_CLAIM_PER_BYTE bytes per byte of the dumps folded in */
    uint64_t read_bytes, claim_bytes, world_dropped;
    struct an_u64map comm_dropped; /* ids of communicators left out: said once */
};
#define AN_CLAIM_FLOOR (8ull << 20)
#define AN_CLAIM_PER_BYTE 16

/* analyze/model.c: the tables, and the helpers of the folding (analyze/fold.c) */
void an_init(struct an *a, const struct an_opts *o);
void an_free(struct an *a);
void an_add_bad(struct an *a, const char *path, const char *why);
void an_note(struct an *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
struct an_seq *an_seq_at(struct an_comm *c, uint64_t seq); /* NULL: not recorded */
void *an_grow(void *vec, size_t *n, size_t *cap, size_t el);
void an_push_line(char ***vec, size_t *n, size_t *cap, char *s);
const struct an_rcomm *an_rcomm_of(const struct an *a, int32_t ri, uint32_t c);
/* 1 when ri (an->ranks) is a culprit */
int an_is_culprit(const struct an *a, int32_t ri);
/* Appends a zeroed element to vec (n elements, room for cap) and points at it. */
#define PUSH(vec, n, cap) ((vec) = an_grow((vec), &(n), &(cap), sizeof *(vec)), &(vec)[(n)-1])

/* The communicator of dc (made at its first sight), AN_NONE when unusable. */
uint32_t an_comm_of(struct an *a, const struct dr_comm *dc);
/* The aggregate of seq on c (made when new), NULL beyond the span compared. */
struct an_seq *an_seq_slot(struct an *a, struct an_comm *c, uint64_t seq);
/* 1 when the job may be taken to have `world` ranks: the rows of the ranks
 * without a dump fit the input's bound (analyze/model.h); else said once. */
int an_claim_world(struct an *a, int64_t world);
uint32_t an_sig_of(struct an *a, const struct dr_op *o);
void an_count_sig(struct an *a, struct an_seq *s, uint32_t sig, int32_t rank);
void an_count_arrival(struct an_seq *s, const struct dr_op *o, int32_t rank);

#endif
