/*
 * peek.h: reads of the process's own memory that cannot fault.
 *
 * Owns: nothing but the read. Evidence reads memory that may be changing or
 * gone (another thread's stack, the interpreter's lists, a module's headers
 * from a crash handler): process_vm_readv on our own pid copies it and answers
 * a short count where a load would take SIGSEGV.
 *
 * Threads: any, signal handlers included (two system calls, no lock, no
 * allocation).
 */
#ifndef NCCLGUARD_PEEK_H
#define NCCLGUARD_PEEK_H

#include <stddef.h>
#include <stdint.h>

/* Copies len bytes at addr into dst, page by page; returns how many were copied
 * from addr on: len, or fewer when a page is not readable (0 for addr 0). */
size_t ncclguard_peek(uintptr_t addr, void *dst, size_t len);

/* All of it or nothing said: 0 when the len bytes were copied, else -1. */
static inline int ncclguard_peek_all(uintptr_t addr, void *dst, size_t len)
{
    return ncclguard_peek(addr, dst, len) == len ? 0 : -1;
}

#endif
