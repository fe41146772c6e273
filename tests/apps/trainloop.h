/*
 * trainloop: one rank of a data-parallel training job on NCCL, for the tests.
 *
 * Module map (each file owns one part):
 *   trainloop.c        options, environment, threads, the step loop, summary
 *   trainloop_util.c   messages and the single exit path (tl_die)
 *   trainloop_cuda.c   device, context, streams, host "kernels", stream waits
 *   trainloop_nccl.c   communicator life cycle, return-code and async checks
 *   trainloop_rdzv.c   unique-id exchange through the rendezvous directory
 *   trainloop_ops.c    the op table, buffers, and issuing one step's ops
 *   trainloop_check.c  input values and exact checks of every result
 *   trainloop_graph.c  CUDA-graph capture of one AllReduce (--graph)
 *   trainloop_fault.c  host-side faults (hang, GPU stall, skip, mismatch, corrupt)
 *   trainloop_pipe.c   the pipeline step (--pipeline): hand-off, tp and world streams
 *
 * Only the public CUDA driver API and the NCCL API are used, so the same
 * program runs on the CPU harness and on a real GPU machine.
 */
#ifndef TRAINLOOP_H
#define TRAINLOOP_H

#include <cuda.h>
#include <nccl.h>
#include <pthread.h>
#include <stddef.h>

/* Exit statuses. */
#define TL_EXIT_OK 0
#define TL_EXIT_WRONG 1 /* a result differs from the expected value */
#define TL_EXIT_CALL 2  /* a CUDA or NCCL call failed */
#define TL_EXIT_SETUP 3 /* environment or rendezvous problem */
#define TL_EXIT_USAGE 64

/* A host fault: which rank (-1: none) and before/in which step. */
struct tl_fault {
    int rank;
    int step;
};

struct tl_opts {
    int steps;
    int compute_ms;
    int threads;
    int nonblocking;
    int graph;
    int quiet;
    int jitter_ms, pause_ms;        /* healthy host-side irregularity (tl_host_jitter) */
    int seed;                       /* of the jitter and pauses; 0: the fixed pattern */
    int late_gpu_rank, late_gpu_ms; /* rank R's GPU is M ms late every step, -1: none */
    struct tl_fault hang, skip, mismatch, stall_gpu, corrupt, hang_split, crash;
    int pipeline; /* --pipeline: the step of trainloop_pipe.c, not the table */
    struct tl_fault stall_split, drop_send;
};

/* Per-process state, read-only once the workers start (except the sync objects). */
struct tl_proc {
    struct tl_opts opt;
    int rank, nranks, local_rank;
    const char *rdzv_dir; /* LAUNCH_RDZV_DIR, may be NULL when nranks == 1 */
    const char *run_id;   /* LAUNCH_RUN_ID, may be NULL */
    CUdevice dev;
    int dev_ordinal;
    CUcontext ctx; /* the device's retained primary context */
    pthread_barrier_t barrier;
    pthread_mutex_t capture_lock;
};

enum tl_kind { TL_ALLREDUCE, TL_ALLGATHER, TL_REDUCESCATTER, TL_BROADCAST, TL_SENDRECV };

/* One op of a step, as listed in the table of trainloop_ops.c. */
struct tl_op {
    const char *name; /* as NCCL spells the op, for messages */
    enum tl_kind kind;
    ncclDataType_t dtype;
    ncclRedOp_t redop;
    size_t count; /* per-rank count: send count, or recv count for ReduceScatter */
    int grouped;  /* issued inside the gradient ncclGroupStart/End */
    int on_half;  /* on the split communicator, else on the world one */
    int every;    /* issued on steps divisible by this (1: every step) */
};

/* Device and host copies of one op's buffers. */
struct tl_buf {
    CUdeviceptr dsend, drecv;
    void *hsend, *hrecv;
    size_t nsend, nrecv; /* elements */
};

#define TL_MAX_OPS 16

