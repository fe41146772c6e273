/*
 * stackscan.h: the stack of a thread that must not be interrupted, read from
 * outside it.
 *
 * A thread blocked in nanosleep, poll, a timed futex wait and the like would
 * have that call cut short (EINTR) by any signal handler, SA_RESTART or not
 * (signal(7)), so threads.c does not signal it. Its innermost pc and its stack
 * pointer come from /proc/self/task/<tid>/syscall; this module scans its stack
 * for return addresses: words that point into executable memory just after a
 * call instruction, as crash reporters do when no unwind information is at
 * hand. Such frames are marked "scan" in the dump: a stale return address left
 * on the stack can appear among them.
 *
 * Owns: the table of executable mappings (read from /proc/self/maps at each
 * scan pass) and the stack copy. Memory is read with process_vm_readv on our
 * own pid, which cannot fault when the thread runs on or exits meanwhile.
 *
 * Threads: the dumping thread only (threads.c); not async-signal-safe.
 */
#ifndef NCCLGUARD_STACKSCAN_H
#define NCCLGUARD_STACKSCAN_H

#include <stdint.h>

/* Reads the executable mappings; call once before the scans of one dump. */
void ncclguard_stackscan_begin(void);

/* Writes pc and then up to max - 1 return addresses found above sp, innermost
 * first; returns how many (at least 1 when max >= 1). */
int ncclguard_stackscan(uintptr_t pc, uintptr_t sp, void **pcs, int max);

#endif
