/*
 * modmap.h: the modules of a crash sample's frames (module path, offset from
 * the module's load address, build-id), found async-signal-safely, so that a
 * crash dump's frames can be named offline (`ncclguard analyze`).
 *
 * Owns: a table of the process's executable file mappings, read from
 * /proc/self/maps with open/read when a crash sample is taken, and of their
 * modules: each one's load address from its ELF and program headers in
 * memory, its build-id from its PT_NOTE segments. Memory is read only through
 * process_vm_readv on our own pid, so a mapping that went away or is not
 * readable gives no build-id, never a fault. Static storage only: no malloc,
 * no lock, no dl_iterate_phdr.
 *
 * Threads: the crashing thread, inside the crash handler (crash.c lets one
 * thread in per process): ncclguard_modmap_load from
 * ncclguard_threads_take_self, ncclguard_modmap_find from the dump writer
 * (dump_body.c). Async-signal-safe. A crash during a SIGTERM dump (or the
 * reverse) does not load the table a second time: the second handler's frames
 * use the table of the first, and every index read from it is bounded.
 */
#ifndef NCCLGUARD_MODMAP_H
#define NCCLGUARD_MODMAP_H

#include <stdint.h>

#include "evidence/symbolize.h"

/* Reads the executable mappings of /proc/self/maps into the table. Returns
 * how many were kept, -1 when the file cannot be read (the table is then
 * empty: frames stay bare addresses). */
int ncclguard_modmap_load(void);

/* The module of pc, looked up at pc - 1 (a return address, as
 * ncclguard_symbolize does) unless exact (the interrupted instruction, the
 * innermost frame of a crashed thread): fills out's module, offset and
 * build_id, leaves function NULL, returns 0. -1, with out untouched, when the
 * table is not loaded or no mapping of it holds the address. The strings stay
 * valid until the next load. */
int ncclguard_modmap_find(uintptr_t pc, int exact, struct ng_symbol *out);

#endif