/* One thread's training job: its communicators, streams and buffers. */
struct tl_worker {
    struct tl_proc *p;
    int tid;
    CUstream compute, comm_stream;
    CUevent grads_ready;
    ncclComm_t world, half;
    int half_rank, half_size, half_base; /* half_base: global rank of half rank 0 */
    int nops;
    const struct tl_op *ops;
    struct tl_buf buf[TL_MAX_OPS];
    int issued[TL_MAX_OPS]; /* issued (and so to be checked) this step */
    int graph_op;           /* index of the captured op, -1 without --graph */
    CUgraph graph;
    CUgraphExec graph_exec;
    long nccl_ops;
    CUstream tp_stream;            /* the split communicator's ops (--pipeline,
                                              --stall-split-rank), else NULL */
    CUevent handoff_done, rs_done; /* --pipeline: orders the streams */
    struct tl_buf pipe[3];         /* --pipeline: hand-off, ReduceScatter, AllReduce */
};

/* trainloop_util.c */
void tl_set_identity(int rank, int quiet);
void tl_set_thread(int tid);
__attribute__((noreturn, format(printf, 2, 3))) void tl_die(int code, const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void tl_note(const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void tl_info(const char *fmt, ...);

/* trainloop_cuda.c */
void tl_cu_check(CUresult r, const char *call);
#define TL_CU(fn, args) tl_cu_check(fn args, #fn)
void tl_device_open(struct tl_proc *p);
void tl_device_close(struct tl_proc *p);
void tl_streams_create(struct tl_worker *w);
void tl_streams_destroy(struct tl_worker *w);
void tl_enqueue_compute(struct tl_worker *w, int ms);
void tl_stream_wait(struct tl_worker *w, CUstream s);

/* trainloop_nccl.c */
void tl_nccl_check(struct tl_worker *w, ncclComm_t comm, ncclResult_t r, const char *call);
#define TL_NCCL(w, comm, fn, args) tl_nccl_check((w), (comm), fn args, #fn)
void tl_comm_wait(struct tl_worker *w, ncclComm_t comm, const char *call);
void tl_comms_poll_errors(struct tl_worker *w);
void tl_comms_create(struct tl_worker *w, ncclUniqueId id);
void tl_comms_destroy(struct tl_worker *w);
void tl_group_start(struct tl_worker *w);
void tl_group_end(struct tl_worker *w, ncclComm_t a, ncclComm_t b);

/* trainloop_rdzv.c */
void tl_rdzv_unique_id(const struct tl_proc *p, int tid, ncclUniqueId *id);

/* trainloop_ops.c */
void tl_ops_setup(struct tl_worker *w);
void tl_ops_free(struct tl_worker *w);
/* Frees one op's device and host buffers and zeroes it. */
void tl_buf_free(struct tl_buf *b);
void tl_step_issue(struct tl_worker *w, int step);

/* trainloop_check.c */
void tl_fill_inputs(struct tl_worker *w, int step);
void tl_check_results(struct tl_worker *w, int step);
size_t tl_dtype_size(ncclDataType_t dt);

/* trainloop_graph.c */
void tl_graph_capture(struct tl_worker *w);
void tl_graph_launch(struct tl_worker *w);
void tl_graph_destroy(struct tl_worker *w);

/* trainloop_fault.c */
int tl_fault_now(const struct tl_proc *p, const struct tl_fault *f, int step);
void trainloop_host_stall(void);
void trainloop_crash(void);
void tl_host_jitter(const struct tl_proc *p, int step);
void CUDA_CB trainloop_gpu_stall(void *arg);
void tl_enqueue_gpu_stall(struct tl_worker *w, int step);
void tl_release_gpu_stalls(void);
void tl_enqueue_split_stall(struct tl_worker *w, int step);

/* trainloop_pipe.c */
void tl_pipeline_setup(struct tl_worker *w);
void tl_pipeline_free(struct tl_worker *w);
void tl_pipeline_step(struct tl_worker *w, int step);
void tl_pipeline_check(struct tl_worker *w, int step);

void CUDA_CB trainloop_gpu_late(void *arg);
void tl_enqueue_gpu_late(struct tl_worker *w);

#endif
