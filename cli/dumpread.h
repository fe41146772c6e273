/*
 * dumpread.h: the reader of evidence dumps (docs/dump-format.md, schemas
 * ncclguard.dump/1.x and /2.x), shared by the subcommands that read them.
 *
 * One dump is read into one struct ng_dump: plain C values, strings owned by the
 * dump, nothing of the JSON left. A directory is read as a stream: its dumps are
 * parsed by worker threads and handed to the caller one at a time, in file-name
 * order, each freed once the callback returns, so that only a few are in memory
 * at any time whatever the number of ranks. Files that cannot be used are handed
 * to another callback, with one line saying why.
 *
 * Null members: an unknown integer reads as NG_DUMP_NONE (-1: rank, root, peer,
 * marker, device, line, function_offset) or 0 (seq, p2p_seq, group, the
 * timestamps, nccl and cuda_driver versions), as the writer encodes them; a
 * null string reads as NULL.
 */
#ifndef NCCLGUARD_DUMPREAD_H
#define NCCLGUARD_DUMPREAD_H

#include <stddef.h>
#include <stdint.h>

#include "jsonread.h"

#define NG_DUMP_NONE (-1)

/* ops[].op */
enum ng_dop_name { NG_OP_ALLREDUCE, NG_OP_BROADCAST, NG_OP_BCAST, NG_OP_REDUCE, NG_OP_ALLGATHER,
                   NG_OP_REDUCESCATTER, NG_OP_ALLTOALL, NG_OP_GATHER, NG_OP_SCATTER, NG_OP_SEND,
                   NG_OP_RECV, NG_OP_UNKNOWN, NG_OP_NNAMES };
#define NG_DOP_NAMES {"AllReduce", "Broadcast", "Bcast", "Reduce", "AllGather", "ReduceScatter", \
                      "AlltoAll", "Gather", "Scatter", "Send", "Recv", "Unknown"}

/* ops[].state */
enum ng_dop_state { NG_ST_SCHEDULED, NG_ST_STARTED, NG_ST_COMPLETED, NG_ST_FAILED, NG_ST_ABORTED,
                    NG_ST_CAPTURED, NG_ST_UNTRACKED, NG_ST_OTHER, NG_ST_NSTATES };
#define NG_DOP_STATE_NAMES {"scheduled", "started", "completed", "failed", "aborted", "captured", \
                           "untracked", "other"}

/* ops[].flags, bit i: NG_DUMP_OP_FLAG_NAMES[i] (dump_format.h), "bitN" for the others */
#define NG_DOP_SLOW (1u << 0)
#define NG_DOP_TIMEOUT (1u << 1)

struct ng_dop {
    uint64_t index, comm, seq, p2p_seq, count, bytes, stream, group, thread;
    int64_t enqueue_ns, enqueue_mono_ns, gpu_start_ns, gpu_end_ns, seen_start_ns, seen_end_ns;
    int32_t comm_rank, comm_nranks, root, peer, result, marker;
    int32_t stack;         /* the enqueue stack's id (2.1), NG_DUMP_NONE when none */
    uint32_t flags;
    uint8_t op, state;     /* enum ng_dop_name, enum ng_dop_state */
    char datatype[16];     /* "bfloat16", "unknown/<n>" */
    char redop[24];        /* "" when null; "sum", "premulsum/<n>" */
    char times[12];        /* "sampled", "discovered", "" when null or before 2.1 */
};

struct ng_dpeer {
    int64_t peer;
    uint64_t last_p2p_seq, last_completed_p2p_seq;
};

struct ng_dcomm {
    uint64_t id, parent;   /* parent 0: a root communicator */
    int64_t rank, nranks, device, created_ns, last_async_error;
    uint64_t last_seq, last_completed_seq;
    const char *name, *state;
    int blocking;
    struct ng_dpeer *peers;
    size_t npeers;
};

struct ng_dframe {
    uint64_t pc, offset;
    int64_t function_offset;
    const char *module, *function, *build_id;
    const char *file;      /* source file, named offline (the resolver); NULL when unknown */
    int64_t line;          /* its line, NG_DUMP_NONE when unknown */
    int guess; /* the unwind could not confirm this frame (2.2; 0 in older dumps) */
};

struct ng_dthread {
    int64_t tid;
    const char *name, *state, *syscall, *stack_from;
    const char *stack_note; /* why the stack is short or guessed; NULL when neither (2.2) */
    struct ng_dframe *frames;
    size_t nframes;
};

struct ng_dpyframe {
    const char *file, *function;
    int64_t line;
};

