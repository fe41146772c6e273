/*
 * dump/dump.h: one evidence dump as the reader gives it (docs/dump-format.md, schemas
 * ncclguard.dump/1.x and /2.x), shared by the subcommands that read them.
 *
 * One dump is read into one struct dr_dump: plain C values, strings owned by the
 * dump, nothing of the JSON left. A directory is read as a stream: its dumps are
 * parsed by worker threads and handed to the caller one at a time, in file-name
 * order, each freed once the callback returns, so that only a few are in memory
 * at any time whatever the number of ranks. Files that cannot be used are handed
 * to another callback, with one line saying why.
 *
 * Null members: an unknown integer reads as DR_NONE (-1: rank, root, peer,
 * marker, device, line, function_offset) or 0 (seq, p2p_seq, group, the
 * timestamps, nccl and cuda_driver versions), as the writer encodes them; a
 * null string reads as NULL.
 */
#ifndef NCCLGUARD_CLI_DUMP_DUMP_H
#define NCCLGUARD_CLI_DUMP_DUMP_H

#include <stddef.h>
#include <stdint.h>

#include "base/ops.h"
#include "dump/mem.h"

#define DR_NONE (-1)

/* ops[].op: enum ng_op_type of base/ops.h, the writer's; DR_OP_UNKNOWN for a name
 * it does not have. ops[].state: enum ng_op_state; DR_ST_OTHER for another name. */
#define DR_OP_UNKNOWN NG_OP_NTYPES
#define DR_ST_OTHER NG_OP_NSTATES

/* ops[].flags, bit i: NG_DUMP_OP_FLAG_NAMES[i] (dump_format.h), "bitN" for the others */
#define DR_OP_SLOW (1u << 0)
#define DR_OP_TIMEOUT (1u << 1)

struct dr_op {
    uint64_t index, comm, seq, p2p_seq, count, bytes, stream, group, thread;
    int64_t enqueue_ns, enqueue_mono_ns, gpu_start_ns, gpu_end_ns, seen_start_ns, seen_end_ns;
    int32_t comm_rank, comm_nranks, root, peer, result, marker;
    int32_t stack; /* the enqueue stack's id (2.1), DR_NONE when none */
    uint32_t flags;
    uint8_t op, state; /* enum ng_dop_name, enum ng_dop_state */
    char datatype[16]; /* "bfloat16", "unknown/<n>" */
    char redop[24];    /* "" when null; "sum", "premulsum/<n>" */
    char times[12];    /* "sampled", "discovered", "" when null or before 2.1 */
};

struct dr_peer {
    int64_t peer;
    uint64_t last_p2p_seq, last_completed_p2p_seq;
};

struct dr_comm {
    uint64_t id, parent; /* parent 0: a root communicator */
    int64_t rank, nranks, device, created_ns, last_async_error;
    uint64_t last_seq, last_completed_seq;
    const char *name, *state;
    int blocking;
    struct dr_peer *peers;
    size_t npeers;
};

struct dr_frame {
    uint64_t pc, offset;
    int64_t function_offset;
    const char *module, *function, *build_id;
    const char *file; /* source file, named offline (the resolver); NULL when unknown */
    int64_t line;     /* its line, DR_NONE when unknown */
    int guess;        /* the unwind could not confirm this frame (2.2; 0 in older dumps) */
};

struct dr_thread {
    int64_t tid;
    const char *name, *state, *syscall, *stack_from;
    const char *stack_note; /* why the stack is short or guessed; NULL when neither (2.2) */
    struct dr_frame *frames;
    size_t nframes;
};

struct dr_pyframe {
    const char *file, *function;
    int64_t line;
};

struct dr_pythread {
    uint64_t thread_id;
    int64_t tid;
    struct dr_pyframe *frames;
    size_t nframes;
};

struct dr_python {
    const char *method, *why, *raw;
    struct dr_pythread *threads;
    size_t nthreads;
};

struct dr_dump {
    const char *path;   /* as given to the reader */
    const char *schema; /* "ncclguard.dump/2" */
    int major, minor;   /* 2, 0 */
    const char *reason, *incident, *host, *job;
    int64_t time_ns, pid, rank, local_rank;
    struct {
        const char *ncclguard, *python;
        int64_t nccl, cuda_driver;
    } versions; /* 1.x: from ncclguard_version and nccl_version */
    struct {
        uint64_t capacity, recorded, overwritten, dropped_inflight;
    } flight;
    const char *ras; /* a "ras" member (NCCL's RAS view) when a dump carries one */
    struct dr_comm *comms;
    size_t ncomms;
    struct dr_op *ops;
    size_t nops;
    struct dr_thread *threads; /* NULL with has_threads 0: the member was null (or 1.x) */
    size_t nthreads;
    int has_threads;
    struct dr_python *python; /* NULL: null, or 1.x */
    struct dr_mem *mem;       /* owns everything above */
    uint64_t bytes;           /* the length of the document read */
};

/* The names the writer uses: ng_op_name(op), "Unknown" past the known ops;
 * ng_op_state_name(state), "other" past the known states. */
const char *dr_op_name(int op);
const char *dr_state_name(int state);
/* Frees d and everything it owns (NULL: nothing). */
void dr_free(struct dr_dump *d);

#endif
