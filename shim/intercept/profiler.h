/*
 * profiler.h: libncclguard.so as NCCL's profiler plugin (ncclProfiler_v5,
 * NVIDIA/nccl src/include/plugin/profiler/profiler_v5.h, declared in
 * profiler.c from its fields), for NCCL that the wrappers do not see: linked
 * statically, or resolved through a private dlopen handle.
 *
 * Owns: the communicators NCCL announced through the plugin's init (hash,
 * rank, size) and, per communicator, the collectives NCCL enqueued (Coll
 * events) and the kernels that started and finished on the GPU (KernelCh
 * start, and KernelChStop): a kernel that started and never stopped is
 * started, not finished. Only these event kinds are asked for: the
 * activation mask is Coll | P2p | KernelCh.
 *
 * Chaining: a plugin named in the profiler_chain setting (v6 or v5) is loaded
 * behind this one at the first init and gets every event NCCL would have sent
 * it alone (its own mask, an int of its own that is added to NCCL's), with its
 * own contexts and handles: the parents NCCL passes are ours, translated.
 *
 * Ops: a communicator the wrappers created is theirs, and its ops are theirs
 * to record; on any other (NCCL static, a private handle) each Coll and P2p
 * event is an op, recorded through track/reported.h, and its KernelCh events
 * tell the observer where its kernel is. The plugin's init starts the shim's
 * machinery when nothing else did (the library loaded only as the plugin).
 *
 * Threads: init and finalize on the thread creating or ending a communicator;
 * start/stop/record on NCCL's calling threads and on its proxy threads. No
 * malloc, no lock: communicator slots and event handles come from fixed
 * tables, taken with atomic increments.
 */
#ifndef NCCLGUARD_INTERCEPT_PROFILER_H
#define NCCLGUARD_INTERCEPT_PROFILER_H

/* At exit: one line per communicator the plugin saw (start.c's at_exit, or the
 * plugin's own atexit when the library was loaded only as a plugin). */
void ncclguard_profiler_report(void);

/*
 * The constructor's step, after the site policy. `start` is how the plugin's
 * init starts the shim's machinery (ncclguard_start: the library may be loaded
 * only as the plugin), unless tracking is off. With profiler_plugin on, it names this
 * library in NCCL_PROFILER_PLUGIN, so that communicators the wrappers cannot see
 * (a private handle, in a process that also calls NCCL through them) reach it.
 * A plugin the job named itself is chained behind it (and NCCLGUARD_PROFILER_CHAIN
 * set, for its children); with none, NCCL's default libnccl-profiler.so is, where
 * it exists. Left alone: a value the site policy set, forced or removed; none; a
 * value that already loads this library. Before any thread (setenv).
 */
void ncclguard_profiler_init(void (*start)(void));

#endif
