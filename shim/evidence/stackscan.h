/*
 * stackscan.h: the stack of a thread that must not be interrupted, read from
 * outside it.
 *
 * A thread blocked in nanosleep, poll, a timed futex wait and the like would
 * have that call cut short (EINTR) by any signal handler, SA_RESTART or not
 * (signal(7)), so threads.c does not signal it. Its innermost pc and its stack
 * pointer come from /proc/self/task/<tid>/syscall (the registers the kernel
 * saved at the call's entry); nothing stops or wakes the thread.
 *
 * From there the stack is unwound with DWARF CFI ("cfi" in the dump): the
 * remote API of libunwind-x86_64.so.8 (the generic build of libunwind8, the
 * package of libunwind.so.8) on our own address space, with accessors of this
 * module: memory through process_vm_readv on our own pid (a read of an
 * unmapped page fails, it never faults), rip and rsp from the syscall file,
 * every other register unknown (an error, never a guess). The unwind tables
 * are found by libunwind's own local accessors (dl_iterate_phdr and
 * .eh_frame_hdr), read through ours. Such frames are exact.
 *
 * CFI stops early when a frame's rules need a register the syscall file does
 * not give (rbp in code with frame pointers: its CFA is rbp + 16) or when a pc
 * has no CFI. The stack above is then scanned, and a word is kept only when it
 * is confirmed from the frame below: it is a return address (it follows a call
 * instruction), and either that call is direct and targets the start of the
 * frame below's function (per its CFI, through a PLT entry's GOT slot too), or
 * the call is indirect, the frame below finds its return address through rbp
 * by its CFI, the word sits where that rule puts it, and the caller's CFI, with
 * the registers so restored, steps on to another return address (or ends the
 * stack). The unwind then goes on with CFI from the kept frame,
 * rbp taken from that frame's CFI (rbp = slot - 8). Every frame from the first
 * kept one on is a guess (a stale return address left by an earlier call of
 * the same function can pass the test) and is marked so; the note says why.
 *
 * Without the CFI unwinder (no libunwind-x86_64.so.8, not x86-64) the stack is
 * the bare scan of old ("scan"): pc, then every return address above sp, all
 * but the pc marked as guesses.
 *
 * Owns: libunwind-x86_64.so.8 (dlopen RTLD_LOCAL, once) and its address
 * space, the table of executable mappings (read from /proc/self/maps at each
 * dump), a small cache of the memory read for one thread, and the stack copy.
 *
 * Threads: open under the start lock (threads.c's init); the rest on the
 * dumping thread only (threads.c); not async-signal-safe.
 */
#ifndef NCCLGUARD_STACKSCAN_H
#define NCCLGUARD_STACKSCAN_H

#include <stdint.h>

/* Loads the CFI unwinder; 0, or -1 when there is none (the bare scan is used). */
int ncclguard_stackscan_open(void);

/* Reads the executable mappings; call once before the scans of one dump. */
void ncclguard_stackscan_begin(void);

/* What one unwind found beside its frames. */
struct ng_scan_result {
    int n;           /* frames written */
    int first_guess; /* frames at this index and above are guesses; n when none */
    int cfi;         /* 1: unwound with CFI, 0: the bare scan */
    char note[160];  /* why the stack is short or guessed, "" when it is neither */
};

/* Writes pc and the frames above it, innermost first, up to max. */
void ncclguard_stackscan(uintptr_t pc, uintptr_t sp, void **pcs, int max,
                         struct ng_scan_result *out);

#endif