struct ng_dpythread {
    uint64_t thread_id;
    int64_t tid;
    struct ng_dpyframe *frames;
    size_t nframes;
};

struct ng_dpython {
    const char *method, *why, *raw;
    struct ng_dpythread *threads;
    size_t nthreads;
};

struct ng_dump {
    const char *path;      /* as given to the reader */
    const char *schema;    /* "ncclguard.dump/2" */
    int major, minor;      /* 2, 0 */
    const char *reason, *incident, *host, *job;
    int64_t time_ns, pid, rank, local_rank;
    struct {
        const char *ncclguard, *python;
        int64_t nccl, cuda_driver;
    } versions;            /* 1.x: from ncclguard_version and nccl_version */
    struct {
        uint64_t capacity, recorded, overwritten, dropped_inflight;
    } flight;
    const char *ras;       /* a "ras" member (NCCL's RAS view) when a dump carries one */
    struct ng_dcomm *comms;
    size_t ncomms;
    struct ng_dop *ops;
    size_t nops;
    struct ng_dthread *threads; /* NULL with has_threads 0: the member was null (or 1.x) */
    size_t nthreads;
    int has_threads;
    struct ng_dpython *python;  /* NULL: null, or 1.x */
    struct ng_dump_mem *mem;    /* owns everything above */
    uint64_t bytes;             /* the length of the document read */
};

/* Offline symbolization: once a dump is read, the resolver is called on each
 * of its C frames (the caller's threads: the parsing threads of a directory),
 * exact 1 when the frame's pc is an interrupted instruction (the innermost
 * frame of a thread taken by a signal, from its registers, or in a crash or
 * SIGTERM dump), 0 for a return address. Its strings must outlive the dump.
 * None by default (frames as written); the command installs cli/symres.h's.
 * Set before reading. */
typedef void (*ng_dframe_resolver)(struct ng_dframe *f, int exact);
void ng_dump_set_resolver(ng_dframe_resolver fn);

const char *ng_dop_name_str(int op);
const char *ng_dop_state_str(int state);

/* Flags of a read: NG_DUMP_BRIEF skips, unparsed, the members of ops[] that the
 * analysis does not use (comm_rank, comm_nranks, bytes, group, enqueue_mono_ns,
 * seen_start_ns, seen_end_ns, marker: they read as 0 or none), and in the ops past
 * the first one not in flight (the writer puts those in flight first) also index,
 * p2p_seq, peer and stream, which it uses only of an op in flight. A dump that puts
 * an op in flight later is read again without the second skip. */
#define NG_DUMP_BRIEF 1

/* Reads one dump from buf[0..len) (NG_JSON_PADDING readable bytes after it): JSON,
 * or a Flight Recorder pickle when it starts as one (frread.h). Returns the dump, or NULL with a one-line reason in err. */
struct ng_dump *ng_dump_parse(ng_jparser *p, const char *buf, size_t len, const char *path,
                              int flags, char *err, size_t errlen);
/* Reads the file at path (a regular file, at most 1 GiB). */
struct ng_dump *ng_dump_read_file(ng_jparser *p, const char *path, int flags, char *err,
                                  size_t errlen);
void ng_dump_free(struct ng_dump *d);

/* A directory, streamed. */
struct ng_dumpdir_opts {
    enum ng_json_backend backend;
    int threads;           /* parsing threads; 0: one per CPU, at most 8 */
    int progress;          /* 1: a progress bar on stderr when it is a terminal and the
                              read takes longer than a second */
    int flags;             /* of ng_dump_parse */
};

/* Called in file-name order (natural order: r2 before r10), one at a time, from
 * the calling thread. on_dump's dump is freed when it returns; a nonzero
 * return stops the read. */
struct ng_dumpdir_cb {
    int (*on_dump)(void *ctx, const struct ng_dump *d);
    void (*on_bad)(void *ctx, const char *path, const char *why);
    void *ctx;
};

struct ng_dumpdir_stats {
    size_t files, dumps, bad;
    uint64_t bytes;        /* of the dumps read */
};

/* Reads every *.json entry of dir, and every file that starts as a pickle does
 * (PyTorch's Flight Recorder dumps, frread.h; other files are not dumps, and are
 * left alone). Returns 0, or -1 with the reason in err when dir cannot be listed. */
int ng_dumpdir_read(const char *dir, const struct ng_dumpdir_opts *o, const struct ng_dumpdir_cb *cb,
                    struct ng_dumpdir_stats *st, char *err, size_t errlen);

#endif
