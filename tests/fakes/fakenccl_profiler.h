/*
 * fakenccl profiler plugin host: loads NCCL_PROFILER_PLUGIN the way NCCL's
 * plugin/profiler.cc and plugin/plugin_open.cc do and calls it at NCCL's
 * points (docs/harness.md, "Profiler plugin"). The ABI declarations are this
 * fake's own, written from NVIDIA/nccl src/include/plugin/nccl_profiler.h and
 * profiler/profiler_v4.h .. v6.h; v1 .. v3 are found but not driven.
 *
 * Threads: fn_prof_load and the comm hooks run on the creating thread; the
 * API and task hooks on the calling thread; the kernel hooks on the stream
 * worker. The activation mask is one process-wide int that the plugin may
 * change at any time: it is re-read (relaxed) at each event.
 */
#ifndef FAKENCCL_PROFILER_H
#define FAKENCCL_PROFILER_H

#include "fakenccl_exec.h"

/* Calls the plugin's init for a communicator that just became ready. */
void fn_prof_comm_init(struct fn_comm *c);
/* Calls the plugin's finalize for a communicator being destroyed or aborted. */
void fn_prof_comm_fini(struct fn_comm *c);
/* Outermost ncclGroupStart / ncclGroupEnd (GroupApi event). */
void fn_prof_group_api_start(void);
void fn_prof_group_api_stop(void);
/* One API call (CollApi or P2pApi); `implicit` wraps it in its own GroupApi. */
void *fn_prof_api_start(const struct fn_op *op);
void fn_prof_api_stop(void *handle);
/* A launch of ops (the plan): Group, Coll/P2p with seqNumber, KernelLaunch; ops get handles. */
void fn_prof_launch(struct fn_op *ops, int nops);
/* An op's kernel on its channel 0 starts / stops on the stream (KernelCh). */
void fn_prof_kernel_start(struct fn_op *op);
void fn_prof_kernel_stop(struct fn_op *op);

#endif
