/*
 * unwind.h: the calling thread's own return addresses, for the stacks of the
 * dump (evidence/threads.c) and later the enqueue stacks of the hot path.
 *
 * Owns: libunwind.so.8, opened with dlopen(RTLD_LOCAL) at the first
 * communicator and never linked (a DT_NEEDED libunwind changes which unwinder
 * the job's C++ exceptions bind to: DESIGN.md), and the fallback, glibc's
 * backtrace(), called once at open so that its lazy load of libgcc_s happens
 * there and never inside a signal handler.
 *
 * Threads: ncclguard_unwind_open under the start lock, once; the others from
 * any thread, ncclguard_unwind_here also from a signal handler (after open),
 * ncclguard_unwind_fast never from one.
 */
#ifndef NCCLGUARD_UNWIND_H
#define NCCLGUARD_UNWIND_H

/* Opens libunwind, else warms up backtrace(). Returns the method's name. */
const char *ncclguard_unwind_open(void);

/* "libunwind", "backtrace", or "none" before open. */
const char *ncclguard_unwind_method(void);

/* Writes up to max return addresses of the calling thread, innermost first,
 * leaving out this function's own frame; returns how many. 0 before open.
 * Async-signal-safe once open: libunwind's local unwinder allocates from its
 * own mmap pool, and backtrace() has loaded libgcc_s at open. */
__attribute__((noinline)) int ncclguard_unwind_here(void **pcs, int max);

/* The same for the hot path (enqueue stacks): libunwind's unw_backtrace, which
 * keeps per-thread caches of the frames it met and costs about 0.3 us at 24
 * frames where unw_step and backtrace() cost 6 to 11 us. Returns 0 when
 * libunwind is not loaded: backtrace() is too slow to run on every call. Not
 * async-signal-safe: a thread's first call allocates its cache (libunwind's
 * thread-local storage, malloc and mmap). Innermost first, from this function
 * or its caller on. */
int ncclguard_unwind_fast(void **pcs, int max);

#endif
