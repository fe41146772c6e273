/*
 * stacks.h: the enqueue stacks, the call stack of every op at the moment the
 * application enqueued it, kept once per distinct stack.
 *
 * Owns: the per-process stack table, preallocated at the first communicator:
 * NG_STACKS_MAX stacks of up to the configured depth (NCCLGUARD_STACK_DEPTH,
 * at most NG_STACKS_DEPTH_MAX) return addresses each, found by a hash of the
 * addresses. A record of the flight recorder holds a stack's id, its index in
 * the table, never frames. Entries are never removed: a job has few distinct
 * call sites (the C frames of a Python program are the interpreter's, the same
 * for every Python caller), so the table fills only with a pathological mix.
 * Once it is full a stack not in it is not kept: its op gets no stack id, and
 * the loss is counted (`lost`); the stacks already in it keep being found.
 *
 * The frames are raw return addresses, innermost first, starting at the
 * caller of the NCCL function (the shim's own frames are left out). They are
 * symbolized only when written (evidence/symbolize.h).
 *
 * Threads: ncclguard_stacks_init under the start lock; ncclguard_stack_capture
 * on application threads (hot path: one unwind, a hash, a probe of the table;
 * no lock, no syscall, no malloc after a thread's first call: see
 * ncclguard_unwind_fast); the readers on any thread, signal handlers included.
 */
#ifndef NCCLGUARD_STACKS_H
#define NCCLGUARD_STACKS_H

#include <stdint.h>

#define NG_STACKS_MAX 1024
#define NG_STACKS_DEPTH_MAX 64
#define NG_NO_STACK (-1)

/* Allocates the table for stacks of `depth` frames; depth 0 turns enqueue
 * stacks off. Without libunwind (ncclguard_unwind_fast) they are off too, and
 * one line says so. Idempotent. */
void ncclguard_stacks_init(int depth);

/* The calling thread's stack, as the id of its table entry; NG_NO_STACK when
 * stacks are off, the unwind found no frame, or the table is full. The caller
 * passes its own return address (__builtin_return_address(0)): with the
 * return address into the caller, it names the path through the shim, which
 * tells where the job's innermost return address lies. Off, it costs a load
 * and a branch (no call). */
extern int ncclguard_stack_depth;
__attribute__((noinline)) int64_t ncclguard_stack_capture_at(void *caller_ra);
static inline int64_t ncclguard_stack_capture(void *caller_ra)
{
    return ncclguard_stack_depth ? ncclguard_stack_capture_at(caller_ra) : NG_NO_STACK;
}

/* The id of the stack pcs[0..n-1] (innermost first, 0 < n <= the depth):
 * its entry, added when new; NG_NO_STACK when stacks are off, or the list is
 * full and the stack is not in it (counted in `lost`). The step of
 * ncclguard_stack_capture after its unwind. */
int64_t ncclguard_stack_intern(const uint64_t *pcs, int n);

struct ng_stacks_stats {
    int depth;        /* 0: enqueue stacks are off */
    int capacity;     /* NG_STACKS_MAX, 0 when off */
    int used;         /* entries taken */
    uint64_t lost;    /* captures that found the table full */
    int sites;        /* call sites cached (each one stack seen from one call site) */
    uint64_t unwinds; /* captures the cache did not answer: full unwinds */
};
void ncclguard_stacks_stats(struct ng_stacks_stats *out);

/* The frames of stack `id` (0 <= id < used): their count, 0 when the entry is
 * still being written. *pcs points into the table, which is never freed. */
int ncclguard_stack_frames(int64_t id, const uint64_t **pcs);

/* Unloads, for the cache of call sites (shim/track/README.md, "Enqueue
 * stacks"): ncclguard_stacks_unloaded after every dlclose (intercept/loader.c,
 * any thread). ncclguard_stacks_watch_unloads, in the constructor, says that
 * every dlclose of the process comes through there: the cache then trusts its
 * own count instead of asking the loader at every capture. */
void ncclguard_stacks_watch_unloads(void);
void ncclguard_stacks_unloaded(void);

/* fork(): nothing to do, the child keeps the parent's stacks (same mappings). */

#endif
