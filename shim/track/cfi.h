/*
 * cfi.h: how a frame is laid out at one return address, read from the call
 * frame information (.eh_frame) of the code there, for the stack cache
 * (stacks.c, shim/track/README.md: "Enqueue stacks").
 *
 * Owns: libgcc_s.so.1's _Unwind_Find_FDE, opened with dlopen(RTLD_LOCAL) at
 * the first communicator (the shim links nothing but libc), and a reader of
 * the few call frame instructions that compilers emit for ordinary x86-64
 * functions. Anything else (an expression, a signal frame, a rule for the
 * stack pointer or the return address other than the usual ones, a 64-bit
 * DWARF length) answers "unknown": the caller then unwinds the slow way, which
 * is always exact.
 *
 * Threads: ncclguard_cfi_open under the start lock; ncclguard_cfi_rule on any
 * application thread, never in a signal handler (_Unwind_Find_FDE may take
 * the loader's lock). It allocates nothing.
 */
#ifndef NCCLGUARD_TRACK_CFI_H
#define NCCLGUARD_TRACK_CFI_H

#include <stdint.h>

/* The frame at a return address: its canonical frame address (CFA, the
 * caller's stack pointer) is rsp + cfa_off or rbp + cfa_off, the return
 * address is at CFA - 8, and the caller's rbp is either untouched or saved at
 * CFA + rbp_off. `last` says the return address is undefined there: the
 * outermost frame of a stack (_start, a makecontext entry). */
struct ng_cfi_rule {
    int cfa_is_rbp; /* 0: CFA = rsp + cfa_off; 1: CFA = rbp + cfa_off */
    int64_t cfa_off;
    int rbp_saved; /* 1: the caller's rbp is at CFA + rbp_off */
    int64_t rbp_off;
    int last;
};

/* Finds _Unwind_Find_FDE; 0 when found, else -1 (and the rule is always
 * unknown). Idempotent. */
int ncclguard_cfi_open(void);

/* The rule at the return address ra (the instruction after a call); 0 when
 * known, -1 when not. */
int ncclguard_cfi_rule(uintptr_t ra, struct ng_cfi_rule *out);

#endif
