/*
 * altstack.h: an alternate signal stack for each thread the shim knows of, so
 * that the crash handler (SA_ONSTACK) can run when the thread's own stack is
 * what failed: a stack overflow leaves no room to push a signal frame, and the
 * kernel then kills the process without a dump.
 *
 * Owns: the stacks it maps (NG_ALTSTACK_SIZE each, with a guard page below),
 * one per thread at most, unmapped at the thread's exit. A thread that has an
 * alternate stack of that size or more keeps it; one with none, or with one too
 * small for the handler (an application's 4 KB one), gets ours, and the
 * application's smaller one is put back at the thread's exit.
 *
 * Threads: any application thread, off the hot path (at communicator creation,
 * and at a thread's first op, behind the branch that takes its thread id).
 */
#ifndef NCCLGUARD_ALTSTACK_H
#define NCCLGUARD_ALTSTACK_H

#include <stddef.h>

/* What the crash handler needs: the dump from the handler, and the kernel's
 * signal frame (sysconf(_SC_MINSIGSTKSZ)) on top. */
#define NG_ALTSTACK_SIZE (256u * 1024)

/* Gives the calling thread an alternate signal stack of at least
 * NG_ALTSTACK_SIZE unless it has one; idempotent. 0, or -1 when none could be
 * made (no memory; the thread runs on its handler on a signal frame then). */
int ncclguard_altstack_ensure(void);

/* The size of the calling thread's alternate signal stack, 0 when it has none
 * (for tests). */
size_t ncclguard_altstack_size(void);

#endif
