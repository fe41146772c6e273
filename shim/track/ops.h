/*
 * ops.h: the hooks that the generated wrappers (intercept/wrappers.c) call
 * around every collective, point-to-point op and group call. This is the hot
 * path.
 *
 * Owns: the meaning of each op for ncclguard: which communicator it runs on,
 * the per-communicator sequence numbers that make one op comparable across
 * ranks (seq for collectives, p2p_seq per peer), the thread-local group depth
 * and the group's streams, and the CUDA markers around the op.
 *
 * Threads: every function runs on the application thread that made the NCCL
 * call: no malloc, no lock held for long, no syscall beyond the CUDA event
 * calls. The *_pre function fills a ticket on the caller's stack that the
 * matching *_post function receives with the real call's result.
 */
#ifndef NCCLGUARD_TRACK_OPS_H
#define NCCLGUARD_TRACK_OPS_H

#include <nccl.h>
#include <stdint.h>

#include "track/flight.h"

struct ng_comm;

struct ng_op_ticket {
    struct ng_comm *comm;    /* NULL: not tracked */
    int captured;            /* the stream was capturing */
    int group_slot;          /* index in the thread's group stream list, -1 if none */
    struct ng_comm *entered; /* a nonblocking communicator this call is inside */
    void *end_event;         /* the marker's end event (ncclguard_marker_begin) */
    struct ng_op_record rec;
};

/* 1 when the call must be refused: ncclguard aborted the communicator (its
 * fence); else 0. */
int ncclguard_op_pre(struct ng_op_ticket *t, int type, ncclComm_t comm, cudaStream_t stream,
                     size_t count, ncclDataType_t dtype, int redop, int root);
void ncclguard_op_post(struct ng_op_ticket *t, ncclResult_t r);

void ncclguard_group_start_post(ncclResult_t r);
void ncclguard_group_end_pre(void);
void ncclguard_group_end_post(ncclResult_t r);

/* ncclGroupSimulateEnd ends the group like ncclGroupEnd. On nonblocking
 * communicators it launches the group's ops, which get their markers as at
 * ncclGroupEnd; on blocking ones it only simulates them: they never run, and
 * their records end `failed` without a marker. */
void ncclguard_group_simulate_end_pre(void);
void ncclguard_group_simulate_end_post(ncclResult_t r);

/* Calls of one op type that NCCL accepted, over every communicator (summary). */
uint64_t ncclguard_op_total(int type);

#endif
